"""A dynamic KRaft quorum's voter set (KIP-853, Kafka 3.9+): whether the cluster has one, and
the two changes, AddRaftVoter and RemoveRaftVoter (:mod:`kops.cluster.raft_messages`, sent by
:class:`kops.cluster.kp_client.KopsAdminClient` through a broker, which forwards them to the
active controller).

A quorum is dynamic when the cluster finalized the ``kraft.version`` feature at level 1 or
higher: its controllers were formatted with ``kafka-storage.sh format --standalone`` or
``--initial-controllers`` and find each other through ``controller.quorum.bootstrap.servers``.
A static quorum (``controller.quorum.voters``, ``kraft.version`` 0) and a Kafka before 3.9 (no
``kraft.version`` level 1 to support) are refused by :func:`require_dynamic_quorum` with
:class:`kops.cluster.versions.Unsupported` (exit 2, nothing changed), naming what is needed.
"""

from __future__ import annotations

from kops.cluster.versions import DYNAMIC_QUORUM, Unsupported

KRAFT_VERSION = "kraft.version"


def dynamic_quorum_problem(features) -> str | None:
    """Why the cluster (its :class:`kops.cluster.features.Features`) cannot change its voter set,
    None when it can: ``kraft.version`` finalized at level 1 or higher."""
    kraft = features.get(KRAFT_VERSION)
    supported = kraft.supported_max if kraft is not None else None
    finalized = (kraft.finalized if kraft is not None else None) or 0
    if finalized >= 1:
        return None
    if supported is None or supported < 1:
        return (f"{DYNAMIC_QUORUM.what} needs {DYNAMIC_QUORUM.needs()} with a dynamic quorum ({KRAFT_VERSION} "
                f"feature level 1); the cluster's brokers support no {KRAFT_VERSION} level 1 (an older Kafka)")
    return (f"{DYNAMIC_QUORUM.what} needs a dynamic quorum ({KRAFT_VERSION} feature level 1, KIP-853); this "
            f"cluster's quorum is static ({KRAFT_VERSION} finalized at {finalized}: controllers listed in "
            "controller.quorum.voters). Format new controllers with `kafka-storage.sh format --standalone` or "
            "`--initial-controllers` and `controller.quorum.bootstrap.servers`, or raise kraft.version to 1 "
            "where the Kafka version supports that (`kafka-features.sh upgrade --feature kraft.version=1`)")


def require_dynamic_quorum(conn, what: str) -> int:
    """The finalized ``kraft.version`` level (>= 1); :class:`Unsupported` naming what is needed
    otherwise (:func:`dynamic_quorum_problem`)."""
    from kops.cluster.features import read_features

    features = read_features(conn)
    problem = dynamic_quorum_problem(features)
    if problem is not None:
        raise Unsupported(f"{what}: {problem}. Nothing was changed.")
    return int(features.get(KRAFT_VERSION).finalized)


#: how long one AddRaftVoter / RemoveRaftVoter may wait for its answer
ATTEMPT_S = 20.0
#: the pause after a late answer, before the change is sent again
PAUSE_S = 1.0


def add_voter(conn, voter_id: int, directory_id: str, endpoints: list[tuple[str, str, int]], *,
              timeout_s: float = 30.0) -> str:
    """AddRaftVoter for ``voter_id`` (an observer with that directory id, reachable at ``endpoints``:
    ``(listener name, host, port)``); returns once the new voter set is committed (with
    :func:`until_committed`'s note)."""
    what = f"add controller {voter_id} (directory {directory_id}) to the KRaft quorum"

    def send(attempt_s: float) -> None:
        try:
            conn.kp_admin().add_raft_voter(voter_id, directory_id, endpoints, timeout_ms=int(attempt_s * 1000))
        except Exception as e:  # noqa: BLE001 - mapped to a kops error naming the request
            raise _mapped(conn, e, what) from None

    def landed() -> bool:  # DUPLICATE_VOTER: done when the voter is this one (its directory)
        return any(v.id == voter_id and v.directory_id in (None, directory_id) for v in _voters(conn))

    return until_committed(send, "DuplicateVoterError", timeout_s, landed=landed)


def remove_voter(conn, voter_id: int, directory_id: str, *, timeout_s: float = 30.0) -> str:
    """RemoveRaftVoter for ``voter_id`` with that directory id; returns once committed (with
    :func:`until_committed`'s note)."""
    what = f"remove controller {voter_id} (directory {directory_id}) from the KRaft quorum"

    def send(attempt_s: float) -> None:
        try:
            conn.kp_admin().remove_raft_voter(voter_id, directory_id, timeout_ms=int(attempt_s * 1000))
        except Exception as e:  # noqa: BLE001
            raise _mapped(conn, e, what) from None

    def landed() -> bool:  # VOTER_NOT_FOUND: done when no voter has the id any more
        return all(v.id != voter_id for v in _voters(conn))

    return until_committed(send, "VoterNotFoundError", timeout_s, landed=landed)


def _voters(conn):
    from kops.cluster.topology import read_quorum

    return read_quorum(conn).voters


def until_committed(send, committed_error: str, timeout_s: float, *, landed=None, attempt_s: float = ATTEMPT_S,
                    pause_s: float = PAUSE_S, clock=None, sleep=None) -> str:
    """Send a voter change until the leader answers that it is committed, for at most
    ``timeout_s``. Returns "" when the first send was answered, else a note for the step's
    summary (how many sends, the late answer).

    ``send(attempt_s)`` sends it once, waiting at most ``attempt_s`` for the answer, and returns
    when the leader answered that the change is committed. A late answer (:class:`ClusterTimeout`)
    says nothing about the change: the leader answers REQUEST_TIMED_OUT when the new voter set did
    not commit within ``controller.quorum.request.timeout.ms`` or while an earlier change is not
    committed yet, and a broker answers so when it could not forward the request to the active
    controller within 60 s; the leader answers NOT_LEADER_OR_FOLLOWER when it resigned before the
    change committed (seen on 3.9.2 with a voter of the new set stopped: the leader, missing a
    majority, resigned). The change may commit after any of these, so it is sent again. The
    leader's answer to that send is exact: committed now; REQUEST_TIMED_OUT at once while the
    earlier one is still pending (never a second change); or ``committed_error`` (VOTER_NOT_FOUND
    to a removal, DUPLICATE_VOTER to an addition) once an earlier send committed it.

    ``committed_error`` can also answer the first send: the broker that forwards it to the active
    controller sends it again after a lost connection or a NOT_CONTROLLER answer, and the second
    forward finds the change the first one committed (seen on 3.9.2 under load: a removal's first
    send answered VOTER_NOT_FOUND after 7 s, the voter gone). So on ``committed_error`` the quorum
    is read (``landed()``, True when it shows the change): shown, the change is done; not shown
    (a voter with that id and another directory), it is an error. Where the quorum cannot be
    read (a leader election after a leader removed itself), the answer after a late one is taken
    as exact, the first one as an error. Any other error ends it. At ``timeout_s`` the last late
    answer is raised, saying how long and how many sends."""
    import time

    from kops.errors import AuthenticationError, AuthorizationError, ClusterError, ClusterTimeout

    clock, sleep = clock or time.monotonic, sleep or time.sleep
    deadline = clock() + timeout_s
    sends, late = 0, None

    def told(how: str) -> str:
        return f"{how} (sent {sends} time{'s' if sends != 1 else ''}" + (
            f"; a late answer: {late.message})" if late is not None else ")")

    while True:
        sends += 1
        try:
            send(max(1.0, min(attempt_s, deadline - clock())))
            return "" if late is None else told("committed")
        except (AuthorizationError, AuthenticationError):
            raise
        except ClusterTimeout as e:
            late = e
        except ClusterError as e:
            if committed_error not in e.message:
                raise
            shown = _shown(landed)
            if shown is False or (shown is None and late is None):
                raise
            how = "the quorum shows it" if shown else "as the leader answered the next"
            return told(f"committed by an earlier send, {how} ({committed_error})")
        if clock() + pause_s >= deadline:
            raise ClusterTimeout(f"{late.message}; not committed within {timeout_s:.0f} s "
                                 f"({sends} send{'s' if sends != 1 else ''})")
        sleep(pause_s)


def _shown(landed) -> bool | None:
    """``landed()``: whether the quorum shows the change; None when it cannot be read (or no check)."""
    from kops.errors import ClusterError

    if landed is None:
        return None
    try:
        return bool(landed())
    except ClusterError:
        return None


def voter_endpoints(conn) -> dict[int, set[tuple[str, int]]]:
    """voter id -> its ``(host, port)`` endpoints, as the quorum's leader reports them
    (DescribeQuorum v2 ``nodes``, Kafka 3.9+); empty where the answer has none."""
    try:
        raw = conn.kp_admin().describe_metadata_quorum()
    except Exception as e:  # noqa: BLE001
        raise conn.map_error(e, "describe the KRaft metadata quorum") from None
    out: dict[int, set[tuple[str, int]]] = {}
    for node in raw.get("nodes") or ():
        out[int(node["node_id"])] = {(str(x["host"]), int(x["port"])) for x in node.get("listeners") or ()}
    return out


def bootstrap_servers(conn, broker_ids: list[int]) -> dict[int, list[tuple[str, int]] | None]:
    """broker -> its ``controller.quorum.bootstrap.servers`` (``(host, port)`` pairs; None where
    it has none, e.g. ``controller.quorum.voters`` instead, or did not answer)."""
    from kops.cluster import broker_configs

    out: dict[int, list[tuple[str, int]] | None] = {}
    for b, entries in broker_configs.read(conn, broker_ids, strict=False).items():
        entry = (entries or {}).get("controller.quorum.bootstrap.servers")
        value = getattr(entry, "value", None) if entry is not None else None
        out[b] = parse_servers(value) if value else None
    return out


def parse_servers(text: str) -> list[tuple[str, int]]:
    """``h1:p1,h2:p2`` -> [(h1, p1), (h2, p2)] (entries that are not HOST:PORT left out)."""
    out = []
    for item in str(text).split(","):
        host, sep, port = item.strip().rpartition(":")
        if sep and host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def stranded_brokers(servers: dict[int, list[tuple[str, int]] | None],
                     endpoints_left: set[tuple[str, int]]) -> list[int]:
    """The brokers none of whose bootstrap servers is an endpoint of a voter left (pure): after
    the quorum's next leader change they could not find the new leader (an observer asks its
    bootstrap servers)."""
    return sorted(b for b, hosts in servers.items() if hosts and not set(hosts) & endpoints_left)


def _mapped(conn, exc: BaseException, what: str) -> Exception:
    import kafka.errors as Errors

    if isinstance(exc, Errors.IncompatibleBrokerVersion):
        return Unsupported(f"{what}: {DYNAMIC_QUORUM.what} needs {DYNAMIC_QUORUM.needs()}; the broker asked "
                           f"does not answer {DYNAMIC_QUORUM.api}. Nothing was changed.")
    from kops.errors import ClusterError, ClusterTimeout

    err = conn.map_error(exc, what)
    if getattr(exc, "retriable", False) and type(err) is ClusterError:
        # an answer that says "ask again" (NOT_LEADER_OR_FOLLOWER: the leader resigned before the
        # change committed; a connection lost): whether the change commits is open, as after a
        # late answer (:func:`until_committed`)
        err = ClusterTimeout(err.message)
    leader_text = str(exc).strip()
    if leader_text and leader_text not in err.message:
        err.message = f"{err.message} ({leader_text})"
    return err


__all__ = ["ATTEMPT_S", "KRAFT_VERSION", "PAUSE_S", "add_voter", "bootstrap_servers", "dynamic_quorum_problem", "parse_servers", "remove_voter",
           "require_dynamic_quorum", "stranded_brokers", "until_committed", "voter_endpoints"]
