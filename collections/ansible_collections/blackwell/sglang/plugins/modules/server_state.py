#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: what a host's SGLang instances look like now, in one read-only look."""

from __future__ import annotations

DOCUMENTATION = r"""
module: server_state
version_added: 0.2.0
short_description: Read the state of a host's SGLang instances in one step (units, activity, health, virtualenv)
description:
  - One read-only module run for what roles/sglang_server needs to decide which instances are due for a restart.
  - The units this role installed, RV(installed_units) (files in O(unit_dir) named like O(unit_patterns), not hidden,
    regular files, one line of which matches O(unit_marker) at its start).
  - The C(ActiveState) of each instance's unit, RV(active) (one C(systemctl is-active) call for all of them).
  - The HTTP status of the health URL of each instance whose unit is active, RV(health) (-1 when nothing answered);
    a status not in O(health_status_codes) fails the module, as M(ansible.builtin.uri) with C(status_code) would.
  - The virtualenv O(venv) resolves to, RV(venv) (the link's target, or O(venv) when it is not a link), and the
    virtualenv records naming it, RV(venv_records) (regular files named O(venv_record_name) in O(config_dir) and its
    direct subdirectories, such as the last-known-good directories, with a line that is exactly RV(venv)).
options:
  instances:
    description: The host's instances.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Instance name (the key of RV(active) and RV(health)).
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
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Look at the instances of this host
  blackwell.sglang.server_state:
    instances:
      - {name: chat, unit: sglang-chat.service, url: "http://127.0.0.1:30000/health"}
      - {name: code, unit: sglang-code.service, url: "https://127.0.0.1:30001/health", ca_path: /etc/sglang/ca.pem}
    unit_patterns: [sglang.service, sglang-*.service]
    venv: /opt/sglang/venvs/current
    config_dir: /etc/sglang
  register: state
"""

RETURN = r"""
installed_units:
  description: Names (without C(.service)) of the units found with the marker, sorted.
  type: list
  elements: str
  returned: always
active:
  description: Instance name to the ActiveState of its unit (C(inactive) for a unit systemd does not know).
  type: dict
  returned: always
health:
  description: Instance name to the HTTP status of its health URL, for the instances whose unit is active.
  type: dict
  returned: always
venv:
  description: The virtualenv O(venv) resolves to.
  type: str
  returned: always
venv_records:
  description: Paths of the virtualenv records naming RV(venv), sorted.
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_server_state import STATE_OPTIONS, look


def main() -> None:
    module = AnsibleModule(argument_spec=STATE_OPTIONS, supports_check_mode=True)
    module.exit_json(**look(module, module.params))


if __name__ == "__main__":
    main()
