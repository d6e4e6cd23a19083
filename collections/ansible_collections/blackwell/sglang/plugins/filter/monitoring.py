# SPDX-License-Identifier: Apache-2.0
"""Filters of the monitoring roles: Prometheus scrape configurations generated from the inventory, and the workers
each gateway is given (what its alert compares the workers it reports healthy with)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.sglang import server_instances
from ansible_collections.blackwell.sglang.plugins.plugin_utils.sglang_inputs import path_problem, port_problem, text_problem

# A host name (RFC 1123 labels) or an IPv4/IPv6 address: what a scrape target's address may hold.
_HOST_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?")
_WILDCARD = ("", "0.0.0.0", "::", "[::]", "*")
# Jobs (the ``job`` label the rules and the dashboard select on) in the order they are written.
JOBS = ("sglang", "sglang-ready", "sglang-router", "node", "dcgm")
# The settings' ``defaults`` keys: each role variable the targets depend on, overridable per host.
DEFAULT_KEYS = (
    "node_exporter_listen_host", "node_exporter_port", "node_exporter_service_name",
    "dcgm_exporter_enabled", "dcgm_exporter_listen_host", "dcgm_exporter_port", "dcgm_exporter_service_name",
    "sglang_router_prometheus_host", "sglang_router_prometheus_port", "sglang_router_service_name",
    "sglang_router_worker_group",
)


class TargetError(AnsibleFilterError):
    """A host whose settings give Prometheus no address to scrape."""


def _fail(host: str, variable: str, value: Any, why: str, fix: str) -> TargetError:
    return TargetError(f"{host}: {variable} {value!r}: {why}. Fix: {fix}")


def _is_loopback(address: str) -> bool:
    if address.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def address_problem(value: Any) -> str | None:
    """Why ``value`` is not a host name or an IP address Prometheus can connect to, or None."""
    if not isinstance(value, str) or not value:
        return "it must be a host name or an IP address"
    try:
        ipaddress.ip_address(value.strip("[]") if value.startswith("[") and value.endswith("]") else value)
        return None
    except ValueError:
        pass
    if _HOST_NAME.fullmatch(value):
        return None
    return text_problem(value) or "it is neither a host name (letters, digits, '-', '_', '.') nor an IP address"


def _hostport(address: str, port: int) -> str:
    bare = address.strip("[]")
    return f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"


def _port(host: str, variable: str, value: Any) -> int:
    number = value
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    problem = port_problem(number)
    if problem:
        raise _fail(host, variable, value, problem, f"set {variable} to a port number")
    return int(number)


def _truthy(host: str, variable: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise _fail(host, variable, value, "it is not a boolean", f"set {variable} to true or false")


def _connect(monitor: str, host: str, host_vars: Mapping[str, Any], listen: Any, variable: str) -> str:
    """The address Prometheus on ``monitor`` reaches a service of ``host`` at, which listens on ``listen``."""
    listen = "" if listen is None else listen
    if not isinstance(listen, str):
        raise _fail(host, variable, listen, "it is not an address", f"set {variable} to an address such as 0.0.0.0")
    if listen in _WILDCARD:
        if host == monitor:
            return "127.0.0.1"
        address = host_vars.get("ansible_host") or host
        problem = address_problem(address)
        if problem:
            name = "ansible_host" if host_vars.get("ansible_host") else "the inventory name"
            raise _fail(host, name, address, problem, f"give {host} an ansible_host Prometheus can connect to")
        return str(address)
    problem = address_problem(listen)
    if problem:
        raise _fail(host, variable, listen, problem, f"set {variable} to an address such as 0.0.0.0")
    if _is_loopback(listen) and host != monitor:
        raise _fail(host, variable, listen, f"it listens on loopback only, out of reach of Prometheus on {monitor}",
                    f"set {variable} to 0.0.0.0 or to an address of {host} that {monitor} can reach")
    return listen


def _labels(host: str, port: int, service: Any, **extra: Any) -> dict[str, str]:
    labels = {"host": host, "instance": f"{host}:{port}", "service": str(service)}
    labels.update({k: str(v) for k, v in extra.items()})
    for name, value in labels.items():
        problem = text_problem(value)
        if problem:
            raise _fail(host, f"the {name} label", value, problem, "rename it")
    return labels


def _unique_hosts(groups: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for group in names:
        for host in groups.get(str(group)) or []:
            if str(host) not in seen:
                seen.append(str(host))
    return seen


class _Jobs:
    """Scrape configurations being built: one per (job, scheme, CA file, client certificate); the job label stays
    the job's."""

    def __init__(self) -> None:
        self._configs: dict[tuple[str, str, str, tuple[str, str]], dict[str, Any]] = {}

    def add(self, job: str, target: str, labels: dict[str, str], *, path: str = "/metrics", scheme: str = "http",
            ca_file: str = "", client: tuple[str, str] = ("", "")) -> None:
        key = (job, scheme, ca_file, client)
        config = self._configs.get(key)
        if config is None:
            siblings = sum(1 for k in self._configs if k[0] == job)
            config = {"job_name": job if siblings == 0 else f"{job}-{siblings + 1}", "metrics_path": path,
                      "scheme": scheme, "static_configs": []}
            if siblings:  # the same job label for every scheme and CA file
                config["relabel_configs"] = [{"target_label": "job", "replacement": job}]
            if ca_file:
                config["tls_config"] = {"ca_file": ca_file}
            if client[0]:  # a worker behind its verifying TLS front (roles/sglang_worker_tls): Prometheus's certificate
                config["tls_config"] = {**config.get("tls_config", {}), "cert_file": client[0], "key_file": client[1]}
            self._configs[key] = config
        config["static_configs"].append({"targets": [target], "labels": labels})

    def result(self) -> list[dict[str, Any]]:
        """The configurations in :data:`JOBS` order, each job's in the order they were first needed."""
        return [config for _key, config in sorted(self._configs.items(), key=lambda item: JOBS.index(item[0][0]))]


def _setting(host_vars: Mapping[str, Any], defaults: Mapping[str, Any]) -> Callable[[str], Any]:
    def get(name: str) -> Any:
        return host_vars[name] if name in host_vars else defaults.get(name)
    return get


def scrape_configs(monitor: str, hostvars: Any, groups: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Prometheus ``scrape_configs`` for every SGLang server, router and exporter of the inventory.

    ``monitor``: the Prometheus host (its own services are scraped over loopback). ``settings``:
    ``server_group``, ``router_group``, ``node_exporter_groups``, ``dcgm_exporter_groups``, ``tls_ca_file``
    (the CA bundle on the Prometheus host for https servers; empty: each server's ``ca_file``, else the
    system store) and ``defaults`` (:data:`DEFAULT_KEYS`: the exporter and router roles' defaults, which a
    host's own variables override).

    Jobs: ``sglang`` (each instance's /metrics; node_rank 0 of a multi-node instance only), ``sglang-ready``
    (its /ready: up is 0 while it does not accept requests), ``sglang-router``, ``node``, ``dcgm``. Every
    target has the labels ``host`` (inventory name), ``instance`` (``<host>:<port>``) and ``service`` (the
    systemd unit), SGLang's also ``sglang_instance`` (the instance's name). A service that listens on
    loopback on another host than ``monitor`` is refused, naming the variable.
    Usage: ``inventory_hostname | blackwell.sglang.scrape_configs(hostvars, groups, {...})``.
    """
    monitor = str(monitor)
    defaults = dict(settings.get("defaults") or {})
    unknown = sorted(set(defaults) - set(DEFAULT_KEYS))
    if unknown:
        raise AnsibleFilterError(f"scrape_configs does not know the defaults {', '.join(unknown)}")
    ca_override = str(settings.get("tls_ca_file") or "")
    if ca_override and path_problem(ca_override):
        raise _fail(monitor, "sglang_monitoring_tls_ca_file", ca_override, str(path_problem(ca_override)),
                    "set it to the CA bundle's absolute path on the Prometheus host, or to \"\"")
    client = (str(settings.get("client_cert_file") or ""), str(settings.get("client_key_file") or ""))
    for var, value in zip(("sglang_monitoring_client_cert_file", "sglang_monitoring_client_key_file"), client, strict=True):
        if value and path_problem(value):
            raise _fail(monitor, var, value, str(path_problem(value)), "set it to the file's absolute path on the "
                        "Prometheus host, or to \"\"")
    if bool(client[0]) != bool(client[1]):
        raise _fail(monitor, "sglang_monitoring_client_key_file" if client[0] else "sglang_monitoring_client_cert_file",
                    "", "Prometheus's client certificate and its key go together", "set both, or neither")
    jobs = _Jobs()

    for host in _unique_hosts(groups, [settings.get("server_group") or "sglang_servers"]):
        for inst in server_instances(host, hostvars, groups):
            if int(inst.get("node_rank") or 0) != 0:
                continue  # only node 0 of a multi-node instance serves HTTP
            if _is_loopback(str(inst.get("listen_host") or "")) and host != monitor:
                raise _fail(host, "sglang_listen_host", inst.get("listen_host"),
                            f"the SGLang server listens on loopback only, out of reach of Prometheus on {monitor}",
                            f"set sglang_listen_host to 0.0.0.0 or to an address of {host} that {monitor} can reach")
            url = urlsplit(str(inst["local_url"] if host == monitor else inst["url"]))
            port = int(inst["port"])
            target = _hostport(str(url.hostname), port)
            labels = _labels(host, port, inst["service"], sglang_instance=inst["name"])
            scheme = str(inst.get("scheme") or "http")
            ca_file = (ca_override or str(inst.get("ca_file") or "")) if scheme == "https" else ""
            # Behind the host's verifying TLS front (sglang_worker_tls_client_ca_file) only a client certificate of
            # the front's CA gets through: Prometheus's, sglang_monitoring_client_cert_file.
            fronted = "front" in inst
            if fronted and not client[0]:
                raise _fail(monitor, "sglang_monitoring_client_cert_file", "",
                            f"{host}'s SGLang instance {inst['name']} is behind its verifying TLS front "
                            "(sglang_worker_tls_client_ca_file), which admits only a client certificate of its CA",
                            "set sglang_monitoring_client_cert_file and sglang_monitoring_client_key_file to a client "
                            "certificate of that CA and its key on the Prometheus host")
            mine = client if fronted else ("", "")
            jobs.add("sglang", target, labels, scheme=scheme, ca_file=ca_file, client=mine)
            jobs.add("sglang-ready", target, labels, path="/ready", scheme=scheme, ca_file=ca_file, client=mine)

    for host in _unique_hosts(groups, [settings.get("router_group") or "sglang_routers"]):
        get = _setting(hostvars[host], defaults)
        port = _port(host, "sglang_router_prometheus_port", get("sglang_router_prometheus_port"))
        address = _connect(monitor, host, hostvars[host], get("sglang_router_prometheus_host"), "sglang_router_prometheus_host")
        jobs.add("sglang-router", _hostport(address, port), _labels(host, port, get("sglang_router_service_name")))

    for host in _unique_hosts(groups, settings.get("node_exporter_groups") or []):
        get = _setting(hostvars[host], defaults)
        port = _port(host, "node_exporter_port", get("node_exporter_port"))
        address = _connect(monitor, host, hostvars[host], get("node_exporter_listen_host"), "node_exporter_listen_host")
        jobs.add("node", _hostport(address, port), _labels(host, port, get("node_exporter_service_name")))

    for host in _unique_hosts(groups, settings.get("dcgm_exporter_groups") or []):
        get = _setting(hostvars[host], defaults)
        if not _truthy(host, "dcgm_exporter_enabled", get("dcgm_exporter_enabled")):
            continue
        port = _port(host, "dcgm_exporter_port", get("dcgm_exporter_port"))
        address = _connect(monitor, host, hostvars[host], get("dcgm_exporter_listen_host"), "dcgm_exporter_listen_host")
        jobs.add("dcgm", _hostport(address, port), _labels(host, port, get("dcgm_exporter_service_name")))

    return jobs.result()


def gateway_workers(monitor: str, hostvars: Any, groups: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The workers each gateway of ``router_group`` is given: ``[{labels, workers}]``, one per gateway.

    ``labels``: ``job`` (``sglang-router``), ``host``, ``instance`` and ``service``, those of its scrape target
    (:func:`scrape_configs`, same ``settings``), so that a recording rule of this count joins the gateway's own
    series. ``workers``: node_rank 0 of every SGLang instance of the GPU hosts of its ``sglang_router_worker_group``
    (its own variable, else ``defaults``), read from their launch plans (``server_instances``: the published plan
    when the run has one), as the gateway's role writes its worker list. Usage:
    ``inventory_hostname | blackwell.sglang.gateway_workers(hostvars, groups, {...})``.
    """
    defaults = dict(settings.get("defaults") or {})
    out = []
    for host in _unique_hosts(groups, [settings.get("router_group") or "sglang_routers"]):
        get = _setting(hostvars[host], defaults)
        port = _port(host, "sglang_router_prometheus_port", get("sglang_router_prometheus_port"))
        group = get("sglang_router_worker_group") or "sglang_servers"
        if not isinstance(group, str):
            raise _fail(host, "sglang_router_worker_group", group, "it is not a group name", "set it to an inventory group")
        count = sum(1 for gpu in _unique_hosts(groups, [group]) for inst in server_instances(gpu, hostvars, groups)
                    if int(inst.get("node_rank") or 0) == 0)
        out.append({"labels": {"job": "sglang-router", **_labels(host, port, get("sglang_router_service_name"))},
                    "workers": count})
    return out


class FilterModule:
    """blackwell.sglang monitoring filters."""

    def filters(self) -> dict[str, Any]:
        return {"scrape_configs": scrape_configs, "gateway_workers": gateway_workers}
