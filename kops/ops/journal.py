"""The execution journal: what a reassignment kops started is, and how far it got.

Each execution records its plan (as moves: original and target replicas), the options it ran
with, the throttles kops set with the values that were there before, and per-partition
progress. It is stored

- in the cluster, so that it outlives the kops process and the host it ran on: always in the
  compacted topic ``__kops_journal`` (key ``execution/<id>``; works on KRaft clusters too), and
  also under ``/kops/reassign/executions/<id>`` when ``--zookeeper`` is given;
- and locally, in ``$KOPS_HOME/journal/<cluster-id>/<id>.json`` (``KOPS_HOME`` defaults to
  ``~/.kops``), which is also the fallback when the cluster copy cannot be read.

The cluster-wide lock (one execution at a time) is in :mod:`kops.ops.lock`.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import socket
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.ops.throttle import ThrottleState
from kops.ops.move import Move

JOURNAL_TOPIC = "__kops_journal"
ZK_ROOT = "/kops/reassign"

# execution states
RUNNING = "running"  # moves being started/driven (or interrupted: see owner liveness)
HALTED = "halted"  # stopped starting new waves (health gate); in-flight moves continue
COMPLETE = "complete"
CANCELLED = "cancelled"
FAILED = "failed"  # ended with partitions not at their target (mismatch / rejected)
FINISHED_STATES = (COMPLETE, CANCELLED, FAILED)

# per-partition states
PENDING = "pending"  # not submitted yet (a later wave)
IN_FLIGHT = "in_flight"
DONE = "done"
REJECTED = "rejected"  # the controller refused it
ROLLED_BACK = "rolled_back"  # cancelled while in flight
DROPPED = "dropped"  # cancelled before it was submitted
MISMATCH = "mismatch"  # not reassigning any more, but replicas differ from the target


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_execution_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def owner_identity() -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except Exception:  # pragma: no cover
        user = "unknown"
    return {"host": socket.gethostname(), "pid": os.getpid(), "user": user}


@dataclass
class Journal:
    id: str
    cluster_id: str
    moves: list[Move]
    options: dict[str, Any] = field(default_factory=dict)
    state: str = RUNNING
    owner: dict[str, Any] = field(default_factory=owner_identity)
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    heartbeat: float = field(default_factory=time.time)
    progress: dict[str, str] = field(default_factory=dict)  # "topic-p" -> per-partition state
    submitted_at: dict[str, float] = field(default_factory=dict)
    throttles: ThrottleState = field(default_factory=ThrottleState)
    waves: int = 0
    events: list[str] = field(default_factory=list)

    # -- helpers ------------------------------------------------------------------------
    def __post_init__(self) -> None:
        for m in self.moves:
            self.progress.setdefault(m.name, DONE if m.noop else PENDING)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    def moves_in(self, *states: str) -> list[Move]:
        return [m for m in self.moves if self.progress.get(m.name) in states]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.progress.values():
            out[s] = out.get(s, 0) + 1
        return dict(sorted(out.items()))

    def event(self, text: str) -> None:
        self.events.append(f"{now_iso()} {text}")
        del self.events[:-200]

    def touch(self) -> None:
        self.updated_at = now_iso()
        self.heartbeat = time.time()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "kops-reassignment",
            "version": 1,
            "id": self.id,
            "cluster_id": self.cluster_id,
            "state": self.state,
            "owner": self.owner,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "heartbeat": self.heartbeat,
            "options": self.options,
            "waves": self.waves,
            "moves": [m.to_dict() for m in self.moves],
            "progress": dict(self.progress),
            "submitted_at": dict(self.submitted_at),
            "throttles": self.throttles.to_dict(),
            "events": list(self.events),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Journal:
        j = cls(
            id=d["id"],
            cluster_id=d["cluster_id"],
            moves=[Move.from_dict(m) for m in d["moves"]],
            options=d.get("options", {}),
            state=d.get("state", RUNNING),
            owner=d.get("owner", {}),
            created_at=d.get("created_at", ""),
            updated_at=d.get("updated_at", ""),
            heartbeat=float(d.get("heartbeat", 0)),
            progress=dict(d.get("progress", {})),
            submitted_at={k: float(v) for k, v in d.get("submitted_at", {}).items()},
            throttles=ThrottleState.from_dict(d.get("throttles")),
            waves=int(d.get("waves", 0)),
            events=list(d.get("events", [])),
        )
        return j

    def rollback_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "partitions": [
                {"topic": m.topic, "partition": m.partition, "replicas": list(m.original),
                 "log_dirs": ["any"] * len(m.original)}
                for m in self.moves
            ],
        }

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "owner": self.owner,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "partitions": len(self.moves),
            "progress": self.counts(),
            "throttle": self.options.get("throttle"),
            **({"throttle_auto": self.options["throttle_auto"],
                "throttle_last_change": next((e for e in reversed(self.events) if " throttle auto: " in e), None)}
               if self.options.get("throttle_auto") else {}),
        }


def encode(doc: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"))


def decode(data: bytes) -> dict[str, Any]:
    try:
        data = zlib.decompress(data)
    except zlib.error:
        pass  # written uncompressed (by hand)
    return json.loads(data.decode("utf-8"))


# ------------------------------------------------------------------------------------------
# stores
# ------------------------------------------------------------------------------------------


from kops.paths import kops_home  # noqa: E402  (re-exported: journal users call J.kops_home)


class LocalStore:
    """``$KOPS_HOME/journal/<cluster-id>/<id>.json`` (atomic replace)."""

    def __init__(self, cluster_id: str, root: Path | None = None):
        self.dir = (root or kops_home() / "journal") / _safe(cluster_id)

    def put(self, doc: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{doc['id']}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, path)

    def get(self, execution_id: str) -> dict[str, Any] | None:
        from kops.inputs.files import read_json

        path = self.dir / f"{execution_id}.json"
        if not path.exists():
            return None
        return read_json(str(path), what="local journal copy")

    def all(self) -> list[dict[str, Any]]:
        if not self.dir.exists():
            return []
        out = []
        for p in sorted(self.dir.glob("*.json")):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue
        return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "unknown"


class ZkStore:
    """Journal znodes under ``/kops/reassign/executions`` (zlib-compressed JSON)."""

    def __init__(self, conn):
        self.conn = conn

    def put(self, doc: dict[str, Any]) -> None:
        from kazoo.exceptions import NoNodeError

        zk = self.conn.zk()
        path = f"{ZK_ROOT}/executions/{doc['id']}"
        data = encode(doc)
        try:
            zk.retry(zk.set, path, data)
        except NoNodeError:
            zk.retry(zk.create, path, data, makepath=True)

    def get(self, execution_id: str) -> dict[str, Any] | None:
        from kazoo.exceptions import NoNodeError

        zk = self.conn.zk()
        try:
            data, _ = zk.retry(zk.get, f"{ZK_ROOT}/executions/{execution_id}")
        except NoNodeError:
            return None
        return decode(data)

    def all(self) -> list[dict[str, Any]]:
        from kazoo.exceptions import NoNodeError

        zk = self.conn.zk()
        try:
            ids = zk.retry(zk.get_children, f"{ZK_ROOT}/executions")
        except NoNodeError:
            return []
        out = []
        for i in sorted(ids):
            d = self.get(i)
            if d is not None:
                out.append(d)
        return out


class TopicStore:
    """Records in the compacted topic ``__kops_journal`` (one partition; last value per key)."""

    def __init__(self, conn, topic: str = JOURNAL_TOPIC):
        self.conn = conn
        self.topic = topic
        self._ensured = False

    # -- plumbing ---------------------------------------------------------------------------
    def ensure_topic(self) -> None:
        if self._ensured:
            return
        from confluent_kafka.admin import NewTopic

        md, exists = self.conn.topic_metadata(self.topic, f"look for the journal topic {self.topic}")
        if not exists:
            alive = len(md.brokers)
            rf = max(1, min(3, alive))
            new = NewTopic(self.topic, 1, rf, config={
                "cleanup.policy": "compact",
                "min.insync.replicas": "1" if rf < 3 else "2",
                "max.message.bytes": str(8 * 1024 * 1024),
            })
            try:
                self.conn.to_controller(
                    lambda admin: admin.create_topics([new], request_timeout=self.conn.timeout_s)[self.topic],
                    f"create topic {self.topic}")
            except ClusterError as e:
                if "TOPIC_ALREADY_EXISTS" not in e.message.upper():
                    raise
            _wait_for_leader(self.conn, self.topic)
        self._ensured = True

    def _producer(self):
        p = getattr(self.conn, "_kops_journal_producer", None)
        if p is None:
            p = self._new_producer()
            try:
                self.conn._kops_journal_producer = p
            except AttributeError:  # pragma: no cover
                pass
        return p

    def _new_producer(self):
        from kops.cluster.connection import new_producer

        # a journal topic deleted under a running kops fails the write (never re-created by the
        # broker with its defaults: not compacted, perhaps RF 1)
        return new_producer(self.conn, acks="all", enable_idempotence=True, message_max_bytes=8 * 1024 * 1024,
                            message_timeout_ms=int(max(self.conn.timeout_s, 5) * 1000))

    def put_raw(self, key: str, value: bytes | None) -> None:
        self._cache().pop(self.topic, None)
        self.ensure_topic()
        producer = self._producer()
        errors: list[str] = []

        def delivered(err, msg):
            if err is not None:
                errors.append(str(err))

        producer.produce(self.topic, key=key.encode(), value=value, on_delivery=delivered)
        remaining = producer.flush(self.conn.timeout_s + 2)
        if remaining:
            raise ClusterError(f"journal: no acknowledgement from topic {self.topic} within {self.conn.timeout_s:.0f} s")
        if errors:
            raise ClusterError(f"journal: write to topic {self.topic} failed: {errors[0]}")

    def _cache(self) -> dict:
        # one read per command: shared by every TopicStore of this connection, dropped on writes
        cache = getattr(self.conn, "_kops_journal_cache", None)
        if cache is None:
            cache = {}
            try:
                self.conn._kops_journal_cache = cache
            except AttributeError:  # pragma: no cover - slotted connection objects
                pass
        return cache

    def read_all(self) -> dict[str, bytes | None]:
        """Every key's last value (None for a tombstone)."""
        cache = self._cache()
        if self.topic not in cache:
            cache[self.topic] = self._read_all()
        return dict(cache[self.topic])

    def _read_all(self) -> dict[str, bytes | None]:
        from kops.cluster.partition_reader import import_in_background, read_to_end

        import_in_background()  # beside the metadata requests below
        if not self.conn.topic_metadata(self.topic, f"look for the journal topic {self.topic}")[1]:
            return {}
        # another kops may have created the topic a moment ago: its partition needs a leader
        # before it can be read (a new client's metadata can lag the Admin API's, too)
        _wait_for_leader(self.conn, self.topic)
        return {key.decode(): value for key, value in read_to_end(self.conn, self.topic) if key is not None}

    # -- store interface ------------------------------------------------------------------
    def put(self, doc: dict[str, Any]) -> None:
        self.put_raw(f"execution/{doc['id']}", encode(doc))

    def get(self, execution_id: str) -> dict[str, Any] | None:
        v = self.read_all().get(f"execution/{execution_id}")
        return decode(v) if v else None

    def all(self) -> list[dict[str, Any]]:
        return [decode(v) for k, v in sorted(self.read_all().items()) if k.startswith("execution/") and v]


def _wait_for_leader(conn, topic: str, timeout: float = 15.0) -> None:
    """Until every partition of ``topic`` has a leader (a topic just created, by this kops or
    another), at most ``timeout`` seconds; the read or write that follows reports what is wrong."""
    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

    def led() -> bool:
        md = conn.metadata(topic, what=f"read metadata of {topic}").topics.get(topic)
        return bool(md is not None and md.error is None and md.partitions
                    and all(p.leader >= 0 for p in md.partitions.values()))

    Retrying(retry=retry_if_result(lambda ok: not ok), stop=stop_after_delay(timeout), wait=wait_fixed(0.2),
             retry_error_callback=lambda _state: False)(led)


class JournalStore:
    """The cluster copies plus the local copy.

    The topic ``__kops_journal`` is always written (every client can read it, with or without
    ``--zookeeper``, on ZooKeeper and KRaft clusters); with ``--zookeeper`` the znode is a second
    cluster copy. Reading merges them (the most recent heartbeat wins)."""

    def __init__(self, conn, cluster_id: str, *, local_root: Path | None = None):
        self.conn = conn
        self.cluster_id = cluster_id
        self.local = LocalStore(cluster_id, local_root)
        self.remotes: list = [TopicStore(conn)]
        if getattr(conn, "zookeeper", None):
            self.remotes.append(ZkStore(conn))
        self.warnings: list[str] = []

    @property
    def remote(self):  # the primary cluster copy
        return self.remotes[0]

    @remote.setter
    def remote(self, value) -> None:
        self.remotes = [value]

    @property
    def where(self) -> str:
        out = [f"topic {JOURNAL_TOPIC}"]
        if len(self.remotes) > 1:
            out.append(f"ZooKeeper {ZK_ROOT}/executions")
        return " and ".join(out)

    def save(self, journal: Journal) -> None:
        journal.touch()
        doc = journal.to_dict()
        self.local.put(doc)
        for r in self.remotes:
            r.put(doc)

    @staticmethod
    def _newest(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
        if a is None or b is None:
            return a or b
        return a if float(a.get("heartbeat", 0)) >= float(b.get("heartbeat", 0)) else b

    def load(self, execution_id: str) -> Journal | None:
        doc = None
        for r in self.remotes:
            try:
                doc = self._newest(doc, r.get(execution_id))
            except ClusterError as e:
                self.warnings.append(f"journal in the cluster unreadable ({e.message}); using the other copies")
        if doc is None:
            doc = self.local.get(execution_id)
            try:
                return Journal.from_dict(doc) if doc else None
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise BadInput(
                    f"local journal copy {self.local.dir / f'{execution_id}.json'} is damaged "
                    f"({type(e).__name__}: {e}) and the cluster holds no copy of execution {execution_id}: "
                    "restore the file from a backup, or move it aside") from None
        return Journal.from_dict(doc) if doc else None

    def all(self) -> list[Journal]:
        docs: dict[str, dict[str, Any]] = {d["id"]: d for d in self.local.all()}
        remote: dict[str, dict[str, Any]] = {}
        for r in self.remotes:
            try:
                for d in r.all():
                    remote[d["id"]] = self._newest(remote.get(d["id"]), d)
            except ClusterError as e:
                self.warnings.append(f"journal in the cluster unreadable ({e.message}); using the other copies")
        docs.update(remote)  # the cluster copy wins: it is what the last owner wrote
        return [Journal.from_dict(d) for _, d in sorted(docs.items())]

    def unfinished(self) -> list[Journal]:
        return [j for j in self.all() if not j.finished]
