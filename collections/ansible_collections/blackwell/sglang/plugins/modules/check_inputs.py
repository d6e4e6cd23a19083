#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Documentation of the blackwell.sglang.check_inputs action plugin: a role's variables against the input contract.

The action plugin plugins/action/check_inputs.py does the work on the controller; this file holds only its
documentation, which ansible-doc and ansible-test read from modules.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: check_inputs
version_added: 0.2.0
short_description: Check a role's variables against the collection's input contract, on the controller
description:
  - Every role of the collection runs it first, so that a role run alone refuses bad input before anything on
    the host changes, as C(playbooks/validate.yml) does for the whole deployment.
  - Reads the variables of the role's entry point from its C(meta/argument_specs.yml), templates those the play
    defines and checks each against its kind in the input contract (C(plugin_utils/sglang_contract.py)), such as a
    path under an allowed root, a unit name in the project's namespace, a service account, an address, a URL, a port,
    a secret, bounded free text.
  - Fails with one line per variable, naming it, why and the fix; a secret's value is never shown.
options:
  role_path:
    description: The role's directory (the magic variable C(role_path)).
    type: path
    required: true
  entry:
    description: The entry point of the role whose options are checked.
    type: str
    default: main
  extra:
    description: Variables of the contract the role reads beyond its argument spec (e.g. C(proxy_env)).
    type: list
    elements: str
    default: []
  gateway:
    description:
      - Also the gateway's own rules (C(plugin_utils/sglang_gateway.py)) over every variable of the role, defaults
        included, and the GPU hosts of its C(sglang_router_worker_group) (their worker URLs, their instances' API keys
        against C(sglang_router_api_key)). For roles/sglang_router. No line shows a key.
    type: bool
    default: false
notes:
  - An action plugin; this module file holds its documentation only. Connects to no host.
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.controller
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the role's variables against the input contract
  blackwell.sglang.check_inputs:
    role_path: "{{ role_path }}"
"""

RETURN = r"""
checked:
  description: The variables checked (those of the entry point the play defines).
  type: list
  elements: str
  returned: always
problems:
  description: One line per variable that breaks the contract.
  type: list
  elements: str
  returned: always
"""
