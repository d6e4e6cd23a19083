"""Test helpers: a throwaway CA and server certificate, and the SGLang stand-in's HTTP server in-process.

The stand-in (tests/fixtures/sglang_standin/src) is imported from the source tree; its parser is built
from the committed argument schema, so a server here is configured by the same flags and ``--config``
YAML as on the simulated hosts. Servers listen on 127.0.0.1 only.
"""
from __future__ import annotations

import datetime
import ipaddress
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

REPO = Path(__file__).resolve().parents[2]
STANDIN_SRC = REPO / "tests/fixtures/sglang_standin/src"
SCHEMA = REPO / "collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/schemas/sglang-0.5.23.json"


def standin() -> tuple[ModuleType, ModuleType, ModuleType]:
    """The stand-in's ``server``, ``args`` and ``proc`` modules, imported from the source tree."""
    if str(STANDIN_SRC) not in sys.path:
        sys.path.insert(0, str(STANDIN_SRC))
    from sglang._standin import args, proc, server

    assert Path(server.__file__).is_relative_to(STANDIN_SRC), f"not the stand-in: {server.__file__}"
    return server, args, proc


@dataclass
class Pki:
    ca: Path  # the CA certificate (PEM): what clients verify against
    cert: Path  # server certificate for 127.0.0.1, ::1 and localhost
    key: Path  # its private key, encrypted with ``password`` when one was given
    password: str | None


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_pki(directory: Path, password: str | None = None, sans: tuple[str, ...] = ("127.0.0.1", "::1", "localhost"),
             label: str = "test") -> Pki:
    """A fresh CA and a server certificate signed by it (EC P-256, valid for a day) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name(f"{label} CA")).issuer_name(_name(f"{label} CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for san in sans:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            alt.append(x509.DNSName(san))
    cert = (x509.CertificateBuilder().subject_name(_name(f"{label} server")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pki = Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key", password)
    pki.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    pki.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    pki.key.chmod(0o600)
    return pki


def tls_flags(pki: Pki, config_dir: Path) -> list[str]:
    """--ssl-certfile/--ssl-keyfile on the command line; the key password in a --config YAML file, as deployed."""
    flags = ["--ssl-certfile", str(pki.cert), "--ssl-keyfile", str(pki.key)]
    if pki.password is not None:
        config = config_dir / "secrets.yaml"
        config.write_text(f"ssl-keyfile-password: {json.dumps(pki.password)}\n", encoding="utf-8")  # JSON is YAML
        config.chmod(0o600)
        flags += ["--config", str(config)]
    return flags


@dataclass
class Running:
    url: str  # base URL, e.g. https://127.0.0.1:PORT
    state: object  # the stand-in's State
    cfg: dict


@contextmanager
def serve(argv: list[str], monkeypatch) -> Iterator[Running]:  # type: ignore[no-untyped-def]
    """Parse ``argv`` like ``sglang serve``, resolve it, and serve it on 127.0.0.1 (a free port) until exit."""
    server, args, _ = standin()
    monkeypatch.setenv("SGLANG_STANDIN_SCHEMA", str(SCHEMA))
    cfg = args.resolve(args.parse_args(["--model-path", "/models/test-model", "--host", "127.0.0.1", *argv]))
    state = server.State(cfg, argv)
    httpd = server._bind("127.0.0.1", 0, state, server.ssl_context(cfg))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.status = "up"
    scheme = "https" if httpd.ssl_context is not None else "http"
    try:
        yield Running(f"{scheme}://127.0.0.1:{httpd.server_address[1]}", state, cfg)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
