"""The gateway's input contract (plugin_utils/sglang_gateway.py), property-based.

Every string a gateway variable or a GPU host's worker variable can hold either is refused by
``gateway_problems`` naming the variable (and the GPU host), or the router's unit and environment file,
rendered as roles/sglang_router renders them and read back with systemd's rules (``rendering.parse_unit`` /
``systemd_split`` / ``parse_env_file``), keep exactly the baseline's directives and carry the value into the
intended argv word, setting or environment value.  Extra arguments are read back by an argparse parser with
every option of sglang-router 0.3.2 (abbreviations allowed, as its own parser does): no managed option is ever
given twice or by an extra argument.  The classes the issue names (loopback by prefix, worker URL injection,
managed-option overrides in every spelling, keys on the command line, privileged identities, per-instance key
mismatches) are parametrized over the class.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.sglang import gateway_problems as gateway_filter
from ansible_collections.blackwell.sglang.plugins.filter.sglang import router_endpoint, server_instances
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway as gw
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_gateway_args as ga
from hypothesis import example, given
from hypothesis import strategies as st
from reference import host_with
from rendering import _evaluate, jinja_env, parse_env_file, parse_unit, systemd_split
from role_defaults import ROLE_DEFAULTS

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_router"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
SPECS = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))["argument_specs"]
SERVICE = (ROLE / "templates" / "sglang-router.service.j2").read_text(encoding="utf-8")
ENV_FILE = (ROLE / "templates" / "sglang-router.env.j2").read_text(encoding="utf-8")
GATEWAY = "gw-01"
GPU = "gpu-01"
CANARY = "Zq9x"  # starts every secret, so an echo of it is seen whatever the rest is

SPECIAL = "\n\r\x00\t\x0b\x0c\x1b\x7f\x85\u2028\u2029\ufeff \"'\\$%;#=[]`-/.:@{}é中\U0001f600"
TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from([*SPECIAL, "a", "0", "1", "7"]), max_size=24),
    st.sampled_from([
        "--host", "-", "", " ", "0.0.0.0", "::", "127.0.0.1", "::1", "localhost", "localhost.attacker.example",
        "127.attacker.example", "localhostx", "127.1", "%h", "$HOME", "${X}", "a\\", ";", "root", "docker", "ubuntu",
        "x\n[Service]\nExecStartPre=+/bin/sh -c id", "x\nUser=root", "x\rUser=root", "10.0.0.5 --api-key=x",
        "http://10.0.0.9:30000\nLD_PRELOAD=/tmp/x.so", "http://10.0.0.9:30000 http://evil.example:80",
        "/etc/ssl/a b.pem", "/root/key.pem", "/home/u/c.pem", "/etc/ssl/../shadow", "sglang", "sglang-x", "ssh",
    ]),
)


def gpu_host(**changes: Any) -> dict[str, Any]:
    """The sample inventory's reference GPU host (valid as it is) with changes."""
    return host_with(None, **changes)


_GPU_BASE = gpu_host(ansible_host="10.0.0.5")


# One environment (StrictUndefined, nothing changes it) for every render: rendering compiles each variable and
# template once (rendering._evaluate keeps them by environment), not once per property example.
_ENV = jinja_env()
_ENV.undefined = jinja2.StrictUndefined
_SERVICE_TEMPLATE = _ENV.from_string(SERVICE)
_ENV_FILE_TEMPLATE = _ENV.from_string(ENV_FILE)


def router_context(overrides: dict[str, Any], workers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The role's variables on the gateway (defaults, ``overrides`` as host variables, then the vars/main.yml
    entries the templates use), evaluated as Ansible would, with ``workers`` as sglang_router_worker_group."""
    env = _ENV
    groups = {"all": [GATEWAY, *workers], "sglang_servers": list(workers), "sglang_routers": [GATEWAY]}
    context: dict[str, Any] = {"ansible_managed": "Ansible managed", "inventory_hostname": GATEWAY, "groups": groups,
                               "hostvars": {**workers, GATEWAY: dict(overrides)}}
    context.update(overrides)
    for name, value in DEFAULTS.items():
        if name not in overrides:
            context[name] = _evaluate(env, value, context)
    for name in ("__sglang_router_smg", "__sglang_router_release", "__sglang_router_venv", "__sglang_router_settings",
                 "__sglang_router_self",
                 "__sglang_router_secrets_file", "__sglang_router_launcher"):
        context[name] = _evaluate(env, VARS[name], context)
    context["__sglang_router_workers"] = workers
    return context


def render(overrides: dict[str, Any] | None = None, workers: dict[str, dict[str, Any]] | None = None) -> tuple[str, str]:
    """The router's unit and environment file as the role writes them."""
    context = router_context(overrides or {}, {GPU: _GPU_BASE} if workers is None else workers)
    return _SERVICE_TEMPLATE.render(**context), _ENV_FILE_TEMPLATE.render(**context)


def problems(overrides: dict[str, Any] | None = None, workers: dict[str, dict[str, Any]] | None = None) -> list[gw.Problem]:
    """What the role's first task refuses (check_inputs with gateway: true): every variable of its argument spec as
    the play has it, and its workers."""
    context = router_context(overrides or {}, {GPU: _GPU_BASE} if workers is None else workers)
    inputs = {name: context[name] for name in SPECS["main"]["options"] if name in context}
    return gw.gateway_problems(inputs, context["__sglang_router_workers"], ROLE_DEFAULTS)


def names(found: list[gw.Problem], variable: str) -> bool:
    return any(p.variable == variable or p.variable.startswith(variable + "[") for p in found)


def directives(unit: str) -> list[tuple[str, str]]:
    return [(section, key) for section, key, _ in parse_unit(unit)]


def settings_of(unit: str) -> dict[tuple[str, str], str]:
    return {(section, key): value for section, key, value in parse_unit(unit)}


def argv(unit: str) -> list[str]:
    """ExecStart's words as systemd passes them (its $SGLANG_ROUTER_WORKER_URLS, from the environment file, as a word)."""
    [line] = [v for s, k, v in parse_unit(unit) if (s, k) == ("Service", "ExecStart")]
    return systemd_split(line.replace("$SGLANG_ROUTER_WORKER_URLS", "WORKERS"))


def option(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words else None


GOOD_TLS = {"sglang_router_tls_cert_file": "/etc/sglang-router/tls.pem", "sglang_router_tls_key_file": "/etc/sglang-router/tls.key"}
GOOD_CA = {"sglang_router_ca_file": "/etc/ssl/certs/fleet-ca.pem"}
BASE_UNIT, BASE_ENV = render()


def test_the_defaults_and_the_sample_fleet_pass() -> None:
    assert problems() == []
    assert problems(GOOD_TLS | GOOD_CA) == []
    assert parse_env_file(BASE_ENV) == {"SGLANG_ROUTER_WORKER_URLS": server_instances(GPU, {GPU: _GPU_BASE}, {"all": [GPU]})[0]["url"]}


def test_gateway_defaults_are_the_roles_read_by_the_caller() -> None:
    """No copy of the role's defaults in Python: the caller passes them (read from the roles' defaults files), and
    without them the check says which it needs instead of using a value of its own."""
    assert not hasattr(gw, "GATEWAY_DEFAULTS")
    assert {n: ROLE_DEFAULTS[n] for n in gw.GATEWAY_VARS} == {n: DEFAULTS[n] for n in gw.GATEWAY_VARS}
    with pytest.raises(TypeError, match="sglang_router_host"):
        gw.gateway_problems({"sglang_router_port": 30001}, {})
    assert gw.other_roles_dirs(ROLE_DEFAULTS) == ("/opt/sglang", "/etc/sglang", "/var/lib/sglang", "/var/cache/sglang",
                                                  "/usr/local/libexec/sglang", "/srv/sglang-bundle", "/var/cache/sglang-uv")


def test_every_role_variable_is_checked() -> None:
    """The role's first task checks every option of its argument spec (check_inputs reads it) with the gateway's
    rules too, before anything changes."""
    first = yaml.safe_load((REPO / "roles" / "sglang_router" / "tasks" / "main.yml").read_text())[0]
    assert first["blackwell.sglang.check_inputs"] == {"role_path": "{{ role_path }}", "gateway": True}
    assert "sglang_router_proxy_env" in SPECS["main"]["options"]


# --- every string of the unit: refused naming the variable, or exactly where it belongs -------------------------------

def _expect(var: str, value: str, unit: str) -> None:
    words, conf = argv(unit), settings_of(unit)
    cfg_dir = DEFAULTS["sglang_router_config_dir"]
    checks = {
        "sglang_router_host": lambda: option(words, "--host") == value,
        "sglang_router_prometheus_host": lambda: option(words, "--prometheus-host") == value,
        "sglang_router_policy": lambda: option(words, "--policy") == value,
        "sglang_router_log_level": lambda: option(words, "--log-level") == value,
        "sglang_router_user": lambda: conf[("Service", "User")] == value,
        "sglang_router_group": lambda: conf[("Service", "Group")] == value,
        "sglang_router_service_name": lambda: (conf[("Service", "SyslogIdentifier")] == value
                                               and conf[("Service", "EnvironmentFile")] == f"{cfg_dir}/{value}.env"
                                               and words[2] == f"{cfg_dir}/{value}.secrets.json"),
        "sglang_router_smg_version": lambda: words[0] == f"{DEFAULTS['sglang_router_venvs_dir']}/smg-{value}/bin/python",
        "sglang_router_venvs_dir": lambda: words[:2] == [f"{value}/smg-{DEFAULTS['sglang_router_smg_version']}/bin/python",
                                                         f"{value}/sglang-router-launch"],
        "sglang_router_config_dir": lambda: (conf[("Service", "EnvironmentFile")] == f"{value}/sglang-router.env"
                                             and words[2] == f"{value}/sglang-router.secrets.json"),
        "sglang_router_tls_cert_file": lambda: option(words, "--tls-cert-path") == value,
        "sglang_router_tls_key_file": lambda: option(words, "--tls-key-path") == value,
        "sglang_router_ca_file": lambda: (option(words, "--ca-cert-paths") == value
                                          and systemd_split(conf[("Service", "Environment")]) == [f"SSL_CERT_FILE={value}"]
                                          if value else "--ca-cert-paths" not in words),
        "sglang_router_worker_group": lambda: True,
    }
    assert checks[var](), f"{var}={value!r} did not reach its place: {words}"


UNIT_STRINGS = ["sglang_router_host", "sglang_router_prometheus_host", "sglang_router_policy", "sglang_router_log_level",
                "sglang_router_user", "sglang_router_group", "sglang_router_service_name", "sglang_router_smg_version",
                "sglang_router_venvs_dir", "sglang_router_config_dir", "sglang_router_tls_cert_file",
                "sglang_router_tls_key_file", "sglang_router_ca_file", "sglang_router_worker_group"]


def _shape(var: str) -> dict[str, Any]:
    """The other settings a value of ``var`` is rendered with (TLS needs both files)."""
    return {"sglang_router_tls_cert_file": GOOD_TLS, "sglang_router_tls_key_file": GOOD_TLS,
            "sglang_router_ca_file": {}}.get(var, {})


@pytest.mark.parametrize("var", UNIT_STRINGS)
@given(value=TEXT)
@example(value="127.0.0.1\n[Service]\nExecStartPre=+/bin/sh -c 'id'\nUser=root")
@example(value="0.0.0.0 --api-key stolen")
@example(value="cache_aware --host 0.0.0.0")
def test_unit_string(var: str, value: str) -> None:
    overrides = {**_shape(var), var: value}
    found = problems(overrides)
    if names(found, var):
        assert all(CANARY not in p.message for p in found)
        return
    assert found == [], [gw.format_problem(p) for p in found]
    unit, env = render(overrides)
    good = {**GOOD_CA, **GOOD_TLS}.get(var) if value else value  # an empty file setting is "unset"
    baseline_unit, baseline_env = render({**_shape(var), **({var: good} if var in GOOD_CA or var in GOOD_TLS else {})})
    assert directives(unit) == directives(baseline_unit), "the unit's directives changed"
    assert set(parse_env_file(env)) == set(parse_env_file(baseline_env)) == {"SGLANG_ROUTER_WORKER_URLS"}
    _expect(var, value, unit)


@pytest.mark.parametrize("var", ["sglang_router_api_key", "sglang_router_control_plane_api_key"])
@given(value=TEXT)
def test_keys_never_reach_the_unit_or_a_message(var: str, value: str) -> None:
    key = CANARY + value
    overrides = {"sglang_router_api_key": "a", "sglang_router_control_plane_api_key": "c", var: key}
    found = problems(overrides)
    assert all(CANARY not in gw.format_problem(p) for p in found), "a key was echoed"
    if found:
        assert names(found, var)
        return
    unit, env = render(overrides)
    assert CANARY not in unit and CANARY not in env


# --- extra arguments: read back by each gateway's own option shapes (its committed schema) ----------------------------

SCHEMAS = {g: ga.load(g, ga.releases(g)[-1]) for g in ga.GATEWAYS}
assert all(SCHEMAS.values()), SCHEMAS


def router_parser(gateway: str) -> argparse.ArgumentParser:
    """Every option of the gateway's launch parser with its shape (option strings, nargs; abbreviations allowed, as
    its parse_router_args), each collecting every occurrence: an override shows as a second occurrence."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    for action in SCHEMAS[gateway].actions:
        if action["nargs"] == 0:
            parser.add_argument(*action["option_strings"], action="append_const", const=True, dest=action["dest"])
        else:
            parser.add_argument(*action["option_strings"], nargs=action["nargs"], action="append", dest=action["dest"])
    return parser


MANAGED_VALUES = {"host": ["127.0.0.1"], "port": ["30000"], "prometheus_host": ["127.0.0.1"],
                  "prometheus_port": ["29000"], "policy": ["cache_aware"], "log_level": ["info"],
                  "max_concurrent_requests": ["-1"], "queue_size": ["100"], "worker_urls": [["WORKERS"]],
                  # health checks, retries, circuit breaker: the role's defaults, each from its variable (gw.TUNING)
                  "health_check_endpoint": ["/health"], "health_check_interval_secs": ["60"],
                  "health_check_timeout_secs": ["30"], "health_failure_threshold": ["3"], "health_success_threshold": ["2"],
                  "retry_max_retries": ["5"], "retry_initial_backoff_ms": ["50"], "retry_max_backoff_ms": ["30000"],
                  "cb_failure_threshold": ["10"], "cb_success_threshold": ["3"], "cb_timeout_duration_secs": ["60"],
                  "cb_window_duration_secs": ["120"]}


@pytest.mark.parametrize("gateway", ga.GATEWAYS)
@given(args=st.lists(st.one_of(TEXT, st.sampled_from(["--host", "--ho", "--host=0.0.0.0", "--api-key=k", "--port",
                                                       "--worker", "--prefill", "--mini-lb", "--retry-jitter-factor",
                                                       "5", "-1", "--", "--jwt-jwks-uri", "--control-plane-api-keys",
                                                       "--log-dir", "--cors-allowed-origins", "-h", "--encode",
                                                       "--discovery-file", "--cache-match-threshold", "0.5"])),
                     max_size=5))
@example(args=["--host", "0.0.0.0"])
@example(args=["--retry-jitter-factor", "0.1", "--cors-allowed-origins", "https://a.example"])
@example(args=["--retry-max-retries", "5"])
def test_extra_args_never_override_a_managed_option(gateway: str, args: list[str]) -> None:
    overrides = {"sglang_router_gateway": gateway, "sglang_router_extra_args": args}
    found = problems(overrides)
    if names(found, "sglang_router_extra_args"):
        return
    assert found == []
    words = argv(render(overrides)[0])
    tail = words[words.index("--cb-window-duration-secs") + 2:words.index("--worker-urls")]
    assert tail == args
    try:
        parsed = router_parser(gateway).parse_known_args(words[3:])[0]
    except (argparse.ArgumentError, SystemExit):
        return  # the gateway would refuse to start: nothing is overridden
    for dest, value in MANAGED_VALUES.items():
        assert getattr(parsed, dest) == value, f"{dest} given by an extra argument: {args}"
    for action in SCHEMAS[gateway].actions:
        if action["dest"] in gw.MANAGED_DESTS and action["dest"] not in MANAGED_VALUES:
            assert getattr(parsed, action["dest"]) is None, f"{action['dest']} set by {args}"
        if gw._carries_secret(action):
            assert getattr(parsed, action["dest"]) is None, f"a secret option {action['dest']} in {args}"


MANAGED = sorted((g, o) for g in ga.GATEWAYS for o in gw.managed_options(SCHEMAS[g]))


@pytest.mark.parametrize(("gateway", "option_"), MANAGED)
@pytest.mark.parametrize("spelling", ["plain", "equals", "abbreviated", "abbreviated-equals"])
def test_every_spelling_of_a_managed_option_is_refused(gateway: str, option_: str, spelling: str) -> None:
    strings = SCHEMAS[gateway].option_strings()
    if option_.startswith("--"):
        # The shortest prefix argparse would resolve to this option alone, else the option itself.
        short = next((option_[:n] for n in range(3, len(option_))
                      if {id(a) for o, a in strings.items() if o.startswith(option_[:n])} == {id(strings[option_])}),
                     option_)
    else:
        short = option_
    word = {"plain": option_, "equals": f"{option_}=x", "abbreviated": short, "abbreviated-equals": f"{short}=x"}[spelling]
    value = [] if strings[option_]["nargs"] == 0 or "=" in word else ["1"]
    found = gw.router_extra_args_problems(["--retry-jitter-factor", "0.3", word, *value], gateway, SCHEMAS[gateway].version)
    # Refused at its own word (a value after it may be refused too: its type or choices), nothing before it.
    assert found and found[0].startswith("sglang_router_extra_args[2]"), found
    assert any(why in found[0] for why in ("the role manages", "secret", "single-dash")), found


@pytest.mark.parametrize("word", ["--api-key", "--api-key=Zq9xsecret", "--control-plane-api-keys", "--oracle-password=pw",
                                  "--control-plane-api", "--api", "--redis-url=redis://u:Zq9xpw@cache:6379",
                                  "--postgres-db-url=postgres://app:Zq9x@db/x", "--some-token", "--db-password",
                                  "--client-secret=x", "--my-credentials", "--tenant-api-key=t:Zq9x"])
@pytest.mark.parametrize("gateway", ga.GATEWAYS)
def test_options_that_carry_a_secret_are_refused_without_echo(word: str, gateway: str) -> None:
    found = gw.router_extra_args_problems([word, "value"], gateway)
    assert found and found[0].startswith("sglang_router_extra_args[0]")
    assert all(CANARY not in line and "Zq9x" not in line for line in found)


@pytest.mark.parametrize("option", ["--client-cert-path", "--client-key-path"])
@pytest.mark.parametrize("gateway", ga.GATEWAYS)
def test_the_client_certificate_for_the_workers_is_the_roles(option: str, gateway: str) -> None:
    """mTLS to the workers' TLS front: sglang_router_client_cert_file / _key_file, not an extra argument."""
    [found] = gw.router_extra_args_problems([option, "/etc/sglang-router/client.pem"], gateway)
    assert f"the role manages {option}" in found and "set sglang_router_client_" in found


@pytest.mark.parametrize("args", [["--retry-jitter-factor", "0.1"],
                                  ["--tokenizer-path", "/srv/tok"], ["--max-payload-size", "1024"], ["--prefill-policy", "random"],
                                  ["--queue-timeout-secs", "-1"], ["--cors-allowed-origins", "https://a.example", "https://b.example"]])
@pytest.mark.parametrize("gateway", ga.GATEWAYS)
def test_ordinary_extra_args_pass(args: list[str], gateway: str) -> None:
    assert gw.router_extra_args_problems(args, gateway) == []


def test_a_key_path_is_no_secret() -> None:
    """smg's --mesh-tls-key is the path of the mesh node's PEM key (the gateway reads the file): it passes as a path,
    checked like the role's own TLS files; numbers and switches named like secrets carry none."""
    key = ["--enable-mesh", "--mesh-tls-ca-cert", "/etc/ssl/mesh/ca.pem", "--mesh-tls-cert", "/etc/ssl/mesh/node.pem",
           "--mesh-tls-key", "/etc/ssl/mesh/node.key"]
    assert gw.router_extra_args_problems(key, "smg", "1.13.0") == []
    assert gw.router_extra_args_problems(["--mesh-tls-key=/etc/ssl/mesh/node.key"], "smg", "1.13.0") == []
    [relative] = gw.router_extra_args_problems(["--mesh-tls-key", "node.key"], "smg", "1.13.0")
    assert relative.startswith("sglang_router_extra_args[0] '--mesh-tls-key': --mesh-tls-key is the path of a key file")
    assert gw.router_extra_args_problems(["--least-load-mean-prefill-tokens", "1024"], "smg", "1.13.0") == []
    assert gw.router_extra_args_problems(["--oracle-external-auth"], "smg", "1.13.0") == []
    # still refused: a name that says secret and takes text, known or not
    assert gw.router_extra_args_problems(["--oracle-password", "x"], "smg", "1.13.0")
    assert gw.router_extra_args_problems(["--mesh-tls-token", "x"], "smg", "1.13.0")
    schema = SCHEMAS["smg"]
    assert all(schema.option_strings().get(o) is not None for o in gw.KEY_PATH_OPTIONS)


@pytest.mark.parametrize("args", ["--host 0.0.0.0", {"--host": "0.0.0.0"}, [5], [None], [["--host"]]])
def test_extra_args_are_a_list_of_text(args: Any) -> None:
    assert gw.router_extra_args_problems(args)


# --- loopback and addresses -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("localhost", True),
    ("localhost.attacker.example", False), ("127.attacker.example", False), ("localhostx", False), ("127.1", False),
    ("127.0.0.1.attacker.example", False), ("0.0.0.0", False), ("::", False), ("", False), ("LOCALHOST.", False),
    ("::ffff:7f00:1", False), ("10.0.0.5", False), ("::2", False), ("127.0.0.01", False),
])
def test_loopback_is_parsed_not_prefixed(host: str, loopback: bool) -> None:
    assert gw.is_loopback(host) is loopback
    opened = router_endpoint({"host": host, "port": 30000, "tls_cert_file": "", "tls_key_file": "", "ca_file": "",
                              "api_key": "", "control_plane_api_key": "", "allow_unauthenticated": False})["problems"]
    refused = any("listens beyond loopback" in p for p in opened) or any(p.startswith("sglang_router_host") for p in opened)
    assert refused is not loopback
    found = problems({"sglang_router_host": host})
    assert names(found, "sglang_router_host") is not loopback


@pytest.mark.parametrize(("listen", "connect"), [("0.0.0.0", "127.0.0.1"), ("::", "[::1]"), ("0:0::0", "[::1]"),
                                                 ("10.0.0.5", "10.0.0.5"), ("gw.example", "gw.example")])
def test_the_api_is_called_on_loopback_when_the_router_listens_everywhere(listen: str, connect: str) -> None:
    cfg = {"host": listen, "port": 30000, "tls_cert_file": "", "tls_key_file": "", "ca_file": "", "api_key": "a",
           "control_plane_api_key": "c", "allow_unauthenticated": False}
    assert router_endpoint(cfg)["url"] == f"http://{connect}:30000"


# --- worker URLs from the GPU hosts --------------------------------------------------------------------------------

@pytest.mark.parametrize("var", ["sglang_router_worker_url", "ansible_host"])
@given(value=TEXT)
@example(value="http://10.0.0.9:30000\nLD_PRELOAD=/tmp/evil.so")
@example(value="http://10.0.0.9:30000 http://evil.example:80")
@example(value="10.0.0.9\nLD_PRELOAD=/tmp/evil.so")
@example(value="10.0.0.9 evil.example")
@example(value="http://u:p@10.0.0.9:30000")
def test_worker_url_from_a_gpu_host(var: str, value: str) -> None:
    workers = {GPU: {**_GPU_BASE, var: value}}
    found = [p for p in problems(workers=workers) if p.source == GPU]
    if found:
        assert any(p.variable in (var, "inventory_hostname") for p in found), found
        assert all(f"GPU host {GPU}" in p.message for p in found)
        # The environment file refuses it too (a role run that skipped the check still writes nothing).
        with pytest.raises((AnsibleFilterError, ValueError)):
            render(workers=workers)
        return
    assert problems(workers=workers) == []
    _, env = render(workers=workers)
    parsed = parse_env_file(env)
    assert set(parsed) == {"SGLANG_ROUTER_WORKER_URLS"}
    [instance] = server_instances(GPU, {GPU: workers[GPU]}, {"all": [GPU]})
    expected = value if var == "sglang_router_worker_url" else instance["url"]
    if var == "ansible_host" and value:
        assert expected.split("://", 1)[1].rsplit(":", 1)[0] in (value, f"[{value}]")
    # systemd splits the unbraced $SGLANG_ROUTER_WORKER_URLS on white space: exactly one worker, this one.
    assert parsed["SGLANG_ROUTER_WORKER_URLS"].split() == [expected]


@pytest.mark.parametrize(("url", "why"), [
    ("http://10.0.0.9:30000\nLD_PRELOAD=/tmp/evil.so", "line break"),
    ("http://10.0.0.9:30000 http://evil.example:80", "white space"),
    ("http://10.0.0.9:30000\thttp://evil.example", "tab"),
    ("http://user:pw@10.0.0.9:30000", "password"),
    ("http://10.0.0.9:30000/v1?x=1", "path"),
    ("ftp://10.0.0.9", "http"),
    ("http://10.0.0.9:0", "port"),
    ("http://[fe80::1%eth0]:30000", "IPv6"),
    ("http://-evil:30000", "label"),
])
def test_worker_url_injection_is_refused(url: str, why: str) -> None:
    assert gw.worker_url_problem(url)
    found = problems(workers={GPU: {**_GPU_BASE, "sglang_router_worker_url": url}})
    assert [p.variable for p in found] == ["sglang_router_worker_url"] and found[0].source == GPU
    assert "pw" not in gw.format_problem(found[0])
    with pytest.raises(AnsibleFilterError, match=f"GPU host {GPU}"):
        render(workers={GPU: {**_GPU_BASE, "sglang_router_worker_url": url}})


def test_the_env_template_uses_its_check() -> None:
    """Ansible 2.19 raises a filter's error where its value is used: the strict check's result must feed the line."""
    assert "{% set refused = {} | blackwell.sglang.gateway_problems({}, urls=labelled, strict=true) %}" in ENV_FILE
    assert "(urls if refused | length == 0 else [])" in ENV_FILE


@pytest.mark.parametrize("url", ["http://10.0.0.9:30000", "https://gpu-01.example:30443/", "http://[2001:db8::5]:30000",
                                 "https://GPU-01.Example"])
def test_plain_worker_urls_pass(url: str) -> None:
    assert gw.worker_url_problem(url) is None


# --- identity, names and paths -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(gw.PRIVILEGED_GROUPS | {"root", "daemon", "bin", "sys", "nobody", "www-data",
                                                                  "ubuntu", "debian", "admin", "sglang"}))
@pytest.mark.parametrize("var", ["sglang_router_user", "sglang_router_group"])
def test_privileged_and_well_known_identities_are_refused(var: str, name: str) -> None:
    assert names(problems({var: name}), var)


@pytest.mark.parametrize("name", ["sglang", "sglang-model-peer", "ssh", "systemd-journald", "dbus", "nvidia-persistenced",
                                  "sglang.service", "sglang-router@x", "../sglang", "", "sglang\nUser=root"])
def test_unit_names_outside_the_gateways_namespace_are_refused(name: str) -> None:
    assert names(problems({"sglang_router_service_name": name}), "sglang_router_service_name")


@pytest.mark.parametrize(("var", "path"), [
    ("sglang_router_venvs_dir", "/etc/systemd/system/sglang.service.d"), ("sglang_router_venvs_dir", "/tmp"),
    ("sglang_router_venvs_dir", "/usr/lib/sglang"), ("sglang_router_config_dir", "/etc/sudoers.d"),
    ("sglang_router_config_dir", "/etc"), ("sglang_router_config_dir", "/home/admin/sglang"),
    ("sglang_router_config_dir", "/etc/ssl/private"), ("sglang_router_venvs_dir", "/opt"),
    ("sglang_router_venvs_dir", "/opt/other"), ("sglang_router_tls_key_file", "/root/sglang.key"),
    ("sglang_router_ca_file", "/home/u/ca.pem"), ("sglang_router_ca_file", "/run/user/0/ca.pem"),
    ("sglang_router_ca_file", "relative/ca.pem"), ("sglang_router_config_dir", "/etc/sglang"),
    ("sglang_router_venvs_dir", "/opt/sglang/router"), ("sglang_router_config_dir", "/var/lib/sglang"),
])
def test_paths_the_system_owns_or_the_sandbox_hides_are_refused(var: str, path: str) -> None:
    overrides = {**(GOOD_TLS if var.startswith("sglang_router_tls") else {}), var: path}
    assert names(problems(overrides), var)


@pytest.mark.parametrize(("var", "value"), [
    ("sglang_router_python", "/tmp/python3"), ("sglang_router_python", "/home/u/bin/python"),
    ("sglang_router_python", "python3"), ("sglang_router_proxy_env", {"LD_PRELOAD": "/tmp/x.so"}),
    ("sglang_router_proxy_env", {"PIP_INDEX_URL": "http://evil.example"}), ("sglang_router_proxy_env", "http://p:3128"),
    ("sglang_router_proxy_env", {"https_proxy": "http://p:3128\nLD_PRELOAD=/tmp/x.so"}),
    ("sglang_router_pip_index_url", "https://pypi.example/simple --trusted-host evil"),
    ("sglang_router_pip_find_links", ["/srv/wheels --index-url=http://evil.example"]),
    ("sglang_router_pip_index_url", "https://user:pw@pypi.example/simple"),
    ("sglang_router_system_packages", ["python3-venv", "-o APT::X=1"]), ("sglang_router_version", "0.3.2\nUser=root"),
    ("sglang_router_worker_group", "sglang_servers\nLD_PRELOAD=/x"), ("sglang_router_poll_interval", 0),
    ("sglang_router_allow_unauthenticated", "maybe"), ("sglang_router_allow_unauthenticated", ["true"]),
])
def test_what_runs_as_root_on_the_gateway_is_refused(var: str, value: Any) -> None:
    assert names(problems({var: value}), var)


def test_proxy_settings_pass() -> None:
    assert problems({"sglang_router_proxy_env": {"https_proxy": "http://proxy.example:3128", "NO_PROXY": "localhost,10.0.0.0/8"}}) == []


# --- keys ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("host_key", "instance_keys", "bad"), [
    (None, [None, None], []),
    ("fleet", [None], []),
    ("", [None], []),
    ("other", [None], ["sglang_api_key"]),
    ("fleet", [None, "other"], ["sglang_instances[1].api_key"]),
    ("other", ["fleet", None], ["sglang_api_key"]),
    (None, ["fleet", "fleet"], []),
    (None, ["other", "fleet", "other2"], ["sglang_instances[0].api_key", "sglang_instances[2].api_key"]),
    ("other", ["fleet", "fleet"], []),
])
def test_each_instance_key_is_checked_against_the_gateways(host_key: str | None, instance_keys: list[str | None],
                                                            bad: list[str]) -> None:
    hostvars: dict[str, Any] = {"ansible_host": "10.0.0.5"}
    if host_key is not None:
        hostvars["sglang_api_key"] = CANARY + host_key if host_key else ""
    if len(instance_keys) > 1 or instance_keys != [None]:
        hostvars["sglang_instances"] = [{"name": f"i{n}", **({"api_key": CANARY + k} if k else {})}
                                        for n, k in enumerate(instance_keys)]
    found = gw.gateway_problems({"sglang_router_api_key": CANARY + "fleet"}, {GPU: hostvars}, ROLE_DEFAULTS)
    assert sorted(p.variable for p in found) == bad
    assert all(p.source == GPU and p.value is None for p in found)
    assert all(CANARY not in gw.format_problem(p) for p in found)
    assert all(CANARY not in line for line in gateway_filter({"sglang_router_api_key": CANARY + "fleet"}, {GPU: hostvars}))


def test_a_worker_key_without_a_gateway_key_is_a_mismatch() -> None:
    found = gw.gateway_problems({}, {GPU: {"sglang_api_key": "k"}}, ROLE_DEFAULTS)
    assert [p.variable for p in found] == ["sglang_api_key"]


def test_the_join_sends_the_instances_own_key() -> None:
    join = (ROLE / "tasks" / "join.yml").read_text(encoding="utf-8")
    assert "__sglang_router_instance_api_key" in join and "'api_key': sglang_api_key" not in join
    env = jinja_env()
    env.tests["mapping"] = lambda v: isinstance(v, dict)
    for instances, host_key, expected in ([[{"name": "a", "api_key": "ka"}, {"name": "b"}], "kh", {"a": "ka", "b": "kh"}],
                                          [None, "kh", {"main": "kh"}], [[{"name": "a"}], None, {"a": ""}]):
        for name, key in expected.items():
            context: dict[str, Any] = {"__sglang_router_instance": {"name": name}}
            if instances is not None:
                context["sglang_instances"] = instances
            if host_key is not None:
                context["sglang_api_key"] = host_key
            context["__sglang_router_instance_entry"] = _evaluate(env, VARS["__sglang_router_instance_entry"], context)
            assert _evaluate(env, VARS["__sglang_router_instance_api_key"], context) == key


# --- the role's entry and the bench ---------------------------------------------------------------------------------

def test_the_roles_first_tasks_refuse_before_any_change() -> None:
    """The gateway's rules run in the role's first task (check_inputs with gateway: true, tagged always): nothing on the
    host changes until its variables and its workers' passed."""
    first = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text(encoding="utf-8"))[0]
    assert first["blackwell.sglang.check_inputs"]["gateway"] is True
    assert "always" in first["tags"]


def test_the_bench_never_shows_server_info() -> None:
    tasks = yaml.safe_load((REPO / "roles" / "sglang_bench" / "tasks" / "target.yml").read_text(encoding="utf-8"))
    for task in tasks:
        text = yaml.safe_dump(task)
        if "server_info" in text or "__sglang_bench_info" in text:
            assert task.get("no_log") is True, task["name"]


# --- systemd itself ----------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_rendered_unit(tmp_path: Path) -> None:
    venvs = REPO / "build" / "test-sglang-router"
    python = venvs / f"smg-{DEFAULTS['sglang_router_smg_version']}" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    overrides = {"sglang_router_venvs_dir": str(venvs), **GOOD_TLS, **GOOD_CA,
                 "sglang_router_extra_args": ["--retry-jitter-factor", "0.1", "--cors-allowed-origins", "https://a b.example"]}
    assert problems(overrides) == []
    unit, _ = render(overrides)
    path = tmp_path / "sglang-router.service"
    path.write_text(unit, encoding="utf-8")
    proc = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "sglang-router.service" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


# --- any value of any variable: a problem naming it, never a crash, never a key --------------------------------------

ANY_VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
                         lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
                         max_leaves=6)


@pytest.mark.parametrize("var", sorted(SPECS["main"]["options"]))
@given(value=ANY_VALUE)
def test_any_value_of_any_variable_is_a_problem_or_accepted(var: str, value: Any) -> None:
    found = gw.gateway_problems({var: value}, {GPU: {"ansible_host": "10.0.0.5"}}, ROLE_DEFAULTS)
    assert all(isinstance(p, gw.Problem) and p.variable for p in found)
    lines = [gw.format_problem(p) for p in found]
    if var in gw.SECRET_VARS and isinstance(value, str) and len(value) > 3:
        assert all(value not in line for line in lines), "a key was echoed"


@given(hostvars=st.one_of(ANY_VALUE, st.fixed_dictionaries({}, optional={
    "ansible_host": ANY_VALUE, "sglang_router_worker_url": ANY_VALUE, "sglang_api_key": ANY_VALUE,
    "sglang_instances": st.one_of(ANY_VALUE, st.lists(st.dictionaries(st.sampled_from(["name", "api_key"]), ANY_VALUE),
                                                      max_size=3))})))
def test_any_worker_hostvars_are_a_problem_or_accepted(hostvars: Any) -> None:
    found = gw.gateway_problems({"sglang_router_api_key": CANARY + "fleet"}, {GPU: hostvars}, ROLE_DEFAULTS)
    assert all(p.source == GPU for p in found)
    assert all(CANARY not in gw.format_problem(p) for p in found if p.variable != "ansible_host")


@pytest.mark.parametrize("tasks_from", ["join.yml", "drain.yml"])
def test_join_and_drain_check_every_router_before_calling_it(tasks_from: str) -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / tasks_from).read_text(encoding="utf-8"))
    first_call = next(i for i, t in enumerate(tasks) if "ansible.builtin.uri" in t and t.get("delegate_to"))
    checks = [t for t in tasks[:first_call] if "ansible.builtin.assert" in t]
    assert any("blackwell.sglang.router_endpoint" in str(t.get("vars")) for t in checks)
    if tasks_from == "join.yml":
        assert any("blackwell.sglang.gateway_problems" in str(t.get("vars")) for t in checks)


@pytest.mark.parametrize("host", ["gw.example/x", "10.0.0.1 --api-key", "localhost.attacker.example", "::ffff:127.0.0.1"])
def test_a_router_host_the_gpu_hosts_would_call_is_checked(host: str) -> None:
    defaults = {"host": "127.0.0.1", "port": 30000, "tls_cert_file": "", "tls_key_file": "", "ca_file": "", "api_key": "",
                "control_plane_api_key": "", "allow_unauthenticated": False}
    assert router_endpoint({"sglang_router_host": host}, defaults)["problems"]


# --- mTLS to the workers: the gateway's client certificate (the GPU hosts' TLS front, roles/sglang_worker_tls) -----
def test_the_client_certificate_reaches_the_gateway_by_path_only() -> None:
    unit, _ = render({"sglang_router_client_cert_file": "/etc/ssl/sglang/client.pem",
                      "sglang_router_client_key_file": "/etc/ssl/sglang/client.key"})
    words = argv(unit)
    assert option(words, "--client-cert-path") == "/etc/ssl/sglang/client.pem"
    assert option(words, "--client-key-path") == "/etc/ssl/sglang/client.key"
    assert "--client-cert-path" not in argv(render()[0])


@pytest.mark.parametrize("given_var", ["sglang_router_client_cert_file", "sglang_router_client_key_file"])
def test_a_client_certificate_without_its_key_or_the_reverse_is_refused(given_var: str) -> None:
    found = problems({given_var: "/etc/ssl/sglang/client.pem"})
    other = ({"sglang_router_client_cert_file", "sglang_router_client_key_file"} - {given_var}).pop()
    assert [(p.rule, p.variable) for p in found if p.rule == "gateway.tls"] == [("gateway.tls", other)]


@given(st.text(max_size=60))
def test_an_untrusted_client_certificate_path_renders_as_given_or_is_refused_naming_it(value: str) -> None:
    overrides = {"sglang_router_client_cert_file": value, "sglang_router_client_key_file": "/etc/ssl/sglang/client.key"}
    found = problems(overrides)
    if not names(found, "sglang_router_client_cert_file"):
        words = argv(render(overrides)[0])
        assert option(words, "--client-cert-path") == (value or None)
