"""Why a ZooKeeper session kazoo started did not serve kops: one cause, one message.

kazoo reports the same cause in ways that depend on timing. kazoo's client is "connected" as soon
as ZooKeeper accepts the session, *before* the SASL login; a refused login then ends the
connection thread -- on ``SessionClosedRequireSaslError`` when ZooKeeper enforces SASL (its
``enforce.auth.enabled``: the thread dies of it), on ``AuthFailedError`` (state ``AUTH_FAILED``)
when ZooKeeper drops the connection. Whether ``KazooClient.start`` sees that (and raises
``KazooTimeoutError``, at once, not after its timeout) or returns and the first read fails
(``ConnectionLoss``, ``ConnectionClosedError``, ``AuthFailedError``) is a race between that
thread and the caller's; on a loaded machine either wins. So kops does not read the cause from
the exception the caller got but from what the session went through: :func:`record` notes each
state of the client and the error the connection thread ended on, and :func:`failure` names the
cause from that record:

- a refused login with credentials given: ZooKeeper refused the SASL/<mechanism> login of the
  user, check the credentials in --zookeeper-auth-file (never the password);
- a refused unauthenticated session: ZooKeeper requires SASL authentication, pass
  --zookeeper-auth-file / KOPS_ZOOKEEPER_AUTH_FILE;
- no session within the timeout: ZooKeeper cannot be reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kops.cluster.config import ZookeeperAuth
from kops.cluster.redact import redact
from kops.errors import AuthenticationError, ClusterError

#: what kazoo raises (to the caller or in its connection thread) when ZooKeeper refuses the login
#: or the unauthenticated session
REFUSED = ("AuthFailedError", "SessionClosedRequireSaslError")


@dataclass
class Session:
    """What one kazoo client went through: its states (kazoo's ``KeeperState`` names, in order)
    and the error its connection thread ended on (None while it runs or when it ended cleanly)."""

    states: list[str] = field(default_factory=list)
    thread_error: BaseException | None = None

    @property
    def connected(self) -> bool:
        """ZooKeeper accepted the session at least once (it was reachable)."""
        return any(s in ("CONNECTED", "CONNECTED_RO") for s in self.states)

    @property
    def closed(self) -> bool:
        """kazoo's connection thread is over (it makes no connection again)."""
        return bool(self.states) and self.states[-1] in ("CLOSED", "AUTH_FAILED")

    @property
    def auth_failed(self) -> bool:
        return "AUTH_FAILED" in self.states


def record(zk: Any) -> Session:
    """Note the states of the kazoo client ``zk`` and the error its connection thread ends on
    (call before ``zk.start``). The connection thread sees them first: read the record once
    ``zk.stop()`` has returned (it joins that thread)."""
    session = Session()
    on_state = zk._session_callback
    conn = zk._connection
    loop = conn.zk_loop

    def session_callback(state) -> None:
        session.states.append(str(state))
        on_state(state)

    def zk_loop() -> None:  # same name: kops's thread hook knows kazoo's thread by it
        try:
            loop()
        except BaseException as e:
            session.thread_error = e
            raise

    zk._session_callback = session_callback
    conn.zk_loop = zk_loop
    return session


def failure(zookeeper: str, auth: ZookeeperAuth | None, timeout_s: float, session: Session,
            error: BaseException | None) -> ClusterError | None:
    """The kops error for a session that failed (``error``: what ``start`` or the first read
    raised, if anything), judged from ``session``; None when the record names no cause (the
    caller maps ``error`` as any other client error)."""
    names = {type(e).__name__ for e in (error, session.thread_error) if e is not None}
    if session.auth_failed or names.intersection(REFUSED):
        if auth is not None:
            where = f"--zookeeper-auth-file {auth.source}" if auth.source else "--zookeeper-auth-file (KOPS_ZOOKEEPER_AUTH_FILE)"
            return AuthenticationError(
                f"ZooKeeper at {zookeeper} refused the SASL/{auth.mechanism} login of user {auth.username!r}; "
                f"check the credentials in {where}"
            )
        return AuthenticationError(
            f"ZooKeeper at {zookeeper} requires SASL authentication and closed the unauthenticated session: "
            "pass --zookeeper-auth-file FILE (username=..., password=...) or set KOPS_ZOOKEEPER_AUTH_FILE"
        )
    if session.thread_error is not None:  # the connection thread died of something else
        e = session.thread_error
        text = redact(f"{type(e).__name__}{': ' + str(e) if str(e) else ''}")
        if auth is not None:  # (a file's password is registered with redact already; this one may not be)
            text = text.replace(auth.password, "******")
        return ClusterError(f"kazoo's connection to ZooKeeper at {zookeeper} failed: {text}")
    if not session.connected or (error is not None and type(error).__name__ == "KazooTimeoutError"):
        return ClusterError(f"cannot reach ZooKeeper at {zookeeper} within {timeout_s:.0f} s")
    return None
