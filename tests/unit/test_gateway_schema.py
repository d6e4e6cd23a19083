"""The gateways' launch parsers as data (plugin_utils/schemas/gateway-*.json, tools/gateway_schema.py) and the
reading of ``sglang_router_extra_args`` against them (plugin_utils/sglang_gateway_args.py), property-based.

- The emulation of argparse (``sglang_gateway_args.parse``) accepts exactly the word lists a real
  ``argparse.ArgumentParser`` rebuilt from the schema accepts (same option strings, nargs, types, choices,
  mutually exclusive groups, abbreviations), for both gateways.
- Every type a schema names is one the role can convert; every managed dest exists in a gateway's parser.
- ``validate.yml``'s gateway check (``sglang_gateway.gateway_problems``) refuses a misspelled option, an
  ill-typed value and an extra option overriding a managed one, naming the variable and citing the parser.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway as gw
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway_args as ga
from hypothesis import example, given, settings
from hypothesis import strategies as st
from role_defaults import ROLE_DEFAULTS
from tool_loader import load_tool

SCHEMAS = {g: ga.load(g, v) for g in ga.GATEWAYS for v in ga.releases(g)}
PINNED = {"smg": "1.13.0", "sglang-router": "0.3.2"}


class Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Refused(message)


def _type(action: dict) -> Any:
    kind = action["type"]
    if kind is None:
        return None
    if kind in ga.TYPES:
        convert = ga.TYPES[kind][0]
    else:
        convert = str

    def typed(text: str) -> Any:
        try:
            return convert(text)
        except ga.ValueRefused as why:
            raise argparse.ArgumentTypeError(str(why)) from None

    typed.__name__ = kind
    return typed


def real_parser(schema: ga.GatewaySchema) -> argparse.ArgumentParser:
    """argparse itself, rebuilt from the schema (the shapes the gateway's add_cli_args declares)."""
    parser = _Parser(add_help=False, exit_on_error=False)
    groups: dict[int, Any] = {}
    kinds = {"_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
             "_ExtendAction": "extend", "_AppendAction": "append", "_HelpAction": "store_true",
             "_StoreConstAction": "store_const", "_CountAction": "count"}
    for action in schema.actions:
        where = parser
        if action["mutex"] is not None:
            where = groups.setdefault(action["mutex"], parser.add_mutually_exclusive_group())
        if action["action"] == "BooleanOptionalAction":
            strings = [o for o in action["option_strings"] if not o.startswith("--no-")]
            where.add_argument(*strings, action=argparse.BooleanOptionalAction, dest=action["dest"])
            continue
        kind = kinds[action["action"]]
        kwargs: dict[str, Any] = {"dest": action["dest"], "action": kind}
        if kind in ("store", "extend", "append"):
            kwargs.update(nargs=action["nargs"], type=_type(action), choices=action["choices"])
        if kind == "store_const":
            kwargs["const"] = action["const"]
        where.add_argument(*action["option_strings"], **kwargs)
    return parser


def accepted(schema: ga.GatewaySchema, words: list[str]) -> bool:
    try:
        real_parser(schema).parse_args(words)
    except (Refused, argparse.ArgumentError):
        return False
    return True


def _words(schema: ga.GatewaySchema) -> st.SearchStrategy[str]:
    options = sorted(schema.option_strings())
    choices = sorted({str(c) for a in schema.actions for c in (a["choices"] or [])})
    return st.one_of(
        st.sampled_from(options),
        st.sampled_from(options).map(lambda o: o[:max(3, len(o) // 2)]),
        st.tuples(st.sampled_from(options), st.sampled_from(["1", "x", "-1", "0.5", "random", ""])).map("=".join),
        st.sampled_from(choices or ["x"]),
        st.sampled_from(["1", "-1", "2.5", "-0.5", "nan", "inf", "x", "1,2", "", " ", "-", "--", "-x", "--no-such",
                         "http://a:1", "a b", "-1e3", "TRUE"]),
        st.text(alphabet="-=.,01ax ", max_size=6),
    )


@pytest.mark.parametrize("key", sorted(SCHEMAS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_emulation_reads_words_as_argparse_does(key: str, data: st.DataObject) -> None:
    schema = SCHEMAS[key]
    words = data.draw(st.lists(_words(schema), max_size=6))
    reading = ga.parse(schema, words)
    assert (reading.problems == []) == accepted(schema, words), (words, reading.problems)


@pytest.mark.parametrize("key", sorted(SCHEMAS))
@pytest.mark.parametrize("words", [["--retry-max-retries", "5"], ["--policy", "random"], ["--pol", "random"],
                                   ["--cb-failure-threshold=3"], ["--disable-retries"], ["--cors-allowed-origins"],
                                   ["--request-id-headers", "a", "b"], ["--queue-timeout-secs", "-1"]])
def test_ordinary_words(key: str, words: list[str]) -> None:
    schema = SCHEMAS[key]
    assert (ga.parse(schema, words).problems == []) == accepted(schema, words)


@pytest.mark.parametrize("key", sorted(SCHEMAS))
def test_every_type_is_one_the_role_converts(key: str) -> None:
    schema = SCHEMAS[key]
    for action in schema.actions:
        kind = action["type"]
        assert kind is None or kind in ga.TYPES or (kind.endswith("<lambda>") and action["dest"] in ga.TEXT_LAMBDAS), \
            (action["dest"], kind)
    for name in schema.data["types"]:
        assert name in ga.TYPES or name.endswith("<lambda>"), name


def test_the_pinned_releases_have_schemas() -> None:
    for gateway, version in PINNED.items():
        schema = ga.load(gateway, version)
        assert schema is not None and schema.version == version
        assert schema.data["generator"] == "tools/gateway_schema.py"
    assert ROLE_DEFAULTS["sglang_router_smg_version"] == PINNED["smg"]
    assert ROLE_DEFAULTS["sglang_router_version"] == PINNED["sglang-router"]
    # smg 1.13.0's launch parser: 213 options (help included), as the issue counts them.
    assert ga.load("smg", "1.13.0").data["options"] == 213


def test_every_managed_dest_is_a_gateways_and_the_unit_sets_only_common_ones() -> None:
    dests = {a["dest"] for s in SCHEMAS.values() for a in s.actions}
    assert set(gw.MANAGED_DESTS) <= dests, set(gw.MANAGED_DESTS) - dests
    for schema in SCHEMAS.values():
        for dest in ("host", "port", "prometheus_host", "prometheus_port", "policy", "log_level", "worker_urls",
                     "max_concurrent_requests", "queue_size", "rate_limit_tokens_per_second", "tls_cert_path",
                     "tls_key_path", "ca_cert_paths", "api_key", "control_plane_api_keys"):
            assert schema.by_dest(dest) is not None, (schema.name, dest)


def test_schema_files_are_json_with_sources() -> None:
    for schema in SCHEMAS.values():
        json.dumps(schema.data)
        for action in schema.actions:
            assert action["dest"] == "help" or action["source"], action["dest"]


def _problems(**values: Any) -> list[str]:
    return [gw.format_problem(p) for p in gw.gateway_problems(values, {}, ROLE_DEFAULTS)]


@pytest.mark.parametrize(("gateway", "cites"), [("smg", "smg/"), ("sglang-router", "sglang_router/")])
def test_validate_refuses_misspelled_ill_typed_and_managed_options_citing_the_parser(gateway: str, cites: str) -> None:
    for args, says in ((["--retry-max-retrys", "5"], "is no option"), (["--worker-startup-timeout-secs", "five"], "integer"),
                       (["--policy=random"], "the role manages --policy"), (["--ho", "0.0.0.0"], "the role manages --host"),
                       (["--cache-threshold", "x"], "a number")):
        found = _problems(sglang_router_gateway=gateway, sglang_router_extra_args=args)
        assert len(found) == 1 and found[0].startswith("sglang_router_extra_args["), (args, found)
        assert says in found[0] and cites in found[0] and f"gateway-{gateway}-" in found[0], (args, found)


@pytest.mark.parametrize("gateway", ["smg", "sglang-router"])
def test_health_retry_and_circuit_breaker_variables_map_onto_the_gateways_own_options(gateway: str) -> None:
    """Each variable is one option of the pinned gateway's parser (both gateways have them all); values checked."""
    schema = ga.load(*gw.release_of({**ROLE_DEFAULTS, "sglang_router_gateway": gateway}))
    assert schema is not None
    for var, dest in gw.TUNING.items():
        action = schema.by_dest(dest)
        assert action is not None, (gateway, dest)
        assert gw.MANAGED_DESTS[dest] == f"set {var}"
        assert (action["nargs"] == 0) is var.endswith("_enabled")
        if action["nargs"] != 0:  # the role's default is a value the gateway takes
            assert ga.convert(schema, action, str(ROLE_DEFAULTS[var])) is None, var
    assert _problems(sglang_router_gateway=gateway) == []
    [found] = _problems(sglang_router_gateway=gateway, sglang_router_extra_args=["--cb-failure-threshold", "3"])
    assert "the role manages --cb-failure-threshold" in found and "sglang_router_circuit_breaker_failure_threshold" in found


@pytest.mark.parametrize(("values", "variable", "says"), [
    ({"sglang_router_health_check_timeout": 60}, "sglang_router_health_check_timeout", "shorter than the interval"),
    ({"sglang_router_health_check_interval": "20", "sglang_router_health_check_timeout": "25"},
     "sglang_router_health_check_timeout", "shorter than the interval"),
    ({"sglang_router_retry_initial_backoff_ms": 40000}, "sglang_router_retry_initial_backoff_ms", "longest backoff"),
    ({"sglang_router_health_check_interval": 0}, "sglang_router_health_check_interval", "out of range"),
    ({"sglang_router_health_check_endpoint": "/health?x=1"}, "sglang_router_health_check_endpoint", "a URL path"),
    ({"sglang_router_health_check_endpoint": "health"}, "sglang_router_health_check_endpoint", "a URL path"),
    ({"sglang_router_circuit_breaker_enabled": "maybe"}, "sglang_router_circuit_breaker_enabled", "true or false"),
    ({"sglang_router_retry_max_retries": 0}, "sglang_router_retry_max_retries", "out of range"),
])
def test_bad_health_retry_and_circuit_breaker_settings_are_refused(values: dict[str, Any], variable: str, says: str) -> None:
    found = _problems(**values)
    assert len(found) == 1 and found[0].startswith(variable) and says in found[0], found


def test_a_gateway_release_without_one_of_the_options_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ga.load("sglang-router", "0.3.2")
    assert real is not None
    data = {**real.data, "arguments": [a for a in real.data["arguments"] if a["dest"] != "cb_window_duration_secs"]}
    monkeypatch.setattr(ga, "load", lambda gateway, version: ga.GatewaySchema(data, real.name))
    [found] = _problems(sglang_router_gateway="sglang-router")
    assert found.startswith("sglang_router_circuit_breaker_window") and "has no --cb-window-duration-secs" in found


def test_policy_is_checked_against_the_pinned_gateway() -> None:
    assert _problems(sglang_router_gateway="smg", sglang_router_policy="prefix_hash") == []
    found = _problems(sglang_router_gateway="sglang-router", sglang_router_policy="prefix_hash")
    assert len(found) == 1 and found[0].startswith("sglang_router_policy") and "sglang_router/router_args.py" in found[0]


def test_a_release_without_schema_cannot_take_extra_args() -> None:
    assert _problems(sglang_router_smg_version="9.9.9") == []
    found = _problems(sglang_router_smg_version="9.9.9", sglang_router_extra_args=["--retry-jitter-factor", "0.1"])
    assert len(found) == 1 and "tools/gateway_schema.py" in found[0]


@given(value=st.text(max_size=20))
@example(value="smg\nUser=root")
@example(value="sglang-router")
def test_the_gateway_variable_is_a_choice(value: str) -> None:
    found = _problems(sglang_router_gateway=value)
    if value in ga.GATEWAYS:
        assert found == []
    else:
        assert found and all(line.startswith("sglang_router_gateway") for line in found)


# --- the extractor (tools/gateway_schema.py) ----------------------------------------------------------------------

TOOL = load_tool("gateway_schema")
WHEELS = TOOL.DEFAULT_WHEEL_DIR


@pytest.mark.parametrize(("gateway", "version"), sorted(PINNED.items()))
def test_the_committed_schema_is_what_the_wheel_gives(gateway: str, version: str) -> None:
    """One command per release: the schema extracted again from the cached wheel equals the committed file."""
    stem = TOOL.GATEWAYS[gateway][0].replace("-", "_")
    wheels = sorted(WHEELS.glob(f"{stem}-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no {gateway} {version} wheel in .cache/gateway-wheels (make gateway-schema downloads it)")
    assert json.loads(json.dumps(TOOL.extract(gateway, version, wheels[0]))) == ga.load(gateway, version).data


@pytest.mark.parametrize(("source", "refused"), [
    ("def parse_router_args(a):\n    p = argparse.ArgumentParser(allow_abbrev=False)\n"
     "    RouterArgs.add_cli_args(p, use_router_prefix=False)\n", "allow_abbrev"),
    ("def parse_router_args(a):\n    p = argparse.ArgumentParser()\n"
     "    RouterArgs.add_cli_args(p, use_router_prefix=True)\n", "use_router_prefix"),
    ("def main():\n    pass\n", "no parse_router_args"),
])
def test_the_extractor_refuses_a_parser_it_cannot_describe(source: str, refused: str) -> None:
    with pytest.raises(SystemExit, match=refused):
        TOOL.parser_source(source, "smg")
    good = ("def parse_router_args(a):\n    p = argparse.ArgumentParser(description='x')\n"
            "    RouterArgs.add_cli_args(p, use_router_prefix=False)\n")
    assert TOOL.parser_source(good, "smg")["source"] == "smg/launch_router.py:2"
