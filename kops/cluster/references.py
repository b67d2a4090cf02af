"""Bad input named completely: the problems of a plan or an election file found without the
cluster, with those only a topology shows added when one is at hand (topics, partitions and
brokers that do not exist), read without waiting for a cluster that does not answer at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kops.errors import BadInput, ClusterError


def refuse(problems, cluster_problems: Callable[[Any], list[str]], *, topology_file: str | None = None,
           bootstrap: str | None = None, connect: Callable[[], Any] | None = None):
    """Raise ``problems`` (a :class:`kops.inputs.Problems` found without the cluster: exit 2,
    nothing changed), with ``cluster_problems(topology)`` added when a topology is at hand: the
    ``topology_file`` snapshot, or the live cluster (``connect()`` makes the connection) when its
    ``bootstrap`` port accepts a connection within a second. That read changes nothing; a cluster
    that does not answer at once is not waited for, so bad input is refused as fast without a
    cluster as with one."""
    unchecked = "nothing was changed; not checked against the cluster ({}): topics, partitions and brokers"
    note = "nothing was changed"
    try:
        if topology_file:
            from kops.cluster.snapshot import load_topology

            problems.extend(cluster_problems(load_topology(topology_file)))
        elif bootstrap and connect is not None and answers_at_once(bootstrap):
            from kops.cluster.topology import ReadOptions, read_topology

            with connect() as conn:
                topo = read_topology(conn, ReadOptions(with_configs=False, with_sizes=False,
                                                       with_reassignments=False))
            problems.extend(cluster_problems(topo))
        else:
            note = unchecked.format("not reachable at once" if bootstrap else "no --bootstrap-server")
    except BadInput as e:  # the snapshot or the client configuration is bad too
        problems.add("", e.message)
        problems.extend(e.details)
    except ClusterError as e:
        note = unchecked.format(e)
    except Exception as e:  # noqa: BLE001 - a best-effort read: the bad input is the answer
        note = unchecked.format(f"{type(e).__name__}: {e}")
    raise problems.error(note)


def answers_at_once(bootstrap: str, timeout_s: float = 1.0) -> bool:
    """Does any bootstrap server accept a TCP connection within ``timeout_s``?"""
    import socket

    for hp in bootstrap.split(","):
        host, _, port = hp.strip().rpartition(":")
        if not port.isdigit() or not host:
            continue
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return True
        except (OSError, ValueError, OverflowError):
            continue
    return False


__all__ = ["answers_at_once", "refuse"]
