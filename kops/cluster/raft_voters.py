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


def add_voter(conn, voter_id: int, directory_id: str, endpoints: list[tuple[str, str, int]], *,
              timeout_s: float = 30.0) -> None:
    """AddRaftVoter for ``voter_id`` (an observer with that directory id, reachable at ``endpoints``:
    ``(listener name, host, port)``); returns once the new voter set is committed."""
    try:
        conn.kp_admin().add_raft_voter(voter_id, directory_id, endpoints, timeout_ms=int(timeout_s * 1000))
    except Exception as e:  # noqa: BLE001 - mapped to a kops error naming the request
        raise _mapped(conn, e, f"add controller {voter_id} (directory {directory_id}) to the KRaft quorum") from None


def remove_voter(conn, voter_id: int, directory_id: str, *, timeout_s: float = 30.0) -> None:
    """RemoveRaftVoter for ``voter_id`` with that directory id; returns once committed."""
    try:
        conn.kp_admin().remove_raft_voter(voter_id, directory_id, timeout_ms=int(timeout_s * 1000))
    except Exception as e:  # noqa: BLE001
        raise _mapped(conn, e, f"remove controller {voter_id} (directory {directory_id}) from the KRaft quorum") from None


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
    err = conn.map_error(exc, what)
    leader_text = str(exc).strip()
    if leader_text and leader_text not in err.message:
        err.message = f"{err.message} ({leader_text})"
    return err


__all__ = ["KRAFT_VERSION", "add_voter", "bootstrap_servers", "dynamic_quorum_problem", "parse_servers", "remove_voter",
           "require_dynamic_quorum", "stranded_brokers", "voter_endpoints"]
