"""How much each partition takes in: its bytes-in rate, sampled from the cluster itself.

No metrics pipeline: at both ends of a window kops reads every partition's log start and end
offsets (ListOffsets, earliest and latest) and its size on disk (DescribeLogDirs, the largest
replica). A partition's rate is the growth of its size over the window when its log start did not
move and its size did not shrink (nothing deleted or compacted away meanwhile: the exact figure,
compressed as it is stored, replicated and fetched); otherwise the messages written in the window
(end offsets) times the partition's average message size on disk. The window is measured, not
assumed: the time between the two readings' midpoints.

:func:`estimate` is pure (tested without a cluster); :func:`sample_rates` does the reading.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from kops.model import LoadSample, TopicPartition, Topology

#: below this window a burst dominates the figure: said in the sample's notes
SHORT_WINDOW_S = 30.0


@dataclass(frozen=True)
class Reading:
    """One partition at one moment: log start / end offsets and size on disk (None: unknown)."""

    start: int | None
    end: int | None
    size: int | None


def estimate(first: Mapping[TopicPartition, Reading], second: Mapping[TopicPartition, Reading],
             seconds: float, *, started_at: str | None = None) -> tuple[dict[TopicPartition, float], LoadSample]:
    """Bytes-in per second of each partition read at both ends of a ``seconds`` window, and how
    they were obtained (:class:`LoadSample`)."""
    if seconds <= 0:
        raise ValueError("the window must be longer than 0 s")
    rates: dict[TopicPartition, float] = {}
    by_size = by_offsets = unmeasured = 0
    shrank: list[str] = []
    for tp in sorted(set(first) | set(second)):
        a, b = first.get(tp), second.get(tp)
        if a is None or b is None or a.end is None or b.end is None or b.end < a.end:
            unmeasured += 1
            continue
        if (a.size is not None and b.size is not None and b.size >= a.size
                and a.start is not None and a.start == b.start):
            rates[tp] = round((b.size - a.size) / seconds, 1)
            by_size += 1
            continue
        kept = (b.end - b.start) if b.start is not None else None
        if b.size is not None and kept is not None and kept > 0:
            rates[tp] = round((b.end - a.end) * (b.size / kept) / seconds, 1)
            by_offsets += 1
            shrank.append(f"{tp[0]}-{tp[1]}")
        elif b.end == a.end:
            rates[tp] = 0.0  # nothing written (an empty log has no average message size)
            by_size += 1
        else:
            unmeasured += 1
    notes = [f"rates over {seconds:.1f} s from end offsets and sizes on disk (as stored: compressed)"]
    if seconds < SHORT_WINDOW_S:
        notes.append(f"a window under {SHORT_WINDOW_S:.0f} s: a burst counts as the steady rate "
                     "(sample 60 s or more for planning)")
    if shrank:
        notes.append(f"{len(shrank)} partition(s) lost data in the window (retention or compaction ran): "
                     f"their rate is messages written x average message size, e.g. {', '.join(shrank[:3])}")
    if unmeasured:
        notes.append(f"{unmeasured} partition(s) without a rate (offline, size or offsets not answered)")
    sample = LoadSample(seconds=round(seconds, 3), started_at=started_at, partitions=len(rates),
                        by_size=by_size, by_offsets=by_offsets, unmeasured=unmeasured, notes=tuple(notes))
    return rates, sample


def read_point(conn, topo: Topology, topics: Iterable[str] | None = None) -> dict[TopicPartition, Reading]:
    """Every partition's (of ``topics``, default all) log start / end offsets and size now."""
    import confluent_kafka
    from confluent_kafka.admin import OffsetSpec

    from kops.cluster.topology import log_dir_usage

    wanted = set(topics) if topics is not None else None
    parts = [p for p in topo.partitions() if (wanted is None or p.topic in wanted)]
    admin = conn.admin()
    offsets: dict[str, dict[TopicPartition, int]] = {}
    for name, spec in (("start", OffsetSpec.earliest()), ("end", OffsetSpec.latest())):
        asked = {confluent_kafka.TopicPartition(p.topic, p.partition): spec for p in parts if not p.offline}
        futures = admin.list_offsets(asked, request_timeout=conn.timeout_s) if parts else {}
        got: dict[TopicPartition, int] = {}
        for tp, fut in futures.items():
            try:
                got[(tp.topic, tp.partition)] = int(conn.wait(fut, f"list offsets of {tp.topic}-{tp.partition}").offset)
            except Exception:  # noqa: BLE001 - one partition not answering leaves it unmeasured
                continue
        offsets[name] = got
    usage = log_dir_usage(conn, topo.alive_broker_ids, {p.topic for p in parts}) if parts else None
    sizes = usage.partition_sizes() if usage is not None else {}
    return {p.tp: Reading(offsets["start"].get(p.tp), offsets["end"].get(p.tp), sizes.get(p.tp)) for p in parts}


def sample_rates(conn, topo: Topology, seconds: float, topics: Iterable[str] | None = None,
                 *, sleep=time.sleep) -> Topology:
    """``topo`` with each partition's ``bytes_in_per_s`` measured over at least ``seconds``: the
    window runs from the middle of the first read to the middle of the second (the rates use
    the window measured), and the second read starts once the first read's middle is
    ``seconds`` behind — a slow first read (cold connections) does not shorten it."""
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    names = list(topics) if topics is not None else None
    t0 = time.monotonic()
    first = read_point(conn, topo, names)
    t1 = time.monotonic()
    sleep(max(0.0, seconds - (t1 - t0) / 2))
    t2 = time.monotonic()
    second = read_point(conn, topo, names)
    t3 = time.monotonic()
    window = ((t2 + t3) - (t0 + t1)) / 2
    rates, sample = estimate(first, second, window, started_at=started_at)
    return topo.with_rates(rates, sample)
