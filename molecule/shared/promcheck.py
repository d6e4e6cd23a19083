"""What the monitoring tests ask a Prometheus server: the dashboard's queries and the alerts' signals.

The Grafana dashboard (roles/sglang_monitoring/files/sglang-fleet.json) uses the template variables
``$host``, ``$sglang_instance`` (regex matchers, "All" = ``.*``) and ``$__rate_interval``; a query is
evaluated here with every host and instance selected and a fixed rate window. Every alert of the rules
file has the shape ``<signal> <comparison> <threshold>`` (the file's header): its signal is the
expression without the comparison, which must return data whether the alert fires or not.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "roles" / "sglang_monitoring" / "files" / "sglang-fleet.json"
VARIABLES = {"$__rate_interval": "1m", "$sglang_instance": ".*", "$host": ".*"}
ALERT_SHAPE = re.compile(r"^\s*(?P<signal>[A-Za-z_:][A-Za-z0-9_:]*)\s*(?P<op>==|!=|>=|<=|>|<)\s*(?P<threshold>-?[0-9]+(?:\.[0-9]+)?)\s*$")
Getter = Callable[[str, dict[str, str]], Any]


def dashboard_queries(path: Path = DASHBOARD, variables: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of every panel, the template variables replaced."""
    values = variables or VARIABLES
    out = []
    for panel in json.loads(path.read_text(encoding="utf-8"))["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name in sorted(values, key=len, reverse=True):
                expr = expr.replace(name, values[name])
            if "$" in expr:
                raise ValueError(f"panel {panel['title']!r}: unknown template variable in {target['expr']!r}")
            out.append((str(panel["title"]), expr))
    return out


def variable_queries(path: Path = DASHBOARD, variables: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(variable, PromQL) for each query variable of the dashboard: ``label_values(S, L)`` as ``count by (L) (S)``."""
    values = variables or VARIABLES
    out = []
    for var in json.loads(path.read_text(encoding="utf-8"))["templating"]["list"]:
        if var.get("type") != "query":
            continue
        found = re.fullmatch(r"label_values\((?P<selector>.*),\s*(?P<label>[A-Za-z_][A-Za-z0-9_]*)\)", var["definition"])
        if found is None:
            raise ValueError(f"variable {var['name']}: {var['definition']!r} is not label_values(selector, label)")
        expr = f"count by ({found['label']}) ({found['selector']})"
        for name in sorted(values, key=len, reverse=True):
            expr = expr.replace(name, values[name])
        out.append((f"variable {var['name']}", expr))
    return out


def alert_signals(rule_groups: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(alert, signal, comparison, threshold) of every alerting rule of ``/api/v1/rules``'s groups."""
    out = []
    for group in rule_groups:
        for rule in group["rules"]:
            if rule.get("type") != "alerting":
                continue
            shape = ALERT_SHAPE.match(rule["query"])
            if shape is None:
                raise ValueError(f"alert {rule['name']}: {rule['query']!r} is not '<signal> <comparison> <threshold>'")
            out.append((rule["name"], shape["signal"], shape["op"], shape["threshold"]))
    return out


def values(result: dict[str, Any]) -> list[float]:
    """The sample values of an instant query's result (vector or scalar)."""
    data = result["data"]
    if data["resultType"] == "vector":
        return [float(s["value"][1]) for s in data["result"]]
    if data["resultType"] == "scalar":
        return [float(data["result"][1])]
    raise ValueError(f"unexpected result type {data['resultType']}")


def has_data(result: dict[str, Any]) -> bool:
    """At least one series, and at least one value that is a number (a quantile of no request is NaN)."""
    return any(not math.isnan(v) for v in values(result))


def empty_queries(get: Getter, queries: list[tuple[str, str]]) -> list[str]:
    """'name: expr' of each query that returns no data; ``get(path, params)`` is the API's JSON."""
    missing = []
    for name, expr in queries:
        result = get("/api/v1/query", {"query": expr})
        if result.get("status") != "success" or not has_data(result):
            missing.append(f"{name}: {expr} -> {json.dumps(result.get('data', result))[:300]}")
    return missing
