# SPDX-License-Identifier: Apache-2.0
"""The service account of a role (user and group): refused when it is a person's or a login's, else ensured.

One rule, shared by every role that creates a service account (roles/sglang, sglang_server, sglang_router through
the ``account`` option of blackwell.sglang.server_files): an existing user whose uid is at least ``uid_min`` or whose
shell is not one of ``nologin_shells``, or an existing group whose gid is at least ``uid_min``, belongs to a person
or a login. Taking it over would rewrite its shell to nologin and its home, so it is refused before anything
changes. Otherwise the group and the user are created as system accounts without login and without a home
directory created (the roles create the home with its own mode), or corrected (primary group, home, shell) the way
ansible.builtin.user would.
"""

from __future__ import annotations

import grp
import pwd
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Account:
    """The account a role needs, and the rule for existing ones."""

    user: str
    group: str
    home: str
    shell: str = "/usr/sbin/nologin"
    uid_min: int = 1000
    nologin_shells: tuple[str, ...] = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false")
    names: str = "the service user / group"  # the variables that name them, for the message


@dataclass
class Found:
    """What the host has: the user's passwd entry and the group's entry, each None when absent."""

    user: Any = None
    group: Any = None


def look(account: Account) -> Found:
    """Read the user's and the group's entries."""
    found = Found()
    try:
        found.user = pwd.getpwnam(account.user)
    except KeyError:
        pass
    try:
        found.group = grp.getgrnam(account.group)
    except KeyError:
        pass
    return found


def refusal(account: Account, found: Found, host: str = "the host") -> str | None:
    """The message refusing an existing account of a person or a login, or None when the account may be used."""
    user, group = found.user, found.group
    user_ok = user is None or (user.pw_uid < account.uid_min and user.pw_shell in account.nologin_shells)
    group_ok = group is None or group.gr_gid < account.uid_min
    if user_ok and group_ok:
        return None
    user_text = "absent" if user is None else f"uid {user.pw_uid}, gid {user.pw_gid}, home {user.pw_dir}, shell {user.pw_shell}"
    group_text = "absent" if group is None else f"gid {group.gr_gid}"
    return (f"{account.names}: {host} already has user {account.user} ({user_text}) and group {account.group} "
            f"({group_text}), an account of a person or a login (uid or gid from {account.uid_min}, or a login shell), "
            "which the role would take over: its shell set to nologin, its home moved. Nothing was changed. Name a new "
            "account (the role creates it as a system account), e.g. the default sglang.")


def plan(account: Account, found: Found) -> list[list[str]]:
    """The commands (without their binaries' paths) that make the host's account the one asked for."""
    commands: list[list[str]] = []
    if found.group is None:
        commands.append(["groupadd", "--system", account.group])
    if found.user is None:
        commands.append(["useradd", "--system", "--gid", account.group, "--home-dir", account.home, "--no-create-home",
                         "--shell", account.shell, account.user])
        return commands
    fix: list[str] = []
    if found.group is None or found.user.pw_gid != found.group.gr_gid:
        fix += ["--gid", account.group]
    if found.user.pw_dir != account.home:
        fix += ["--home", account.home]
    if found.user.pw_shell != account.shell:
        fix += ["--shell", account.shell]
    if fix:
        commands.append(["usermod", *fix, account.user])
    return commands
