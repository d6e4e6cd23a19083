"""The input contract (plugin_utils/sglang_contract.py), property-based: every variable of every role has one
declared kind; each kind refuses, over the whole class of values, what cannot reach a unit, a file, a path or an
argv faithfully or safely, and never crashes on any value; the roles' argument specs and docs/security.md's table are
held to the same declaration."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.blackwell.sglang.plugins.plugin_utils import sglang_contract as c
from hypothesis import example, given
from hypothesis import strategies as st
from role_defaults import ROLE_DEFAULTS

REPO = Path(__file__).resolve().parents[2]
SPECS = {p.parent.parent.name: yaml.safe_load(p.read_text()) for p in sorted((REPO / "roles").glob("*/meta/argument_specs.yml"))}
OPTIONS = {name: spec for role in SPECS.values() for entry in role["argument_specs"].values()
           for name, spec in (entry.get("options") or {}).items()}
KINDS = sorted({id(k): k for k in c.CONTRACT.values()}.values(), key=lambda k: (k.name, k.describe))
LINE_BREAKS = ["\n", "\r", "\x00", "\x85", "\u2028", "\u2029", "\x1b"]
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def check(values: dict[str, Any]) -> list[c.Finding]:
    """The contract's findings, against the context ``values`` and the roles' defaults make (as the actions do)."""
    return c.check(values, context=c.context_of(values, ROLE_DEFAULTS))


def test_every_option_of_every_role_has_one_kind_of_the_same_type() -> None:
    missing = sorted(set(OPTIONS) - set(c.CONTRACT))
    assert not missing, f"declare these in sglang_contract.CONTRACT: {missing}"
    differ = {n: (OPTIONS[n].get("type"), c.CONTRACT[n].spec_type) for n in OPTIONS
              if OPTIONS[n].get("type", "str") != c.CONTRACT[n].spec_type}
    assert not differ, differ
    elements = {n: (OPTIONS[n].get("elements"), c.CONTRACT[n].elements) for n in OPTIONS
                if OPTIONS[n].get("type") == "list" and OPTIONS[n].get("elements") != c.CONTRACT[n].elements}
    assert not elements, elements


def test_the_contract_declares_no_variable_nothing_reads() -> None:
    text = "\n".join(p.read_text() for p in (REPO / "roles").rglob("*.yml")) + \
        "\n".join(p.read_text() for p in (REPO / "playbooks").rglob("*.yml")) + \
        "\n".join(p.read_text() for p in (REPO / "collections").rglob("*.py"))
    unread = [n for n in c.CONTRACT if not re.search(rf"\b{n}\b", text.replace("CONTRACT", ""))]
    assert not unread, unread


def test_every_literal_role_default_passes() -> None:
    for defaults in (REPO / "roles").glob("*/defaults/main.yml"):
        data = yaml.safe_load(defaults.read_text()) or {}
        literal = {k: v for k, v in data.items() if "{{" not in yaml.safe_dump(v)}
        assert not check(literal), (defaults, [f.message() for f in check(literal)])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.name}:{k.describe[:20]}")
@given(value=VALUES)
def test_no_kind_crashes_on_any_value(kind: c.Kind, value: Any) -> None:
    why = kind.problem(value, c.Context(("/var/lib/sglang",), ("/opt/sglang/venvs",)))
    assert why is None or isinstance(why, str)


@pytest.mark.parametrize("kind", [k for k in KINDS if k.spec_type in ("str", "path", "int", "float", "bool")],
                         ids=lambda k: f"{k.name}:{k.describe[:20]}")
@given(head=st.text(max_size=12), brk=st.sampled_from(LINE_BREAKS), tail=st.text(max_size=12))
@example(head="127.0.0.1", brk="\n", tail="ExecStartPre=+/bin/sh -c id")
def test_a_line_break_or_control_character_is_refused_by_every_scalar_kind(kind: c.Kind, head: str, brk: str, tail: str) -> None:
    assert kind.problem(head + brk + tail) is not None


@given(st.text(max_size=30) | st.from_regex(r"[0-9a-f:.\[\]]{1,20}", fullmatch=True))
@example("localhost.attacker.example")
@example("127.attacker.example")
@example("localhostx")
@example("127.0.0.5")
@example("[::1]")
@example("::ffff:127.0.0.1")
def test_loopback_is_parsed_not_prefixed(host: str) -> None:
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        expected = ipaddress.ip_address(text).is_loopback
    except ValueError:
        expected = text.lower() in ("localhost", "localhost.")
    assert c.is_loopback(host) is expected


@given(st.text(min_size=1, max_size=40))
@example("0.0.0.0 --api-key x")
@example("a..b")
@example("-x.example")
def test_an_address_is_an_ip_or_a_dns_name(host: str) -> None:
    ok = c.address_problem(host) is None
    try:
        ipaddress.ip_address(host)
        is_ip = "%" not in host
    except ValueError:
        is_ip = False
    labels = (host[:-1] if host.endswith(".") else host).split(".")
    is_name = host.isascii() and all(re.fullmatch(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)", p) for p in labels) \
        and not labels[-1].isdigit() and len(host) <= 254
    assert ok is (is_ip or is_name)


@pytest.mark.parametrize("url", ["http://user:pw@10.0.0.1:30000", "http://10.0.0.1:30000 http://evil:1", "http://a b",
                                 "http://10.0.0.1:99999", "ftp://x", "http://x\nLD_PRELOAD=/tmp/x.so", "10.0.0.1:30000"])
def test_urls_carry_no_user_space_or_second_url(url: str) -> None:
    assert c.url_problem(url) is not None


@pytest.mark.parametrize("url", ["http://10.0.0.1:30000", "https://gpu-01.example:443/", "http://[::1]:30000"])
def test_plain_urls_pass(url: str) -> None:
    assert c.url_problem(url) is None


TREES = st.sampled_from([*c.PROTECTED_TREES, *c.WORLD_WRITABLE_TREES, "/etc/sglang", "/opt/sglang",
                         "/usr/local/libexec/sglang", "/opt/sglang/venvs", "/opt/sglang/current", "/etc"])
SEGMENT = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,8}", fullmatch=True).filter(lambda s: s not in (".", ".."))
CONTEXT = c.context_of({}, ROLE_DEFAULTS)


@given(tree=TREES, below=st.lists(SEGMENT, max_size=3))
@example(tree="/etc/systemd", below=["system", "sglang.service.d"])
@example(tree="/etc", below=["sudoers.d"])
@example(tree="/etc/ssl", below=["private"])
@example(tree="/usr/local/libexec/sglang", below=[])
def test_a_service_directory_is_never_a_system_or_project_directory_nor_below_one(tree: str, below: list[str]) -> None:
    path = "/".join([tree.rstrip("/"), *below])
    assert c.service_dir_problem(path, CONTEXT) is not None


@given(root=st.sampled_from([*(ROLE_DEFAULTS[n] for n in c.SERVICE_ROOT_VARS), ROLE_DEFAULTS[c.MODELS_DIR_VAR]]),
       below=st.lists(SEGMENT, max_size=3))
def test_a_directory_under_an_allowed_root_is_a_service_directory(root: str, below: list[str]) -> None:
    assert c.service_dir_problem("/".join([root, *below]), CONTEXT) is None


@given(below=st.lists(SEGMENT, min_size=1, max_size=3))
def test_a_directory_outside_the_roots_is_refused_until_its_root_is_declared(below: list[str]) -> None:
    path = "/data/" + "/".join(below)
    assert "sglang_service_roots" in (c.service_dir_problem(path, CONTEXT) or "")
    assert c.service_dir_problem(path, c.context_of({"sglang_service_roots": ["/data"]}, ROLE_DEFAULTS)) is None


@pytest.mark.parametrize("name", sorted(c.PRIVILEGED_GROUPS | c.RESERVED_ACCOUNTS))
def test_privileged_groups_and_existing_accounts_are_no_service_account(name: str) -> None:
    if c.account_problem(name) is None:
        pytest.fail(f"{name} accepted")


@given(st.from_regex(r"[a-z_][a-z0-9_-]{0,31}", fullmatch=True))
def test_other_plain_names_are_service_accounts(name: str) -> None:
    assert (c.account_problem(name) is None) is (name not in c.PRIVILEGED_GROUPS | c.RESERVED_ACCOUNTS)


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,30}", fullmatch=True))
@example("ssh")
@example("systemd-journald")
@example("dbus")
@example("sglangx")
def test_units_the_project_writes_stay_in_its_namespace(name: str) -> None:
    inside = name == "sglang" or name.startswith(("sglang-", "sglang_"))
    plain = not name.endswith(".service") and ".." not in name
    assert (c.owned_unit_problem(name) is None) is (inside and plain)


def test_an_alias_chain_is_refused_without_expanding_it() -> None:
    value: Any = ["x"] * 9
    for _ in range(12):  # 9**12 leaves if expanded
        value = [value] * 9
    assert "more than" in (c.size_problem(value) or "")


def test_a_secret_is_never_shown_in_a_finding() -> None:
    [finding] = check({"sglang_router_api_key": "s3cr3t with space"})
    assert finding.value is None and "s3cr3t" not in finding.message() + finding.fix()


def test_the_docs_list_every_kind() -> None:
    table = "| kind | what it holds | variables |\n| --- | --- | --- |\n" + "".join(
        f"| {k} | {d} | {n} |\n" for k, d, n in c.kinds_table())
    page = REPO / "docs" / "security.md"  # "The input contract" (the README's before issue 33)
    assert table in page.read_text(), "docs/security.md's input-contract table, from the contract:\n" + table


@pytest.mark.parametrize(("variable", "value"), [
    ("nvidia_driver_repo_obsolete_files", ["/etc/passwd"]),
    ("nvidia_driver_repo_obsolete_files", ["/etc/apt/sources.list.d/../../shadow"]),
    ("node_exporter_defaults_file", "/etc/default/ssh"),
    ("sglang_monitoring_defaults_file", "/etc/sudoers"),
    ("sglang_monitoring_config_file", "/etc/systemd/system/ssh.service"),
    ("sglang_monitoring_rules_file", "/etc/cron.d/x"),
    ("nvidia_driver_repo_keyring", "/etc/ssh/sshd_config"),
    ("dcgm_exporter_counters_file", "/etc/profile.d/x.sh"),
    ("dcgm_exporter_service_name", "ssh"),
    ("cuda_toolkit_service_units", ["systemd-journald.service"]),
    ("sglang_python", "/tmp/python3"),
    ("sglang_router_python", "/home/u/python3"),
])
def test_files_root_writes_removes_or_runs_stay_where_they_belong(variable: str, value: Any) -> None:
    assert [f.variable for f in check({variable: value})] == [variable]


@pytest.mark.parametrize(("variable", "value"), [
    ("nvidia_driver_repo_obsolete_files", ["/etc/apt/sources.list.d/cuda-debian12-x86_64.list"]),
    ("node_exporter_defaults_file", "/etc/default/prometheus-node-exporter"),
    ("sglang_monitoring_defaults_file", "/etc/default/prometheus"),
    ("nvidia_driver_repo_keyring", "/etc/apt/keyrings/cuda-archive-keyring.asc"),
    ("dcgm_exporter_service_name", "nvidia-dcgm-exporter"),
    ("cuda_toolkit_service_units", ["sglang.service", "sglang-chat.service"]),
])
def test_and_their_own_places_pass(variable: str, value: Any) -> None:
    assert check({variable: value}) == []


@pytest.mark.parametrize("kind", [k for k in KINDS if k.spec_type in ("int", "float", "bool")], ids=lambda k: k.name)
@pytest.mark.parametrize("text", ["1\x85", "\u20281", "\n5", "5\n", "true\x85", "\x0b0"])
def test_numbers_and_switches_refuse_unicode_line_breaks_that_strip_and_float_take_as_white_space(kind: c.Kind,
                                                                                                     text: str) -> None:
    assert kind.problem(text) is not None
