"""A ZooKeeper session that failed: one cause, one message, whichever way kazoo reported it
(kops/cluster/zk_session.py). No ZooKeeper: kazoo's exceptions are the library's own; where a
client is needed it is a stand-in for ``KazooClient`` at the seam kops records it through, or
kazoo's real client pointed at a port nothing listens on.

The orders below are the ones seen against a ZooKeeper that enforces SASL (the secured sandbox,
``enforce.auth.enabled``): a wrong password ends kazoo's connection thread on
``SessionClosedRequireSaslError`` right after the session was accepted, and ``start`` either
returns (the first read then gets ``ConnectionLoss`` or ``ConnectionClosedError``) or, on a loaded
machine, sees the session gone and raises ``KazooTimeoutError`` at once."""

from __future__ import annotations

import threading

import pytest
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    SASLException,
    SessionClosedRequireSaslError,
)
from kazoo.handlers.threading import KazooTimeoutError

from kops.cluster import zk_session
from kops.cluster.config import ClientConfig, ZookeeperAuth
from kops.cluster.connection import Connection
from kops.errors import AuthenticationError, ClusterError

ZK = "127.0.0.1:2181"
PASSWORD = "Wrong-Zk-Pass-987654"
AUTH = ZookeeperAuth("kafka", PASSWORD, "DIGEST-MD5", "/etc/kops/zk.properties")
REFUSED = ("ZooKeeper at 127.0.0.1:2181 refused the SASL/DIGEST-MD5 login of user 'kafka'; "
           "check the credentials in --zookeeper-auth-file /etc/kops/zk.properties")
UNAUTHENTICATED = ("ZooKeeper at 127.0.0.1:2181 requires SASL authentication and closed the unauthenticated "
                   "session: pass --zookeeper-auth-file FILE (username=..., password=...) or set KOPS_ZOOKEEPER_AUTH_FILE")
UNREACHABLE = "cannot reach ZooKeeper at 127.0.0.1:2181 within 5 s"

ACCEPTED = ["CONNECTING", "CONNECTED"]
#: (states, error of the connection thread, what start or the first read raised)
WRONG_PASSWORD = {
    "thread died, start saw it (loaded machine)": (ACCEPTED + ["CLOSED"], SessionClosedRequireSaslError(),
                                                   KazooTimeoutError("Connection time-out")),
    "thread died during the first read": (ACCEPTED + ["CLOSED"], SessionClosedRequireSaslError(),
                                          ConnectionLoss()),
    "thread died before the first read": (ACCEPTED + ["CLOSED"], SessionClosedRequireSaslError(),
                                          ConnectionClosedError("Connection has been closed")),
    "thread died, the read's error mapped": (ACCEPTED + ["CLOSED"], SessionClosedRequireSaslError(),
                                             ClusterError("ZooKeeper at 127.0.0.1:2181 did not answer within 5 s")),
    "connection dropped in SASL, first read": (ACCEPTED + ["AUTH_FAILED", "CLOSED"], None, AuthFailedError()),
    "connection dropped in SASL, start saw it": (ACCEPTED + ["AUTH_FAILED", "CLOSED"], None,
                                                 KazooTimeoutError("Connection time-out")),
}


def _failure(states, thread_error, error, auth=AUTH):
    return zk_session.failure(ZK, auth, 5, zk_session.Session(list(states), thread_error), error)


@pytest.mark.parametrize("order", list(WRONG_PASSWORD))
def test_a_refused_login_is_one_message_whatever_kazoo_raised(order):
    e = _failure(*WRONG_PASSWORD[order])
    assert isinstance(e, AuthenticationError) and e.exit_code == 1
    assert e.message == REFUSED
    assert PASSWORD not in e.message and "cannot reach" not in e.message


def test_an_unauthenticated_session_closed_names_the_auth_file():
    for states, thread_error, error in [
        (ACCEPTED, None, SessionClosedRequireSaslError()),  # the first read's answer
        (ACCEPTED + ["CLOSED"], SessionClosedRequireSaslError(), ConnectionLoss()),
        (ACCEPTED + ["CLOSED"], SessionClosedRequireSaslError(), KazooTimeoutError("Connection time-out")),
    ]:
        e = _failure(states, thread_error, error, auth=None)
        assert isinstance(e, AuthenticationError) and e.message == UNAUTHENTICATED


def test_no_session_within_the_timeout_is_unreachable_with_or_without_credentials():
    for auth in (AUTH, None):
        for states in (["CONNECTING"], []):
            e = _failure(states, None, KazooTimeoutError("Connection time-out"), auth=auth)
            assert type(e) is ClusterError and e.message == UNREACHABLE
        # accepted once, then lost and not made again within the timeout: no guess at a login
        e = _failure(ACCEPTED + ["CONNECTING"], None, KazooTimeoutError("Connection time-out"), auth=auth)
        assert type(e) is ClusterError and e.message == UNREACHABLE


def test_other_failures_are_left_to_the_caller_or_named():
    # a connection lost after the session was accepted, nothing refused: the caller's generic mapping
    assert _failure(ACCEPTED + ["CONNECTING"], None, ClusterError("did not answer")) is None
    # kazoo's connection thread ended on an error of its own (pure-sasl missing a mechanism, ...)
    e = _failure(ACCEPTED + ["CLOSED"], SASLException(f"library error {PASSWORD}"), ConnectionLoss())
    assert type(e) is ClusterError and PASSWORD not in e.message
    assert e.message.startswith("kazoo's connection to ZooKeeper at 127.0.0.1:2181 failed: SASLException: library error")


def test_the_auth_file_is_named_only_when_known():
    auth = ZookeeperAuth("kafka", PASSWORD)  # built by code, not loaded from a file
    e = _failure(ACCEPTED + ["CLOSED"], SessionClosedRequireSaslError(), ConnectionLoss(), auth=auth)
    assert e.message.endswith("check the credentials in --zookeeper-auth-file (KOPS_ZOOKEEPER_AUTH_FILE)")


# -- the record ----------------------------------------------------------------------------------
class _Handler:
    """A stand-in for kazoo's ``ConnectionHandler``: ``zk_loop`` runs the connection thread."""

    def __init__(self, client, thread_error):
        self.client, self.thread_error = client, thread_error

    def zk_loop(self):
        try:
            if self.thread_error is not None:
                raise self.thread_error
        finally:
            self.client._session_callback("CLOSED")


class _Client:
    """A stand-in for ``KazooClient`` at the seam :func:`zk_session.record` uses."""

    def __init__(self, thread_error=None):
        self.seen: list[str] = []
        self._connection = _Handler(self, thread_error)

    def _session_callback(self, state):
        self.seen.append(state)


def test_record_notes_the_states_and_the_error_the_connection_thread_ended_on():
    zk = _Client(SessionClosedRequireSaslError())
    session = zk_session.record(zk)
    zk._session_callback("CONNECTING")
    zk._session_callback("CONNECTED")
    thread = threading.Thread(target=zk._connection.zk_loop, daemon=True)
    ended: list[str] = []
    hook, threading.excepthook = threading.excepthook, lambda a: ended.append(a.exc_type.__name__)
    try:
        thread.start()
        thread.join(5)
    finally:
        threading.excepthook = hook
    assert zk.seen == ["CONNECTING", "CONNECTED", "CLOSED"]  # kazoo's own callback still runs
    assert session.states == ["CONNECTING", "CONNECTED", "CLOSED"] and session.connected
    assert isinstance(session.thread_error, SessionClosedRequireSaslError)
    assert ended == ["SessionClosedRequireSaslError"]  # still raised: the thread ends as it did
    assert zk._connection.zk_loop.__name__ == "zk_loop"  # kops's thread hook knows it by name


def test_record_on_kazoo_itself_with_nothing_listening():
    """kazoo's real client (the seams exist in the installed kazoo): no session, so unreachable."""
    from kazoo.client import KazooClient

    from kops.sandbox.procs import free_ports

    # a port nothing listens on, below the kernel's ephemeral range (no connection can take it
    # as its own local port: a client never connects to itself)
    port = free_ports(1)[0]
    zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=1, connection_retry={"max_tries": -1, "delay": 0.05})
    session = zk_session.record(zk)
    with pytest.raises(KazooTimeoutError) as raised:
        zk.start(timeout=0.5)
    zk.close()
    assert "CONNECTING" in session.states and not session.connected and session.thread_error is None
    e = zk_session.failure(f"127.0.0.1:{port}", AUTH, 1, session, raised.value)
    assert e.message == f"cannot reach ZooKeeper at 127.0.0.1:{port} within 1 s"


# -- Connection.zk(): both orders of the race, same message ----------------------------------------
class _RacingKazooClient:
    """A stand-in for ``KazooClient`` whose ZooKeeper accepts the session and then refuses the SASL
    login, ``start_saw_it`` deciding the race: True, ``start`` sees the session gone (kazoo then
    stops the client and raises ``KazooTimeoutError``); False, it returns and the first read fails
    with ``first_read`` (kazoo's ``ConnectionLoss`` when it was queued before the thread ended,
    ``ConnectionClosedError`` after)."""

    start_saw_it = False
    first_read: type[Exception] = ConnectionClosedError
    thread_error: Exception | None = SessionClosedRequireSaslError()
    instances: list[_RacingKazooClient] = []

    def __init__(self, hosts, timeout, connection_retry, command_retry, read_only, **auth):
        self._connection = _Handler(self, type(self).thread_error)
        self._thread = None
        self.reads = 0
        type(self).instances.append(self)

    def _session_callback(self, state):
        self.state = state

    def start(self, timeout):
        self._session_callback("CONNECTING")
        self._session_callback("CONNECTED")
        if self._connection.thread_error is None:
            return  # a session that serves: the thread runs on (not started here)
        self._thread = threading.Thread(target=self._connection.zk_loop, daemon=True)
        self._thread.start()
        if type(self).start_saw_it:
            self.stop()
            raise KazooTimeoutError("Connection time-out")

    def retry(self, func, *args):
        return func(*args)

    def exists(self, path):
        self.reads += 1
        if self._thread is None:  # a connection dropped once, then made again
            if self.reads == 1:
                self._session_callback("CONNECTING")
                raise ConnectionLoss()
            self._session_callback("CONNECTED")
            return None
        self._thread.join(5)
        raise type(self).first_read()

    def stop(self):
        if self._thread is not None:
            self._thread.join(5)

    def close(self):
        pass


def _connection(monkeypatch, tmp_path, **race) -> Connection:
    import kazoo.client

    monkeypatch.setattr(kazoo.client, "KazooClient", _RacingKazooClient)
    monkeypatch.setattr(_RacingKazooClient, "instances", [])
    for k, v in race.items():
        monkeypatch.setattr(_RacingKazooClient, k, v)
    f = tmp_path / "zk.properties"
    f.write_text(f"username=kafka\npassword={PASSWORD}\n")
    return Connection(None, ClientConfig.load(None), ZK, timeout_s=5, zookeeper_auth=ZookeeperAuth.load(str(f)))


@pytest.mark.parametrize("start_saw_it, first_read", [(True, None), (False, ConnectionLoss),
                                                      (False, ConnectionClosedError)])
def test_connection_reports_a_refused_login_the_same_way_in_every_order(monkeypatch, tmp_path, start_saw_it,
                                                                          first_read):
    c = _connection(monkeypatch, tmp_path, start_saw_it=start_saw_it, first_read=first_read)
    with pytest.raises(AuthenticationError) as e:
        c.zk(migrating=True)
    assert e.value.message == (f"ZooKeeper at {ZK} refused the SASL/DIGEST-MD5 login of user 'kafka'; "
                               f"check the credentials in --zookeeper-auth-file {tmp_path / 'zk.properties'}")
    assert c._zk is None
    # a closed session is not read again (kazoo makes no connection any more)
    assert [zk.reads for zk in _RacingKazooClient.instances] == [0 if start_saw_it else 1]


def test_connection_lost_at_the_first_read_and_made_again_is_no_failure(monkeypatch, tmp_path):
    c = _connection(monkeypatch, tmp_path, thread_error=None)
    zk = c.zk(migrating=True)
    assert zk is c._zk and zk.reads == 2
