"""Secured sandbox generation (kops.sandbox.security + SandboxConfig security mode): no cluster."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import stat

import pytest

from kops.cluster.config import ClientConfig
from kops.errors import BadInput
from kops.sandbox import security
from kops.inputs.properties import parse_properties
from kops.sandbox.config import SandboxConfig


def _cfg(tmp_path, sec="sasl_ssl", **kw):
    return SandboxConfig(workdir=tmp_path, brokers=3, zookeeper_port=12181, base_port=19092, security=sec, **kw)


def test_security_mode_validation(tmp_path):
    with pytest.raises(BadInput, match="security 'tls'"):
        _cfg(tmp_path, "tls").validate()
    with pytest.raises(BadInput, match="ZooKeeper mode"):
        SandboxConfig(workdir=tmp_path, mode="kraft", security="sasl_ssl").validate()
    assert _cfg(tmp_path, "none").validate().listener_protocol == "PLAINTEXT"


def test_default_is_unchanged_plaintext(tmp_path):
    cfg = _cfg(tmp_path, "none")
    p = cfg.broker_properties(0)
    assert p["listeners"].startswith("PLAINTEXT://")
    assert not any(k.startswith(("sasl.", "ssl.", "authorizer", "zookeeper.set.acl")) for k in p)
    assert "authProvider.sasl" not in cfg.zookeeper_properties()
    assert not any("java.security.auth.login.config" in a for a in cfg.jvm_command(0, java="java", classpath="cp"))


@pytest.mark.parametrize("sec,proto", [("sasl_ssl", "SASL_SSL"), ("sasl_plaintext", "SASL_PLAINTEXT")])
def test_broker_properties_secured(tmp_path, sec, proto):
    cfg = _cfg(tmp_path, sec).validate()
    s = security.Secrets("adminPw-123", "userPw-456", "zkPw-789")
    p = cfg.broker_properties(1, s)
    assert p["listeners"] == f"{proto}://127.0.0.1:19093" == p["advertised.listeners"]
    assert p["security.inter.broker.protocol"] == proto
    assert p["sasl.enabled.mechanisms"] == p["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    jaas = p[f"listener.name.{proto.lower()}.scram-sha-512.sasl.jaas.config"]
    assert 'username="admin"' in jaas and 'password="adminPw-123"' in jaas
    assert p["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert p["super.users"] == "User:admin" and p["zookeeper.set.acl"] == "true"
    if proto == "SASL_SSL":
        assert p["ssl.keystore.type"] == p["ssl.truststore.type"] == "PEM"
        assert p["ssl.keystore.location"].endswith("security/broker.pem")
        assert "ssl.keystore.password" not in p  # Kafka refuses a store password with PEM files
    else:
        assert not any(k.startswith("ssl.") for k in p)
    # without secrets (preview): a placeholder, never a real password
    assert "<generated>" in cfg.broker_properties(1)[f"listener.name.{proto.lower()}.scram-sha-512.sasl.jaas.config"]
    zk = cfg.zookeeper_properties()
    assert zk["authProvider.sasl"].endswith("SASLAuthenticationProvider")
    assert zk["enforce.auth.enabled"] == "true" and zk["enforce.auth.schemes"] == "sasl"
    assert zk["requireClientAuthScheme"] == "sasl"


def test_jvm_command_points_at_jaas_files_without_secrets(tmp_path):
    cfg = _cfg(tmp_path).validate()
    zk = cfg.jvm_command("zookeeper", java="java", classpath="cp")
    b = cfg.jvm_command(0, java="java", classpath="cp")
    assert f"-Djava.security.auth.login.config={cfg.security_files.zookeeper_jaas}" in zk
    assert f"-Djava.security.auth.login.config={cfg.security_files.broker_jaas}" in b
    assert not any("password" in a.lower() for a in zk + b)


def test_config_roundtrip_keeps_security_and_no_secret(tmp_path):
    cfg = _cfg(tmp_path)
    d = cfg.to_dict()
    assert d["security"] == "sasl_ssl"
    assert SandboxConfig.from_dict(d).security == "sasl_ssl"
    assert "password" not in json.dumps(d).lower()


def test_write_security_files(tmp_path):
    cfg = _cfg(tmp_path).validate()
    sf = cfg.security_files
    s = security.write_security_files(cfg.security, sf, cfg.host)
    assert len({s.admin_password, s.user_password, s.zk_password}) == 3
    assert all(len(p) >= 24 for p in s.all())
    assert stat.S_IMODE(sf.dir.stat().st_mode) == 0o700
    for f in (sf.secrets, sf.admin_properties, sf.user_properties, sf.zookeeper_auth, sf.broker_pem, sf.ca_key,
              sf.broker_jaas, sf.zookeeper_jaas):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    # stable across restarts: the second call keeps the passwords
    assert security.write_security_files(cfg.security, sf, cfg.host) == s
    # client properties: Kafka format, and what ClientConfig maps onto both libraries
    admin = ClientConfig.load(str(sf.admin_properties))
    rd = admin.librdkafka()
    assert rd["security.protocol"] == "SASL_SSL" and rd["sasl.mechanism"] == "SCRAM-SHA-512"
    assert rd["sasl.username"] == "admin" and rd["sasl.password"] == s.admin_password
    assert rd["ssl.ca.location"] == str(sf.ca_cert)
    kp = admin.kafka_python()
    assert kp["sasl_plain_username"] == "admin" and kp["ssl_cafile"] == str(sf.ca_cert)
    assert admin.ignored_keys() == []
    user = ClientConfig.load(str(sf.user_properties))
    assert user.sasl_user == "kops-user"
    assert user.describe_identity() == "SCRAM-SHA-512 user 'kops-user' over SASL_SSL"
    zk = parse_properties(sf.zookeeper_auth.read_text())
    assert zk == {"username": "kafka", "password": s.zk_password}
    assert f'user_kafka="{s.zk_password}"' in sf.zookeeper_jaas.read_text()
    assert "Server {" in sf.zookeeper_jaas.read_text() and "Client {" in sf.broker_jaas.read_text()
    assert sf.client_files()["admin_command_config"] == str(sf.admin_properties)


def test_sasl_plaintext_files_have_no_tls(tmp_path):
    cfg = _cfg(tmp_path, "sasl_plaintext").validate()
    security.write_security_files(cfg.security, cfg.security_files)
    props = parse_properties(cfg.security_files.admin_properties.read_text())
    assert props["security.protocol"] == "SASL_PLAINTEXT" and "ssl.truststore.location" not in props
    assert not cfg.security_files.broker_pem.exists()


def test_certificates(tmp_path):
    from cryptography import x509

    sf = security.SecurityFiles(tmp_path / "security")
    sf.dir.mkdir()
    security.ensure_certificates(sf, "127.0.0.1")
    ca = x509.load_pem_x509_certificate(sf.ca_cert.read_bytes())
    pem = sf.broker_pem.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, as Kafka's PEM key store wants
    certs = x509.load_pem_x509_certificates(pem[pem.index(b"-----BEGIN CERTIFICATE-----"):])
    leaf = certs[0]
    assert leaf.issuer == ca.subject and certs[1] == ca
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ca.public_key().verify(leaf.signature, leaf.tbs_certificate_bytes,
                           __import__("cryptography.hazmat.primitives.asymmetric.padding", fromlist=["x"]).PKCS1v15(),
                           leaf.signature_hash_algorithm)


def test_scram_credential_matches_rfc5802():
    salt = b"0123456789abcdef"
    text = security.scram_credential("pencil", iterations=4096, salt=salt)
    fields = dict(kv.split("=", 1) for kv in text.split(","))
    assert set(fields) == {"salt", "stored_key", "server_key", "iterations"}
    assert base64.b64decode(fields["salt"]) == salt and fields["iterations"] == "4096"
    salted = hashlib.pbkdf2_hmac("sha512", b"pencil", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    assert base64.b64decode(fields["stored_key"]) == hashlib.sha512(client_key).digest()
    assert base64.b64decode(fields["server_key"]) == hmac.new(salted, b"Server Key", hashlib.sha512).digest()
    # a fresh random salt each time
    assert security.scram_credential("pencil") != security.scram_credential("pencil")


class _FakeZk:
    def __init__(self):
        self.nodes: dict[str, tuple[bytes, list]] = {}

    def create(self, path, value=b"", acl=None):
        from kazoo.exceptions import NodeExistsError

        if path in self.nodes:
            raise NodeExistsError()
        self.nodes[path] = (value, acl)

    def exists(self, path):
        return path in self.nodes

    def get(self, path):
        return self.nodes[path][0], None

    def set(self, path, value):
        self.nodes[path] = (value, self.nodes[path][1])


def test_create_scram_users_in_zookeeper_layout():
    zk = _FakeZk()
    s = security.Secrets("a" * 30, "u" * 30, "z" * 30)
    security.create_scram_users(zk, s)
    for user in ("admin", "kops-user"):
        data, acl = zk.nodes[f"/config/users/{user}"]
        doc = json.loads(data)
        assert doc["version"] == 1 and doc["config"]["SCRAM-SHA-512"].startswith("salt=")
        assert [a.id.scheme for a in acl] == ["sasl"] and acl[0].id.id == "kafka"  # not world-readable
        assert "a" * 30 not in data.decode() and "u" * 30 not in data.decode()
    assert {a.id.scheme for a in zk.nodes["/config"][1]} == {"sasl", "world"}
    before = dict(zk.nodes)
    security.create_scram_users(zk, s)  # idempotent: kept as they are
    assert zk.nodes == before
