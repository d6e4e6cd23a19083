"""Bench-only: counts calls of the project's planners, filters and renderer, and the connection's round trips, in
ansible-playbook and its forked workers, without touching production code.

Active only when ``BENCH_CALL_LOG`` names a file and this folder is on ``PYTHONPATH`` (Python imports the first
``sitecustomize`` it finds at start-up)::

    PYTHONPATH=bench/hooks BENCH_CALL_LOG=calls.jsonl ansible-playbook ...

Every call appends one JSON line ``{"fn", "host", "caller", "task", "action", "cmd", "pid"}`` to that file, opened
with ``O_APPEND`` and written with one ``write`` per line, so the workers' lines never interleave. What is
counted, wrapped right after its module is first executed (so ``from ... import plan_host`` picks the wrapper):

* ``plan_host`` (plugin_utils/sglang_hostplan.py): ``host`` is the planned host, ``caller`` the module that
  called it (the validate action plugin or the filter plugin);
* the planning filters of plugins/filter/sglang.py and monitoring.py (:data:`FILTERS`): ``host`` is their
  first argument when it is a string (the host, or the monitor of ``scrape_configs``);
* ``server_files`` (plugin_utils/sglang_files.py, the one rendering function): each instance's files rendered
  (``fn = "server_files"``, no host: its first argument is the plan);
* ``ActionBase._low_level_execute_command`` (``fn = "exec"``): every command an action sends through the
  connection to a host, a module run with pipelining being one: ``host`` is the connection's address
  (the container's name on the docker connection), ``task`` and ``action`` the task's, ``cmd`` the command's
  first 120 characters.

The collection's modules are loaded by Ansible's collection loader, whose ``exec_module`` is wrapped; the
others (``ansible.plugins.action``) by a finder placed first on ``sys.meta_path`` at start-up.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

ENV = "BENCH_CALL_LOG"
COLLECTION = "ansible_collections.blackwell.sglang.plugins."
FILTERS = {
    COLLECTION + "filter.sglang": ("instance_plans", "server_instances", "staged_models", "multinode_layout",
                                   "rollout_plan", "model_fanout_plan"),
    COLLECTION + "filter.monitoring": ("scrape_configs",),
}


def log(fn: str, host: Any = None, caller: str | None = None, task: str | None = None, action: str | None = None,
        cmd: str | None = None) -> None:
    """Append one line for one call to ``$BENCH_CALL_LOG``."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"fn": fn, "host": host if isinstance(host, str) else None, "caller": caller, "task": task,
                       "action": action, "cmd": cmd, "pid": os.getpid()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def counted(fn: str, func: Callable[..., Any], with_caller: bool = False) -> Callable[..., Any]:
    """``func``, logging each call as ``fn`` with its first argument as the host."""
    if getattr(func, "__bench_counted__", False):
        return func

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__") if with_caller else None
        log(fn, str(args[0]) if args and isinstance(args[0], str) else None, caller)
        return func(*args, **kwargs)

    wrapper.__bench_counted__ = True  # type: ignore[attr-defined]
    return wrapper


def patch_hostplan(module: ModuleType) -> None:
    module.plan_host = counted("plan_host", module.plan_host, with_caller=True)  # type: ignore[attr-defined]


def patch_filters(module: ModuleType) -> None:
    for name in FILTERS[module.__name__]:
        if hasattr(module, name):
            setattr(module, name, counted(name, getattr(module, name)))


def patch_files(module: ModuleType) -> None:
    module.server_files = counted("server_files", module.server_files)  # type: ignore[attr-defined]


def patch_action(module: ModuleType) -> None:
    base = module.ActionBase  # type: ignore[attr-defined]
    execute = base._low_level_execute_command

    @functools.wraps(execute)
    def _low_level_execute_command(self: Any, *args: Any, **kwargs: Any) -> Any:
        host = None
        try:
            host = self._connection.get_option("remote_addr")
        except Exception:  # a connection without the option
            host = getattr(self._play_context, "remote_addr", None)
        cmd = args[0] if args else kwargs.get("cmd")
        log("exec", host, task=self._task.get_name(), action=str(self._task.action), cmd=str(cmd)[:120])
        return execute(self, *args, **kwargs)

    base._low_level_execute_command = _low_level_execute_command


HOOKS: dict[str, Callable[[ModuleType], None]] = {
    COLLECTION + "plugin_utils.sglang_hostplan": patch_hostplan,
    COLLECTION + "plugin_utils.sglang_files": patch_files,
    **dict.fromkeys(FILTERS, patch_filters),
    "ansible.plugins.action": patch_action,
}


def after_exec(name: str, module: ModuleType) -> None:
    hook = HOOKS.get(name)
    if hook is not None:
        hook(module)


def patch_collection_loader(module: ModuleType) -> None:
    """Wrap the collection loader's ``exec_module``: the collection's modules never pass through :class:`Finder`."""
    base = module._AnsibleCollectionPkgLoaderBase  # type: ignore[attr-defined]
    exec_module = base.exec_module

    def wrapped(self: Any, module_: ModuleType) -> None:
        exec_module(self, module_)
        after_exec(module_.__name__, module_)

    base.exec_module = wrapped


HOOKS["ansible.utils.collection_loader._collection_finder"] = patch_collection_loader


class Finder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: finds the modules of :data:`HOOKS` through the other finders, hooks their loader."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in HOOKS or name.startswith("ansible_collections."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader, exec_module = spec.loader, spec.loader.exec_module

                def wrapped(module: ModuleType, exec_module: Callable[[ModuleType], None] = exec_module) -> None:
                    exec_module(module)
                    after_exec(name, module)

                loader.exec_module = wrapped  # type: ignore[method-assign]  # a file loader serves one module
                return spec
            if spec is not None:
                return spec
        return None


if os.environ.get(ENV):
    sys.meta_path.insert(0, Finder())
