"""The sglang_server role's files of many hosts, rendered on the controller from their launch plans.

``playbooks/validate.yml -e render_dir=DIR`` writes, for every host, the unit, environment file and ``--config``
YAML that a deploy would install (secrets replaced by the role's marker). The role renders them per host with
its ``plan.yml`` (the ``template`` module, delegated to the control node): about three seconds a host. Here the
validate task renders them in its one pass over the hosts, from the plans it has just computed, with what the
role itself uses: its templates, its defaults (and those of the roles it depends on), its ``vars/main.yml``
and Ansible's own templating as the ``template`` module drives it (``ansible_managed``, ``trim_blocks``, no
backslash escaping). The files are the role's byte for byte (tests/integration/test_validate_playbook.py).

Hosts whose files would come out the same (the same plans and the same role variables, none of them a
template) are rendered once. Controller-only: modules never import it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import jinja2.nodes
from ansible.errors import AnsibleError
from ansible.template import Templar
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_hostplan import is_plain

try:  # ansible-core >= 2.19
    from ansible._internal._templating._template_vars import generate_ansible_template_vars
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover (older ansible-core)
    from ansible.template import generate_ansible_template_vars  # type: ignore[attr-defined,no-redef]

    def trust_as_template(value: Any) -> Any:  # type: ignore[misc]
        return value

# (template, file name under render_dir/<host>/): plan_instance.yml's loop.
FILES = (("sglang.service.j2", "{service}.service"), ("sglang.env.j2", "{service}.env"),
         ("sglang-config.yaml.j2", "{service}.yaml"))
# What plan.yml sets for its templates besides the role's own variables.
RENDER_VARS = {"__sglang_server_mask_secrets": True, "__sglang_server_render_only": True}
# Names through which a template reaches variables it does not name: with one of them, a host's files are rendered
# with all of its variables.
_DYNAMIC = frozenset(("vars", "hostvars", "lookup", "query", "q", "varnames"))
_PARSER = jinja2.Environment()  # only to find the names a template reads (no filter is looked up when parsing)


@functools.lru_cache(maxsize=4096)
def _names_in(text: str) -> frozenset[str]:
    try:
        return frozenset(n.name for n in _PARSER.parse(text).find_all(jinja2.nodes.Name))
    except jinja2.TemplateSyntaxError:
        return _DYNAMIC  # Ansible reports it; read everything meanwhile


def _names_read(value: Any) -> set[str]:
    """Every name a value reads when templated (a superset: loop variables and the like count too)."""
    if isinstance(value, str):
        return set(_names_in(str.__str__(value))) if "{" in value else set()
    if isinstance(value, Mapping):
        return set().union(*(_names_read(v) for v in value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*(_names_read(v) for v in value)) if value else set()
    return set()


def _closure(start: Iterable[str], sources: Iterable[Mapping[str, Any]]) -> set[str]:
    """``start`` and every name the values of those names read, in ``sources``, transitively."""
    sources = list(sources)
    todo, seen = set(start), set()
    while todo:
        name = todo.pop()
        seen.add(name)
        for source in sources:
            if name in source:
                todo |= _names_read(source[name]) - seen
    return seen


# The template module's defaults (ansible.builtin.template), which plan_instance.yml keeps.
_OVERRIDES = {"trim_blocks": True, "lstrip_blocks": False, "newline_sequence": "\n"}


def _load(loader: Any, path: Path) -> dict[str, Any]:
    try:
        data = loader.load_from_file(str(path), trusted_as_template=True)
    except TypeError:  # pragma: no cover (ansible-core < 2.19)
        data = loader.load_from_file(str(path))
    return dict(data or {})


class RoleRenderer:
    """Renders the files of ``role_dir`` (roles/sglang_server) for one host after another."""

    def __init__(self, role_dir: str | os.PathLike[str], loader: Any) -> None:
        self.role_dir = Path(role_dir)
        self._loader = loader
        if not (self.role_dir / "templates" / FILES[0][0]).is_file():
            raise AnsibleError(f"{self.role_dir} is not the sglang_server role (no templates/{FILES[0][0]})")
        # Defaults of the roles it depends on first, then its own; vars/main.yml over the inventory.
        self.defaults: dict[str, Any] = {}
        meta = _load(loader, self.role_dir / "meta" / "main.yml") if (self.role_dir / "meta" / "main.yml").is_file() else {}
        for dep in meta.get("dependencies") or []:
            name = str(dep.get("role") if isinstance(dep, Mapping) else dep).rsplit(".", 1)[-1]
            path = self.role_dir.parent / name / "defaults" / "main.yml"
            if path.is_file():
                self.defaults.update(_load(loader, path))
        self.defaults.update(_load(loader, self.role_dir / "defaults" / "main.yml"))
        self.role_vars = _load(loader, self.role_dir / "vars" / "main.yml")
        self.sources = {src: self.role_dir / "templates" / src for src in dict(FILES)}
        self.texts = {src: trust_as_template(self._loader.get_text_file_contents(str(path)))
                      for src, path in self.sources.items()}
        # The names whose values reach the files: a host that changes none of them renders like its twin.
        self._names = sorted({*self.defaults, *self.role_vars, "ansible_managed"})
        self._rendered: dict[str, dict[str, str]] = {}
        self._role_plan_vars: dict[str, dict[str, Any]] = {}
        self._templar = _compiling_once(Templar(loader=loader, variables={}))
        # The variables the files read, through the role's own variables: a host's files are rendered with these
        # only (Ansible wraps every variable of the context at each use), and vars/main.yml's among them are
        # evaluated once per instance rather than at every use in every file.
        self._read = _closure(set().union(*(_names_read(t) for t in self.texts.values())), [self.role_vars, self.defaults])
        self._derived = sorted(n for n in self._read if n in self.role_vars)
        self._static = {**self.defaults, **self.role_vars}  # read above; a host's own values are read per host

    def variables(self, host_vars: Mapping[str, Any]) -> dict[str, Any]:
        """The role's variables for a host: its defaults, the host's variables (untemplated, as Ansible keeps
        them), then vars/main.yml and what plan.yml sets."""
        return {**self.defaults, **host_vars, **self.role_vars, **RENDER_VARS}

    def twin_key(self, host_vars: Mapping[str, Any]) -> str | None:
        """What the files depend on besides the plans: the host's values of the role's variables, when none of them
        is a template (which could read anything); None otherwise."""
        names = [n for n in self._names if n in host_vars]
        names += sorted(n for n in host_vars if n.startswith(("sglang_server_", "sglang_common_", "__sglang_server_"))
                        and n not in self._names)
        if not all(is_plain(host_vars[n]) for n in names):
            return None
        try:
            return json.dumps({n: host_vars[n] for n in names}, sort_keys=True)
        except (TypeError, ValueError):
            return None

    def role_plan_vars(self, variables: Mapping[str, Any], twin: str | None) -> dict[str, Any]:
        """``__sglang_server_role_vars`` of vars/main.yml for the host: what the role passes to ``instance_plans``."""
        if twin is not None and twin in self._role_plan_vars:
            return dict(self._role_plan_vars[twin])
        self._templar.available_variables = variables
        value = dict(self._templar.template(self.role_vars["__sglang_server_role_vars"]))
        if twin is not None:
            self._role_plan_vars[twin] = value
        return dict(value)

    def render(self, host: str, variables: dict[str, Any], plans: list[dict[str, Any]], twin: str | None) -> dict[str, str]:
        """``{file name: text}`` of every instance of the host. ``plans``: the role's ``__sglang_server_plans`` (full
        plans); ``twin``: :meth:`twin_key` of the host's variables (hosts with the same plans and key share one rendering)."""
        key = None
        if twin is not None:
            try:
                key = json.dumps([plans, twin], sort_keys=True)
            except (TypeError, ValueError):
                key = None
            if key is not None and key in self._rendered:
                return self._rendered[key]
        out: dict[str, str] = {}
        context = {**variables, "__sglang_server_plans": plans}
        own = {n: v for n, v in variables.items() if n not in self._static or v is not self._static[n]}
        read = _closure(self._read, [{n: v for n, v in own.items() if not is_plain(v)}])
        if not read & _DYNAMIC:
            context = {n: context[n] for n in read | {"__sglang_server_plans"} if n in context}
        for plan in plans:
            context["sglang_server_instance"] = plan["name"]
            self._templar.available_variables = context
            try:
                resolved = self._templar.template({n: self.role_vars[n] for n in self._derived})
            except AnsibleError:
                resolved = {}  # each file evaluates them where it uses them (and reports the error there)
            for src, dest in FILES:
                name = dest.format(service=plan["service"])
                temp_vars = {**context, **resolved}
                temp_vars.update(generate_ansible_template_vars(
                    path=src, fullpath=str(self.sources[src]), dest_path=f"{host}/{name}",
                    include_ansible_managed="ansible_managed" not in temp_vars))
                self._templar.available_variables = temp_vars
                text = self._templar.template(self.texts[src], escape_backslashes=False, overrides=_OVERRIDES)
                out[name] = "" if text is None else str(text)
        if key is not None:
            self._rendered[key] = out
        return out


def _compiling_once(templar: Templar) -> Templar:
    """``templar``, compiling each template and expression once for all the hosts it renders.

    Ansible compiles every template it renders, and every variable value that is a template each time it is read:
    for a role's files that is most of the time (a few ms a template). A compiled Jinja template does not depend on the
    variables it is rendered with, so this templar keeps them, by text and options. Where the templating engine has
    no such methods (another ansible-core), it is returned as it is: slower, the same files.
    """
    engine = getattr(templar, "_engine", None)
    for name in ("_compile_template", "_compile_expression"):
        compile_ = getattr(engine, name, None)
        if compile_ is not None:
            setattr(engine, name, _memoized(compile_))
    return templar


def _memoized(compile_: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    """``compile_`` remembering its result per (text, options)."""
    cache: dict[tuple[str, Any], Any] = {}

    def cached(text: str, options: Any) -> Any:
        key = (str.__str__(text), options)
        found = cache.get(key)
        if found is None:
            found = cache[key] = compile_(text, options)
        return found

    return cached


# The file that marks a render_dir as this project's plan: a directory without it is only written into when it is new
# (created here) or empty; one that holds anything else is refused, never chmodded nor written into.
MARKER = ".blackwell-sglang-plan"
MARKER_TEXT = "A launch plan rendered by playbooks/validate.yml -e render_dir (blackwell.sglang); safe to delete.\n"
# Inventory host names as path components: letters, digits and ._:- , not starting with "." nor holding "..".
_HOST_COMPONENT = re.compile(r"(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9._:-]{0,252}")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class PlanDirError(AnsibleError):
    """render_dir, a host's directory or a file in it cannot be written safely: nothing more is written."""


def host_component_problem(host: str) -> str | None:
    """Why the inventory host name ``host`` cannot be a directory name of the plan (None when it can)."""
    if not isinstance(host, str) or not _HOST_COMPONENT.fullmatch(host):
        return ("a plan directory is named after its host: letters, digits and . _ : - only, not starting with '.', "
                "no '..', no '/', at most 253 characters")
    return None


class PlanDir:
    """render_dir, opened once without following a symbolic link, its files written relative to it.

    It is created (0700, with its MARKER) when absent; an existing directory must carry the MARKER (a plan this
    project rendered before) or be empty (it is then marked, its mode left as it is). Host directories (0700) and
    files (0600) are opened relative to it with O_NOFOLLOW: a symbolic link, a hard link or anything that is not a
    plain directory or file where the plan writes is refused, so nothing outside render_dir is ever written.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        created = False
        if not os.path.lexists(root):
            root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                os.mkdir(root, 0o700)
                created = True
            except FileExistsError:
                pass
        try:
            self.fd = os.open(root, _DIR_FLAGS)
        except OSError as exc:
            raise PlanDirError(f"render_dir {str(root)!r} is not a directory this run can write a plan into "
                               f"({exc.strerror}).") from None
        try:
            if created:
                os.fchmod(self.fd, 0o700)
            marked = self._is_marked()
            if not marked:
                others = [n for n in os.listdir(self.fd) if n != MARKER]
                if others:
                    raise PlanDirError(
                        f"render_dir {str(root)!r} already exists and holds other files ({len(others)} entries) but no "
                        f"{MARKER}: it is not a plan this project rendered, and nothing is written into it. Give a new "
                        "directory (it is created, readable by you only) or one rendered into before.")
                self._write_marker()
        except BaseException:
            os.close(self.fd)
            raise

    def _is_marked(self) -> bool:
        try:
            info = os.stat(MARKER, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(info.st_mode):
            raise PlanDirError(f"render_dir {str(self.root)!r}: its {MARKER} is not a plain file.")
        return True

    def _write_marker(self) -> None:
        fd = os.open(MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600,
                     dir_fd=self.fd)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(MARKER_TEXT)

    def write(self, host: str, files: Mapping[str, str]) -> None:
        """The host's files under render_dir/<host>/ (0700), each 0600, as plan.yml leaves them."""
        problem = host_component_problem(host)
        if problem:
            raise PlanDirError(f"inventory host {host!r}: {problem}. Nothing was written for it.")
        try:
            os.mkdir(host, 0o700, dir_fd=self.fd)
        except FileExistsError:
            pass
        try:
            host_fd = os.open(host, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise PlanDirError(f"render_dir {str(self.root)!r}: {host} is not a plain directory ({exc.strerror}); "
                               "a symbolic link is never followed.") from None
        try:
            os.fchmod(host_fd, 0o700)
            for name, text in files.items():
                self._write_file(host_fd, host, name, text)
        finally:
            os.close(host_fd)

    def _write_file(self, host_fd: int, host: str, name: str, text: str) -> None:
        if not name or "/" in name or name in (".", "..") or name.startswith("."):
            raise PlanDirError(f"{host}: {name!r} is not a file name of the plan.")
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600,
                         dir_fd=host_fd)
        except OSError as exc:
            raise PlanDirError(f"render_dir {str(self.root)!r}: {host}/{name} cannot be written ({exc.strerror}); "
                               "a symbolic link is never followed.") from None
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise PlanDirError(f"render_dir {str(self.root)!r}: {host}/{name} is not a plain file of its own "
                                   "(a hard link or a device); nothing was written to it.")
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, 0)
            handle.write(text)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> PlanDir:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
