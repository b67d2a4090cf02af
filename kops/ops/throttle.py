"""The one place that applies and removes replication throttles.

Kafka's way (kafka-internals.md §2.5): rates are dynamic *broker* configs
(``leader.replication.throttled.rate`` on the brokers data is read from,
``follower.replication.throttled.rate`` on the brokers data is written to); which replicas the
rates apply to are *topic* configs (``leader.replication.throttled.replicas`` = the current
replicas ``partition:broker`` of the moving partitions, ``follower.replication.throttled.replicas``
= the replicas being added).

kops differs from ``kafka-reassign-partitions.sh`` on purpose:

- only the moves in flight are throttled, and throttles are lifted per broker/partition as
  their moves finish (:func:`sync` is called with the moves in flight after every change);
- brokers that are down are skipped (their removal is retried later), so a dead broker never
  makes the call hang (KAFKA-13392);
- values kops did not set are never removed: topic replica lists are merged (kops only adds and
  later removes its own ``p:b`` entries; a ``*`` wildcard is left alone), and a pre-existing
  broker rate is recorded and restored (unless somebody changed it again meanwhile).

The bookkeeping lives in :class:`ThrottleState`, which the journal stores, so that a later
``verify``/``resume``/``cancel`` can finish the cleanup after kops was killed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kops.errors import ClusterError
from kops.model import Topology
from kops.ops import failpoints

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


# ------------------------------------------------------------------------------------------
# pure: what should be throttled
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Desired:
    """Throttle configs wanted for a set of moves in flight."""

    brokers: dict[int, dict[str, str]]  # broker -> {rate key: value}
    topics: dict[str, dict[str, frozenset[str]]]  # topic -> {replicas key: {"p:b"}}


def desired_throttles(
    moves: Iterable[Any],
    *,
    rate: int | None,
    log_dir_rate: int | None = None,
) -> Desired:
    """The throttle configs for ``moves`` (objects with topic, partition, original, adding,
    log_dir_moves), as Kafka computes them but restricted to these moves."""
    brokers: dict[int, dict[str, str]] = {}
    topics: dict[str, dict[str, set[str]]] = {}
    for m in moves:
        if rate is not None and m.adding:
            sources = [b for b in m.original]
            t = topics.setdefault(m.topic, {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: set()})
            t[LEADER_REPLICAS].update(f"{m.partition}:{b}" for b in sources)
            t[FOLLOWER_REPLICAS].update(f"{m.partition}:{b}" for b in m.adding)
            for b in sources:
                brokers.setdefault(b, {})[LEADER_RATE] = str(rate)
            for b in m.adding:
                brokers.setdefault(b, {})[FOLLOWER_RATE] = str(rate)
        if log_dir_rate is not None:
            for b in m.log_dir_moves:
                brokers.setdefault(b, {})[LOG_DIR_RATE] = str(log_dir_rate)
    return Desired(
        brokers=brokers,
        topics={t: {k: frozenset(v) for k, v in d.items() if v} for t, d in topics.items()},
    )


def parse_replicas(value: str | None) -> set[str] | None:
    """``"0:1, 1:2"`` -> ``{"0:1", "1:2"}``; ``None`` for the ``*`` wildcard."""
    if value is None:
        return set()
    value = value.strip()
    if value == "*":
        return None
    return {s.strip() for s in value.split(",") if s.strip()}


def format_replicas(entries: Iterable[str]) -> str:
    """Kafka's order: a TreeSet of strings joined with commas (string order, not numeric)."""
    return ",".join(sorted(set(entries)))


@dataclass
class ThrottleState:
    """What kops has set, and what was there before (stored in the journal).

    ``brokers[b][key] = {"original": str|None, "set": str}``;
    ``topics[t][key] = {"original": str|None, "added": [p:b, ...]}``;
    ``pending_removal`` lists brokers whose restore failed (down) and must be retried.
    """

    brokers: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)
    topics: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Nothing of kops' is set (records kept for the rest of the execution don't count)."""
        return not any(r.get("active", True) for kv in self.brokers.values() for r in kv.values()) and not any(
            r.get("added") for kv in self.topics.values() for r in kv.values()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokers": {str(b): {k: dict(v) for k, v in d.items()} for b, d in sorted(self.brokers.items())},
            "topics": {t: {k: dict(v) for k, v in d.items()} for t, d in sorted(self.topics.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ThrottleState:
        d = d or {}
        return cls(
            brokers={int(b): {k: dict(v) for k, v in kv.items()} for b, kv in d.get("brokers", {}).items()},
            topics={t: {k: dict(v) for k, v in kv.items()} for t, kv in d.get("topics", {}).items()},
        )

    def describe(self) -> list[str]:
        out = []
        for b, kv in sorted(self.brokers.items()):
            for k, v in sorted(kv.items()):
                if v.get("active", True):
                    out.append(f"broker {b}: {k}={v['set']}")
        for t, kv in sorted(self.topics.items()):
            for k, v in sorted(kv.items()):
                if v.get("added"):
                    out.append(f"topic {t}: {k} += {format_replicas(v['added'])}")
        return out


@dataclass(frozen=True)
class Change:
    """One config change: SET (value) or DELETE (value None) of ``key`` on a broker or topic."""

    kind: str  # "broker" | "topic"
    name: str  # broker id as str, or topic name
    key: str
    value: str | None

    def __str__(self) -> str:
        what = f"{self.kind} {self.name}"
        return f"{what}: {'delete ' + self.key if self.value is None else self.key + '=' + self.value}"


@dataclass
class SyncPlan:
    changes: list[Change]
    state: ThrottleState
    skipped: list[str]  # human notes: brokers down, foreign values left alone


def _known_values(rec: Mapping[str, Any]) -> set[str | None]:
    """Values of a broker rate that are kops' own or what it found: the one it set, the ones
    it set before in this execution (a lagging read may still show them), the original."""
    return {rec["set"], rec["original"], *rec.get("prior", ())}


def plan_sync(state: ThrottleState, desired: Desired, topo: Topology, *, final: bool = False) -> SyncPlan:
    """Pure: the config changes that take the cluster from ``state`` to ``desired``.

    ``topo`` supplies the current values (``Broker.configs``/``Topic.configs``) and which brokers
    are alive. Returns the changes and the new state (to be saved once the changes succeeded).

    Config reads can lag behind writes (brokers learn of dynamic config changes
    asynchronously), so the records never rely on a read to know what kops wrote: a broker
    rate's original value is kept for the whole execution, every ``p:b`` entry kops ever added
    to a topic list is remembered (``ours``), removals are always written (idempotent), and
    ``final`` (the end of the execution) drops the records once everything is lifted.
    """
    new = ThrottleState(
        brokers={b: {k: dict(v) for k, v in kv.items()} for b, kv in state.brokers.items()},
        topics={t: {k: dict(v) for k, v in kv.items()} for t, kv in state.topics.items()},
    )
    changes: list[Change] = []
    skipped: list[str] = []

    # -- broker rates ----------------------------------------------------------------------
    for b in sorted(set(desired.brokers) | set(state.brokers)):
        broker = topo.broker(b)
        alive = broker is not None and broker.alive
        current = dict(broker.configs) if broker is not None else {}
        want = desired.brokers.get(b, {})
        have = new.brokers.setdefault(b, {})
        for key in BROKER_KEYS:
            rec = have.get(key)
            active = bool(rec) and rec.get("active", True)
            if key in want:
                if not alive:
                    skipped.append(f"broker {b} is down: {key} not set")
                    continue
                if rec is None:
                    have[key] = {"original": current.get(key), "set": want[key], "active": True}
                    changes.append(Change("broker", str(b), key, want[key]))
                elif not active or rec["set"] != want[key]:
                    if active and current.get(key) not in {want[key], *_known_values(rec)}:
                        skipped.append(
                            f"broker {b}: {key} was changed by someone else to "
                            f"{current.get(key)}; kops sets {want[key]} while its moves run"
                        )
                    if active and rec["set"] != want[key]:
                        rec["prior"] = sorted(set(rec.get("prior", [])) | {rec["set"]})
                    rec.update(set=want[key], active=True)
                    changes.append(Change("broker", str(b), key, want[key]))
                elif current.get(key) != want[key]:
                    # recorded as set but not (yet) visible: written ahead in the journal by a
                    # kops that was killed before applying it, or a lagging read. SET again
                    # (idempotent) rather than trust the record.
                    changes.append(Change("broker", str(b), key, want[key]))
            elif active:
                if not alive:
                    skipped.append(f"broker {b} is down: {key} will be restored when it is back")
                    continue
                cur = current.get(key)
                if cur not in _known_values(rec):
                    skipped.append(f"broker {b}: {key} is now {cur} (set by someone else), left alone")
                else:
                    changes.append(Change("broker", str(b), key, rec["original"]))
                rec["active"] = False
            if final and key in have and not have[key].get("active", True):
                del have[key]
        if not have:
            del new.brokers[b]

    # -- topic replica lists ---------------------------------------------------------------
    for t in sorted(set(desired.topics) | set(state.topics)):
        topic = topo.topic(t)
        want_t = desired.topics.get(t, {})
        have_t = new.topics.setdefault(t, {})
        if topic is None:  # deleted meanwhile: nothing to restore
            new.topics.pop(t, None)
            continue
        for key in TOPIC_KEYS:
            want = set(want_t.get(key, ()))
            rec = have_t.get(key)
            if rec is None and not want:
                continue
            ours = set(rec.get("ours", rec.get("added", ()))) if rec else set()
            added = set(rec["added"]) if rec else set()
            cur_raw = topic.configs.get(key)
            current = parse_replicas(cur_raw)
            if current is None:  # "*": everything is throttled already; never touch it
                if want:
                    skipped.append(f"topic {t}: {key}=* already throttles every replica")
                if rec is not None and not want and final:
                    have_t.pop(key, None)
                continue
            foreign = current - ours
            new_added = want - foreign
            value = foreign | new_added
            if value != current or new_added != added:
                changes.append(Change("topic", t, key, format_replicas(value) if value else None))
            if final and not new_added:
                have_t.pop(key, None)
            else:
                have_t[key] = {
                    "original": rec["original"] if rec else cur_raw,
                    "added": sorted(new_added),
                    "ours": sorted(ours | new_added),
                }
        if not have_t:
            del new.topics[t]
    return SyncPlan(changes=changes, state=new, skipped=skipped)


# ------------------------------------------------------------------------------------------
# side effects
# ------------------------------------------------------------------------------------------


def apply_changes(conn, changes: list[Change]) -> list[tuple[str, str, str]]:
    """Apply ``changes`` with IncrementalAlterConfigs (one request per broker, one for all
    topics). Returns the failures as (kind, name, message) (empty = all applied)."""
    if not changes:
        return []
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = conn.admin()
    by_resource: dict[tuple[str, str], list[Change]] = {}
    for c in changes:
        by_resource.setdefault((c.kind, c.name), []).append(c)

    def resource(kind: str, name: str, cs: list[Change]):
        entries = [
            ConfigEntry(
                c.key,
                c.value,
                incremental_operation=AlterConfigOpType.DELETE if c.value is None else AlterConfigOpType.SET,
            )
            for c in cs
        ]
        rtype = ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC
        return ConfigResource(rtype, name, incremental_configs=entries)

    failures: list[tuple[str, str, str]] = []
    topic_resources = [resource(k, n, cs) for (k, n), cs in by_resource.items() if k == "topic"]
    # broker resources must go one per request (each to its own broker); they go in parallel,
    # after the topic request has completed: brokers apply config changes in the order they
    # were made (ZooKeeper change notifications / the metadata log), so a broker that shows
    # its new rate has applied the topics' replica lists too (see :func:`await_rates`)
    broker_batches = [[resource(k, n, cs)] for (k, n), cs in by_resource.items() if k == "broker"]
    if any(c.kind == "broker" and c.value is not None for c in changes):
        steps: list[list[list]] = [[topic_resources]] if topic_resources else []
        steps.append(broker_batches)
    else:  # only lifting rates: no order to keep, all requests at once
        steps = [broker_batches + ([topic_resources] if topic_resources else [])]
    for batches in steps:
        pending = []
        for batch in batches:
            try:
                futures = admin.incremental_alter_configs(batch, request_timeout=conn.timeout_s)
            except Exception as e:  # pragma: no cover - local validation errors
                for r in batch:
                    failures.append((_kind(r), r.name, str(e)))
                continue
            pending.extend(futures.items())
        for res, fut in pending:
            try:
                conn.wait(fut, f"alter configs of {res.restype.name.lower()} {res.name}")
            except ClusterError as e:
                failures.append((_kind(res), res.name, e.message))
    return failures


def await_rates(conn, desired: Desired, topo: Topology, *, timeout_s: float = 10.0,
                interval_s: float = 0.1) -> list[int]:
    """Wait until every alive broker of ``desired`` reports the rates kops set (DescribeConfigs
    on a broker is answered from the configs it has applied). Dynamic configs reach brokers
    asynchronously: a reassignment submitted before they arrive copies unthrottled at first
    (seen on a busy machine: 2 MB in 0.4 s under a 50 kB/s throttle). Returns the brokers that
    still did not show them after ``timeout_s`` (the caller says so and goes on)."""
    want = {b: {k: v for k, v in kv.items() if k in (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)}
            for b, kv in desired.brokers.items()}
    return _await_brokers(
        conn, {b: kv for b, kv in want.items() if kv}, topo,
        lambda kv, seen: all(seen.get(k) == v for k, v in kv.items()),
        timeout_s=timeout_s, interval_s=interval_s,
    )


def await_lifted(conn, records: ThrottleState, topo: Topology, *, timeout_s: float = 10.0,
                 interval_s: float = 0.1) -> list[int]:
    """Wait until no alive broker still shows a rate kops set (``records``: the execution's
    broker records, lifted since). Without this, a kops started right after — the next wave of
    a playbook, a cron run — could read a rate that was already deleted but not yet applied
    (ZooKeeper-mode brokers apply config changes 0.1-2 s later) as an operator's pre-existing
    value, and "restore" it when it ends. Returns the brokers still showing one."""
    ours = {}
    for b, kv in records.brokers.items():
        keys = {k: {rec.get("set"), *rec.get("prior", ())} - {None, rec.get("original")} for k, rec in kv.items()}
        keys = {k: vals for k, vals in keys.items() if vals}
        if keys:
            ours[b] = keys
    return _await_brokers(
        conn, ours, topo, lambda kv, seen: all(seen.get(k) not in vals for k, vals in kv.items()),
        timeout_s=timeout_s, interval_s=interval_s,
    )


def _await_brokers(conn, want: Mapping[int, Any], topo: Topology, ok, *, timeout_s: float,
                   interval_s: float) -> list[int]:
    """Poll the applied throttle configs of the alive brokers in ``want`` (DescribeConfigs,
    each broker answering for itself) until ``ok(want[b], seen_b)`` holds for each; returns
    the brokers for which it still does not after ``timeout_s``."""
    import time

    from kops.cluster.topology import broker_throttle_configs

    want = {b: w for b, w in want.items() if topo.broker(b) is not None and topo.broker(b).alive}
    deadline = time.monotonic() + timeout_s
    while want:
        try:
            seen = broker_throttle_configs(conn, sorted(want))
        except ClusterError:
            seen = {}
        want = {b: w for b, w in want.items() if b not in seen or not ok(w, seen[b])}
        if not want or time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    return sorted(want)


def _kind(res) -> str:
    return "broker" if res.restype.name == "BROKER" else "topic"


def merge_states(old: ThrottleState, new: ThrottleState) -> ThrottleState:
    """Records covering both ``old`` and ``new`` (what kops may have set either way).

    Written ahead to the journal before throttle changes are applied: if kops is killed while
    applying them, the journal still names every throttle that may be in place, so the
    execution that resumes it (or its verify/cancel) removes them all. Removals are idempotent,
    so recording a throttle that never got applied costs nothing."""
    def broker_rec(o: dict[str, Any], n: dict[str, Any]) -> dict[str, Any]:
        rec = dict(n, original=o["original"], active=bool(o.get("active", True) or n.get("active", True)))
        prior = set(o.get("prior", ())) | set(n.get("prior", ()))
        if o.get("set") != n.get("set"):
            prior.add(o["set"])
        if prior:
            rec["prior"] = sorted(prior)
        return rec

    def topic_rec(o: dict[str, Any], n: dict[str, Any]) -> dict[str, Any]:
        added = set(o.get("added", ())) | set(n.get("added", ()))
        ours = set(o.get("ours", o.get("added", ()))) | set(n.get("ours", n.get("added", ())))
        return {"original": o["original"], "added": sorted(added), "ours": sorted(ours | added)}

    def merge(old_map: Mapping[Any, dict], new_map: Mapping[Any, dict], rec) -> dict[Any, dict]:
        out: dict[Any, dict] = {}
        for name in sorted(set(old_map) | set(new_map)):
            o_kv, n_kv = old_map.get(name, {}), new_map.get(name, {})
            out[name] = {
                key: dict(o_kv.get(key) or n_kv[key]) if key not in o_kv or key not in n_kv
                else rec(o_kv[key], n_kv[key])
                for key in sorted(set(o_kv) | set(n_kv))
            }
        return out

    return ThrottleState(brokers=merge(old.brokers, new.brokers, broker_rec),
                         topics=merge(old.topics, new.topics, topic_rec))


def sync(conn, state: ThrottleState, desired: Desired, topo: Topology, *, final: bool = False,
         before_apply: Callable[[ThrottleState], None] | None = None,
         ) -> tuple[ThrottleState, list[str], list[Change]]:
    """Bring the cluster's throttles to ``desired``; returns (new state, notes, changes made).

    ``before_apply`` is called with :func:`merge_states` of the old and the new records before
    any change is written (the journal's write-ahead record). When a change fails the state
    keeps the old record for it, so the next call retries.
    """
    sp = plan_sync(state, desired, topo, final=final)
    if sp.changes and before_apply is not None:
        before_apply(merge_states(state, sp.state))
    failures = apply_changes(conn, sp.changes)
    if sp.changes:
        failpoints.reach("throttles.applied")
    if not failures:
        return sp.state, sp.skipped, sp.changes
    # a change that failed may still have landed (a request that timed out on a slow link
    # can be applied after kops gave up on it): for what could not be changed keep the
    # records of both the old and the new state (:func:`merge_states`, what the journal
    # has written ahead), so that a later sync or the final removal covers it either way.
    # A removal that failed stays recorded as active and is sent again; a rate that may
    # not have landed is SET again by the next sync when a read does not show it.
    failed = {(k, n) for k, n, _ in failures}
    either = merge_states(state, sp.state)
    merged = ThrottleState(brokers={b: dict(kv) for b, kv in sp.state.brokers.items()},
                           topics={t: dict(kv) for t, kv in sp.state.topics.items()})
    for c in sp.changes:
        if (c.kind, c.name) not in failed:
            continue
        if c.kind == "broker":
            b = int(c.name)
            rec = either.brokers.get(b, {}).get(c.key)
            if rec is not None:  # (a failed lift: still active, as in the old record)
                merged.brokers.setdefault(b, {})[c.key] = rec
        else:
            rec = either.topics.get(c.name, {}).get(c.key)
            if rec is not None:
                merged.topics.setdefault(c.name, {})[c.key] = rec
    notes = sp.skipped + [f"throttle change failed on {k} {n}: {m}" for k, n, m in failures]
    return merged, notes, [c for c in sp.changes if (c.kind, c.name) not in failed]


def remove_all(conn, state: ThrottleState, topo: Topology, *,
               before_apply: Callable[[ThrottleState], None] | None = None,
               ) -> tuple[ThrottleState, list[str], list[Change]]:
    """Lift every throttle kops set (restoring pre-existing values)."""
    return sync(conn, state, Desired(brokers={}, topics={}), topo, final=True, before_apply=before_apply)


def throttles_in(topo: Topology, topics: Iterable[str] | None = None) -> list[str]:
    """Every throttle config present in ``topo`` (for reports and tests)."""
    out = []
    for b in topo.brokers:
        for k in BROKER_KEYS:
            if k in b.configs:
                out.append(f"broker {b.id}: {k}={b.configs[k]}")
    names = set(topics) if topics is not None else None
    for t in topo.topics:
        if names is not None and t.name not in names:
            continue
        for k in TOPIC_KEYS:
            if t.configs.get(k):
                out.append(f"topic {t.name}: {k}={t.configs[k]}")
    return out
