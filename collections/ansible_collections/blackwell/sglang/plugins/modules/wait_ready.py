#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Documentation of the blackwell.sglang.wait_ready action plugin (waiting for an SGLang server to become healthy).

The action plugin plugins/action/wait_ready.py does the work on the controller; this file holds only its
documentation, which ansible-doc and ansible-test read from modules.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: wait_ready
version_added: 0.1.0
short_description: Wait until an SGLang server answers its health endpoint, with progress output
description:
  - Polls the host with the C(blackwell.sglang.server_probe) module, which checks O(url) every O(interval)
    seconds on the host itself and returns when it answers 200, when the unit fails, or after
    O(progress_every) seconds; then the elapsed time, the unit's state and the server's last log line are
    printed, so a 397B model's minutes of loading are visible at little cost per round trip.
  - Fails early when the unit has failed (crash loop that hit the start limit) or exited, with the last
    journal lines; when the server has shown no progress for O(no_progress_timeout) seconds (no new journal
    line of the unit, no growth of the memory used on O(gpus)); after O(timeout) otherwise.
options:
  url:
    description: Health URL.
    type: str
    required: true
  ca_path:
    description: PEM CA bundle that verifies the server's certificate when O(url) is https (empty, the system's store).
    type: str
    default: ""
  unit:
    description: systemd unit of the server.
    type: str
    required: true
  timeout:
    description: Seconds to wait in total.
    type: int
    default: 3600
  interval:
    description: Seconds between health checks on the host (each round trip to the host waits up to O(progress_every)).
    type: float
    default: 0.5
  progress_every:
    description: Seconds between progress lines.
    type: float
    default: 15
  no_progress_timeout:
    description: >-
      Fail when neither a new journal line of O(unit) (its journal cursor moved) nor growth of the GPU memory
      used on O(gpus) was seen for this many seconds; 0 disables the check.
    type: float
    default: 600
  gpus:
    description: nvidia-smi indices of the server's GPUs (empty, every GPU of the host).
    type: list
    elements: int
    default: []
  info_url:
    description: >-
      Once healthy, read this URL in the same round trip (SGLang's C(/server_info)) and return the values of
      O(info_keys) as RV(info); the wait fails when it cannot be read. Unset, nothing more is read.
    type: str
  info_keys:
    description: The keys of O(info_url)'s JSON to return (only these, because C(/server_info) also holds the server's secrets).
    type: list
    elements: str
    default: []
  api_key:
    description: The server's API key, sent to O(info_url) only. Kept out of the output.
    type: str
  require_info:
    description: >-
      Keys of O(info_keys) that must have a value once the server is healthy (for example C(speculative_algorithm)
      when speculative decoding was asked for); the wait fails naming the keys without one. Needs O(info_url).
    type: list
    elements: str
    default: []
  require_info_why:
    description: Why O(require_info) must be set, for the failure message.
    type: str
    default: ""
  metrics:
    description: >-
      Once healthy, read SGLang's C(/metrics) beside O(url) in the same round trip and return its startup breakdown
      as RV(startup_breakdown) (the server runs with C(--enable-metrics)).
    type: bool
    default: false
notes:
  - An action plugin; this module file holds its documentation only. It runs M(blackwell.sglang.server_probe) on the host.
extends_documentation_fragment:
  - blackwell.sglang.attributes
  - blackwell.sglang.attributes.read_only
  - blackwell.sglang.attributes.gpu_host
author:
  - blackwell-sglang-ansible contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Wait for the health endpoint (model load included)
  blackwell.sglang.wait_ready:
    url: http://127.0.0.1:30000/health
    unit: sglang.service
    timeout: 3600
    gpus: [0, 1, 2, 3]
"""

RETURN = r"""
elapsed:
  description: Seconds waited.
  type: float
  returned: always
probes:
  description: Round trips to the host until it answered healthy.
  type: int
  returned: success
info:
  description: The values of O(info_keys) in O(info_url)'s JSON, read once the server was healthy.
  type: dict
  returned: success, with O(info_url)
startup_breakdown:
  description: >-
    SGLang's startup breakdown (C(phases), C(cuda_graph), C(cuda_graph_seconds), C(weight_load_seconds),
    C(weight_update_seconds)), read once the server was healthy; null without its startup samples.
  type: dict
  returned: success, with O(metrics)
metrics_error:
  description: Why C(/metrics) could not be read (null when it was).
  type: str
  returned: success, with O(metrics)
unit_state:
  description: ActiveState, SubState, Result, NRestarts and MainPID of the unit at the last probe.
  type: dict
  returned: always
stalled:
  description: Whether the wait failed because the server made no progress for O(no_progress_timeout) seconds.
  type: bool
  returned: failure
log:
  description: The last journal lines of the unit.
  type: list
  elements: str
  returned: failure
"""
