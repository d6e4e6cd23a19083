# SPDX-License-Identifier: Apache-2.0
"""Warmup and readiness (issue 35 item 3): ``--skip-server-warmup`` only where the operator allows it.

SGLang 0.5.23 (sglang/srt/entrypoints/http_server.py) marks the server ready after its warmup request:
``_wait_and_warmup`` (:2572-2609) runs ``_execute_server_warmup`` (:2360-2535: GET /model_info, then one
generation of 8 tokens at temperature 0), which sets ``server_status = ServerStatus.Up`` (:2502) once it answered 200.
With ``--skip-server-warmup`` it sets ``Up`` with no request at all (:2589-2593), so ``/ready`` (:714-718,
``tokenizer_manager.is_ready()``) and ``/health`` answer 200 before any kernel ran: the ready wait passes, and the
first requests routed to the server pay the JIT compiles and CUDA-graph misses that the warmup would have absorbed.
SGLang accepts the flag; the project refuses it unless ``sglang_server_allow_skip_warmup`` is true.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_rules.registry import Report, rule

if TYPE_CHECKING:  # pragma: no cover
    from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_validate import Context

ALLOW_VAR = "sglang_server_allow_skip_warmup"
_HTTP = "sglang/srt/entrypoints/http_server.py"


@rule("server.warmup", file=_HTTP, sources=(
    "sglang/srt/entrypoints/http_server.py:2589-2593 (_wait_and_warmup: skip_server_warmup sets ServerStatus.Up "
    "without a request)",
    "sglang/srt/entrypoints/http_server.py:714-718 (/ready: 200 once is_ready())",
), stricter=("SGLang accepts --skip-server-warmup; it then reports ready before any request ran, so the ready wait and "
             "the routers send the first real requests into the kernel JIT the warmup would have paid"))
def _skip_warmup(ctx: Context, report: Report) -> None:
    """--skip-server-warmup only with sglang_server_allow_skip_warmup: true."""
    if not ctx.is_set("skip_server_warmup") or ctx.allow_skip_warmup:
        return
    report.error(ctx.var("skip_server_warmup"),
                 "--skip-server-warmup makes SGLang mark itself ready without its warmup request "
                 f"({report.source('2589-2593')}: _wait_and_warmup sets ServerStatus.Up with no request, so /ready, "
                 f"{report.source('714-718')}, answers 200 at once): the ready wait passes before any kernel ran and the "
                 "first requests the routers send pay the JIT compiles.",
                 f"remove sglang_args.skip_server_warmup, or set {ALLOW_VAR}: true for this host if the first requests "
                 "may be slow (e.g. a test server)",
                 report.source("2589-2593"), value=True)
