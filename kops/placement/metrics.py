"""Plan figures: lower bound on moves, Kafka ``--generate``'s proposal for the same goal, the report.

Pure (no I/O). Everything returned is JSON-ready and in a fixed order, so the same plan gives
byte-identical output.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from itertools import chain
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kops.model import TopicPartition
from kops.placement import goals
from kops.placement.optimizer import FORCED, Optimized
from kops.placement.leaders import slot_counts
from kops.placement.rackcheck import RackSafety
from kops.placement.racks import RackTree
from kops.placement.state import PlacementState

__all__ = ["lower_bound", "kafka_generate", "build_report", "spread", "moved"]


def spread(counts: Mapping[int, int]) -> int:
    return (max(counts.values()) - min(counts.values())) if counts else 0


def moved(before: Sequence[int], after: Sequence[int]) -> int:
    """Replicas that must be copied: brokers in ``after`` that did not hold the partition."""
    return sum(1 for b in after if b not in before)


# ---------------------------------------------------------------------------------------------
def lower_bound(st: PlacementState, prep: Mapping[str, Any]) -> dict[str, Any]:
    """Moves any plan for this goal needs (computed on the current assignment, before planning).

    * ``mandatory``: replicas to create because a partition has fewer distinct allowed replicas
      than its (target) RF -- replicas on removed/dead/excluded brokers, duplicates, RF increases;
      plus one move per partition that is rack-unsafe and needs nothing else;
    * ``balanced``: also reaching replica counts within floor/ceil of the mean on every allowed
      broker: ``max(mandatory_adds + sum_b max(0, kept_b - ceil), sum_b max(0, floor - kept_b),
      mandatory)`` -- every kept replica above ``ceil`` must leave its broker (a move distinct from
      the mandatory ones), every replica missing below ``floor`` must arrive.
    """
    allowed = st.allowed
    parts, loads = st.parts, st.loads
    need_total, need_bytes = prep["need_total"], prep["need_bytes"]
    repairs, repair_bytes = prep["repairs"], prep["repair_bytes"]
    kc_all, kc_nodrop = prep["kc_all"], prep["kc_nodrop"]
    total = sum(parts.rf)
    n = len(allowed)
    floor_, ceil_ = total // n, -(-total // n)
    excess = sum(max(0, c - ceil_) for c in kc_nodrop.values())
    deficit = sum(max(0, floor_ - c) for c in kc_all.values())
    mandatory = need_total + repairs
    balanced = max(need_total + excess, deficit, mandatory)
    bytes_mandatory = (need_bytes + repair_bytes) if parts.sizes_known else None
    to_mean = None
    if loads.weighted:
        # weighted (bytes or rates) the plan balances the weight, not counts: the count bound
        # does not apply
        moves_lb = mandatory
    if loads.bytes_mode:
        # bytes above a broker's target (the mean, or its capacity's share of the total) must
        # leave it, bytes missing below it must arrive
        target_bytes = sum(rf * s for rf, s in zip(parts.rf, parts.size))
        kb_all, kb_nodrop = prep["kb_all"], prep["kb_nodrop"]
        share = loads.capw or dict.fromkeys(allowed, 1)
        c = sum(share[b] for b in allowed)
        above = sum(max(0, c * v - target_bytes * share[b]) for b, v in kb_nodrop.items()) // c
        below = sum(max(0, target_bytes * share[b] - c * v) for b, v in kb_all.items()) // c
        to_mean = max(need_bytes + above, below, bytes_mandatory or 0)
    if not loads.weighted:
        moves_lb = balanced
    return {
        "moves": moves_lb,
        "moves_mandatory": mandatory,
        "bytes_mandatory": bytes_mandatory,
        # by bytes: what bringing every broker exactly to the mean would copy at least (the plan
        # stops within about one partition of the mean, so it may copy a little less)
        "bytes_to_reach_mean": to_mean,
        "replicas_to_replace": need_total,
        "rack_repairs": repairs,
        "excess_above_ceil": excess,
        "deficit_below_floor": deficit,
        "target_per_broker": [floor_, ceil_],
    }


# ---------------------------------------------------------------------------------------------
def kafka_generate(st: PlacementState, seed: int) -> dict[str, Any]:
    """What ``kafka-reassign-partitions.sh --generate`` would propose for the same goal.

    Kafka calls ``AdminUtils.assignReplicasToBrokers`` once per topic with the broker list (here:
    the brokers the goal allows), the topic's partition count and RF (the target RF) and a random
    start index and shift; kops draws those from ``random.Random(seed)``, topics in name order,
    so the figure is reproducible.
    """
    try:
        from kops.placement.kafka_assign import assign_topics
    except ImportError as e:  # pragma: no cover - the module ships with kops
        return {"available": False, "reason": f"kafka_assign unavailable: {e}"}
    topo = st.topo
    brokers = [(b, topo.rack_of(b)) for b in st.allowed]
    with_rack = [b for b, r in brokers if r is not None]
    if with_rack and len(with_rack) != len(brokers):
        return {
            "available": False,
            "reason": "Not all brokers have rack information (Kafka's --generate refuses without --disable-rack-aware)",
        }
    rng = random.Random(seed)
    parts = st.parts
    by_topic: dict[str, list[int]] = defaultdict(list)
    for i, (t, _) in enumerate(parts.tps):
        by_topic[t].append(i)
    new_reps: list[Sequence[int]] = [()] * len(parts.tps)
    names = sorted(by_topic)
    try:
        done = assign_topics(brokers, [(len(by_topic[t]), parts.rf[by_topic[t][0]]) for t in names], rng=rng)
        for t, res in zip(names, done):
            for k, p in enumerate(by_topic[t]):
                new_reps[p] = res[k]
    except Exception as e:  # Kafka would fail too: report its reason
        return {"available": False, "reason": str(e)}
    moves = nbytes = changed = 0
    size = parts.size
    for p, new in enumerate(new_reps):
        old = parts.orig[p]
        if tuple(new) != tuple(old):
            changed += 1
            m = moved(old, new)
            moves += m
            nbytes += m * size[p]
    unsafe = len(st.racks.safety.unsafe(new_reps))
    repl = _replica_counts(new_reps, st.allowed)
    lead = slot_counts(new_reps, st.allowed, 0)
    return {
        "available": True,
        "seed": seed,
        "replicas_moved": moves,
        "bytes_moved": nbytes if parts.sizes_known else None,
        "partitions_changed": changed,
        "rack_violations": unsafe,
        "replica_spread": spread(repl),
        "leader_spread": spread(lead),
    }


def _replica_counts(reps: Iterable[Sequence[int]], brokers: Iterable[int]) -> dict[int, int]:
    seen = Counter(chain.from_iterable(reps))
    return {b: seen.get(b, 0) for b in sorted(set(brokers))}


def _weighted_counts(reps: Sequence[Sequence[int]], w: Sequence[int], brokers: Iterable[int]) -> dict[int, int]:
    c: dict[int, int] = defaultdict(int)
    for r, x in zip(reps, w):
        if x:
            for b in r:
                c[b] += x
    return {b: c.get(b, 0) for b in sorted(set(brokers))}


# ---------------------------------------------------------------------------------------------
def build_report(
    st: PlacementState,
    before: Mapping[TopicPartition, tuple[int, ...]],
    target: Mapping[TopicPartition, tuple[int, ...]],
    changes: Mapping[TopicPartition, tuple[int, ...]],
    lower: dict[str, Any],
    kafka: dict[str, Any] | None,
    throttle: int | None,
    complete: bool,
) -> dict[str, Any]:
    topo = st.topo
    scoped = st.parts
    idx = {tp: i for i, tp in enumerate(scoped.tps)}
    moves = nbytes = leader_changes = reorder_only = 0
    in_bytes: dict[int, int] = defaultdict(int)
    out_bytes: dict[int, int] = defaultdict(int)
    for tp, new in changes.items():
        old = before[tp]
        p = idx[tp]
        m = [b for b in new if b not in old]
        moves += len(m)
        nbytes += len(m) * scoped.size[p]
        if set(new) == set(old):
            reorder_only += 1
        if not old or new[0] != old[0]:
            leader_changes += 1
        if m and scoped.sizes_known:
            cur = scoped.scope[p]
            src = cur.leader if cur.leader is not None and cur.leader >= 0 else (old[0] if old else None)
            for b in m:
                in_bytes[b] += scoped.size[p]
                if src is not None:
                    out_bytes[src] += scoped.size[p]

    # rack-safety before (over every broker of the cluster) and after (over the allowed brokers)
    all_racks = {b.id: b.rack for b in topo.brokers}
    for r in before.values():
        for b in r:
            all_racks.setdefault(b, None)
    before_safety = RackSafety(RackTree.build(all_racks))
    viol_before = [scoped.tps[i] for i in before_safety.unsafe(scoped.orig)]
    # every partition in scope is safe after the plan except those a bounded plan left alone
    left = sorted(st.unrepaired)
    viol_after = [scoped.tps[left[i]] for i in st.racks.safety.unsafe([st.reps[p] for p in left])]

    # per-broker counts over the whole cluster (every partition; changes applied)
    brokers = sorted(set(all_racks))
    n_all = sum(len(t.partitions) for t in topo.topics)
    if n_all == len(scoped.tps):
        old_all: Sequence[Sequence[int]] = scoped.orig
        new_all: Sequence[Sequence[int]] = [target[tp] for tp in scoped.tps]
        size_all: Sequence[int] = scoped.size
    else:
        parts = sorted(topo.partitions(), key=lambda p: p.tp)
        old_all = [p.replicas for p in parts]
        new_all = [changes.get(p.tp, p.replicas) for p in parts]
        size_all = [p.size_bytes or 0 for p in parts]
    rb = _replica_counts(old_all, brokers)
    ra = _replica_counts(new_all, brokers)
    lb = slot_counts(old_all, brokers, 0)
    la = slot_counts(new_all, brokers, 0)
    fb = slot_counts(old_all, brokers, 1)
    fa = slot_counts(new_all, brokers, 1)
    bb = _weighted_counts(old_all, size_all, brokers)
    ba = _weighted_counts(new_all, size_all, brokers)
    sizes = scoped.sizes_known
    broker_rows = []
    for b in brokers:
        row: dict[str, Any] = {
            "id": b,
            "rack": all_racks[b],
            "allowed": b in st.allowed_set,
            "replicas_before": rb[b],
            "replicas_after": ra[b],
            "leaders_before": lb[b],
            "leaders_after": la[b],
            "first_followers_before": fb[b],
            "first_followers_after": fa[b],
        }
        if sizes:
            row["bytes_before"] = bb[b]
            row["bytes_after"] = ba[b]
        broker_rows.append(row)
    rack_rows: dict[str, dict[str, Any]] = {}
    for row in broker_rows:
        key = row["rack"] if row["rack"] is not None else "(none)"
        rr = rack_rows.setdefault(
            key, {"rack": key, "brokers": 0, "replicas_before": 0, "replicas_after": 0, "leaders_before": 0, "leaders_after": 0}
        )
        rr["brokers"] += 1
        for k in ("replicas_before", "replicas_after", "leaders_before", "leaders_after"):
            rr[k] += row[k]

    # balance over what the planner balances: partitions in scope, allowed brokers (where the
    # scope is every partition, the counts above are those: read on the allowed brokers)
    allowed = st.allowed
    if old_all is scoped.orig and st.allowed_set.issubset(all_racks):
        spreads = [spread({b: c[b] for b in allowed}) for c in (rb, ra, lb, la, fb, fa, bb, ba)]
    else:
        orig_reps = [before[tp] for tp in scoped.tps]
        new_reps = [target[tp] for tp in scoped.tps]
        spreads = [spread(c) for c in (
            _replica_counts(orig_reps, allowed), _replica_counts(new_reps, allowed),
            slot_counts(orig_reps, allowed, 0), slot_counts(new_reps, allowed, 0),
            slot_counts(orig_reps, allowed, 1), slot_counts(new_reps, allowed, 1),
            *((_weighted_counts(orig_reps, scoped.size, allowed), _weighted_counts(new_reps, scoped.size, allowed))
              if sizes else ()))]
    balance = {"brokers": len(allowed)}
    for name, x in zip(("replica_spread_before", "replica_spread_after", "leader_spread_before",
                        "leader_spread_after", "first_follower_spread_before", "first_follower_spread_after",
                        *(("bytes_spread_before", "bytes_spread_after") if sizes else ())), spreads):
        balance[name] = x

    duration: dict[str, Any] | None = None
    if throttle:
        if sizes:
            bottleneck = max([*in_bytes.values(), *out_bytes.values(), 0])
            duration = {
                "throttle_bytes_per_s": throttle,
                "seconds": round(nbytes / throttle, 1),
                "seconds_parallel": round(bottleneck / throttle, 1),
                "assumptions": (
                    "seconds = bytes moved / throttle (one stream at the throttle rate; an upper "
                    "estimate). seconds_parallel = busiest broker's bytes in or out / throttle: "
                    "Kafka's --throttle caps each broker's replication in and out, all moves run "
                    "at once, new replicas copy from the current leader; both ignore new writes "
                    "during the move and assume the throttle is the bottleneck (not disk/network)."
                ),
            }
        else:
            duration = {
                "throttle_bytes_per_s": throttle,
                "seconds": None,
                "seconds_parallel": None,
                "assumptions": "partition sizes unknown (snapshot without size_bytes): no estimate",
            }

    def examples(tps: list[TopicPartition], safety: RackSafety, source: Mapping) -> list[str]:
        out = []
        for tp in tps[:5]:
            out.append(f"{tp[0]}-{tp[1]}: {safety.violation(source[tp])}")
        return out

    return {
        "goal": {**st.goal.to_dict(), "description": st.goal.describe()},
        "balance_by": "bytes" if st.loads.bytes_mode else ("bytes-in" if st.loads.weighted else "replicas"),
        "partitions_in_scope": len(scoped.tps),
        "replicas_moved": moves,
        "bytes_moved": nbytes if sizes else None,
        "partitions_changed": len(changes),
        "reorder_only_partitions": reorder_only,
        "preferred_leader_changes": leader_changes,
        "lower_bound": lower,
        "kafka_generate": kafka,
        "rack_violations_before": len(viol_before),
        "rack_violations_after": len(viol_after),
        "rack_violation_examples_before": examples(viol_before, before_safety, before),
        "rack_violation_examples_after": examples(viol_after, st.racks.safety, target),
        "balance": balance,
        "bounded": {
            "max_moves": st.budget.max_moves,
            "max_bytes": st.budget.max_bytes,
            "complete": complete,
            "forced_over_budget": st.budget.forced,
            "partitions_left_for_next_run": len(st.unrepaired),
        },
        "duration": duration,
        "notes": list(st.res.notes)
        + ([] if sizes else ["partition sizes unknown: balancing replica counts; bytes not reported"]),
        "brokers": broker_rows,
        "racks": [rack_rows[k] for k in sorted(rack_rows)],
    }


def goals_report(st: PlacementState, report: dict[str, Any], done: Optimized, chosen: Sequence[str]
                 ) -> dict[str, dict[str, Any]]:
    """Every goal's figures before and after the plan (:func:`kops.placement.goals.evaluate`;
    rack safety is taken from the report), and for each balance goal its verdict: ``better``,
    ``unchanged`` or ``worse`` (how far the brokers are outside its band, ``off_band_*``). A goal
    of the set that ends worse says why (``why``, and ``forced_by``: the stages before its turn
    that moved replicas -- the plan's forced moves or earlier goals -- after which its own pass
    could not get back without making an earlier goal worse)."""
    rack = goals.figures("rack", "rack-unsafe partitions", report["rack_violations_before"],
                         report["rack_violations_after"], 0, met=not report["rack_violations_after"], hard=True)
    full_before = st.topo.assignment()
    every = len(st.parts.tps) == len(full_before)
    # where every partition is balanced, the report's per-broker counts (over the whole cluster,
    # every allowed broker among them) are the evaluation's: not counted again
    rows = report["brokers"]
    counted = {(when, slot): {row["id"]: row[f"{what}_{when}"] for row in rows}
               for when in ("before", "after") for slot, what in ((None, "replicas"), (0, "leaders"), (1, "first_followers"))
               } if every and st.allowed_set.issubset(row["id"] for row in rows) else None
    # and so are its bytes per broker, where every size is an integer of at least 0 (the report
    # sums them as integers; the evaluation as floats, the same numbers: Evaluation.summed)
    summed = {when: {row["id"]: row[f"bytes_{when}"] for row in rows} for when in ("before", "after")
              } if counted is not None and st.parts.sizes_known and \
        all(type(s) is int and s >= 0 for s in (p.size_bytes for p in st.parts.scope)) else None
    out = goals.evaluate(st.topo, full_before, {**full_before, **done.target}, brokers=st.allowed,
                         known={"rack": rack}, threshold=st.limits.disk_threshold,
                         nw_threshold=goals.DEFAULT_THRESHOLD, band_share=st.band_share,
                         scope=None if every else set(st.parts.tps), counted=counted, summed=summed)
    for name, v in out.items():
        if v.get("verdict") == "worse":
            v["why"], v["forced_by"] = _why(name, v, done, chosen, st.goal.kind)
    return out


def _why(name: str, v: dict[str, Any], done: Optimized, chosen: Sequence[str], kind: str) -> tuple[str, list[str]]:
    """Why goal ``name`` ends further off its band than it started (see :func:`goals_report`):
    the stages that took it further off (from the plan's record of every tracked goal after each
    stage), and what its own pass reached."""
    if name not in chosen:
        return "not among the goals optimised (--goals)", []
    label = {FORCED: kind}
    steps, forced = [], []
    if done.stages and name in done.stages[0][2]:  # a goal tracking the replicas
        prev = round(done.stages[0][2][name], 1)  # (at the report's precision)
        for what, _n, off in done.stages[1:]:
            x = round(off[name], 1)
            if x > prev:
                forced.append(label.get(what, what))
                steps.append(f"{label.get(what, what)}'s moves took it from {_num(prev)} to {_num(x)}")
            elif what == name:
                steps.append(f"its own pass from {_num(prev)} to {_num(x)}")
            prev = x
    lead = done.leadership.get(name if name != "topic-spread" else "topic-spread leaders")
    if lead is not None:
        moving = [label.get(what, what) for what, n, _off in done.stages if n]
        forced += [m for m in moving if m not in forced] if name != "topic-spread" or not forced else []
        steps.append(f"{'its leaders' if name == 'topic-spread' else 'leadership'}: {_num(lead[0])} off the band "
                     f"after the replica moves ({', '.join(moving) or 'none'}), {_num(lead[1])} after "
                     f"{'its pass' if name not in ('leaders', 'first-followers') else 'the leader phase'}")
    if not steps:
        return "its pass did not run (a bounded plan out of budget, or --no-balance)", []
    why = (f"{_num(v['off_band_before'])} off the band before the plan; " + "; ".join(steps) +
           ": no move it could make without making an earlier goal worse brought it back")
    return why, forced


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, int) or float(x).is_integer() else f"{x:.1f}"
