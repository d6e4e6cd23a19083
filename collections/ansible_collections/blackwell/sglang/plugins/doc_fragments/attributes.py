# SPDX-License-Identifier: Apache-2.0
"""The attributes every module of blackwell.sglang documents: check mode, diff mode and platform.

A module extends ``blackwell.sglang.attributes`` (the descriptions) and one of the variants below, or states each
attribute's support itself::

    extends_documentation_fragment:
      - blackwell.sglang.attributes
      - blackwell.sglang.attributes.read_only
      - blackwell.sglang.attributes.gpu_host
"""

from __future__ import annotations


class ModuleDocFragment:
    """The descriptions of the attributes (DOCUMENTATION) and the support of the common cases (the variants)."""

    # The descriptions; each module (or a variant) adds the support.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return a changed status prediction without modifying the target.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
  platform:
    description: The systems the module can be run against.
"""

    # A module that changes nothing: check mode runs it as it is, there is never a diff.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: The module only reads; in check mode it runs and reports the same.
  diff_mode:
    support: N/A
    details: The module changes nothing.
"""

    # A module that runs on the GPU host (or a staging host): Linux with systemd, the targets of the roles.
    GPU_HOST = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: posix
    details: Linux; the roles run it on their Debian and Ubuntu hosts.
"""

    # An action plugin that runs on the controller only and connects to no host.
    CONTROLLER = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: all
    details: Runs on the controller only (an action plugin); it connects to no host.
"""
