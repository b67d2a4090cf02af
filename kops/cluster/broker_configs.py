"""Brokers' configs as DescribeConfigs answers them: the one reader of broker configs (the
topology's throttle configs, the cluster's mode, the migration's checks and snapshot use it).

librdkafka accepts one BROKER resource per DescribeConfigs call (several fail together), so
each broker is asked in its own call; the calls go out together and are waited for one by one.
"""

from __future__ import annotations

from typing import Any

from kops.errors import KopsError


def send(conn, broker_ids: list[int], *, strict: bool = True) -> dict[int, Any]:
    """One DescribeConfigs per broker, sent: broker -> its future (collected by :func:`collect`).
    Not ``strict``: a broker whose request cannot be sent maps to None."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    futures: dict[int, Any] = {}
    for b in broker_ids:
        res = ConfigResource(ResourceType.BROKER, str(b))
        try:
            futures[b] = conn.admin().describe_configs([res], request_timeout=conn.timeout_s)[res]
        except KopsError:
            if strict:
                raise
            futures[b] = None
    return futures


def collect(conn, futures: dict[int, Any], *, strict: bool = True) -> dict[int, Any]:
    """broker -> its raw config entries (name -> ConfigEntry), each future waited for with
    ``conn.wait``. ``strict``: a broker that does not answer raises (its configs are never read
    as empty); otherwise it maps to None."""
    out: dict[int, Any] = {}
    for b, fut in futures.items():
        if fut is None:
            out[b] = None
            continue
        try:
            out[b] = conn.wait(fut, f"describe configs of broker {b}")
        except KopsError:
            if strict:
                raise
            out[b] = None
    return out


def read(conn, broker_ids: list[int], *, strict: bool = True) -> dict[int, Any]:
    """broker -> its raw config entries (:func:`send` then :func:`collect`)."""
    return collect(conn, send(conn, broker_ids, strict=strict), strict=strict)


__all__ = ["collect", "read", "send"]
