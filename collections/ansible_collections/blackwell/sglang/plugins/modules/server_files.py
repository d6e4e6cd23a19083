#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: install the files of a host's SGLang instances in one step (nothing that runs changes)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: server_files
version_added: 0.2.0
short_description: Install the directories, helper scripts, units and configuration files of a host's SGLang instances
description:
  - The host side of roles/sglang_server's install step, in one module run instead of one per file (each run costs a
    round trip to the host). Nothing that runs is started, stopped or restarted; the module reports which instances'
    files changed, and the role decides which restarts are due.
  - "First it looks: every directory, file and unit, the spec records of the installed units (O(spec_guard)) and, for
    each unit file whose content changes, C(systemd-analyze verify) on the new content under the unit's own name.
    When a spec guard or a verification refuses, the module fails and B(nothing is changed)."
  - Then it changes what differs, directories first. A file is written atomically (a temporary file in the same
    directory, owner and mode set, then renamed over the old one) only when its content, owner or mode differ.
    C(systemctl daemon-reload) runs when a unit file changed, then C(systemctl enable) for each unit of O(enable)
    that is not enabled.
  - The contents of O(secret_files) are in O(secret_content), which Ansible keeps out of its output and logs
    (C(no_log)); the module never returns a file's content, and it shows a diff (C(--diff)) of O(files) only.
  - Supports check mode (it reports what it would change, the spec guard and the unit verification included).
options:
  account:
    description:
      - The service account that owns the directories and files, ensured first (a user of the same run can own them).
      - An existing user whose uid is at least C(uid_min) or whose shell is not one of C(nologin_shells), or an
        existing group whose gid is at least C(uid_min), is a person's or a login's; the module fails naming
        C(names) and B(nothing is changed). Otherwise the group and the user are created as system accounts with no
        home created (C(groupadd --system), C(useradd --system --no-create-home)), or their primary group, home and
        shell corrected (C(usermod)), as M(ansible.builtin.user) would.
    type: dict
    suboptions:
      user:
        description: The user.
        type: str
        required: true
      group:
        description: Its primary group.
        type: str
        required: true
      home:
        description: Its home directory (not created here; give it in O(directories) with its mode).
        type: path
        required: true
      shell:
        description: Its shell.
        type: path
        default: /usr/sbin/nologin
      uid_min:
        description: The first uid and gid of persons' and logins' accounts.
        type: int
        default: 1000
      nologin_shells:
        description: The shells of system accounts without login.
        type: list
        elements: path
        default: [/usr/sbin/nologin, /sbin/nologin, /bin/false, /usr/bin/false]
      names:
        description: The variables that name the account, for the message (e.g. C(sglang_user / sglang_group)).
        type: str
        default: the service user / group
      host:
        description: The inventory host name, for the message.
        type: str
        default: the host
  look:
    description:
      - After the install, one read-only look at the instances in the same module run (the options of
        M(blackwell.sglang.server_state)), returned as RV(state). It fails, after the install, on a health status not in
        C(health_status_codes), as M(blackwell.sglang.server_state) does.
    type: dict
    suboptions:
      instances:
        description: The host's instances.
        type: list
        elements: dict
        required: true
        suboptions:
          name:
            description: Instance name (the key of C(state.active) and C(state.health)).
            type: str
            required: true
          unit:
            description: Its systemd unit (e.g. C(sglang-chat.service)).
            type: str
            required: true
          url:
            description: Its health URL, e.g. C(http://127.0.0.1:30000/health).
            type: str
            required: true
          ca_path:
            description: PEM CA bundle that verifies its TLS certificate; unset or empty, the system's CA store.
            type: str
      health_timeout:
        description: HTTP timeout of a health check, in seconds.
        type: float
        default: 5
      health_status_codes:
        description: Health statuses that are an answer (-1 is no answer); any other fails the module.
        type: list
        elements: int
        default: [-1, 200, 503]
      unit_dir:
        description: Where the units are installed.
        type: path
        default: /etc/systemd/system
      unit_patterns:
        description: Shell patterns of the unit file names to consider.
        type: list
        elements: str
        required: true
      unit_marker:
        description: Regular expression a line of a unit this role installed matches at its start.
        type: str
        default: "^# SGLang [0-9]"
      venv:
        description: The virtualenv link the servers should run from.
        type: path
        required: true
      config_dir:
        description: Directory holding the virtualenv records (directly or one directory down).
        type: path
        required: true
      venv_record_name:
        description: File name of a virtualenv record.
        type: str
        default: venv
  directories:
    description: Directories to create or correct (parents are created as needed, mode 0755, root-owned).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      owner:
        description: Owning user.
        type: str
        required: true
      group:
        description: Owning group.
        type: str
        required: true
      mode:
        description: Octal mode, e.g. C(0750).
        type: str
        required: true
  files:
    description: Files whose content is not secret (units, spec records, helper scripts).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path; its directory must exist or be in O(directories).
        type: path
        required: true
      content:
        description: The whole content, exactly as written.
        type: str
        required: true
      owner:
        description: Owning user.
        type: str
        required: true
      group:
        description: Owning group.
        type: str
        required: true
      mode:
        description: Octal mode.
        type: str
        required: true
      instance:
        description: The instance whose restart a change of this file makes due; unset for files every instance uses.
        type: str
      unit:
        description: The file is a systemd unit of this name; its new content must pass C(systemd-analyze verify).
        type: str
      restart:
        description: A change of this file makes a restart due (O(files[].instance)'s, or every instance's).
        type: bool
        default: true
  secret_files:
    description: Files holding secrets (environment and C(--config) files); their content is O(secret_content)[path].
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path; the key of its content in O(secret_content).
        type: path
        required: true
      owner:
        description: Owning user.
        type: str
        required: true
      group:
        description: Owning group.
        type: str
        required: true
      mode:
        description: Octal mode (C(0600) or C(0640)).
        type: str
        required: true
      instance:
        description: The instance whose restart a change of this file makes due.
        type: str
  secret_content:
    description: The content of each file of O(secret_files), by path. Kept out of Ansible's output and logs.
    type: dict
    default: {}
  absent:
    description: Files to remove (a C(--config) file an instance no longer needs).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      instance:
        description: The instance whose restart the removal makes due.
        type: str
  enable:
    description: Units to enable at boot (C(systemctl enable)), after the daemon-reload.
    type: list
    elements: str
    default: []
  spec_guard:
    description:
      - The installed units whose spec record (JSON with C(mode), C(host), C(override) and C(argv)) is checked before
        anything changes. The new record is the content of the O(files) entry at C(marker).
      - A unit started with an earlier run's spec override (C(-e spec=...)) is not restarted silently by a run
        without one (C(run_has_spec) false) whose arguments differ only by lacking it; the module fails naming the
        host variable that keeps the mode and the extra variable that confirms the change.
      - An installed record whose C(argv) is the new record's is left as it is, since the unit runs those arguments
        either way; a run after C(-e spec=auto) whose plan gives the same arguments changes nothing.
    type: list
    elements: dict
    default: []
    suboptions:
      marker:
        description: The installed spec record.
        type: path
        required: true
      service:
        description: The unit's name, without C(.service), for the message.
        type: str
        required: true
      host:
        description: The inventory host name, for the message.
        type: str
        required: true
      run_has_spec:
        description: This run has a C(-e spec=...).
        type: bool
        required: true
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.gpu_host
attributes:
  check_mode:
    support: full
    details: Reports what would change (and the restarts that would be due), verifies the units and writes nothing.
  diff_mode:
    support: partial
    details: Files that hold secrets (the environment file, the C(--config) YAML) show no diff.
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Install the files of every instance
  blackwell.sglang.server_files:
    directories:
      - {path: /etc/sglang, owner: root, group: sglang, mode: "0750"}
    files:
      - path: /etc/systemd/system/sglang.service
        content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
        owner: root
        group: root
        mode: "0644"
        instance: default
        unit: sglang.service
    secret_files:
      - {path: /etc/sglang/sglang.env, owner: root, group: root, mode: "0600", instance: default}
    secret_content:
      /etc/sglang/sglang.env: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
    enable: [sglang.service]
  register: files
"""

RETURN = r"""
state:
  description: With O(look), what M(blackwell.sglang.server_state) returns (C(installed_units), C(active), C(health),
    C(venv), C(venv_records)), looked at after the install.
  type: dict
  returned: when look is set
account:
  description: The commands that created or corrected the account (or, in check mode, would have); empty when it was right.
  type: list
  elements: str
  returned: always
changed_instances:
  description: Instances with a file written or removed, in the order first changed.
  type: list
  elements: str
  returned: always
shared_changed:
  description: True when a file of no instance (a helper script) that makes a restart due was written.
  type: bool
  returned: always
written:
  description: Paths written (content, owner or mode differed) or, in check mode, that would be.
  type: list
  elements: str
  returned: always
removed:
  description: Paths removed (or that would be).
  type: list
  elements: str
  returned: always
directories:
  description: Directories created or corrected (or that would be).
  type: list
  elements: str
  returned: always
enabled:
  description: Units enabled (or that would be).
  type: list
  elements: str
  returned: always
daemon_reload:
  description: True when systemd's configuration was (or would be) reloaded.
  type: bool
  returned: always
"""

import grp
import json
import os
import pwd
import shutil
import stat
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_account import Account, plan, refusal
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_account import look as look_account
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_server_state import STATE_OPTIONS
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_server_state import look as look_state


class Refused(Exception):
    """Nothing was changed: the message says why."""


def ids(owner: str, group: str, pending: bool) -> tuple[int, int] | None:
    """(uid, gid) of ``owner`` and ``group``; None when one does not exist yet and may (``pending``: check mode, or an
    account this run creates first), so that the file counts as changed."""
    try:
        return pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid
    except KeyError as exc:
        if pending:
            return None
        raise Refused(f"no such user or group: {owner}:{group} ({exc})") from None


def resolved(owner: tuple[int, int] | None, item: dict[str, Any]) -> tuple[int, int]:
    """The (uid, gid) ``ids`` found, or, for an account this run just created, looked up now."""
    if owner is None:
        owner = ids(item["owner"], item["group"], False)
        if owner is None:
            raise Refused("the owner of a file to write is unknown")
    return owner


def mode_of(text: str, where: str) -> int:
    try:
        value = int(text, 8)
    except ValueError:
        raise Refused(f"{where}: mode {text!r} is not octal") from None
    if not 0 <= value <= 0o7777:
        raise Refused(f"{where}: mode {text!r} is out of range")
    return value


def file_differs(path: str, content: bytes, owner: tuple[int, int] | None, mode: int) -> tuple[bool, bytes | None]:
    """(True when ``path`` is not a regular file with exactly this content, owner and mode; its old content)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True, None
    if not stat.S_ISREG(info.st_mode):
        return True, None
    with open(path, "rb") as handle:
        old = handle.read()
    return (old != content or owner is None or (info.st_uid, info.st_gid) != owner
            or stat.S_IMODE(info.st_mode) != mode), old


def dir_differs(path: str, owner: tuple[int, int] | None, mode: int) -> bool:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(info.st_mode):
        raise Refused(f"{path} exists and is not a directory")
    return owner is None or (info.st_uid, info.st_gid) != owner or stat.S_IMODE(info.st_mode) != mode


def write(path: str, content: bytes, owner: tuple[int, int], mode: int) -> None:
    """Replace ``path`` atomically: a temporary file beside it, owner and mode set before the rename."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chown(tmp, *owner)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def verify_unit(module: AnsibleModule, unit: str, content: bytes) -> None:
    """``systemd-analyze verify`` on ``content`` saved as ``unit`` in a scratch directory."""
    if "/" in unit or not unit.endswith((".service", ".socket", ".timer", ".target", ".path", ".mount")):
        raise Refused(f"not a unit file name: {unit!r}")
    scratch = tempfile.mkdtemp(prefix="bsa-unit-")
    try:
        path = os.path.join(scratch, unit)
        with open(path, "wb") as handle:
            handle.write(content)
        rc, out, err = module.run_command([module.get_bin_path("systemd-analyze", required=True), "verify", path])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if rc != 0:
        raise Refused(f"systemd-analyze verify refused the new {unit} (nothing was changed): {(err or out).strip()}")


def guard_spec(item: dict[str, Any], new: dict[str, Any]) -> None:
    """Refuse a run without -e spec that would only undo an earlier run's spec override (see the spec_guard option)."""
    try:
        with open(item["marker"], encoding="utf-8") as handle:
            installed = json.load(handle)
    except FileNotFoundError:
        return
    except (OSError, ValueError):
        return  # an unreadable record guards nothing: the new one replaces it
    if item["run_has_spec"] or not installed.get("override"):
        return
    mode, plan = installed.get("mode"), new.get("mode")
    if mode == plan or installed.get("argv", []) == new.get("argv"):
        return
    raise Refused(
        f"{item['host']}: {item['service']} runs with spec={mode}, set by an earlier run's -e spec={mode} (its sglang_spec "
        f"is {installed.get('host')}). This run has no -e spec and would restart it with spec={plan}. To keep the "
        f"running mode, set sglang_spec: {mode} for this host (host_vars or group_vars; spec: in its entry of "
        f"sglang_instances); to restart with spec={plan}, run again with -e spec={plan}. Nothing was changed.")


def same_argv(path: str, text: Any) -> bool:
    """True when the installed spec record at ``path`` records the argv the new record does (record_keeps).

    The record says how the running unit was started: with an earlier run's ``-e spec=auto`` it keeps saying so for as
    long as the unit runs those arguments, also through runs without one whose plan gives the same argv (a deploy
    after ``restart.yml -e spec=auto``); rewriting it there would report a change although nothing runs differently.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            installed = json.load(handle)
        return isinstance(installed, dict) and "argv" in installed and installed["argv"] == json.loads(str(text)).get("argv")
    except (OSError, ValueError, AttributeError):
        return False  # no record, or one that cannot be read: the new one is written


def account_plan(module: AnsibleModule) -> list[list[str]]:
    """The commands that make the ``account`` option's account (module_utils/sglang_account.py); refuses a person's."""
    spec = module.params.get("account")
    if not spec:
        return []
    account = Account(user=spec["user"], group=spec["group"], home=spec["home"], shell=spec["shell"],
                      uid_min=spec["uid_min"], nologin_shells=tuple(spec["nologin_shells"]), names=spec["names"])
    found = look_account(account)
    message = refusal(account, found, spec["host"])
    if message is not None:
        raise Refused(message)
    return plan(account, found)


def install(module: AnsibleModule) -> dict[str, Any]:
    """Look at everything, refuse or change what differs; the module's result."""
    params, check = module.params, module.check_mode
    result: dict[str, Any] = {"changed": False, "changed_instances": [], "shared_changed": False, "written": [],
                              "removed": [], "directories": [], "enabled": [], "daemon_reload": False}
    diffs: list[dict[str, str]] = []
    account = account_plan(module)
    result["account"] = [" ".join(command) for command in account]
    pending = check or bool(account)  # owners this run creates count as changed until they exist

    def touched(instance: str | None) -> None:
        if instance is None:
            result["shared_changed"] = True
        elif instance not in result["changed_instances"]:
            result["changed_instances"].append(instance)

    dirs = []
    for item in params["directories"]:
        owner, mode = ids(item["owner"], item["group"], pending), mode_of(item["mode"], item["path"])
        if dir_differs(item["path"], owner, mode):
            dirs.append((item, owner, mode))
    secret = params["secret_content"] or {}
    files = []
    unit_changed = False
    markers = {guard["marker"] for guard in params["spec_guard"]}
    for item, is_secret in [(i, False) for i in params["files"]] + [(i, True) for i in params["secret_files"]]:
        if is_secret and item["path"] not in secret:
            raise Refused(f"secret_content has no content for {item['path']}")
        text = secret[item["path"]] if is_secret else item["content"]
        if item["path"] in markers and same_argv(item["path"], text):
            continue  # the running unit's own record: nothing it runs changes (see record_keeps)
        content = (text if isinstance(text, str) else str(text)).encode("utf-8")
        owner, mode = ids(item["owner"], item["group"], pending), mode_of(item["mode"], item["path"])
        differs, old = file_differs(item["path"], content, owner, mode)
        if differs:
            files.append((item, content, owner, mode, item.get("restart", True)))
            if not is_secret and module._diff:
                diffs.append({"before_header": item["path"], "after_header": item["path"],
                              "before": (old or b"").decode("utf-8", "replace"), "after": content.decode("utf-8")})
            if not is_secret and item.get("unit") and old != content:
                verify_unit(module, item["unit"], content)
                unit_changed = True
    by_path = {item["path"]: item for item in params["files"]}
    for item in params["spec_guard"]:
        record = by_path.get(item["marker"])
        if record is None:
            raise Refused(f"spec_guard: {item['marker']} is not one of the files")
        guard_spec(item, json.loads(record["content"]))
    gone = [item for item in params["absent"] if os.path.lexists(item["path"])]
    to_enable = []
    systemctl = module.get_bin_path("systemctl", required=bool(params["enable"]) or unit_changed)
    for unit in params["enable"]:
        _rc, out, _err = module.run_command([systemctl, "is-enabled", unit])
        if out.strip() not in ("enabled", "enabled-runtime", "static", "alias", "indirect", "generated"):
            to_enable.append(unit)

    for command in account if not check else []:
        rc, out, err = module.run_command([module.get_bin_path(command[0], required=True), *command[1:]])
        if rc != 0:
            raise Refused(f"{command[0]} failed ({rc}): {(err or out).strip()}")
    for item, owner, mode in dirs:
        result["directories"].append(item["path"])
        if not check:
            os.makedirs(item["path"], exist_ok=True)
            os.chown(item["path"], *resolved(owner, item))
            os.chmod(item["path"], mode)
    for item, content, owner, mode, restart in files:
        result["written"].append(item["path"])
        if restart:
            touched(item.get("instance"))
        if not check:
            write(item["path"], content, resolved(owner, item), mode)
    for item in gone:
        result["removed"].append(item["path"])
        touched(item.get("instance"))
        if not check:
            os.unlink(item["path"])
    if unit_changed:
        result["daemon_reload"] = True
        if not check:
            module.run_command([systemctl, "daemon-reload"], check_rc=True)
    for unit in to_enable:
        result["enabled"].append(unit)
        if not check:
            module.run_command([systemctl, "enable", unit], check_rc=True)
    result["changed"] = bool(result["account"] or dirs or files or gone or to_enable)
    if diffs:
        result["diff"] = diffs
    return result


def main() -> None:
    owned = {"owner": {"type": "str", "required": True}, "group": {"type": "str", "required": True},
             "mode": {"type": "str", "required": True}}
    module = AnsibleModule(
        argument_spec={
            "account": {"type": "dict", "options": {
                "user": {"type": "str", "required": True}, "group": {"type": "str", "required": True},
                "home": {"type": "path", "required": True}, "shell": {"type": "path", "default": "/usr/sbin/nologin"},
                "uid_min": {"type": "int", "default": 1000},
                "nologin_shells": {"type": "list", "elements": "path",
                                   "default": ["/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false"]},
                "names": {"type": "str", "default": "the service user / group"},
                "host": {"type": "str", "default": "the host"}}},
            "look": {"type": "dict", "options": STATE_OPTIONS},
            "directories": {"type": "list", "elements": "dict", "default": [],
                            "options": {"path": {"type": "path", "required": True}, **owned}},
            "files": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "path", "required": True}, "content": {"type": "str", "required": True}, **owned,
                "instance": {"type": "str"}, "unit": {"type": "str"}, "restart": {"type": "bool", "default": True}}},
            "secret_files": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "path", "required": True}, **owned, "instance": {"type": "str"}}},
            "secret_content": {"type": "dict", "default": {}, "no_log": True},
            "absent": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "path", "required": True}, "instance": {"type": "str"}}},
            "enable": {"type": "list", "elements": "str", "default": []},
            "spec_guard": {"type": "list", "elements": "dict", "default": [], "options": {
                "marker": {"type": "path", "required": True}, "service": {"type": "str", "required": True},
                "host": {"type": "str", "required": True}, "run_has_spec": {"type": "bool", "required": True}}},
        },
        supports_check_mode=True,
    )
    for item in module.params["directories"] + module.params["files"] + module.params["secret_files"] \
            + module.params["absent"]:
        if not os.path.isabs(item["path"]):
            module.fail_json(msg=f"not an absolute path: {item['path']!r}")
    try:
        result = install(module)
    except Refused as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=f"could not install the server's files: {exc}")
    if module.params["look"]:
        result["state"] = look_state(module, module.params["look"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
