"""Readiness probes: ZooKeeper four-letter words, broker registrations (kazoo), the cluster as
DescribeCluster answers it (kops' Connection). Heavy client imports happen inside the functions."""

from __future__ import annotations

import json
import logging
import socket
from contextlib import contextmanager
from dataclasses import dataclass


def zk_ruok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """ZooKeeper answers ``imok`` to ``ruok``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(b"ruok")
            s.shutdown(socket.SHUT_WR)
            return s.recv(16) == b"imok"
    except OSError:
        return False


@contextmanager
def zk_client(connect: str, timeout_s: float = 10.0, sasl: dict[str, str] | None = None):
    """A started kazoo client, stopped and closed afterwards. ``sasl``: kazoo ``sasl_options``
    (secured sandbox: DIGEST-MD5 username/password)."""
    from kazoo.client import KazooClient

    for name in ("kazoo", "kazoo.client", "kazoo.protocol.connection"):
        logging.getLogger(name).setLevel(logging.ERROR)
    kw = {"sasl_options": sasl} if sasl else {}
    zk = KazooClient(hosts=connect, timeout=min(timeout_s, 10.0), **kw)
    try:
        zk.start(timeout=timeout_s)
    except Exception as e:  # kazoo.handlers.threading.KazooTimeoutError
        try:
            zk.stop()
            zk.close()
        finally:
            pass
        from kops.errors import ClusterError

        raise ClusterError(f"ZooKeeper at {connect} did not answer within {timeout_s:.0f}s ({type(e).__name__})") from None
    try:
        yield zk
    finally:
        try:
            zk.stop()
        finally:
            zk.close()


@dataclass(frozen=True)
class Registration:
    broker_id: int
    timestamp_ms: int
    rack: str | None
    endpoints: tuple[str, ...]


def zk_registrations(zk) -> dict[int, Registration]:
    """Brokers registered under /brokers/ids (ephemeral znodes)."""
    from kazoo.exceptions import NoNodeError

    out: dict[int, Registration] = {}
    try:
        children = zk.get_children("/brokers/ids")
    except NoNodeError:
        return out
    for c in children:
        try:
            data, _ = zk.get(f"/brokers/ids/{c}")
        except NoNodeError:
            continue
        try:
            d = json.loads(data.decode() or "{}")
        except ValueError:
            d = {}
        out[int(c)] = Registration(
            broker_id=int(c),
            timestamp_ms=int(d.get("timestamp", 0) or 0),
            rack=d.get("rack"),
            endpoints=tuple(d.get("endpoints", ())),
        )
    return out


def zk_controller(zk) -> int | None:
    """The broker id in /controller, None when no controller is elected."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk.get("/controller")
    except NoNodeError:
        return None
    try:
        return int(json.loads(data.decode())["brokerid"])
    except (ValueError, KeyError, TypeError):
        return None


def kafka_cluster(bootstrap: str, timeout_s: float = 5.0, client_config=None) -> tuple[set[int], int | None]:
    """(live broker ids, controller id) as DescribeCluster answers them, asked the way kops asks
    (:meth:`kops.cluster.connection.Connection.describe_cluster`); ``client_config``: a
    :class:`kops.cluster.config.ClientConfig` (a secured sandbox's admin user).

    Raises :class:`kops.errors.ClusterError` when the cluster does not answer in time.
    """
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection

    with Connection(bootstrap, client_config or ClientConfig(), timeout_s=timeout_s) as conn:
        desc = conn.describe_cluster()
    return {n.id for n in desc.nodes}, desc.controller_id


def broker_views(bootstrap: str, brokers: list[int], timeout_s: float = 5.0,
                 client_config=None) -> dict[int, tuple[set[int], int | None]]:
    """Each of ``brokers``' own view of the cluster: (broker ids, controller id) as that broker
    answers a Metadata request sent to it (:meth:`kops.cluster.kp_client.KopsAdminClient.broker_view`),
    not the least loaded broker's. A client bootstraps from any broker of its list and takes
    the first answer for the cluster's; see :func:`kops.sandbox.readiness.lagging_brokers`."""
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection

    with Connection(bootstrap, client_config or ClientConfig(), timeout_s=timeout_s) as conn:
        kp = conn.kp_admin()
        return {b: kp.broker_view(b) for b in brokers}
