# SPDX-License-Identifier: Apache-2.0
"""render_dir: the directory ``playbooks/validate.yml -e render_dir=DIR`` writes each host's files into, safely.

The validate action renders every host's unit, environment file and ``--config`` YAML (secrets replaced by a marker)
with the collection's one rendering function (``sglang_files.server_files``, which the sglang_server role installs
with) and writes them here: DIR is opened once without following a symbolic link and every file is written relative
to it. Controller-only: modules never import it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleError

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
