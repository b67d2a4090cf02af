"""One connection to one cluster: lazily created clients, bounded timeouts, clear errors.

- confluent-kafka ``AdminClient`` for everything it has (metadata, configs, elections) but
  DescribeCluster;
- kafka-python ``KafkaAdminClient`` only for AlterPartitionReassignments,
  ListPartitionReassignments and DescribeLogDirs, which librdkafka lacks, and for
  DescribeCluster, whose librdkafka parser aborts the process when a just-restarted controller
  answers (:meth:`Connection.describe_cluster`);
- kazoo for ZooKeeper, with retries, when ``--zookeeper`` is given; SASL (DIGEST-MD5) with the
  credentials of ``--zookeeper-auth-file`` (env ``KOPS_ZOOKEEPER_AUTH_FILE``).

ZooKeeper-only behaviour on a KRaft cluster: every ZooKeeper access goes through
:meth:`Connection.zk`, which first asks the cluster its mode (:meth:`Connection.cluster_mode`,
from the brokers' ``process.roles``) and refuses with :class:`BadInput` (exit 2, nothing changed)
when the cluster runs in KRaft mode; ``--via zookeeper`` asks the same question
(:meth:`Connection.require_zookeeper_mode`) before anything else.

Errors: authorization refusals become :class:`AuthorizationError` naming the operation, the
resource and the principal; a failed SASL login becomes :class:`AuthenticationError`; both exit 1.
Every message goes through :func:`kops.cluster.redact.redact`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kops.cluster import broker_configs, zk_session
from kops.cluster.config import ClientConfig, ZookeeperAuth
from kops.cluster.redact import redact
from kops.errors import AuthenticationError, AuthorizationError, BadInput, ClusterError, ClusterTimeout

log = logging.getLogger(__name__)

#: a metadata request answered late or in part (after the cluster has answered) is sent again,
#: this many times in all
METADATA_ATTEMPTS = 3


def _kafka_error_text(exc: BaseException) -> str:
    err = exc.args[0] if getattr(exc, "args", None) else None
    if err is not None and hasattr(err, "str"):
        try:
            return redact(f"{err.name()}: {err.str()}")
        except Exception:  # pragma: no cover - defensive
            pass
    return redact(str(exc))


_AUTHZ_MARKERS = ("AUTHORIZATION_FAILED", "NOT AUTHORIZED", "AUTHORIZATIONEXCEPTION", "AUTHORIZATIONFAILED",
                  "NOAUTH")
_AUTHN_MARKERS = ("_AUTHENTICATION", "SASLAUTHENTICATION", "AUTHENTICATION FAILED", "AUTHENTICATIONFAILED",
                  "AUTH_FAILED", "AUTHFAILED", "SSL HANDSHAKE FAILED", "CERTIFICATE VERIFY FAILED")


def _exc_text(exc: BaseException) -> str:
    return f"{type(exc).__name__} {_kafka_error_text(exc)}".upper()


def _is_timeout(exc: BaseException, text: str) -> bool:
    """A request that got no answer in time (librdkafka _TIMED_OUT / _TRANSPORT, Kafka's
    REQUEST_TIMED_OUT, kafka-python's KafkaTimeoutError / RequestTimedOutError)."""
    upper = text.upper()
    return ("TIMED_OUT" in upper or "TIMEDOUT" in upper or "TRANSPORT" in upper
            or type(exc).__name__ in ("KafkaTimeoutError", "RequestTimedOutError"))


def _is_partial(text: str) -> bool:
    """librdkafka ``_PARTIAL`` ("Partial response"): a broker answered a metadata request
    without all it was asked, typically one that has just started and not yet been sent the
    cluster's metadata. The cluster answered; asking again shortly gets the whole answer."""
    return "_PARTIAL" in text.upper() or "PARTIAL RESPONSE" in text.upper()


def is_authorization_error(exc: BaseException) -> bool:
    """librdkafka ``*_AUTHORIZATION_FAILED``, kafka-python ``*AuthorizationFailedError``,
    kazoo ``NoAuthError``."""
    return any(m in _exc_text(exc) for m in _AUTHZ_MARKERS)


def is_authentication_error(exc: BaseException) -> bool:
    """librdkafka ``_AUTHENTICATION``, kafka-python ``SaslAuthenticationFailedError``, kazoo
    ``AuthFailedError``, TLS verification failures."""
    return any(m in _exc_text(exc) for m in _AUTHN_MARKERS)


def _resource_hint(text: str) -> str:
    t = text.upper()
    if "TOPIC_AUTHORIZATION" in t or "TOPICAUTHORIZATION" in t:
        return "topic"
    if "CLUSTER_AUTHORIZATION" in t or "CLUSTERAUTHORIZATION" in t:
        return "cluster"
    if "GROUP_AUTHORIZATION" in t or "GROUPAUTHORIZATION" in t:
        return "group"
    return ""


class ControllerMoved(ClusterTimeout):
    """A controller-bound request (CreateTopics, DeleteTopics, ElectLeaders) answered
    NOT_CONTROLLER: the client still knew a broker that is no longer the controller (librdkafka
    surfaces the error and never re-routes); :meth:`Connection.to_controller` asks again through
    a new client."""


#: a controller-bound request answered NOT_CONTROLLER is sent again, this many times in all
CONTROLLER_ATTEMPTS = 4
#: seconds between two kafka-python controller requests while no broker answers as the controller
CONTROLLER_RETRY_S = 0.5


def _in_thread(call) -> Future:
    """``call()`` in a daemon thread, its outcome in the returned future (for :meth:`Connection.wait`)."""
    fut: Future = Future()

    def run() -> None:
        try:
            fut.set_result(call())
        except BaseException as e:  # noqa: BLE001 - handed to the waiter
            fut.set_exception(e)

    threading.Thread(target=run, name="kops-blocking-call", daemon=True).start()
    return fut


def mode_of_broker_configs(entries: Any) -> str | None:
    """``"kraft"`` / ``"zookeeper"`` from a broker's DescribeConfigs answer (name -> entry):
    ``process.roles`` set on a KRaft node, empty on a ZooKeeper-mode broker; Kafka 2.8 - 3.0 do
    not list ``process.roles`` (an internal config then), so a ``zookeeper.connect`` tells those.
    None when neither answers."""
    roles = entries.get("process.roles")
    if roles is not None and roles.value:
        return "kraft"
    zk = entries.get("zookeeper.connect")
    if roles is not None or (zk is not None and zk.value):
        return "zookeeper"
    return None


@dataclass(frozen=True)
class ClusterNode:
    """A live broker as DescribeCluster names it."""

    id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterDescription:
    """What DescribeCluster answers: the cluster id, the controller id (on a KRaft cluster a
    random live broker, as Kafka answers clients there) and the live brokers (fenced ones left
    out), by id."""

    cluster_id: str | None
    controller_id: int | None
    nodes: tuple[ClusterNode, ...]


#: seconds between two DescribeCluster questions while the answers name no broker
DESCRIBE_CLUSTER_RETRY_S = 0.2
#: Kafka's error code for a topic the cluster does not have
_UNKNOWN_TOPIC_OR_PART = 3


@dataclass
class Connection:
    bootstrap_server: str | None
    client_config: ClientConfig
    zookeeper: str | None = None
    timeout_s: float = 10.0
    zookeeper_auth: ZookeeperAuth | None = None
    _admin: Any = field(default=None, repr=False)
    _auth_error: str | None = field(default=None, repr=False)
    _kp_admin: Any = field(default=None, repr=False)
    _kp_lock: Any = field(default_factory=threading.Lock, repr=False)
    _kp_error: BaseException | None = field(default=None, repr=False)
    _kp_warming: bool = field(default=False, repr=False)
    _zk: Any = field(default=None, repr=False)
    #: a ZooKeeper -> KRaft migration is under way: ZooKeeper is read (and kops' lock znode
    #: written) while some brokers already run in KRaft mode (the playbooks zk-to-kraft*)
    migrating: bool = field(default=False, repr=False)
    #: "zookeeper" / "kraft" once known (read_topology records it; cluster_mode() asks)
    _mode: str | None = field(default=None, repr=False)
    #: True once the cluster has answered a request: a later timeout is then a slow or
    #: cut-off broker (ClusterTimeout, a read may be sent again), not an unreachable cluster
    _answered: bool = field(default=False, repr=False)
    _cluster_id: str | None = field(default=None, repr=False)
    #: time.monotonic() past which no request waits and no request is sent again
    #: (:meth:`bounded_by`: a run's ``--timeout``), None for no such bound
    _deadline: float | None = field(default=None, repr=False)
    #: True while a caller sends a whole read again itself (:meth:`sent_once`): requests inside
    #: are sent once, or retries would multiply (read_topology's 3 x metadata's 3)
    _once: bool = field(default=False, repr=False)

    @classmethod
    def from_options(
        cls,
        *,
        bootstrap_server: str | None,
        command_config: str | None,
        zookeeper: str | None,
        timeout_s: float,
        zookeeper_auth_file: str | None = None,
    ) -> Connection:
        cfg = ClientConfig.load(command_config)
        zk_auth = ZookeeperAuth.load(zookeeper_auth_file)
        if bootstrap_server:  # (the CLI checks it as an option already; library callers too)
            from kops.inputs import values
            try:
                values.host_ports(bootstrap_server)
            except values.Invalid as e:
                raise BadInput(f"--bootstrap-server: {e}") from None
        return cls(bootstrap_server, cfg, zookeeper, timeout_s, zk_auth)

    # -- error mapping -----------------------------------------------------------------------
    def identity(self) -> str:
        """Who we are to the cluster, for messages: ``SCRAM-SHA-512 user 'x' over SASL_SSL``."""
        try:
            return self.client_config.describe_identity()
        except BadInput:
            return self.client_config.security_protocol

    def _config_hint(self) -> str:
        src = self.client_config.source
        return f"check the credentials in --command-config {src}" if src else "pass --command-config FILE"

    def authorization_error(self, what: str, text: str) -> AuthorizationError:
        """``<what>: not authorized (<ERROR>) for <identity>`` — ``what`` names the operation and
        the resource (e.g. ``alter partition reassignments of topic t``)."""
        kind = _resource_hint(text)
        on = f" on the {kind}" if kind and kind not in what else ""
        return AuthorizationError(
            f"{what}: not authorized{on} as {self.identity()} ({redact(text)})",
            details=["the cluster's ACLs do not allow this operation for this principal; nothing was changed by it"],
        )

    def authentication_error(self, text: str) -> AuthenticationError:
        return AuthenticationError(
            f"authentication to the cluster at {self.bootstrap_server} failed as {self.identity()}: "
            f"{redact(text)}; {self._config_hint()}"
        )

    def map_error(self, exc: BaseException, what: str) -> ClusterError:
        """Any client exception (confluent-kafka, kafka-python, kazoo) -> the kops error to raise:
        :class:`AuthorizationError`, :class:`AuthenticationError` or :class:`ClusterError`, with
        ``what`` (operation and resource) in the message and no secret in it. For the ops layer:
        ``except Exception as e: raise conn.map_error(e, "alter partition reassignments") from None``."""
        if isinstance(exc, ClusterError):
            return exc
        text = _kafka_error_text(exc)
        if getattr(exc, "errno", None) is not None and type(exc).__module__.startswith("kafka"):
            # kafka-python: the class name says it; its message repeats the whole request
            text = f"{type(exc).__name__} (error {exc.errno}): {getattr(exc, 'description', '')}".rstrip(": ")
        if not text or text == str(None):
            text = type(exc).__name__
        elif type(exc).__name__ not in text:
            text = f"{type(exc).__name__}: {text}"
        name = type(exc).__name__
        if name == "NoAuthError":  # kazoo: the znode's ACL refuses us
            who = f"ZooKeeper user {self.zookeeper_auth.username!r}" if self.zookeeper_auth else "an unauthenticated ZooKeeper session"
            return AuthorizationError(f"{what}: not authorized in ZooKeeper as {who} (NoAuthError)")
        if is_authorization_error(exc):
            return self.authorization_error(what, text)
        if is_authentication_error(exc):
            return self.authentication_error(text)
        if (again := self._ask_again(what, text)) is not None:
            return again
        if self._answered and _is_timeout(exc, text):
            return ClusterTimeout(f"{what}: {text}")
        return ClusterError(f"{what}: {text}")

    def _ask_again(self, what: str, text: str) -> ClusterTimeout | None:
        """The error for an answer that says "ask again" (the cluster did answer): partial
        metadata from a just-started broker (:class:`ClusterTimeout`) or NOT_CONTROLLER
        (:class:`ControllerMoved`); None for any other answer."""
        if _is_partial(text):
            self._answered = True
            return ClusterTimeout(f"{what}: {text}")
        if "NOT_CONTROLLER" in text.upper():
            self._answered = True
            return ControllerMoved(f"{what}: {text} (the controller moved)")
        return None

    def _on_client_error(self, err) -> None:
        """librdkafka ``error_cb``: remember a failed login so that waits end at once."""
        try:
            from confluent_kafka import KafkaError

            code = err.code()
            if code in (KafkaError._AUTHENTICATION, KafkaError._SSL) or "authentication" in err.str().lower():
                self._auth_error = f"{err.name()}: {err.str()}"
        except Exception:  # pragma: no cover - defensive
            pass

    # -- confluent-kafka -------------------------------------------------------------------
    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            conf = {
                "bootstrap.servers": self.bootstrap_server,
                "socket.connection.setup.timeout.ms": int(min(self.timeout_s, 30) * 1000),
                "logger": _QuietLogger(),
                "error_cb": self._on_client_error,
                # a metadata request for one topic must never create it on a broker with
                # auto.create.topics.enable (librdkafka's default for this client type is true)
                "allow.auto.create.topics": False,
                **self.client_config.librdkafka(),
            }
            self._admin = AdminClient(conf)
        return self._admin

    @contextmanager
    def bounded_by(self, deadline: float | None) -> Iterator[Connection]:
        """Inside, no request waits past ``deadline`` (``time.monotonic()``; None: no bound) and
        none is sent again past it: a run's ``--timeout`` holds even when the cluster stops
        answering in the middle of a poll (a host cut off from it), instead of each read taking
        its full timeout and its retries. Nested bounds keep the earlier deadline."""
        before = self._deadline
        self._deadline = min((d for d in (before, deadline) if d is not None), default=None)
        try:
            yield self
        finally:
            self._deadline = before

    def past_deadline(self) -> bool:
        """Whether the bound of :meth:`bounded_by` has passed: nothing is sent again."""
        return self._deadline is not None and time.monotonic() >= self._deadline

    @contextmanager
    def sent_once(self) -> Iterator[Connection]:
        """Inside, requests this connection would send again (:meth:`metadata`) are sent once:
        for a caller that sends the whole read again itself (:func:`read_topology`)."""
        before, self._once = self._once, True
        try:
            yield self
        finally:
            self._once = before

    def stop_after(self, attempts: int):
        """tenacity ``stop`` for a request sent again: after ``attempts`` in all (one inside
        :meth:`sent_once`), and at once past the deadline of :meth:`bounded_by`."""
        limit = 1 if self._once else attempts
        return lambda state: state.attempt_number >= limit or self.past_deadline()

    def _stop_within_timeout(self, min_attempts: int = 1):
        """tenacity ``stop`` for a request asked again until an answer comes: once the
        connection's timeout has passed since the first attempt (and at least ``min_attempts``
        were made), and at once past the deadline of :meth:`bounded_by`."""
        return lambda state: (state.attempt_number >= min_attempts and state.seconds_since_start >= self.timeout_s) \
            or self.past_deadline()

    def renew_admin(self) -> None:
        """Drop the confluent-kafka client: the next :meth:`admin` makes a new one, with fresh
        connections and metadata (after a request it never answered)."""
        self._admin = None

    def metadata(self, topic: str | None = None, what: str = "read metadata"):
        """The cluster's metadata (confluent-kafka ``list_topics``: brokers, topics, partitions),
        of every topic or of ``topic``. The one way kops asks for it: errors are mapped
        (:meth:`wait`: a failed login ends it at once, not at the timeout), and an answer that is
        late or partial once the cluster has answered (:class:`ClusterTimeout`: a broker slow,
        restarting, or just added) is asked again, up to :data:`METADATA_ATTEMPTS` times in all
        (once inside :meth:`sent_once`, never past the deadline of :meth:`bounded_by`)."""
        from tenacity import Retrying, retry_if_exception_type, wait_fixed

        for attempt in Retrying(retry=retry_if_exception_type(ClusterTimeout),
                                stop=self.stop_after(METADATA_ATTEMPTS), wait=wait_fixed(1), reraise=True):
            with attempt:
                admin = self.admin()
                args = () if topic is None else (topic,)
                # list_topics blocks until the answer or its timeout: it runs beside wait(),
                # which serves the client's error callback meanwhile
                md = self.wait(_in_thread(lambda: admin.list_topics(*args, timeout=self.timeout_s)), what)
                self._cluster_id = getattr(md, "cluster_id", None) or self._cluster_id
                return md
        raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or re-raises

    def cluster_id(self) -> str | None:
        """The cluster id, from the last metadata answer or else from a metadata request for one
        topic (every metadata answer carries it): no DescribeCluster, so no kafka-python client
        on the way (commands that start by keying their state or lock on the cluster)."""
        if self._cluster_id is None:
            self.topic_metadata("__consumer_offsets", "read the cluster id")
        return self._cluster_id

    def topic_metadata(self, topic: str, what: str | None = None):
        """:meth:`metadata` of ``topic`` alone (brokers included), and whether the topic exists:
        ``(metadata, exists)``. One small request where a full read would carry every partition
        of the cluster (seconds on 100,000 partitions). Never creates the topic: kops' client
        does not ask for auto-creation (``allow.auto.create.topics`` false in :meth:`admin`), so a
        broker with ``auto.create.topics.enable`` answers UNKNOWN_TOPIC_OR_PART like any other."""
        md = self.metadata(topic, what or f"look for topic {topic}")
        tm = md.topics.get(topic)
        exists = tm is not None and not (tm.error is not None and tm.error.code() == _UNKNOWN_TOPIC_OR_PART)
        return md, exists

    def describe_cluster(self, what: str = "describe cluster") -> ClusterDescription:
        """The cluster id, controller and live brokers with their racks (DescribeCluster): the one
        way kops asks for them.

        Asked through kafka-python, not confluent-kafka: librdkafka (2.16) sends its
        DescribeCluster to the broker it last knew as the controller, and when that broker has
        just been restarted and answers from a still empty metadata cache (a ZooKeeper-mode
        controller killed and started again, before the new controller has sent it the
        cluster's metadata), librdkafka's parser fails an assertion and aborts the whole
        process (``rdkafka_admin.c: rd_kafka_admin_response_parse: Assertion `rko_result'
        failed``; reproduced by tests/cluster/test_faults.py::
        test_controller_killed_and_restarted_under_a_long_lived_connection). kafka-python asks
        the least loaded broker; an answer that names no broker (from such a just-started
        broker) or a broker connection that drops is asked again every
        :data:`DESCRIBE_CLUSTER_RETRY_S` seconds within the connection's timeout."""
        from tenacity import RetryError, Retrying, retry_if_exception_type, wait_fixed

        def ask() -> ClusterDescription:
            try:
                answer = self.kp_admin().describe_cluster()
            except (ClusterError, BadInput):  # BadInput: versions.Unsupported (Kafka < 2.8)
                raise
            except Exception as e:
                # kafka-python's retriable errors: a dropped connection, a node not ready, a timeout
                if getattr(e, "retriable", False) and not is_authentication_error(e):
                    raise _AskAgain(e) from None
                raise self.map_error(e, what) from None
            nodes = tuple(
                ClusterNode(id=int(b["broker_id"]), host=b["host"], port=int(b["port"]), rack=b.get("rack"))
                for b in answer.get("brokers") or () if not b.get("is_fenced")
            )
            if not nodes:
                raise _AskAgain()  # (no broker named yet)
            ctrl = answer.get("controller_id")
            return ClusterDescription(
                cluster_id=answer.get("cluster_id"),
                controller_id=int(ctrl) if ctrl is not None and int(ctrl) >= 0 else None,
                nodes=tuple(sorted(nodes, key=lambda n: n.id)),
            )

        try:
            for attempt in Retrying(retry=retry_if_exception_type(_AskAgain), stop=self._stop_within_timeout(),
                                    wait=wait_fixed(DESCRIBE_CLUSTER_RETRY_S)):
                with attempt:
                    return ask()
        except RetryError as e:
            last = e.last_attempt.exception()
            if last.cause is not None:
                raise self.map_error(last.cause, what) from None
            raise ClusterTimeout(
                f"{what}: the brokers of {self.bootstrap_server} that answered within "
                f"{self.timeout_s:.0f} s named no live broker (just started, not yet sent the cluster's "
                "metadata)"
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or re-raises

    def to_controller(self, send, what: str, timeout: float | None = None,
                      on_resend: Callable[[str], None] | None = None):
        """``wait(send(admin), what)`` for a request librdkafka sends to the controller it knows
        (CreateTopics, DeleteTopics, ElectLeaders). When that broker is no longer the
        controller (it moved: a controller restarted or killed while this client lived), the
        answer is NOT_CONTROLLER and librdkafka does not re-route it: the request is sent again
        by a new client, which asks the metadata for the controller, up to
        :data:`CONTROLLER_ATTEMPTS` times in all. Only for requests that are safe to send twice
        (a topic created or deleted again answers TOPIC_ALREADY_EXISTS / UNKNOWN_TOPIC, a leader
        elected again ELECTION_NOT_NEEDED). ``on_resend(why)`` is told of each request sent
        again (its second answer can hide what the first did)."""
        from tenacity import Retrying, retry_if_exception_type, wait_fixed

        def fresh_client(state) -> None:
            self.renew_admin()
            if on_resend is not None:
                on_resend(f"{what}: {state.outcome.exception()}; sent again through a new client")

        for attempt in Retrying(retry=retry_if_exception_type(ControllerMoved), stop=self.stop_after(CONTROLLER_ATTEMPTS),
                                wait=wait_fixed(0.5), before_sleep=fresh_client, reraise=True):
            with attempt:
                return self.wait(send(self.admin()), what, timeout)
        raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or re-raises

    def wait(self, future, what: str, timeout: float | None = None):
        """``future.result()`` with the connection's bound and kops' error mapping. Never
        waits past the deadline of :meth:`bounded_by`."""
        from concurrent.futures import TimeoutError as FutTimeout

        t = timeout if timeout is not None else self.timeout_s
        deadline = time.monotonic() + t + 2
        within = f"within {t:.0f} s"
        if self._deadline is not None and self._deadline < deadline:
            deadline = self._deadline  # the run's --timeout comes first: say so, not "within 0 s"
            within = "before the run's --timeout"
        try:
            while True:  # in slices: a failed SASL login (error_cb) ends the wait at once
                if self._admin is not None:
                    self._admin.poll(0)  # serves error_cb
                if self._auth_error:
                    raise self.authentication_error(self._auth_error)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise FutTimeout()
                try:
                    value = future.result(timeout=min(0.25, left))
                except FutTimeout:
                    continue
                self._answered = True
                return value
        except FutTimeout:
            if self._auth_error:
                raise self.authentication_error(self._auth_error) from None
            kind = ClusterTimeout if self._answered else ClusterError
            raise kind(
                f"{what}: no answer from the cluster at {self.bootstrap_server} {within}"
            ) from None
        except ClusterError:
            raise
        except Exception as e:  # confluent_kafka.KafkaException and friends
            text = _kafka_error_text(e)
            if is_authorization_error(e):
                raise self.authorization_error(what, text) from None
            if is_authentication_error(e) or self._auth_error:
                raise self.authentication_error(self._auth_error or text) from None
            if (again := self._ask_again(what, text)) is not None:
                raise again from None
            if _is_timeout(e, text):
                kind = ClusterTimeout if self._answered else ClusterError
                raise kind(
                    f"{what}: cannot reach the cluster at {self.bootstrap_server} {within} ({text})"
                ) from None
            raise ClusterError(f"{what}: {text}") from None

    # -- kafka-python (only for the RPCs librdkafka lacks) ---------------------------------
    def kp_admin(self):
        with self._kp_lock:  # a warm-up thread may be creating it: wait for that one
            if self._kp_admin is None:
                err, self._kp_error = self._kp_error, None
                if err is not None:
                    raise err  # the warm-up's attempt failed: report it (the next call retries)
                self._kp_admin = self._new_kp_admin()
            self._answered = True  # its bootstrap got the cluster's metadata
            return self._kp_admin

    def _new_kp_admin(self):
        from kops.cluster.kp_client import KopsAdminClient

        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        try:
            return KopsAdminClient(
                bootstrap_servers=self.bootstrap_server.split(","),
                client_id="kops",
                request_timeout_ms=int(self.timeout_s * 1000),
                bootstrap_timeout_ms=int(self.timeout_s * 1000),
                **self.client_config.kafka_python(),
            )
        except Exception as e:
            if is_authentication_error(e):
                raise self.authentication_error(f"{type(e).__name__}: {_kafka_error_text(e)}") from None
            raise ClusterError(
                f"cannot reach the cluster at {self.bootstrap_server} within "
                f"{self.timeout_s:.0f} s (kafka-python: {redact(str(e)) or type(e).__name__})"
            ) from None

    def kp_controller(self, call, what: str = "send a request to the controller"):
        """``call(kp_admin)`` for an RPC that goes to the controller (ListPartitionReassignments,
        AlterPartitionReassignments). kafka-python remembers the controller id it found first
        and retries only once on NOT_CONTROLLER; when that controller was killed or lost its
        role (its id unknown in the metadata, no connection, or NOT_CONTROLLER again:
        kafka-python's "Failed to find active controller id!"), the id is forgotten so the next
        attempt asks the metadata for the new controller. A ZooKeeper-mode controller election
        takes seconds, more on a loaded host, during which the brokers' metadata still name the
        old controller: the call is tried again every :data:`CONTROLLER_RETRY_S` seconds within
        the connection's timeout (never past the deadline of :meth:`bounded_by`), then
        :class:`ClusterTimeout` names what was asked. Re-sending these requests is safe: the
        same targets again change nothing."""
        from kafka import errors as ke
        from tenacity import RetryError, Retrying, retry_if_exception_type, wait_fixed

        # (a request that timed out went to a live controller: the caller decides what to do)
        stale = (ke.UnknownBrokerIdError, ke.KafkaConnectionError, ke.NodeNotReadyError, ke.NotControllerError,
                 ke.BrokerNotAvailableError)

        def attempt_once():
            admin = self.kp_admin()
            try:
                return call(admin)
            except stale as e:
                cause: BaseException = e
            except RuntimeError as e:  # kafka-python: "Failed to find active controller id!"
                if "controller" not in str(e):
                    raise
                cause = e
            admin._controller_id = None  # kafka-python's cached controller (refreshed from metadata when None)
            raise _AskAgain(cause)

        try:
            for attempt in Retrying(retry=retry_if_exception_type(_AskAgain), stop=self._stop_within_timeout(2),
                                    wait=wait_fixed(CONTROLLER_RETRY_S)):
                with attempt:
                    return attempt_once()
        except RetryError as e:
            cause = e.last_attempt.exception().cause
            raise ClusterTimeout(
                f"{what}: no broker answered as the controller within {self.timeout_s:.0f} s (a controller "
                f"election in progress?); kafka-python: {redact(str(cause)) or type(cause).__name__}"
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or re-raises

    def warm_up(self) -> None:
        """Create kafka-python's client in a background thread now. Importing kafka-python and
        its bootstrap take 0.2-0.3 s, which then overlap the caller's first confluent-kafka
        requests instead of lying on the way to the first ListPartitionReassignments or
        AlterPartitionReassignments. A failure is kept and raised by the first
        :meth:`kp_admin` call, so it is reported where it matters, once."""
        with self._kp_lock:
            if self._kp_admin is not None or self._kp_warming:
                return
            self._kp_warming = True

        def run() -> None:
            with self._kp_lock:
                if self._kp_admin is not None:
                    return
                try:
                    self._kp_admin = self._new_kp_admin()
                except BaseException as e:  # noqa: BLE001 - kept for kp_admin() to raise
                    self._kp_error = e

        threading.Thread(target=run, name="kops-kafka-python-warm-up", daemon=True).start()

    # -- cluster mode ------------------------------------------------------------------------
    def note_mode(self, mode: str | None) -> None:
        """Record the mode a read found (``process.roles`` of the brokers), saving a question."""
        if mode in ("zookeeper", "kraft"):
            self._mode = mode

    def cluster_mode(self) -> str | None:
        """``"kraft"`` or ``"zookeeper"``: one registered broker's configs as
        :func:`mode_of_broker_configs` reads them. None when it cannot be told (no bootstrap
        server, the cluster unreachable, DescribeConfigs not allowed)."""
        if self._mode is not None or not self.bootstrap_server:
            return self._mode
        try:
            broker = self.describe_cluster().nodes[0].id
            entries = broker_configs.read(self, [broker])[broker]
        except Exception:  # noqa: BLE001 - unknown mode: the caller goes on and finds out the usual way
            return None
        self._mode = mode_of_broker_configs(entries) or self._mode
        return self._mode

    def require_zookeeper_mode(self, what: str) -> None:
        """Refuse ZooKeeper-only behaviour (``what``: ``--zookeeper``, ``--via zookeeper``) on a
        KRaft cluster: :class:`BadInput` (exit 2) before anything is read from or written to
        ZooKeeper or the cluster."""
        if self.cluster_mode() == "kraft":
            raise BadInput(
                f"{what}: the cluster at {self.bootstrap_server} runs in KRaft mode and has no ZooKeeper; "
                f"{what} is for ZooKeeper-mode clusters (Kafka 3.x and older). Leave it out (also "
                "KOPS_ZOOKEEPER): every kops command works on a KRaft cluster through the Admin API "
                "alone. Nothing was changed."
            )

    # -- ZooKeeper -----------------------------------------------------------------------------
    def zk(self, *, migrating: bool = False):
        """The kazoo client (started once). ``migrating``: for reading a ZooKeeper -> KRaft
        migration, whose brokers run in KRaft mode while ZooKeeper still holds its state: the
        cluster's mode is not asked."""
        if self._zk is None:
            if not self.zookeeper:
                raise BadInput("this needs --zookeeper HOST:PORT[/chroot] (or KOPS_ZOOKEEPER)")
            if not (migrating or self.migrating):
                self.require_zookeeper_mode("--zookeeper")
            from kazoo.client import KazooClient

            logging.getLogger("kazoo").setLevel(logging.CRITICAL)
            _quiet_kazoo_threads()
            auth: dict[str, Any] = {}
            if self.zookeeper_auth is not None:
                try:
                    import puresasl  # noqa: F401 - kazoo's SASL needs it
                except ImportError:
                    raise ClusterError(
                        "--zookeeper-auth-file needs the Python package 'pure-sasl' (pip install pure-sasl)"
                    ) from None
                auth["sasl_options"] = self.zookeeper_auth.sasl_options()
            zk = KazooClient(
                hosts=self.zookeeper,
                timeout=self.timeout_s,
                # reconnect for as long as the client lives (a ZooKeeper restart, a leader
                # election): with a bounded count kazoo closes the client for good after a few
                # seconds down; each command stays bounded by command_retry's deadline
                connection_retry={"max_tries": -1, "delay": 0.2, "backoff": 2, "max_delay": 2},
                command_retry={"max_tries": 5, "delay": 0.2, "backoff": 2, "max_delay": 2,
                               "deadline": self.timeout_s},
                read_only=False,
                **auth,
            )
            session = zk_session.record(zk)
            try:
                zk.start(timeout=self.timeout_s)
            except Exception as e:  # a timeout, or (with a chroot) start's own read of it
                _stop_zk(zk)
                raise (zk_session.failure(self.zookeeper, self.zookeeper_auth, self.timeout_s, session, e)
                       or self.map_error(e, f"connect to ZooKeeper at {self.zookeeper}")) from None
            zk.retry = self._zk_errors_as_cluster_errors(zk.retry)
            self._check_zk_session(zk, session)
            self._zk = zk
        return self._zk

    def _zk_errors_as_cluster_errors(self, retry):
        """kazoo's ``retry`` with ZooKeeper being unreachable past the command deadline reported
        as a :class:`ClusterError` (what the polling loop retries and the CLI reports as a cluster
        failure) instead of kazoo's own exception types."""
        from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.retry import RetryFailedError

        def retry_mapped(*args, **kwargs):
            try:
                return retry(*args, **kwargs)
            except (ConnectionLoss, ConnectionClosedError, SessionExpiredError, OperationTimeoutError,
                    RetryFailedError, KazooTimeoutError) as e:
                raise ClusterError(
                    f"ZooKeeper at {self.zookeeper} did not answer within {self.timeout_s:.0f} s "
                    f"({type(e).__name__}{': ' + str(e) if str(e) else ''})"
                ) from None

        return retry_mapped

    def _check_zk_session(self, zk, session: zk_session.Session) -> None:
        """One read right after the start. kazoo calls a session started once ZooKeeper accepts
        it, before the SASL login; a ZooKeeper that enforces SASL then closes the session of an
        unauthenticated client (or one whose login failed), which would otherwise surface later
        as a bare ``SessionClosedRequireSaslError`` or ``ConnectionClosedError`` in whatever read
        comes first. The cause is judged from what the session went through
        (:func:`kops.cluster.zk_session.failure`), not from the error this read got."""
        try:
            zk.exists("/")
            return
        except Exception as e:
            error = e
        if type(error).__name__ == "ConnectionLoss" and not session.closed:
            try:  # the connection dropped and kazoo makes it again: read again within the deadline
                zk.retry(zk.exists, "/")
                return
            except Exception as e:
                error = e
        _stop_zk(zk)  # joins kazoo's connection thread: the session's record is complete
        raise (zk_session.failure(self.zookeeper, self.zookeeper_auth, self.timeout_s, session, error)
               or self.map_error(error, f"read ZooKeeper at {self.zookeeper}")) from None

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


def _stop_zk(zk) -> None:
    """Stop and close a kazoo client that failed (its connection thread joined)."""
    try:
        zk.stop()
        zk.close()
    except Exception:  # pragma: no cover - already failing; the caller reports why
        pass


_kazoo_hook_installed = False


def _quiet_kazoo_threads() -> None:
    """kazoo's connection thread dies with a traceback on stderr when ZooKeeper refuses a SASL
    login (``SessionClosedRequireSaslError``); kops reports that itself (see
    :mod:`kops.cluster.zk_session`), so such thread deaths go to debug logging."""
    global _kazoo_hook_installed
    if _kazoo_hook_installed:
        return
    import threading

    previous = threading.excepthook

    def hook(args) -> None:  # threading.ExceptHookArgs
        mod = getattr(args.exc_type, "__module__", "") or ""
        if mod.startswith("kazoo") or (args.thread is not None and "zk_loop" in (args.thread.name or "")):
            log.debug("kazoo thread ended: %s", redact(f"{args.exc_type.__name__}: {args.exc_value}"))
            return
        previous(args)

    threading.excepthook = hook
    _kazoo_hook_installed = True


def new_producer(conn: Connection, **conf: Any):
    """A new confluent-kafka Producer on ``conn`` (its address, security settings and quiet
    logging); ``conf``: librdkafka settings with ``_`` for ``.`` (``acks="all"``). Topics are never
    created by writing to them."""
    from confluent_kafka import Producer

    return Producer({
        "bootstrap.servers": conn.bootstrap_server,
        "logger": _QuietLogger(),
        "allow.auto.create.topics": False,
        **{k.replace("_", "."): v for k, v in conf.items()},
        **conn.client_config.librdkafka(),
    })


class _AskAgain(Exception):
    """A request to ask again (:meth:`Connection._stop_within_timeout`): ``cause``, the error its
    answer was, or None (an answer that said too little: no broker named yet)."""

    def __init__(self, cause: BaseException | None = None):
        self.cause = cause


class _QuietLogger:
    """librdkafka logs connection refusals loudly on stderr; route them to debug logging."""

    def log(self, level: int, fmt: str, *args: Any) -> None:
        log.debug(redact(fmt % args if args else fmt))
