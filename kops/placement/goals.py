"""Planning goals, measured: each goal's figure before and after a plan, against its bound.

Hard goals first, then soft ones in priority order (issue 21): rack safety; disk capacity
threshold (counting data in flight: during a move source and destination both hold the
partition); network-in and network-out capacity thresholds; then balance of disk usage %, of
network-in %, of leaders' bytes-in, topic spread (each topic's replicas and leaders per broker
within ±1 where the brokers allow), replica counts, leaders, first followers.

A goal needs data: sizes (``Partition.size_bytes``) for the disk goals, sampled rates
(``Partition.bytes_in_per_s``) for the network and leader-bytes-in goals, capacities
(``Broker.capacity``) for thresholds and percentages. A goal without its data is reported as
``unknown`` with what it needs, never as met.

Pure: model objects in, dicts out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kops.model import TopicPartition, Topology
from kops.placement.rackcheck import RackSafety
from kops.placement.racks import RackTree

#: every goal, hard first, then soft in the default priority order
GOALS = ("rack", "disk-capacity", "nw-in-capacity", "nw-out-capacity", "disk-usage", "nw-in-usage",
         "leader-bytes-in", "topic-spread", "replicas", "leaders", "first-followers")
HARD = frozenset({"rack", "disk-capacity", "nw-in-capacity", "nw-out-capacity"})
#: default capacity threshold: a broker's disk / network use kept at or below this share
DEFAULT_THRESHOLD = 0.80
#: consumers per partition assumed for a leader's network-out (each reads what is written once)
DEFAULT_FANOUT = 1.0
#: a balance goal (disk use, network-in use, leaders' bytes-in) is met when every broker is within
#: ±10 % of the mean use (Cruise Control's default balance threshold, 1.10), or within one
#: partition of it where a partition is more than that (no placement does better)
BAND = 0.10


def band(mean: float, largest: float) -> tuple[float, float]:
    """The band a balance goal holds every broker in: ``mean`` ± max(:data:`BAND` of it, the
    ``largest`` single replica's share), in the goal's units."""
    half = max(BAND * mean, largest)
    return mean - half, mean + half

#: the goals a plan optimises unless ``--goals`` says otherwise: the hard goals, then kops'
#: minimal-movement balance -- disk use (replica counts where sizes are unknown), preferred
#: leaders, first followers. Each further goal costs moves (docs/load-and-capacity.md has the
#: figures): ``--goals`` names them, ``--goals all`` takes every goal in the default order
DEFAULT_GOALS = tuple(g for g in GOALS if g in HARD) + ("disk-usage", "leaders", "first-followers")

Assignment = Mapping[TopicPartition, Sequence[int]]


def select_goals(goals: Sequence[str] | str | None) -> tuple[str, ...]:
    """The goals a plan optimises, in priority order: hard goals first (always on: a plan never
    breaks them, named or not), then the soft goals named, in the order named. ``None``: the
    default (:data:`DEFAULT_GOALS`); ``"all"`` (or ``["all"]``): every goal in the default order.
    Raises :class:`~kops.errors.BadInput` on an unknown or repeated goal."""
    from kops.errors import BadInput

    if goals is None:
        return DEFAULT_GOALS
    names = [g.strip() for g in (goals.split(",") if isinstance(goals, str) else goals)]
    names = [g for g in names if g]
    if names == ["all"]:
        return GOALS
    bad = [g for g in names if g not in GOALS]
    dup = sorted({g for g in names if names.count(g) > 1})
    if bad or dup or not names:
        why = ("no goal given" if not names else
               f"unknown goal{'s' if len(bad) > 1 else ''} {', '.join(bad)}" if bad else f"{', '.join(dup)} given twice")
        raise BadInput(f"--goals: {why}; goals are {', '.join(GOALS)} (hard: {', '.join(g for g in GOALS if g in HARD)}, "
                       "always on), or all")
    soft = [g for g in names if g not in HARD]
    return tuple(g for g in GOALS if g in HARD) + tuple(soft)


def shared_disks(topo: Topology) -> set[int]:
    """Brokers whose log dirs are on a volume another broker of the same host uses too (the
    same host and a log dir of the same total size: a local sandbox, several brokers per
    machine). Their measured disk is not theirs alone: no per-broker limit can be drawn from it."""
    seen: dict[tuple[str, int], set[int]] = defaultdict(set)
    for b in topo.brokers:
        for d in b.log_dirs:
            if b.host and d.total_bytes is not None:
                seen[(b.host, d.total_bytes)].add(b.id)
    return {x for ids in seen.values() if len(ids) > 1 for x in ids}


def disk_capacity(broker, shared: set[int] = frozenset()) -> int | None:
    """A broker's disk: its capacity (a capacity file), else what its log dirs' volumes measure
    (not for a broker in ``shared``, see :func:`shared_disks`)."""
    if broker is None:
        return None
    given = broker.capacity.disk_bytes if broker.capacity is not None else None
    if given:
        return given
    return None if broker.id in shared else broker.measured_disk_bytes


def disk_used(broker, held: float, shared: set[int] = frozenset()) -> float:
    """A broker's disk use now: its volumes' total minus usable bytes where every online log dir
    reports them (everything on the disk: other files, deleted segments not yet gone), else
    ``held``, the sizes of the replicas it holds -- always for a broker in ``shared`` (its volume
    holds other brokers' data too: see :func:`shared_disks`)."""
    if broker is not None and broker.id in shared:
        return float(held)
    online = [d for d in broker.log_dirs if not d.offline] if broker is not None else []
    if online and all(d.capacity_known for d in online):
        return float(sum((d.total_bytes or 0) - (d.usable_bytes or 0) for d in online))
    return float(held)


def _spread(values: Iterable[float]) -> float:
    v = list(values)
    return (max(v) - min(v)) if v else 0.0


def _per_broker(assign: Assignment, brokers: Sequence[int], weight, slots: slice | int | None = None) -> dict[int, float]:
    out = dict.fromkeys(brokers, 0.0)
    for tp, reps in assign.items():
        chosen = reps if slots is None else (reps[slots:slots + 1] if isinstance(slots, int) else reps[slots])
        w = weight(tp)
        if w is None:
            continue
        for b in chosen:
            if b in out:
                out[b] += w
    return out


def count_bound(total: int, n: int) -> int:
    """The least spread ``total`` units can have over ``n`` brokers."""
    return 0 if n == 0 or total % n == 0 else 1


def evaluate(topo: Topology, before: Assignment, after: Assignment, *, brokers: Sequence[int] | None = None,
             threshold: float = DEFAULT_THRESHOLD, fanout: float = DEFAULT_FANOUT, nw_threshold: float | None = None,
             goals: Sequence[str] = GOALS, known: Mapping[str, dict[str, Any]] | None = None,
             ) -> dict[str, dict[str, Any]]:
    """Each goal of ``goals``: ``{"hard", "unit", "before", "after", "bound", "status", ...}``;
    ``bound`` is what no placement can beat (the mean use for a capacity goal, the least spread
    for a balance goal; None where not computed), ``status`` met / not met (with ``blockers``:
    the brokers or topics that stop it) / reported (a balance figure) / unknown (with ``needs``).

    ``brokers``: the brokers balanced over (default: the alive ones). ``before`` / ``after``: the
    replica lists of every partition (a plan's whole target, not only its changes). ``known``:
    goals a caller has measured already (the planner's report), taken as they are."""
    ids = sorted(brokers if brokers is not None else topo.alive_broker_ids)
    parts = {p.tp: p for p in topo.partitions()}
    size = {tp: p.size_bytes for tp, p in parts.items()}
    rate = {tp: p.bytes_in_per_s for tp, p in parts.items()}
    sizes_known = bool(size) and all(v is not None for v in size.values())
    rates_known = bool(rate) and all(v is not None for v in rate.values())
    cap = {b: topo.broker(b).capacity if topo.broker(b) else None for b in ids}
    shared = shared_disks(topo)
    disk_cap = {b: c for b in ids if (c := disk_capacity(topo.broker(b), shared))}
    in_cap = {b: c.nw_in_bytes_per_s for b, c in cap.items() if c is not None and c.nw_in_bytes_per_s}
    out_cap = {b: c.nw_out_bytes_per_s for b, c in cap.items() if c is not None and c.nw_out_bytes_per_s}
    out: dict[str, dict[str, Any]] = {}
    # per-broker sums more than one goal reads (each a pass over every partition), over all of
    # ``ids`` (a goal over fewer brokers takes its brokers' entries: the same sums)
    sums: dict[tuple[str, str], dict[int, float]] = {}

    def per_broker(what: str, when: str) -> dict[int, float]:
        got = sums.get((what, when))
        if got is None:
            assign = before if when == "before" else after
            got = sums[(what, when)] = _per_broker(assign, ids, size.get) if what == "size" else \
                _nw(assign, ids, rate, what, fanout)
        return got

    def unknown(goal: str, needs: str) -> None:
        out[goal] = {"hard": goal in HARD, "status": "unknown", "needs": needs}

    for goal in goals:
        if known and goal in known:
            out[goal] = dict(known[goal])
        elif goal == "rack":
            safety = RackSafety(RackTree.build({b.id: b.rack for b in topo.brokers}))

            def unsafe(assign: Assignment) -> list[str]:
                keys = list(assign)
                return sorted(f"{keys[i][0]}-{keys[i][1]}" for i in safety.unsafe([assign[k] for k in keys]))
            ub, ua = unsafe(before), unsafe(after)
            out[goal] = figures(goal, "rack-unsafe partitions", len(ub), len(ua), 0, met=not ua, blockers=ua[:10])
        elif goal == "disk-capacity":
            if not sizes_known:
                unknown(goal, "partition sizes (a live read, or a snapshot with size_bytes)")
                continue
            if not disk_cap:
                unknown(goal, "disk capacities (measured from the log dirs by a live read, or a snapshot from "
                              "cluster describe --capacity-file; brokers sharing one volume need the file)")
                continue
            held = per_broker("size", "before")
            incoming, outgoing = _added(after, before, ids, size), _added(before, after, ids, size)
            ub = {b: disk_used(topo.broker(b), held[b], shared) for b in ids}
            ua = {b: ub[b] + incoming[b] - outgoing[b] for b in ids}
            peak = {b: ub[b] + incoming[b] for b in ids}  # nothing is freed before a move ends
            pct = {k: {b: v[b] / disk_cap[b] for b in disk_cap} for k, v in (("before", ub), ("after", ua),
                                                                            ("peak", peak))}
            over = [b for b in disk_cap if pct["after"][b] > threshold or pct["peak"][b] > threshold]
            # no placement has its largest use below the mean (of the brokers whose capacity is known)
            mean = sum(ua[b] for b in disk_cap) / sum(disk_cap.values())
            out[goal] = figures(goal, "largest disk use, % of capacity", _pct(max(pct["before"].values())),
                                 _pct(max(pct["after"].values())), _pct(mean), met=not over,
                                 blockers=[f"broker {b}: {_pct(pct['after'][b])} % after, {_pct(pct['peak'][b])} % "
                                           "at the peak of the move" for b in sorted(over)],
                                 peak=_pct(max(pct["peak"].values())), threshold=_pct(threshold),
                                 unchecked=sorted(set(ids) - set(disk_cap)),
                                 shared_volume=sorted(shared & set(ids) - set(disk_cap)))
        elif goal in ("nw-in-capacity", "nw-out-capacity"):
            if not rates_known:
                unknown(goal, "bytes-in rates (cluster describe --sample-seconds N)")
                continue
            caps = in_cap if goal == "nw-in-capacity" else out_cap
            if not caps:
                unknown(goal, "network capacities (a snapshot from cluster describe --capacity-file with NW_IN / NW_OUT)")
                continue
            load_b, load_a = per_broker(goal, "before"), per_broker(goal, "after")
            limit = threshold if nw_threshold is None else nw_threshold
            over = [b for b in caps if load_a[b] / caps[b] > limit]
            out[goal] = figures(goal, "busiest broker, % of capacity",
                                 _pct(max(load_b[b] / caps[b] for b in caps)), _pct(max(load_a[b] / caps[b] for b in caps)),
                                 _pct(sum(load_a[b] for b in caps) / sum(caps.values())), met=not over,
                                 blockers=[f"broker {b}: {_pct(load_a[b] / caps[b])} %" for b in sorted(over)],
                                 threshold=_pct(limit), unchecked=sorted(set(ids) - set(caps)))
        elif goal == "disk-usage":
            if not sizes_known or not disk_cap:
                unknown(goal, "partition sizes and disk capacities")
                continue
            known = sorted(disk_cap)
            sb, sa = per_broker("size", "before"), per_broker("size", "after")
            pb = {b: sb[b] / disk_cap[b] for b in known}
            pa = {b: sa[b] / disk_cap[b] for b in known}
            ideal = sum(sa[b] for b in known) / sum(disk_cap.values())
            out[goal] = _balance(goal, "spread of disk use, percentage points", pb, pa, ideal,
                                 max(size.values()) / min(disk_cap.values()))
        elif goal == "nw-in-usage":
            if not rates_known or not in_cap:
                unknown(goal, "bytes-in rates and network-in capacities")
                continue
            known = sorted(in_cap)
            lb, la = per_broker("nw-in-capacity", "before"), per_broker("nw-in-capacity", "after")
            out[goal] = _balance(goal, "spread of network-in use, percentage points",
                                 {b: lb[b] / in_cap[b] for b in known}, {b: la[b] / in_cap[b] for b in known},
                                 sum(la[b] for b in known) / sum(in_cap[b] for b in known),
                                 max(rate.values()) / min(in_cap.values()))
        elif goal == "leader-bytes-in":
            if not rates_known:
                unknown(goal, "bytes-in rates (cluster describe --sample-seconds N)")
                continue
            lb = _per_broker(before, ids, rate.get, 0)
            la = _per_broker(after, ids, rate.get, 0)
            lo, hi = band(sum(la.values()) / len(ids), max(rate.values()))
            out_of = [f"broker {b}: {v:.0f} B/s" for b, v in sorted(la.items()) if not lo - 1e-9 <= v <= hi + 1e-9]
            out[goal] = figures(goal, "spread of leaders' bytes-in, bytes/s", round(_spread(lb.values()), 1),
                                 round(_spread(la.values()), 1), 0.0, met=not out_of, blockers=out_of[:10],
                                 band=[round(lo, 1), round(hi, 1)])
        elif goal == "topic-spread":
            racks = {b: topo.rack_of(b) for b in ids}
            wb, bound, ob = _topics_uneven(before, ids, racks)
            wa, _, oa = _topics_uneven(after, ids, racks)
            # how far: the replicas and leaders a broker holds above or below its topic's floor/ceil
            out[goal] = figures(goal, "topics whose replicas or leaders per broker differ by more than 1",
                                 len(wb), len(wa), bound, met=None if bound is None else len(wa) <= bound,
                                 blockers=wa[:10], off_band_before=ob, off_band_after=oa)
        else:
            slot = {"replicas": None, "leaders": 0, "first-followers": 1}[goal]
            cb = _per_broker(before, ids, lambda tp: 1, slot)
            ca = _per_broker(after, ids, lambda tp: 1, slot)
            total = int(sum(ca.values()))
            bound = count_bound(total, len(ids))
            out[goal] = figures(goal, "spread (max - min per broker)", int(_spread(cb.values())),
                                 int(_spread(ca.values())), bound, met=_spread(ca.values()) <= max(bound, 1))
    return out


def _balance(goal: str, unit: str, before: Mapping[int, float], after: Mapping[int, float], mean: float,
             largest: float) -> dict:
    """A balance goal over use shares: spread before / after (bound 0), met when every broker is
    in :func:`band` (the brokers outside it named)."""
    lo, hi = band(mean, largest)
    out_of = [f"broker {b}: {_pct(v)} %" for b, v in sorted(after.items()) if not lo - 1e-12 <= v <= hi + 1e-12]
    return figures(goal, unit, _pct(_spread(before.values())), _pct(_spread(after.values())), 0.0, met=not out_of,
                   blockers=out_of[:10], mean=_pct(mean), band=[_pct(lo), _pct(hi)])


def figures(goal: str, unit: str, before: Any, after: Any, bound: Any, *, met: bool | None, **extra: Any) -> dict:
    d = {"hard": goal in HARD, "unit": unit, "before": before, "after": after, "bound": bound,
         "status": "met" if met else ("not met" if met is False else "reported")}
    d.update({k: v for k, v in extra.items() if v not in (None, [], ())})
    return d


def _added(assign: Assignment, other: Assignment, ids: Sequence[int],
           size: Mapping[TopicPartition, int | None]) -> dict[int, float]:
    """Per broker of ``ids``: the sizes of the replicas ``assign`` puts on it that ``other`` does
    not (one pass, no copy of the assignment)."""
    out = dict.fromkeys(ids, 0.0)
    for tp, reps in assign.items():
        w = size.get(tp)
        if w is None:
            continue
        had = other.get(tp, ())
        for b in reps:
            if b in out and b not in had:
                out[b] += w
    return out


def _pct(x: float) -> float:
    return round(100.0 * x, 1)


def _nw(assign: Assignment, ids: Sequence[int], rate: Mapping[TopicPartition, float | None], goal: str,
        fanout: float) -> dict[int, float]:
    """Network use per broker: in, every replica takes the partition's bytes-in (the leader from
    producers, each follower by fetching); out, a leader sends it to each follower and to
    ``fanout`` consumers."""
    load = dict.fromkeys(ids, 0.0)
    for tp, reps in assign.items():
        r = rate.get(tp) or 0.0
        if not reps:
            continue
        if goal == "nw-in-capacity":
            for b in reps:
                if b in load:
                    load[b] += r
        elif reps[0] in load:
            load[reps[0]] += r * (len(reps) - 1 + fanout)
    return load


def _topics_uneven(assign: Assignment, ids: Sequence[int],
                   racks: Mapping[int, str | None]) -> tuple[list[str], int | None, int]:
    """Topics whose replicas or leaders per broker (over ``ids``) spread by more than 1; the
    bound: 0 where every topic can be even (no racks, or racks of equal size), None (not
    computed) where racks of different sizes may force a topic's replicas onto the brokers of a
    small rack; and how far off they are: the replicas and leaders above or below their
    topic's floor/ceil of the mean, summed over topics and brokers."""
    reps: dict[str, dict[int, int]] = {}
    leads: dict[str, dict[int, int]] = {}
    last = None
    for (t, _p), r in assign.items():
        if not r:
            continue
        if t != last:  # (a topic's partitions mostly come one after the other)
            rt, lt, last = reps.get(t), leads.get(t), t
            if rt is None:
                rt, lt = reps[t], leads[t] = dict.fromkeys(ids, 0), dict.fromkeys(ids, 0)
        if r[0] in lt:
            lt[r[0]] += 1
        for b in r:
            if b in rt:
                rt[b] += 1
    uneven = sorted(t for t in reps if _spread(reps[t].values()) > 1 or _spread(leads[t].values()) > 1)
    off = 0
    for t in uneven:
        for counts in (reps[t].values(), leads[t].values()):
            lo, hi = sum(counts) // len(ids), -(-sum(counts) // len(ids))
            off += sum(max(0, c - hi) + max(0, lo - c) for c in counts)
    sizes = defaultdict(int)
    for b in ids:
        sizes[racks.get(b)] += 1
    even = None in sizes and len(sizes) == 1 or len(set(sizes.values())) <= 1
    return uneven, 0 if even else None, off
