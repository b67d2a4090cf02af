"""Kafka client properties (``--command-config FILE``) mapped onto both client libraries.

Kafka's tools take a Java properties file (security.protocol, sasl.mechanism, sasl.jaas.config,
ssl.truststore.location, ...). kops talks through confluent-kafka (librdkafka names) and, for
the few Admin RPCs librdkafka lacks, kafka-python (its own keyword names). One parse, two maps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kops.cluster.redact import register_secret
from kops.errors import BadInput
from kops.inputs.properties import parse_properties

_JAAS_KV = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"|(\w+)\s*=\s*([^\s;"]+)')
_JAAS_MODULES = {
    "org.apache.kafka.common.security.scram.ScramLoginModule",
    "org.apache.kafka.common.security.plain.PlainLoginModule",
}
_SECRET_KEYS = ("password", "sasl.jaas.config", "secret")

# Java client properties that librdkafka understands under the same name.
_RDKAFKA_SAME = {
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
    "client.id",
    "socket.timeout.ms",
    "metadata.max.age.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
}
# Java-only settings with no librdkafka meaning: accepted, not passed on.
_JAVA_ONLY = {
    "ssl.truststore.type",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "request.timeout.ms",
    "default.api.timeout.ms",
    "retries",
    "retry.backoff.ms",
}


@dataclass(frozen=True)
class ClientConfig:
    """Parsed client properties, ready for either library."""

    props: dict[str, str] = field(default_factory=dict)
    source: str | None = None

    @classmethod
    def load(cls, path: str | None) -> ClientConfig:
        if not path:
            return cls()
        from kops.inputs.files import read_text

        p = Path(path)
        text = read_text(path, what="--command-config", limit=1 << 20)
        props = parse_properties(text)
        bad = [k for k in props if not re.match(r"^[A-Za-z0-9_.\-]+$", k)]
        if bad:
            raise BadInput(
                f"--command-config {path!r} is not a Kafka client properties file",
                details=[f"line with key {k[:40]!r} is not 'name=value'" for k in bad[:10]],
            )
        for k, v in props.items():
            if any(s in k.lower() for s in _SECRET_KEYS):
                register_secret(v)
        cfg = cls(props, str(p))
        cfg._jaas()  # validate early and register the password as a secret
        return cfg

    # -- SASL ------------------------------------------------------------------------------
    def _jaas(self) -> tuple[str | None, str | None]:
        jaas = self.props.get("sasl.jaas.config")
        if not jaas:
            return self.props.get("sasl.username"), self.props.get("sasl.password")
        module = jaas.split()[0] if jaas.split() else ""
        if module not in _JAAS_MODULES:
            raise BadInput(
                f"--command-config {self.source}: sasl.jaas.config uses {module!r}; kops supports "
                "ScramLoginModule and PlainLoginModule (username=... password=...)"
            )
        values: dict[str, str] = {}
        for m in _JAAS_KV.finditer(jaas[len(module):]):
            if m.group(1):
                values[m.group(1)] = m.group(2).replace('\\"', '"')
            else:
                values[m.group(3)] = m.group(4)
        if "username" not in values or "password" not in values:
            raise BadInput(
                f"--command-config {self.source}: sasl.jaas.config must give username=\"...\" and "
                "password=\"...\""
            )
        register_secret(values["password"])
        return values["username"], values["password"]

    @property
    def sasl_user(self) -> str | None:
        """The SASL username the client authenticates as (None without SASL)."""
        if "SASL" not in self.security_protocol:
            return None
        return self._jaas()[0]

    def describe_identity(self) -> str:
        """``SCRAM-SHA-512 user 'x' over SASL_SSL`` (no secret), for error messages."""
        user = self.sasl_user
        if user is None:
            return f"{self.security_protocol} without SASL"
        return f"{self.props.get('sasl.mechanism', 'GSSAPI').upper()} user {user!r} over {self.security_protocol}"

    @property
    def security_protocol(self) -> str:
        return self.props.get("security.protocol", "PLAINTEXT").upper()

    def _ca_file(self) -> str | None:
        if "ssl.ca.location" in self.props:
            return self.props["ssl.ca.location"]
        ts = self.props.get("ssl.truststore.location")
        if ts:
            if self.props.get("ssl.truststore.type", "").upper() == "PEM" or ts.endswith((".pem", ".crt")):
                return ts
            raise BadInput(
                f"--command-config {self.source}: ssl.truststore.location {ts!r} is a JKS/PKCS12 "
                "truststore; the Python clients need the CA as PEM: add ssl.ca.location=/path/ca.pem "
                "(or set ssl.truststore.type=PEM)"
            )
        return None

    # -- maps --------------------------------------------------------------------------------
    def librdkafka(self) -> dict[str, str]:
        conf: dict[str, str] = {}
        for k, v in self.props.items():
            if k in _RDKAFKA_SAME:
                conf[k] = v
        if self.props.get("sasl.jaas.config"):
            user, pw = self._jaas()
            conf["sasl.username"] = user or ""
            conf["sasl.password"] = pw or ""
        ca = self._ca_file()
        if ca:
            conf["ssl.ca.location"] = ca
        conf.pop("ssl.truststore.location", None)
        if conf.get("ssl.endpoint.identification.algorithm", None) == "":
            conf["ssl.endpoint.identification.algorithm"] = "none"
        return conf

    def kafka_python(self) -> dict[str, object]:
        kw: dict[str, object] = {"security_protocol": self.security_protocol}
        if "sasl.mechanism" in self.props:
            kw["sasl_mechanism"] = self.props["sasl.mechanism"].upper()
        user, pw = self._jaas()
        if user is not None:
            kw["sasl_plain_username"] = user
            kw["sasl_plain_password"] = pw
        ca = self._ca_file()
        if ca:
            kw["ssl_cafile"] = ca
        if "ssl.certificate.location" in self.props:
            kw["ssl_certfile"] = self.props["ssl.certificate.location"]
        if "ssl.key.location" in self.props:
            kw["ssl_keyfile"] = self.props["ssl.key.location"]
        if "ssl.key.password" in self.props:
            kw["ssl_password"] = self.props["ssl.key.password"]
        if self.props.get("ssl.endpoint.identification.algorithm", "https") in ("", "none"):
            kw["ssl_check_hostname"] = False
        return kw

    def ignored_keys(self) -> list[str]:
        known = _RDKAFKA_SAME | _JAVA_ONLY | {"sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.password"}
        return sorted(k for k in self.props if k not in known)


# -- ZooKeeper credentials ----------------------------------------------------------------------
_ZK_MECHANISMS = ("DIGEST-MD5",)


@dataclass(frozen=True)
class ZookeeperAuth:
    """SASL credentials for ZooKeeper (``--zookeeper-auth-file FILE``, env
    ``KOPS_ZOOKEEPER_AUTH_FILE``): a properties file with ``username=...`` and ``password=...``
    (optional ``mechanism=DIGEST-MD5``, the only one kazoo/ZooKeeper digest auth needs).

    Never from the command line: the password would show in the process list. ``repr`` hides
    the password."""

    username: str
    password: str = field(repr=False)
    mechanism: str = "DIGEST-MD5"
    source: str | None = None

    @classmethod
    def load(cls, path: str | None) -> ZookeeperAuth | None:
        if not path:
            return None
        from kops.inputs.files import read_text

        p = Path(path)
        text = read_text(path, what="--zookeeper-auth-file", limit=1 << 20)
        props = parse_properties(text)
        password = props.get("password")
        register_secret(password)
        username = props.get("username") or props.get("user")
        if not username or not password:
            raise BadInput(
                f"--zookeeper-auth-file {path!r} must hold username=... and password=... "
                "(ZooKeeper SASL/DIGEST-MD5 credentials)"
            )
        mech = props.get("mechanism", "DIGEST-MD5").upper()
        if mech not in _ZK_MECHANISMS:
            raise BadInput(f"--zookeeper-auth-file {path!r}: mechanism {mech!r}; kops supports {', '.join(_ZK_MECHANISMS)}")
        return cls(username, password, mech, str(p))

    def sasl_options(self) -> dict[str, str]:
        """kazoo ``KazooClient(sasl_options=...)`` (needs the ``pure-sasl`` package)."""
        return {"mechanism": self.mechanism, "username": self.username, "password": self.password}
