"""Security mode of the sandbox: SASL/SCRAM (+ TLS) to Kafka, SASL/DIGEST-MD5 to ZooKeeper.

``kops sandbox up --security sasl_ssl`` (or ``sasl_plaintext``) makes the same cluster with:

- a SASL_SSL (SASL_PLAINTEXT) listener on every broker, used by clients *and* between brokers,
  SCRAM-SHA-512 only;
- ``AclAuthorizer`` with ``super.users=User:admin``: ``admin`` may do anything, the unprivileged
  user ``kops-user`` nothing (no ACLs are granted to it);
- ZooKeeper requiring SASL (DIGEST-MD5) for every session (``enforce.auth.enabled``) and the
  brokers writing their znodes with ACLs (``zookeeper.set.acl=true``) as ZooKeeper user ``kafka``;
- during and after a ZooKeeper -> KRaft migration (:mod:`kops.sandbox.migration`): the KRaft
  controllers' listener ``CONTROLLER`` secured too (SASL_PLAINTEXT, or SASL_SSL with the broker
  certificate), SASL/PLAIN as ``admin`` (a controller cannot check SCRAM logins: the credentials
  are in the metadata it serves), every KRaft node (controllers, KRaft brokers) with
  ``StandardAuthorizer`` and the same ``super.users``; the controllers in migration mode log in
  to ZooKeeper as the brokers do and to the ZooKeeper brokers' listener with SCRAM as ``admin``;
- a throwaway CA and one broker certificate (SAN ``IP:127.0.0.1``, ``DNS:localhost``), made with
  the ``cryptography`` package; the brokers read them as PEM, the Python clients use ``ca.pem``.

Secrets (passwords) are generated randomly per sandbox, kept in ``<workdir>/security/`` with mode
0600 (the directory 0700) and never printed. The SCRAM credentials are written to ZooKeeper by
kops itself before the brokers start (the same znode Kafka's ``kafka-configs --zookeeper
--alter --add-config SCRAM-SHA-512=[...]`` writes), so no password appears on a command line.

Files in ``<workdir>/security/``::

    secrets.json               every password (0600)
    ca.pem / ca.key            the throwaway CA (ca.key 0600)
    broker.pem                 broker private key + certificate chain, PEM (0600)
    broker-jaas.conf           brokers' JAAS: ZooKeeper ``Client`` section (0600)
    zookeeper-jaas.conf        ZooKeeper's JAAS: ``Server`` section (0600)
    admin.properties           client properties, super user (0600)
    user.properties            client properties, unprivileged user (0600)
    zookeeper-auth.properties  ZooKeeper credentials for kops --zookeeper-auth-file (0600)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets as _secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECURITY_MODES = ("none", "sasl_plaintext", "sasl_ssl")
ADMIN_USER = "admin"
UNPRIVILEGED_USER = "kops-user"
ZK_USER = "kafka"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: the KRaft controller listener's mechanism: SCRAM credentials live in the metadata the controllers
#: serve, so Kafka's controllers authenticate with PLAIN (or GSSAPI), never SCRAM
CONTROLLER_MECHANISM = "PLAIN"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
#: ZooKeeper mode's authorizer (ACLs in ZooKeeper) and KRaft's (ACLs in the metadata log, KIP-801)
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
ZK_SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"


def listener_protocol(security: str) -> str:
    """``PLAINTEXT`` / ``SASL_PLAINTEXT`` / ``SASL_SSL``."""
    return "PLAINTEXT" if security == "none" else security.upper()


@dataclass(frozen=True)
class SecurityFiles:
    """Paths of the security material of one sandbox work dir."""

    dir: Path

    @property
    def secrets(self) -> Path:
        return self.dir / "secrets.json"

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def broker_pem(self) -> Path:
        return self.dir / "broker.pem"

    @property
    def broker_jaas(self) -> Path:
        return self.dir / "broker-jaas.conf"

    @property
    def zookeeper_jaas(self) -> Path:
        return self.dir / "zookeeper-jaas.conf"

    @property
    def admin_properties(self) -> Path:
        return self.dir / "admin.properties"

    @property
    def user_properties(self) -> Path:
        return self.dir / "user.properties"

    @property
    def zookeeper_auth(self) -> Path:
        return self.dir / "zookeeper-auth.properties"

    def client_files(self) -> dict[str, str]:
        """What ``kops sandbox up`` shows: paths only, never contents."""
        return {
            "admin_command_config": str(self.admin_properties),
            "user_command_config": str(self.user_properties),
            "zookeeper_auth_file": str(self.zookeeper_auth),
            "ca_file": str(self.ca_cert),
        }


@dataclass(frozen=True)
class Secrets:
    admin_password: str
    user_password: str
    zk_password: str

    def all(self) -> list[str]:
        return [self.admin_password, self.user_password, self.zk_password]

    def to_dict(self) -> dict[str, str]:
        return {"admin_password": self.admin_password, "user_password": self.user_password,
                "zk_password": self.zk_password}


def _password() -> str:
    return _secrets.token_urlsafe(24)  # [A-Za-z0-9_-]: safe inside JAAS quotes and properties


def write_private(path: Path, text: str | bytes) -> None:
    """Create/replace ``path`` with mode 0600 from the start (no window where it is readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    data = text.encode() if isinstance(text, str) else text
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def load_or_create_secrets(files: SecurityFiles) -> Secrets:
    """The sandbox's passwords: read from ``secrets.json``, or generated once and stored 0600."""
    from kops.cluster.redact import register_secret

    files.dir.mkdir(parents=True, exist_ok=True)
    os.chmod(files.dir, 0o700)
    if files.secrets.exists():
        d = json.loads(files.secrets.read_text())
        s = Secrets(d["admin_password"], d["user_password"], d["zk_password"])
    else:
        s = Secrets(_password(), _password(), _password())
        write_private(files.secrets, json.dumps(s.to_dict(), indent=2) + "\n")
    for v in s.all():
        register_secret(v)
    return s


def load_secrets(files: SecurityFiles) -> Secrets | None:
    if not files.secrets.exists():
        return None
    return load_or_create_secrets(files)


# -- certificates ----------------------------------------------------------------------------------
def ensure_certificates(files: SecurityFiles, host: str = "127.0.0.1", days: int = 30,
                        names: tuple[str, ...] = ()) -> None:
    """A throwaway CA and one broker certificate for ``host``, localhost and ``names`` (the
    containerised sandbox's host names). Kept when present; the broker certificate is issued
    again by the same CA when a name is missing from it (a broker added later)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:  # pragma: no cover - dependency missing
        from kops.errors import ClusterError

        raise ClusterError("--security sasl_ssl needs the Python package 'cryptography' (pip install cryptography)") from None
    import datetime
    import ipaddress

    wanted: list[Any] = [x509.DNSName("localhost")]
    for h in (host, "127.0.0.1", *names):
        try:
            san: Any = x509.IPAddress(ipaddress.ip_address(h))
        except ValueError:
            san = x509.DNSName(h)
        if san not in wanted:
            wanted.append(san)
    have_ca = files.ca_cert.exists() and files.ca_key.exists()
    if have_ca and files.broker_pem.exists():
        cert_now = x509.load_pem_x509_certificates(files.broker_pem.read_bytes())[0]
        try:
            present = list(cert_now.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
        except x509.ExtensionNotFound:
            present = []
        if all(w in present for w in wanted):
            return

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=days)
    pem = serialization.Encoding.PEM
    pkcs8 = serialization.PrivateFormat.PKCS8
    nokey = serialization.NoEncryption()
    if have_ca:
        ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        ca_name = ca_cert.subject
        until = min(until, ca_cert.not_valid_after_utc)
    else:
        ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kops sandbox throwaway CA")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kops-sandbox-broker")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(wanted), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    if not have_ca:
        write_private(files.ca_key, ca_key.private_bytes(pem, pkcs8, nokey))
    write_private(
        files.broker_pem,
        key.private_bytes(pem, pkcs8, nokey) + cert.public_bytes(pem) + ca_cert.public_bytes(pem),
    )
    if not have_ca:
        files.ca_cert.write_bytes(ca_cert.public_bytes(pem))  # public: no secret in it


# -- generated texts ---------------------------------------------------------------------------------
def _jaas_quote(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def scram_jaas(user: str, password: str) -> str:
    return f'{SCRAM_MODULE} required username="{_jaas_quote(user)}" password="{_jaas_quote(password)}";'


def broker_jaas_text(s: Secrets) -> str:
    """Brokers' JAAS file: only the ZooKeeper ``Client`` section (the Kafka listener's login is
    ``listener.name.<l>.scram-sha-512.sasl.jaas.config`` in server.properties)."""
    return (
        "// kops sandbox (generated): the brokers' ZooKeeper login\n"
        "Client {\n"
        f'  {DIGEST_MODULE} required\n  username="{ZK_USER}"\n  password="{_jaas_quote(s.zk_password)}";\n'
        "};\n"
    )


def zookeeper_jaas_text(s: Secrets) -> str:
    return (
        "// kops sandbox (generated): ZooKeeper's DIGEST-MD5 users\n"
        "Server {\n"
        f'  {DIGEST_MODULE} required\n  user_{ZK_USER}="{_jaas_quote(s.zk_password)}";\n'
        "};\n"
    )


def zookeeper_security_properties() -> dict[str, str]:
    """Added to zookeeper.properties: SASL provider, and no session without SASL auth."""
    return {
        "authProvider.sasl": ZK_SASL_PROVIDER,
        "requireClientAuthScheme": "sasl",  # the historical name (kept for readers of Kafka's docs)
        "enforce.auth.enabled": "true",  # ZooKeeper 3.7+: what actually enforces it
        "enforce.auth.schemes": "sasl",
        "jaasLoginRenew": "3600000",
    }


def broker_security_properties(security: str, files: SecurityFiles, s: Secrets | None, *,
                               kraft: bool = False) -> dict[str, str]:
    """Security part of server.properties (listeners are set by the caller). ``kraft``: a KRaft
    broker (a migration's second roll): StandardAuthorizer, no ZooKeeper settings, and the
    inter-broker listener named by the caller (``inter.broker.listener.name``; Kafka refuses it
    together with ``security.inter.broker.protocol``).

    ``s`` None gives a placeholder instead of the password (for tests and previews)."""
    proto = listener_protocol(security)
    pw = s.admin_password if s else "<generated>"
    props = {
        "security.inter.broker.protocol": proto,
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.{proto.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": scram_jaas(ADMIN_USER, pw),
        "authorizer.class.name": ACL_AUTHORIZER,
        **_authorization(),
        "zookeeper.set.acl": "true",
    }
    if kraft:
        del props["security.inter.broker.protocol"], props["zookeeper.set.acl"]
        props["authorizer.class.name"] = STANDARD_AUTHORIZER
    return props | _ssl_properties(security, files)


def _authorization() -> dict[str, str]:
    """What both authorizers read: the super user, and no access where no ACL says so."""
    return {"super.users": f"User:{ADMIN_USER}", "allow.everyone.if.no.acl.found": "false"}


def _ssl_properties(security: str, files: SecurityFiles) -> dict[str, str]:
    """TLS of a SASL_SSL sandbox (every listener: the brokers' and the controllers')."""
    if listener_protocol(security) != "SASL_SSL":
        return {}
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.broker_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_cert),
        "ssl.client.auth": "none",
        "ssl.endpoint.identification.algorithm": "https",
    }


def plain_jaas(user: str, password: str) -> str:
    """A PLAIN login that is both the client's (``username``/``password``) and the listener's one
    user (``user_<name>``): the same line serves the controllers and the nodes that call them."""
    u, p = _jaas_quote(user), _jaas_quote(password)
    return f'{PLAIN_MODULE} required username="{u}" password="{p}" user_{u}="{p}";'


def controller_client_properties(security: str, files: SecurityFiles, s: Secrets | None) -> dict[str, str]:
    """How a node reaches the KRaft controllers' secured ``CONTROLLER`` listener (a broker in
    migration mode, a KRaft broker, a controller reaching the others): PLAIN as ``admin``, and the
    ``CONTROLLER`` listener's protocol (add it to ``listener.security.protocol.map``)."""
    pw = s.admin_password if s else "<generated>"
    return {
        "sasl.mechanism.controller.protocol": CONTROLLER_MECHANISM,
        f"listener.name.controller.{CONTROLLER_MECHANISM.lower()}.sasl.jaas.config": plain_jaas(ADMIN_USER, pw),
    } | _ssl_properties(security, files)


def controller_security_properties(security: str, files: SecurityFiles, s: Secrets | None, *,
                                   migrating: bool) -> dict[str, str]:
    """Security part of a KRaft controller's properties (listeners and the protocol map are the
    caller's): the ``CONTROLLER`` listener served with PLAIN, StandardAuthorizer with the sandbox's
    super user; ``migrating`` (KIP-866 migration mode): also the ZooKeeper brokers' listener as
    their client (SCRAM as ``admin``, what the brokers use between themselves) and znodes written
    with ACLs, as the brokers write them."""
    proto = listener_protocol(security)
    props = {
        "listener.name.controller.sasl.enabled.mechanisms": CONTROLLER_MECHANISM,
        **controller_client_properties(security, files, s),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        **_authorization(),
    }
    if migrating:
        pw = s.admin_password if s else "<generated>"
        props |= {
            # (Kafka wants the inter-broker mechanism among the enabled ones; the controller
            # listener's own setting above still limits it to PLAIN)
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            f"listener.name.{proto.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": scram_jaas(ADMIN_USER, pw),
            "zookeeper.set.acl": "true",
        }
    return props


def client_properties_text(security: str, files: SecurityFiles, user: str, password: str) -> str:
    """A Kafka client properties file (kops --command-config and Kafka's own tools)."""
    from kops.inputs.properties import render_properties

    proto = listener_protocol(security)
    props = {
        "security.protocol": proto,
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.jaas.config": scram_jaas(user, password),
    }
    if proto == "SASL_SSL":
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca_cert)}
    return render_properties(props, f"kops sandbox (generated): client properties for user {user!r}; keep private")


def zookeeper_auth_text(s: Secrets) -> str:
    return (
        "# kops sandbox (generated): ZooKeeper SASL/DIGEST-MD5 credentials for\n"
        "# kops --zookeeper-auth-file FILE (env KOPS_ZOOKEEPER_AUTH_FILE); keep private\n"
        f"username={ZK_USER}\npassword={s.zk_password}\n"
    )


def write_security_files(security: str, files: SecurityFiles, host: str = "127.0.0.1",
                         names: tuple[str, ...] = ()) -> Secrets:
    """Everything the secured sandbox needs on disk (idempotent; secrets kept across restarts).
    ``names``: more host names the broker certificate must carry (containers' names)."""
    s = load_or_create_secrets(files)
    if listener_protocol(security) == "SASL_SSL":
        ensure_certificates(files, host, names=names)
    write_private(files.broker_jaas, broker_jaas_text(s))
    write_private(files.zookeeper_jaas, zookeeper_jaas_text(s))
    write_private(files.admin_properties, client_properties_text(security, files, ADMIN_USER, s.admin_password))
    write_private(files.user_properties, client_properties_text(security, files, UNPRIVILEGED_USER, s.user_password))
    write_private(files.zookeeper_auth, zookeeper_auth_text(s))
    return s


# -- SCRAM credentials in ZooKeeper --------------------------------------------------------------------
def scram_credential(password: str, *, iterations: int = SCRAM_ITERATIONS, salt: bytes | None = None) -> str:
    """Kafka's stored form of a SCRAM-SHA-512 credential (ScramCredentialUtils.credentialToString):
    ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` (RFC 5802)."""
    salt = salt if salt is not None else os.urandom(32)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    stored_key = hashlib.sha512(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha512).digest()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations={iterations}"


def zk_sasl_options(username: str, password: str) -> dict[str, str]:
    return {"mechanism": "DIGEST-MD5", "username": username, "password": password}


def zk_sasl(config) -> dict[str, str] | None:
    """The SASL options of a sandbox's ZooKeeper client (kazoo); None when not secured."""
    from kops.errors import ClusterError

    if not config.secured:
        return None
    s = load_secrets(config.security_files)
    if s is None:
        raise ClusterError(f"the secured sandbox in {config.workdir} has no {config.security_files.secrets}")
    return zk_sasl_options(ZK_USER, s.zk_password)


def admin_client_config(config):
    """The admin user's client settings of a sandbox (:class:`kops.cluster.config.ClientConfig`;
    empty when not secured)."""
    from kops.cluster.config import ClientConfig

    if not config.secured:
        return ClientConfig()
    return ClientConfig.load(str(config.security_files.admin_properties))


def zk_acls(sensitive: bool):
    """The ACLs Kafka itself sets with zookeeper.set.acl=true: ALL for the SASL user, plus world
    READ except on sensitive paths (/config/users holds credentials)."""
    from kazoo.security import make_acl

    acls = [make_acl("sasl", ZK_USER, all=True)]
    if not sensitive:
        acls.append(make_acl("world", "anyone", read=True))
    return acls


def create_scram_users(zk, s: Secrets) -> None:
    """Write the SCRAM credentials of ``admin`` and ``kops-user`` to ``/config/users/<name>``
    (what ``kafka-configs --zookeeper ... --entity-type users --add-config SCRAM-SHA-512=[...]``
    does) before the brokers start; the brokers load every user config at start-up. ``zk`` is a
    started kazoo client authenticated as :data:`ZK_USER`."""
    from kazoo.exceptions import NodeExistsError

    for path, sensitive in (("/config", False), ("/config/users", True)):
        try:
            zk.create(path, b"", acl=zk_acls(sensitive))
        except NodeExistsError:
            pass
    for user, pw in ((ADMIN_USER, s.admin_password), (UNPRIVILEGED_USER, s.user_password)):
        doc = json.dumps({"version": 1, "config": {SCRAM_MECHANISM: scram_credential(pw)}}).encode()
        path = f"/config/users/{user}"
        if zk.exists(path):
            data, _ = zk.get(path)
            try:
                cur = json.loads(data.decode() or "{}").get("config", {})
            except ValueError:
                cur = {}
            if SCRAM_MECHANISM in cur:
                continue  # created by an earlier up(); same password (secrets.json is kept)
            zk.set(path, doc)
        else:
            zk.create(path, doc, acl=zk_acls(True))
