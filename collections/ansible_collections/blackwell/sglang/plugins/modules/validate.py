#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Documentation of the blackwell.sglang.validate action plugin: every host's SGLang launch configuration.

The action plugin plugins/action/validate.py does the work on the controller; this file holds only its
documentation, which ansible-doc and ansible-test read from modules.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: validate
version_added: 0.1.0
short_description: Validate SGLang launch arguments of inventory hosts, on the controller
description:
  - Checks each host's C(sglang_args), C(sglang_model_path), C(sglang_env) and declared hardware
    (C(nvidia_gpu_count), C(nvidia_gpu_compute_capability)) against the committed CLI schema and
    the rules of the pinned SGLang release (C(sglang_version)).
  - Runs on the controller only and connects to no host. Meant to be used with C(run_once) so one
    task validates every host of the play.
  - Prints one readable block per bad host (hosts with identical problems share one block) naming each
    variable, the value, why, the fix and, where the rule is SGLang's own, its source location; fails
    when any host is invalid (see O(fail_on_error)).
options:
  hosts:
    description: Inventory hostnames to validate. Defaults to every host of the play (C(ansible_play_hosts_all)).
    type: list
    elements: str
  spec:
    description:
      - How to treat the speculative-decoding triple. C(keep) as written, C(auto) drop num_steps/eagle_topk/draft_tokens
        so SGLang chooses, C(off) drop every speculative_* argument, C(explicit) require the triple.
      - Overrides each host's C(sglang_spec) (default C(keep)) for this run; unset, every host uses its own.
      - Or the triple itself, a mapping of C(speculative_num_steps), C(speculative_eagle_topk) and
        C(speculative_num_draft_tokens) as whole numbers, means C(explicit) with these values in place of the host's;
        C(playbooks/bench.yml) tries such candidates on a canary.
    type: raw
  fail_on_error:
    description:
      - Fail the task when any host is invalid; the report is then printed by the plugin, once.
      - With false the plugin returns the result for the caller to decide; C(playbooks/validate.yml) stops in a task of
        its own, so that a large fleet's result is not printed again.
    type: bool
    default: true
  show_report:
    description:
      - Print the report (one block per set of hosts with the same problems) as plain lines on standard error, readable
        on any callback and without the project's C(ansible.cfg), and leaving a machine-readable callback's standard
        output as it is. Defaults to O(fail_on_error).
    type: bool
  allow_no_servers:
    description:
      - Without it, an inventory whose C(sglang_servers) group is missing or empty fails (naming the groups it has
        and the nearest name), unless it is a plain host list with no groups at all, whose hosts are all GPU hosts.
        C(playbooks/validate.yml) maps C(-e allow_no_servers=true) onto it, for a run on gateways or monitoring hosts
        only.
    type: bool
    default: false
  render_dir:
    description:
      - When every host is valid, also write O(render_dir)/<host>/ with each instance's systemd unit, environment file
        and C(--config) YAML (when it has secret arguments), rendered from the plans of this pass by the function the
        sglang_server role installs them with (the P(blackwell.sglang.server_files#filter) filter), with the
        O(render_role) role's templates and the role defaults of its settings under each host's own values; secret
        values are replaced by a marker. Directories are C(0700), files C(0600). A relative path is taken from the
        directory ansible-playbook runs in.
      - Nothing is rendered when any host is invalid.
    type: path
  render_role:
    description:
      - The server role whose templates O(render_dir) renders with, as a path, else this collection's own role of that
        name, else the play's C(roles/) directory or the roles path.
    type: str
    default: sglang_server
  check_internals:
    description:
      - Refuse hosts whose inventory sets the roles' internal variables (C(__sglang*), C(__nvidia*), C(__rollout*))
        or a fact the run publishes (C(sglang_server_plan), C(sglang_common_restart_pending)). What the run itself set
        (an earlier playbook of the same run) does not count; when a host carries such a name, the inventory is read
        again from its sources to tell them apart.
      - The sglang_server role's GPU binding and the bench's candidates turn it off; the run's validate task checked
        the inventory already.
    type: bool
    default: true
  check_locks:
    description:
      - Refuse a GPU host whose C(sglang_lock) is true (the C(blackwell.sglang.sglang) role's default) when
        C(sglang_lock_file) is not a hashed lock of its C(sglang_version) (rule C(lock.missing) or C(lock.mismatch)),
        naming the releases that have a lock in its C(sglang_locks_dir) for its C(sglang_torch_requirement), and the
        fixes. Each of these variables is the host's own where its inventory sets it, else the role's default
        (C(role_path) is the role's directory). With C(sglang_lock) false nothing is checked.
      - The sglang_server role's GPU binding and the bench's candidates turn it off; the run's validate task checked
        the locks already, and the server role used alone installs nothing from a lock.
    type: bool
    default: true
notes:
  - An action plugin; this module file holds its documentation only.
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.controller
attributes:
  check_mode:
    support: full
    details: Validates as in a normal run; O(render_dir), on the controller, is written in check mode too.
  diff_mode:
    support: N/A
    details: Validation changes nothing on any host.
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Validate every host's SGLang arguments, printing the report and failing on any invalid host
  blackwell.sglang.validate:
  run_once: true

- name: Validate with SGLang choosing the speculative triple, and report without failing
  blackwell.sglang.validate:
    spec: auto
    fail_on_error: false
  register: validation
  run_once: true

- name: Show the problems
  ansible.builtin.debug:
    msg: "{{ validation.report }}"
  when: validation.report | length > 0
  run_once: true
"""

RETURN = r"""
rendered:
  description: With O(render_dir), where the plan was written (C(dir)), the templates it was rendered with
    (C(templates)), how many C(hosts) and C(files), and the C(seconds) it took.
  type: dict
  returned: when render_dir is given and every host is valid
hosts:
  description: >-
    Per host, C(ok), C(errors) and C(warnings). When every host is valid, the problems are complete records (rule,
    variable, value, message, fix, source) and come with the effective C(args) (secrets masked), the rendered C(argv),
    the GPU ids and the keys of the secret config file. When any host is invalid, the readable report is C(msg) and
    each host carries only C(ok) and its problems as C(variable: rule) lines.
  type: dict
  returned: always
invalid_hosts:
  description: Hostnames with at least one error.
  type: list
  returned: always
report:
  description: >-
    The readable report (also printed once): one block per distinct set of problems, hosts with identical problems
    grouped ("412 hosts (a, b, c, d, e and 407 more): ..."). Absent when the task itself fails (it was printed).
  type: str
  returned: when every host is valid or O(fail_on_error) is false
msg:
  description: >-
    One line, e.g. "SGLang configuration rejected for 2 of 500 host(s): a, b, 0 warning(s), spec=keep".
  type: str
  returned: always
"""
