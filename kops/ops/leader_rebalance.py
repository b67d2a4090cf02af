"""Leadership orchestrations: the cron leader rebalance, and demote / restore for maintenance.

``rebalance``
    Computes the leader imbalance per broker exactly as the ZooKeeper-mode controller does for
    ``leader.imbalance.per.broker.percentage`` (:mod:`kops.placement.leadership`) and runs
    preferred elections for the partitions the controller would elect (preferred replica live
    and in the ISR, on brokers over the threshold), in batches. It never runs twice at once
    (:class:`RunLock`), steps aside while a reassignment is in progress unless ``force``, and can
    write Prometheus textfile metrics.

``demote`` / ``restore``
    Move leadership off brokers or a rack without moving data -- reorder each affected replica
    list so the broker is not first, then elect -- and give it back afterwards. The order each
    partition had before the first demotion is kept in a small state record
    (:class:`DemotionStore`, ``$KOPS_HOME/leadership/<cluster id>.json``, default
    ``~/.kops``), written *before* the first reorder is submitted so that a killed
    run can always be restored.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kops.cluster.connection import Connection
from kops.errors import EXIT_NOT_DONE, EXIT_OK, BadInput, ClusterError, KopsError
from kops.model import Topology, TopicPartition
from kops.ops import metrics
from kops.ops.elections import (
    DEFAULT_BATCH_SIZE,
    ElectionResult,
    run_elections,
    submit_reorder,
    wait_reordered,
)
from kops.ops.metrics import GaugeSpec
from kops.ops.progress import poll_while_progressing
from kops.placement.leadership import (
    DEFAULT_IMBALANCE_PCT,
    Blocked,
    DemotionRecord,
    ImbalanceReport,
    LeadershipMove,
    Unmovable,
    leader_imbalance,
    plan_demote,
    plan_restore,
    tp_str,
)

LOCK_ZNODE = "/kops/locks/leadership"


def state_dir() -> Path:
    """``$KOPS_HOME`` (default ``~/.kops``); leadership files live in its ``leadership/``."""
    from kops.paths import kops_home

    return kops_home()


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:120] or "cluster"


def cluster_key(conn: Connection) -> str:
    """The cluster id (stable across bootstrap strings); the bootstrap string if it has none."""
    return _safe(conn.cluster_id() or conn.bootstrap_server or "cluster")


# ------------------------------------------------------------------------------------------
# Never two runs at once
# ------------------------------------------------------------------------------------------


class LockHeld(KopsError):
    """Another kops leadership run holds the lock (exit 3: not done, try again later)."""

    exit_code = EXIT_NOT_DONE


class NotDone(KopsError):
    exit_code = EXIT_NOT_DONE


class RunLock:
    """An exclusive lock per cluster: a local ``fcntl`` lock file, plus -- when a ZooKeeper
    connect string is given -- an ephemeral znode ``/kops/locks/leadership`` that guards against
    runs on other hosts and vanishes by itself when its holder dies.
    """

    def __init__(self, conn: Connection, key: str, *, what: str, lock_dir: Path | None = None):
        self.conn = conn
        self.what = what
        self.path = (lock_dir or state_dir() / "locks") / f"leadership-{key}.lock"
        self._fd: int | None = None
        self._znode: str | None = None

    def _holder(self) -> str:
        try:
            return self.path.read_text(errors="replace").strip() or "unknown"
        except OSError:
            return "unknown"

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LockHeld(f"another kops leadership run holds {self.path} ({self._holder()})") from None
        me = f"pid {os.getpid()} on {socket.gethostname()}, {self.what}, since {_now()}"
        os.ftruncate(fd, 0)
        os.write(fd, me.encode())
        self._fd = fd
        if self.conn.zookeeper:
            try:
                self._zk_acquire(me)
            except BaseException:
                self.release()
                raise
        return self

    def _zk_acquire(self, me: str) -> None:
        from kazoo.exceptions import NodeExistsError

        zk = self.conn.zk()
        try:
            zk.create(LOCK_ZNODE, me.encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            try:
                data, _ = zk.get(LOCK_ZNODE)
                holder = data.decode(errors="replace")
            except Exception:
                holder = "unknown"
            raise LockHeld(f"another kops leadership run holds ZooKeeper {LOCK_ZNODE} ({holder})") from None
        self._znode = LOCK_ZNODE

    def release(self) -> None:
        if self._znode is not None:
            try:
                self.conn.zk().delete(self._znode)
            except Exception:
                pass  # ephemeral: it goes with the session anyway
            self._znode = None
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def kops_execution_in_progress(conn: Connection) -> str | None:
    """The cluster-side guard shared with the reassignment engine: who holds its cluster lock
    (``kops.ops.lock.ClusterLock``: ZooKeeper ``/kops/reassign/lock`` or the ``__kops_lock``
    topic), or None when no kops execution is in progress."""
    try:
        from kops.ops.lock import ClusterLock, describe_holder
    except ImportError:  # pragma: no cover - the engine is optional
        return None
    lock = ClusterLock(conn)
    if not lock.zk_mode and not lock.topic_exists():
        return None
    try:
        # a lock topic whose holder record is gone is an execution that just ended (the topic's
        # deletion completes asynchronously): not one in progress
        h = lock.settled_holder()
    except ClusterError:
        return "unknown holder"
    return None if h is None else describe_holder(h)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------
# The cron job
# ------------------------------------------------------------------------------------------

BALANCED, ELECTED, NOT_REACHED, STEPPED_ASIDE, DRY_RUN = (
    "balanced", "elected", "not_reached", "stepped_aside", "dry_run")


@dataclass
class RebalanceResult:
    status: str
    exit_code: int
    threshold_pct: float
    before: ImbalanceReport | None = None
    after: ImbalanceReport | None = None
    planned: list[TopicPartition] = field(default_factory=list)
    #: blocked partitions whose preferred replica is live and only out of the ISR as read: the
    #: controller is asked too (its ISR may be ahead of the metadata kops read)
    asked: list[TopicPartition] = field(default_factory=list)
    elections: ElectionResult | None = None
    #: partitions of over-threshold brokers not electable, left after this run's elections
    blocked: list[Blocked] = field(default_factory=list)
    #: of ``asked``, those the controller refused (PREFERRED_LEADER_NOT_AVAILABLE): still blocked
    refused: int = 0
    unreachable: list[int] = field(default_factory=list)  # brokers still over the threshold
    capped: int = 0  # candidates left out by max_elections
    reason: str | None = None
    duration_s: float = 0.0
    dry_run: bool = False
    #: what a topic filter left out (:meth:`kops.placement.topic_filter.TopicFilter.left_out`)
    topics_left_out: dict[str, Any] | None = None

    def summary(self) -> str:
        """The one-line summary cron mails or logs."""
        d = f"{self.duration_s:.1f} s"
        left = self.topics_left_out
        if left and left["topics"]:  # the measure is that of the topics kept: say so on the line
            d = f"{left['topics']} topics left out by {left['filter']}; {d}"
        if self.status == STEPPED_ASIDE:
            return f"leader rebalance: stepped aside: {self.reason}"
        b = self.before
        worst = max(b.brokers, key=lambda x: x.ratio, default=None) if b else None
        worst_s = (f"max imbalance {worst.percent:.1f}% on broker {worst.broker}" if worst else "no partitions")
        thr = f"threshold {self.threshold_pct:g}%"
        if self.status == BALANCED:
            return f"leader rebalance: balanced ({worst_s}, {thr}); no elections; {d}"
        over = ",".join(str(x.broker) for x in b.over_threshold) if b else ""
        asked = (f" (and ask the controller for {len(self.asked)} whose preferred replica is out of the ISR "
                 "as read)" if self.asked else "")
        if self.dry_run:
            tail = "; balance cannot be reached" if self.unreachable else ""
            return (f"leader rebalance (dry run): would elect {len(self.planned)} partitions{asked} on brokers "
                    f"{over} ({worst_s}, {thr}){tail}; {d}")
        e = self.elections.counts() if self.elections else {"elected": 0, "not_needed": 0, "failed": 0}
        sent = len(self.planned) + len(self.asked)
        text = f"leader rebalance: elected {e['elected']} of {sent} partitions on brokers {over} ({worst_s}, {thr})"
        if e["not_needed"]:
            text += f", {e['not_needed']} not needed"
            if self.elections.resent:
                text += f" ({len(self.elections.resent)} requests sent again: their first may have elected them)"
        if e["failed"] - self.refused:
            text += f", {e['failed'] - self.refused} failed"
        if self.unreachable:
            text += f"; balance not reached on brokers {','.join(map(str, self.unreachable))}"
            if self.blocked:
                x = self.blocked[0]
                text += f" ({len(self.blocked)} partitions blocked, e.g. {tp_str(x.tp)}: {x.reason})"
        return text + f"; {d}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status,
            "exit_code": self.exit_code,
            "dry_run": self.dry_run,
            "threshold_percent": self.threshold_pct,
            "summary": self.summary(),
            "duration_s": round(self.duration_s, 3),
        }
        if self.reason:
            d["reason"] = self.reason
        if self.topics_left_out is not None:
            d["topics_left_out"] = self.topics_left_out
        if self.before is not None:
            d["before"] = self.before.to_dict()
            d["planned_elections"] = len(self.planned)
            d["capped_by_max_elections"] = self.capped
            d["blocked"] = [x.to_dict() for x in self.blocked]
            d["asked_out_of_isr"] = len(self.asked)
        if self.elections is not None:
            d["elections"] = self.elections.to_dict(details=True)
        elif self.planned or self.asked:
            d["would_elect"] = [{"topic": t, "partition": p} for t, p in self.planned]
            d["would_ask"] = [{"topic": t, "partition": p} for t, p in self.asked]
        if self.after is not None:
            d["after"] = self.after.to_dict()
        d["unreachable_brokers"] = self.unreachable
        return d


def _read(conn: Connection, topics: Iterable[str] | None = None, *, reassignments: bool = True) -> Topology:
    """The topology leadership needs: metadata, brokers and racks, and (unless the caller has
    just read them) the reassignments in progress -- no configs, no sizes."""
    from kops.cluster.topology import ReadOptions, read_topology

    return read_topology(conn, ReadOptions(
        with_configs=False, with_sizes=False, with_reassignments=reassignments,
        topics=tuple(topics) if topics is not None else None))


def rebalance(
    conn: Connection,
    *,
    threshold_pct: float = DEFAULT_IMBALANCE_PCT,
    dry_run: bool = False,
    max_elections: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_wait_s: float = 0.0,
    force: bool = False,
    metrics_file: str | None = None,
    topology: Topology | None = None,
    lock_dir: Path | None = None,
    on_batch: Callable[[int, int, ElectionResult], None] | None = None,
    window=None,
    now: datetime | None = None,
    topics=None,
) -> RebalanceResult:
    """One cron run. ``topology`` (a snapshot) implies a dry run with no cluster access.
    ``window``: maintenance windows (:mod:`kops.inputs.window`) judged at ``now`` (default: the
    clock); outside them the run steps aside before touching the cluster (a dry run too: it
    says what the run would do, and the run would do nothing). ``topics``: a topic filter
    (:class:`kops.placement.topic_filter.TopicFilter`): only its topics' leaders are measured and
    elected; the result names those left out."""
    t0 = time.monotonic()
    if threshold_pct < 0 or threshold_pct > 100:
        raise BadInput(f"--imbalance-threshold must be within 0..100, not {threshold_pct:g}")
    if max_elections is not None and max_elections < 0:
        raise BadInput("--max-elections must be >= 0")
    if batch_size < 1:
        raise BadInput("--batch-size must be >= 1")
    res: RebalanceResult
    closed = window.closed_reason(now or datetime.now(timezone.utc)) if window is not None else None
    if closed:
        res = RebalanceResult(STEPPED_ASIDE, EXIT_OK, threshold_pct, reason=closed, dry_run=dry_run)
        res.duration_s = time.monotonic() - t0
        if metrics_file:
            write_metrics(metrics_file, res)
        return res
    if topology is not None:
        res = _plan_only(topology, threshold_pct, max_elections, topics)
        res.duration_s = time.monotonic() - t0
        if metrics_file:
            write_metrics(metrics_file, res)
        return res

    if hasattr(conn, "warm_up"):
        conn.warm_up()  # kafka-python (reassignments, DescribeCluster) connects while the checks below run
    lock = RunLock(conn, cluster_key(conn), what="leader rebalance", lock_dir=lock_dir)
    try:
        lock.acquire()
    except LockHeld as e:
        res = RebalanceResult(STEPPED_ASIDE, EXIT_OK, threshold_pct, reason=e.message, dry_run=dry_run)
        res.duration_s = time.monotonic() - t0
        if metrics_file:
            write_metrics(metrics_file, res)
        return res
    try:
        res = _rebalance_locked(conn, threshold_pct, dry_run, max_elections, batch_size, batch_wait_s,
                                force, on_batch, topics)
    finally:
        lock.release()
    res.duration_s = time.monotonic() - t0
    if metrics_file:
        write_metrics(metrics_file, res)
    return res


def _imbalance(topo: Topology, threshold_pct: float, topics) -> ImbalanceReport:
    """The controller's measure of ``topo``, over the topics the filter ``topics`` keeps (all: None)."""
    kept = None if topics is None else [t.name for t in topo.topics if topics.keeps(t.name)]
    return leader_imbalance(topo, threshold_pct, topics=kept)


def _plan_only(topo: Topology, threshold_pct: float, max_elections: int | None, topics=None) -> RebalanceResult:
    left_out = None if topics is None else topics.left_out(topo)
    before = _imbalance(topo, threshold_pct, topics)
    all_c, planned, asked = _to_send(before, max_elections)
    unreachable = [b.broker for b in before.unreachable(planned)]
    status = BALANCED if before.balanced else DRY_RUN
    return RebalanceResult(status, EXIT_NOT_DONE if unreachable else EXIT_OK, threshold_pct, before=before,
                           planned=planned, asked=asked, unreachable=unreachable, blocked=before.blocked,
                           capped=len(all_c) - len(planned), dry_run=True, topics_left_out=left_out)


def _to_send(before: ImbalanceReport, max_elections: int | None
             ) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
    """(every candidate, the candidates within ``max_elections``, the out-of-ISR-as-read
    partitions to ask for within what the cap leaves)."""
    all_c = before.candidates()
    planned = before.candidates(max_elections)
    room = None if max_elections is None else max(0, max_elections - len(planned))
    return all_c, planned, before.out_of_isr(room)


def _rebalance_locked(conn, threshold_pct, dry_run, max_elections, batch_size, batch_wait_s, force,
                      on_batch, topics=None) -> RebalanceResult:
    from concurrent.futures import ThreadPoolExecutor

    from kops.cluster.topology import list_reassignments

    if not force:
        from kops.ops import maintenance

        def pause_or_lock() -> str | None:
            paused = maintenance.current(conn)
            if paused is not None:
                return f"kops' cron jobs are {paused.describe()}"
            holder = kops_execution_in_progress(conn)
            return f"a kops execution holds the cluster lock: {holder}" if holder else None

        # kops' own pause and lock (topics __kops_journal and __kops_lock, confluent-kafka) are
        # read beside the reassignments in progress (kafka-python): both only read. A pause wins
        # over whatever the other read met (a cluster in maintenance may not answer it).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kops-leader-checks") as pool:
            checks = pool.submit(pause_or_lock)
            failed: ClusterError | None = None
            try:
                ongoing = list_reassignments(conn)
            except ClusterError as e:
                failed = e
            reason = checks.result()
        if reason:
            return RebalanceResult(STEPPED_ASIDE, EXIT_OK, threshold_pct, dry_run=dry_run, reason=reason)
        if failed is not None:
            raise failed
        if ongoing:
            eg = ", ".join(tp_str(tp) for tp in sorted(ongoing)[:3])
            return RebalanceResult(
                STEPPED_ASIDE, EXIT_OK, threshold_pct, dry_run=dry_run,
                reason=f"{len(ongoing)} partitions are being reassigned (e.g. {eg}); "
                       "run again later or pass --force")
    # without --force no reassignment was in progress a moment ago (read just above)
    topo = _read(conn, reassignments=force)
    if dry_run:
        return _plan_only(topo, threshold_pct, max_elections, topics)
    left_out = None if topics is None else topics.left_out(topo)
    before = _imbalance(topo, threshold_pct, topics)
    if before.balanced:
        return RebalanceResult(BALANCED, EXIT_OK, threshold_pct, before=before, after=before, topics_left_out=left_out)
    all_c, planned, asked = _to_send(before, max_elections)
    elections = run_elections(conn, "preferred", planned + asked, batch_size=batch_size,
                              batch_wait_s=batch_wait_s, on_batch=on_batch,
                              needed={p.tp for p in topo.partitions() if p.leader != p.preferred_leader})
    # "not needed" means the preferred replica already leads: as good as elected
    done = {o.tp for o in elections.outcomes if o.status in ("elected", "not_needed")}
    asked_set = set(asked)
    refused = sum(1 for o in elections.failed if o.tp in asked_set and o.error == "PREFERRED_LEADER_NOT_AVAILABLE")
    unreachable = [b.broker for b in before.unreachable(done)]
    # after: the leaders the controller confirmed, with no second read of the cluster (Kafka
    # answers ElectLeaders for a partition once its new leader is in the metadata)
    parts = {p.tp: p for p in topo.partitions()}
    after = _imbalance(topo.with_leaders({tp: parts[tp].preferred_leader for tp in done
                                          if tp in parts and parts[tp].preferred_leader is not None}),
                       threshold_pct, topics)
    return RebalanceResult(
        NOT_REACHED if unreachable else ELECTED,
        EXIT_NOT_DONE if unreachable else EXIT_OK,
        threshold_pct, before=before, after=after, planned=planned, asked=asked, elections=elections,
        blocked=[x for x in before.blocked if x.tp not in done], refused=refused,
        unreachable=unreachable, capped=len(all_c) - len(planned), topics_left_out=left_out)


# ------------------------------------------------------------------------------------------
# Prometheus textfile metrics
# ------------------------------------------------------------------------------------------


def gauges(res: RebalanceResult, *, now: float | None = None) -> list[GaugeSpec]:
    """The run's textfile metrics (``--metrics-file``); operators' alerts read these names."""
    out: list[GaugeSpec] = []
    rep = res.after or res.before
    if rep is not None:
        out += [
            GaugeSpec("kops_leader_imbalance_ratio",
                      "Share of the partitions preferring this broker that it does not lead (controller's ratio).",
                      [({"broker": str(b.broker)}, b.ratio) for b in rep.brokers], labels=("broker",)),
            GaugeSpec("kops_leader_preferred_partitions", "Partitions whose preferred replica is this broker.",
                      [({"broker": str(b.broker)}, b.preferred) for b in rep.brokers], labels=("broker",)),
            GaugeSpec("kops_leader_not_preferred_partitions",
                      "Partitions preferring this broker that are led elsewhere or offline.",
                      [({"broker": str(b.broker)}, b.not_preferred) for b in rep.brokers], labels=("broker",)),
        ]
    if res.before is not None:
        out.append(GaugeSpec("kops_leader_imbalance_ratio_before",
                             "Leader imbalance ratio before this run's elections.",
                             [({"broker": str(b.broker)}, b.ratio) for b in res.before.brokers], labels=("broker",)))
    counts = res.elections.counts() if res.elections else {"elected": 0, "not_needed": 0, "failed": 0}
    out += [
        GaugeSpec("kops_leader_rebalance_elections", "Preferred elections in the last run, by outcome.",
                  [({"result": k}, v) for k, v in counts.items()], labels=("result",)),
        GaugeSpec.single("kops_leader_rebalance_blocked_partitions",
                         "Partitions on over-threshold brokers whose preferred replica is down or out of the ISR.",
                         len(res.blocked)),
        GaugeSpec.single("kops_leader_rebalance_threshold_ratio", "leader.imbalance.per.broker.percentage / 100.",
                         res.threshold_pct / 100),
    ]
    if rep is not None:
        balanced = not res.unreachable and (res.status != DRY_RUN or rep.balanced)
        out.append(GaugeSpec.single("kops_leader_rebalance_balanced",
                                    "1 when no broker is over the threshold after the run (dry run: before).",
                                    1 if balanced else 0))
    out += [
        GaugeSpec.single("kops_leader_rebalance_stepped_aside",
                         "1 when the last run stepped aside (lock or reassignment).",
                         1 if res.status == STEPPED_ASIDE else 0),
        GaugeSpec.single("kops_leader_rebalance_exit_code", "Exit code of the last run.", res.exit_code),
        GaugeSpec.single("kops_leader_rebalance_duration_seconds", "Duration of the last run.",
                         round(res.duration_s, 3)),
        GaugeSpec.single("kops_leader_rebalance_last_run_timestamp_seconds", "Unix time the last run ended.",
                         round(now if now is not None else time.time(), 3)),
    ]
    return out


def write_metrics(path: str, res: RebalanceResult) -> None:
    metrics.write_textfile(path, gauges(res))


# ------------------------------------------------------------------------------------------
# Demote / restore
# ------------------------------------------------------------------------------------------


class DemotionStore:
    """Original replica orders of demoted partitions, one JSON file per cluster."""

    def __init__(self, key: str, path: str | Path | None = None):
        self.path = Path(path) if path else state_dir() / "leadership" / f"{key}.json"

    def load(self) -> dict[TopicPartition, DemotionRecord]:
        if not self.path.exists():
            return {}
        from kops.inputs import Problems
        from kops.inputs import values
        from kops.inputs.files import read_json

        doc = read_json(str(self.path), what="demotion record")
        problems = Problems(f"demotion record {self.path} is damaged")
        out: dict[TopicPartition, DemotionRecord] = {}
        entries = doc.get("partitions") if isinstance(doc, dict) else None
        if not isinstance(entries, list):
            problems.add("partitions", "missing or not a list")
        for i, e in enumerate(entries or []):
            try:
                if not isinstance(e, dict):
                    raise values.Invalid("not an object")
                tp = (values.topic(e.get("topic")), values.integer(e.get("partition"), text=False))
                lists = [values.broker_ids(e.get(k), allow_empty=k == "brokers", text=False)
                         for k in ("original", "demoted", "brokers")]
                out[tp] = DemotionRecord(tuple(lists[0]), tuple(lists[1]), frozenset(lists[2]))
            except values.Invalid as err:
                problems.add(f"partitions[{i}]", str(err))
        problems.raise_if_any("restore it from a backup, or move it aside: `kops leader restore` then gives "
                              "leadership back with preferred elections (without the original orders)")
        return out

    def save(self, records: Mapping[TopicPartition, DemotionRecord]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "version": 1,
            "updated_at": _now(),
            "partitions": [
                {"topic": t, "partition": p, **r.to_dict()} for (t, p), r in sorted(records.items())
            ],
        }
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.path)


@dataclass
class MoveResult:
    action: str  # demote | restore
    brokers: list[int]
    move: LeadershipMove
    dry_run: bool
    state_file: str
    refused: dict[TopicPartition, str] = field(default_factory=dict)
    still_open: list[TopicPartition] = field(default_factory=list)
    elections: ElectionResult | None = None
    remaining: list[Unmovable] = field(default_factory=list)  # verify: what is still wrong
    leaders_after: dict[int, int] = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def exit_code(self) -> int:
        return EXIT_NOT_DONE if (self.remaining or (self.dry_run and self.move.unmovable)) else EXIT_OK

    def summary(self) -> str:
        b = ",".join(map(str, self.brokers))
        m = self.move
        if self.dry_run:
            return (f"leader {self.action} (dry run) brokers {b}: would reorder {len(m.reorder)} and elect "
                    f"{len(m.elect)} partitions; {len(m.unmovable)} cannot be moved")
        e = self.elections.counts() if self.elections else {"elected": 0, "failed": 0}
        text = (f"leader {self.action} brokers {b}: reordered {len(m.reorder) - len(self.refused)}, "
                f"elected {e['elected']} partitions")
        if self.remaining:
            text += f"; {len(self.remaining)} not done (e.g. {tp_str(self.remaining[0].tp)}: {self.remaining[0].reason})"
        return text + f"; {self.duration_s:.1f} s"

    def to_dict(self) -> dict[str, Any]:
        d = {
            "action": self.action,
            "brokers": self.brokers,
            "dry_run": self.dry_run,
            "exit_code": self.exit_code,
            "summary": self.summary(),
            "state_file": self.state_file,
            "plan": self.move.to_dict(),
            "refused_reorders": [{"topic": t, "partition": p, "reason": r} for (t, p), r in sorted(self.refused.items())],
            "reassignments_left_open": [{"topic": t, "partition": p} for t, p in self.still_open],
            "remaining": [u.to_dict() for u in self.remaining],
            "duration_s": round(self.duration_s, 3),
        }
        if self.elections is not None:
            d["elections"] = self.elections.to_dict(details=False)
        if self.leaders_after:
            d["leaders_after"] = {str(k): v for k, v in sorted(self.leaders_after.items())}
        return d


def resolve_brokers(topo: Topology, broker: list[int] | None, rack: list[str] | None) -> list[int]:
    """``--broker`` / ``--rack`` -> broker ids, validated against the topology (exit 2)."""
    if not broker and not rack:
        raise BadInput("give --broker ID or --rack RACK (repeatable)")
    ids: set[int] = set()
    known = {b.id for b in topo.brokers}
    bad = sorted(set(broker or ()) - known)
    if bad:
        raise BadInput(f"--broker: unknown brokers {bad} (known: {sorted(known)})")
    ids |= set(broker or ())
    for r in rack or ():
        members = topo.brokers_in_rack(r)
        if not members:
            raise BadInput(f"--rack: no broker is in rack {r!r} (racks: {topo.racks})")
        ids |= set(members)
    return sorted(ids)


def demote(
    conn: Connection,
    *,
    broker: list[int] | None = None,
    rack: list[str] | None = None,
    dry_run: bool = False,
    state_file: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    wait_s: float = 60.0,
    lock_dir: Path | None = None,
) -> MoveResult:
    return _move(conn, "demote", broker, rack, dry_run, state_file, batch_size, wait_s, lock_dir)


def restore(
    conn: Connection,
    *,
    broker: list[int] | None = None,
    rack: list[str] | None = None,
    dry_run: bool = False,
    state_file: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    wait_s: float = 60.0,
    lock_dir: Path | None = None,
) -> MoveResult:
    return _move(conn, "restore", broker, rack, dry_run, state_file, batch_size, wait_s, lock_dir)


def _move(conn, action, broker, rack, dry_run, state_file, batch_size, wait_s, lock_dir) -> MoveResult:
    t0 = time.monotonic()
    key = cluster_key(conn)
    store = DemotionStore(key, state_file)
    with RunLock(conn, key, what=f"leader {action}", lock_dir=lock_dir):
        holder = None if dry_run else kops_execution_in_progress(conn)
        if holder:
            raise NotDone(f"a kops execution holds the cluster lock: {holder}; leader {action} would "
                          "compete with its reassignments. Finish it first (kops reassign verify/cancel).")
        topo = _read(conn)
        ids = resolve_brokers(topo, broker, rack)
        records = store.load()
        if action == "demote":
            prior = {tp: (r.original, set(r.brokers)) for tp, r in records.items()}
            move = plan_demote(topo, ids, already_demoted=prior)
            updates: dict[TopicPartition, DemotionRecord | None] = {}
            for tp, order in move.reorder.items():
                old = records.get(tp)
                if old is not None and sorted(old.original) == sorted(order):
                    updates[tp] = DemotionRecord(old.original, order, old.brokers | frozenset(ids))
                else:
                    updates[tp] = DemotionRecord(move.original[tp], order, frozenset(ids))
        else:
            move, updates = plan_restore(topo, ids, records)
        res = MoveResult(action, ids, move, dry_run, str(store.path))
        if dry_run:
            res.remaining = list(move.unmovable)
            res.duration_s = time.monotonic() - t0
            return res

        if action == "demote":
            # record first: a run killed after this point can always be restored
            _apply(store, records, updates)
        refused = {tp: r for tp, r in submit_reorder(conn, move.reorder).items() if r}
        res.refused = refused
        if action == "demote" and refused:
            for tp in refused:  # nothing changed on those: forget them
                if records.get(tp) is None or records[tp].demoted == move.reorder[tp]:
                    records.pop(tp, None)
            store.save(records)
        accepted = {tp: r for tp, r in move.reorder.items() if tp not in refused}
        not_done, res.still_open = wait_reordered(conn, accepted, timeout_s=wait_s)
        if action == "restore":
            _apply(store, records, {tp: u for tp, u in updates.items() if tp not in refused and tp not in not_done})
        to_elect = [tp for tp in move.elect if tp not in refused and tp not in not_done]
        res.elections = run_elections(conn, "preferred", to_elect, batch_size=batch_size)
        # verify by reading again; the metadata of the broker answering may lag the elections (a
        # broker just restarted is still catching up; after thousands of reorders UpdateMetadata
        # trails the controller by many seconds): a leader that "did not move" is looked at again
        # while fewer and fewer are left -- 10 s without progress, at most ``wait_s`` in all
        def check() -> tuple[Topology, list[Unmovable]]:
            topo = _read(conn)
            return topo, _verify(action, topo, ids, move, refused, not_done, res.elections)

        after, res.remaining = check() if not res.elections.outcomes else poll_while_progressing(
            check, lambda r: sum(1 for u in r[1] if u.reason == _NOT_MOVED), timeout_s=wait_s)
        from kops.placement.leadership import leaders_per_broker

        res.leaders_after = leaders_per_broker(after)
    res.duration_s = time.monotonic() - t0
    return res


def _apply(store: DemotionStore, records: dict, updates: Mapping[TopicPartition, DemotionRecord | None]) -> None:
    for tp, rec in updates.items():
        if rec is None:
            records.pop(tp, None)
        else:
            records[tp] = rec
    store.save(records)


_NOT_MOVED = "leader did not move (the controller may still be applying it)"


def _verify(action: str, topo: Topology, ids: list[int], move: LeadershipMove, refused, not_done,
            elections: ElectionResult) -> list[Unmovable]:
    why: dict[TopicPartition, str] = {u.tp: u.reason for u in move.unmovable}
    why.update(refused)
    why.update(not_done)
    for o in elections.failed:
        why[o.tp] = f"election failed: {o.reason}"
    s = set(ids)
    moved = set(move.elect) | set(move.reorder)  # once: not per partition (quadratic at 10,000s)
    unmovable = {u.tp for u in move.unmovable}
    out = []
    for p in topo.partitions():
        if action == "demote":
            bad = p.leader in s
        else:
            bad = (p.tp in moved and p.leader != p.preferred_leader) or p.tp in unmovable
        if bad:
            out.append(Unmovable(p.tp, p.leader, p.replicas, p.isr,
                                 why.get(p.tp, _NOT_MOVED)))
    return sorted(out, key=lambda u: u.tp)
