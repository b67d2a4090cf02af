"""One connection to one cluster: lazily created clients, bounded timeouts, clear errors.

- confluent-kafka ``AdminClient`` for everything it has (describe cluster/topics/configs,
  configs, elections);
- kafka-python ``KafkaAdminClient`` only for AlterPartitionReassignments,
  ListPartitionReassignments and DescribeLogDirs, which librdkafka lacks;
- kazoo for ZooKeeper, with retries, when ``--zookeeper`` is given.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kops.cluster.config import ClientConfig
from kops.cluster.redact import redact
from kops.errors import AuthorizationError, BadInput, ClusterError

log = logging.getLogger(__name__)


def _kafka_error_text(exc: BaseException) -> str:
    err = exc.args[0] if getattr(exc, "args", None) else None
    if err is not None and hasattr(err, "str"):
        try:
            return redact(f"{err.name()}: {err.str()}")
        except Exception:  # pragma: no cover - defensive
            pass
    return redact(str(exc))


def is_authorization_error(exc: BaseException) -> bool:
    text = _kafka_error_text(exc).upper()
    return "AUTHORIZATION_FAILED" in text or "NOT AUTHORIZED" in text or "AUTHORIZATIONEXCEPTION" in text


@dataclass
class Connection:
    bootstrap_server: str | None
    client_config: ClientConfig
    zookeeper: str | None = None
    timeout_s: float = 10.0
    _admin: Any = field(default=None, repr=False)
    _kp_admin: Any = field(default=None, repr=False)
    _zk: Any = field(default=None, repr=False)

    @classmethod
    def from_options(
        cls,
        *,
        bootstrap_server: str | None,
        command_config: str | None,
        zookeeper: str | None,
        timeout_s: float,
    ) -> Connection:
        cfg = ClientConfig.load(command_config)
        if bootstrap_server:
            for hp in bootstrap_server.split(","):
                host, _, port = hp.strip().rpartition(":")
                if not host or not port.isdigit():
                    raise BadInput(
                        f"--bootstrap-server: {hp.strip()!r} is not HOST:PORT (e.g. 127.0.0.1:9092)"
                    )
        return cls(bootstrap_server, cfg, zookeeper, timeout_s)

    # -- confluent-kafka -------------------------------------------------------------------
    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            conf = {
                "bootstrap.servers": self.bootstrap_server,
                "socket.connection.setup.timeout.ms": int(min(self.timeout_s, 30) * 1000),
                "logger": _QuietLogger(),
                **self.client_config.librdkafka(),
            }
            self._admin = AdminClient(conf)
        return self._admin

    def wait(self, future, what: str, timeout: float | None = None):
        """``future.result()`` with the connection's bound and kops' error mapping."""
        from concurrent.futures import TimeoutError as FutTimeout

        t = timeout if timeout is not None else self.timeout_s
        try:
            return future.result(timeout=t + 2)
        except FutTimeout:
            raise ClusterError(
                f"{what}: no answer from the cluster at {self.bootstrap_server} within {t:.0f} s"
            ) from None
        except Exception as e:  # confluent_kafka.KafkaException and friends
            text = _kafka_error_text(e)
            if is_authorization_error(e):
                raise AuthorizationError(f"{what}: not authorized ({text})") from None
            if "TIMED_OUT" in text.upper() or "TRANSPORT" in text.upper():
                raise ClusterError(
                    f"{what}: cannot reach the cluster at {self.bootstrap_server} within {t:.0f} s "
                    f"({text})"
                ) from None
            raise ClusterError(f"{what}: {text}") from None

    # -- kafka-python (only for the RPCs librdkafka lacks) ---------------------------------
    def kp_admin(self):
        if self._kp_admin is None:
            from kafka.admin import KafkaAdminClient

            logging.getLogger("kafka").setLevel(logging.CRITICAL)
            try:
                self._kp_admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_server.split(","),
                    client_id="kops",
                    request_timeout_ms=int(self.timeout_s * 1000),
                    bootstrap_timeout_ms=int(self.timeout_s * 1000),
                    **self.client_config.kafka_python(),
                )
            except Exception as e:
                raise ClusterError(
                    f"cannot reach the cluster at {self.bootstrap_server} within "
                    f"{self.timeout_s:.0f} s (kafka-python: {redact(str(e)) or type(e).__name__})"
                ) from None
        return self._kp_admin

    # -- ZooKeeper -----------------------------------------------------------------------------
    def zk(self):
        if self._zk is None:
            if not self.zookeeper:
                raise BadInput("this needs --zookeeper HOST:PORT[/chroot] (or KOPS_ZOOKEEPER)")
            from kazoo.client import KazooClient
            from kazoo.handlers.threading import KazooTimeoutError

            logging.getLogger("kazoo").setLevel(logging.CRITICAL)
            zk = KazooClient(
                hosts=self.zookeeper,
                timeout=self.timeout_s,
                connection_retry={"max_tries": 3, "delay": 0.2, "backoff": 2, "max_delay": 2},
                command_retry={"max_tries": 5, "delay": 0.2, "backoff": 2, "max_delay": 2,
                               "deadline": self.timeout_s},
                read_only=False,
            )
            try:
                zk.start(timeout=self.timeout_s)
            except KazooTimeoutError:
                zk.stop()
                zk.close()
                raise ClusterError(
                    f"cannot reach ZooKeeper at {self.zookeeper} within {self.timeout_s:.0f} s"
                ) from None
            self._zk = zk
        return self._zk

    def close(self) -> None:
        if self._kp_admin is not None:
            try:
                self._kp_admin.close()
            except Exception:  # pragma: no cover
                pass
            self._kp_admin = None
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # pragma: no cover
                pass
            self._zk = None
        self._admin = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _QuietLogger:
    """librdkafka logs connection refusals loudly on stderr; route them to debug logging."""

    def log(self, level: int, fmt: str, *args: Any) -> None:
        log.debug(redact(fmt % args if args else fmt))
