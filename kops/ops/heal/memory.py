"""Heal's memory, in the cluster: one record per anomaly in kops' compacted journal topic
``__kops_journal`` (key ``heal/anomaly/<anomaly key>``), next to the executions and the cron
pause, so that cron on any host sees the same first-seen times and a restarted host forgets
nothing; on ZooKeeper and KRaft clusters alike. Also kept there: the racks brokers had while
registered (``heal/brokers``: a dead broker's rack is gone from the metadata) and the last run
(``heal/last-run``).

Records are JSON; each run writes only the records that changed. The last-run record changes
with every run (its time), so it is written when the run's outcome differs from the one
recorded (status, exit code, summary apart from its duration), when other records are written
anyway, or when the recorded one is older than :data:`LAST_RUN_EVERY_S` (a heartbeat): a quiet
cluster costs no write at all on most runs -- an acknowledged write to the journal topic took
1.2 s of a 3 s run on a 10,000-partition cluster (the Prometheus metrics carry every run's time).
An anomaly that ended (fixed or cleared) is kept :data:`HISTORY_S` for ``heal status``, then
deleted (a tombstone).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kops.ops.heal.anomalies import Anomaly

PREFIX = "heal/anomaly/"
ROSTER_KEY = "heal/brokers"
LAST_RUN_KEY = "heal/last-run"
#: how long an ended anomaly stays in the memory (history for ``heal status``)
HISTORY_S = 7 * 24 * 3600.0
#: the last-run record is written at least this often while runs keep the same outcome
LAST_RUN_EVERY_S = 3600.0


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class Memory:
    """What heal remembers (as read), and the raw records it was read from."""

    anomalies: dict[str, Anomaly] = field(default_factory=dict)
    racks: dict[int, str | None] = field(default_factory=dict)
    last_run: dict[str, Any] | None = None
    raw: dict[str, bytes] = field(default_factory=dict)
    #: records that could not be read (written by something else): named, ignored
    unreadable: list[str] = field(default_factory=list)


def parse(records: Mapping[str, bytes | None]) -> Memory:
    """The memory from the journal topic's records (every key's last value; pure)."""
    mem = Memory()
    for key, value in sorted(records.items()):
        if not value or not key.startswith("heal/"):
            continue
        mem.raw[key] = value
        try:
            doc = json.loads(value)
            if key.startswith(PREFIX):
                a = Anomaly.from_record(doc)
                mem.anomalies[a.key] = a
            elif key == ROSTER_KEY:
                mem.racks = {int(b): r for b, r in doc.get("racks", {}).items()}
            elif key == LAST_RUN_KEY:
                mem.last_run = dict(doc)
        except (ValueError, KeyError, TypeError, AttributeError):
            mem.unreadable.append(key)
    return mem


def records(anomalies: Iterable[Anomaly], racks: Mapping[int, str | None], last_run: Mapping[str, Any] | None,
            now: float) -> dict[str, bytes | None]:
    """The records to keep (pure): each anomaly (an ended one until :data:`HISTORY_S` after its
    end; then None: deleted), the racks, the last run."""
    out: dict[str, bytes | None] = {}
    for a in anomalies:
        old = a.ended_at is not None and now - a.ended_at > HISTORY_S
        out[PREFIX + a.key] = None if old else _dump(a.to_record())
    out[ROSTER_KEY] = _dump({"racks": {str(b): r for b, r in sorted(racks.items())}})
    if last_run is not None:
        out[LAST_RUN_KEY] = _dump(dict(last_run))
    return out


def changes(before: Memory, after: Mapping[str, bytes | None]) -> dict[str, bytes | None]:
    """Only what differs from what was read (pure): a record unchanged is not written again, a
    deletion of a record that is not there is not sent, and a last run like the one recorded is
    not written alone until the recorded one is :data:`LAST_RUN_EVERY_S` old."""
    out = {k: v for k, v in sorted(after.items()) if before.raw.get(k) != v and not (v is None and k not in before.raw)}
    last = out.get(LAST_RUN_KEY)
    if len(out) == 1 and last is not None and before.last_run is not None:
        new = json.loads(last)
        if _outcome(new) == _outcome(before.last_run) and \
                _at(new) - _at(before.last_run) < LAST_RUN_EVERY_S:
            return {}
    return out


def _at(run: Mapping[str, Any]) -> float:
    """When a run was (its ISO time; unreadable: the epoch, so that the next run is written)."""
    try:
        return datetime.fromisoformat(run["at"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return 0.0


def _outcome(run: Mapping[str, Any]) -> tuple:
    """A run's outcome: its status, exit code and summary without its duration (``; 1.4 s``)."""
    summary = str(run.get("summary", ""))
    return run.get("status"), run.get("exit_code"), summary.rsplit("; ", 1)[0]


def load(conn) -> Memory:
    """Heal's records from the cluster (none yet: an empty memory)."""
    from kops.ops.journal import TopicStore

    try:
        return parse(TopicStore(conn).read_all())
    except Exception as e:  # noqa: BLE001 - librdkafka's exceptions, named by the connection
        raise conn.map_error(e, "read heal's memory (topic __kops_journal)") from None


def save(conn, writes: Mapping[str, bytes | None], mem: Memory | None = None) -> int:
    """Write these records (:func:`changes`); returns how many. ``mem``: the memory they were
    computed against, updated with each record written (a later :func:`changes` is then only
    what changed since). The first write that fails raises (:class:`~kops.errors.ClusterError`):
    the others are not tried (each would wait as long)."""
    from kops.ops.journal import TopicStore

    store = TopicStore(conn)
    for key, value in writes.items():
        store.put_raw(key, value)
        if mem is not None:
            if value is None:
                mem.raw.pop(key, None)
            else:
                mem.raw[key] = value
    return len(writes)
