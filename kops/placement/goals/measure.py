"""Measuring goals on an assignment before and after a plan: the data every goal's
:meth:`~kops.placement.goals.base.PlanGoal.measure` reads (:class:`Evaluation`, per-broker sums
computed once and shared) and the shape of a goal's figures (:func:`figures`). Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

from kops.model import TopicPartition, Topology
from kops.placement.capacity import disk_capacity, shared_disks

Assignment = Mapping[TopicPartition, Sequence[int]]

#: the per-broker sums over the partitions balanced that equal one over every partition when
#: every partition is balanced (:meth:`Evaluation.per_broker`)
_WHOLE = {"bal-size": "size", "bal-rate": "nw-in-capacity"}


class Evaluation:
    """One evaluation of goals (:func:`kops.placement.goals.evaluate`): the topology, the
    assignments before and after (every partition), the brokers balanced over (``ids``), the
    partitions balanced (``scope``: the balance goals' figures are over them; None: all), the
    thresholds and the balance band, and what the goals read of the data: sizes, rates,
    capacities."""

    def __init__(self, topo: Topology, before: Assignment, after: Assignment, ids: list[int], threshold: float,
                 fanout: float, nw_threshold: float | None, hard: frozenset[str], band_share: float,
                 scope: set | None = None):
        self.topo, self.before, self.after, self.ids = topo, before, after, ids
        self.threshold, self.fanout, self.nw_threshold, self.hard = threshold, fanout, nw_threshold, hard
        self.band_share = band_share
        if scope is None:
            self.bal_before, self.bal_after = before, after
        else:
            self.bal_before = {tp: r for tp, r in before.items() if tp in scope}
            self.bal_after = {tp: r for tp, r in after.items() if tp in scope}
        parts = {p.tp: p for p in topo.partitions()}
        self.size = {tp: p.size_bytes for tp, p in parts.items()}
        self.rate = {tp: p.bytes_in_per_s for tp, p in parts.items()}
        self.sizes_known = bool(self.size) and all(v is not None for v in self.size.values())
        self.rates_known = bool(self.rate) and all(v is not None for v in self.rate.values())
        cap = {b: topo.broker(b).capacity if topo.broker(b) else None for b in ids}
        self.shared = shared_disks(topo)
        self.disk_cap = {b: c for b in ids if (c := disk_capacity(topo.broker(b), self.shared))}
        self.in_cap = {b: c.nw_in_bytes_per_s for b, c in cap.items() if c is not None and c.nw_in_bytes_per_s}
        self.out_cap = {b: c.nw_out_bytes_per_s for b, c in cap.items() if c is not None and c.nw_out_bytes_per_s}
        # per-broker sums more than one goal reads (each a pass over every partition), over all of
        # ``ids`` (a goal over fewer brokers takes its brokers' entries: the same sums)
        self._sums: dict[tuple[str, str], dict[int, float]] = {}

    def assignment(self, when: str, balanced: bool = False) -> Assignment:
        if balanced:
            return self.bal_before if when == "before" else self.bal_after
        return self.before if when == "before" else self.after

    def per_broker(self, what: str, when: str) -> dict[int, float]:
        """``size``: bytes per broker; ``nw-in-capacity`` / ``nw-out-capacity``: network use;
        ``bal-size`` / ``bal-rate``: the bytes / bytes-in of the partitions balanced."""
        if self.bal_before is self.before:
            # every partition balanced: the sums over the partitions balanced are those over all
            # (bytes; bytes-in, as network-in use sums them: the same terms in the same order)
            what = _WHOLE.get(what, what)
        got = self._sums.get((what, when))
        if got is None:
            assign = self.assignment(when, what.startswith("bal-"))
            if what in ("size", "bal-size"):
                got = per_broker(assign, self.ids, self.size.get)
            elif what == "bal-rate":
                got = per_broker(assign, self.ids, self.rate.get)
            else:
                got = network_use(assign, self.ids, self.rate, what, self.fanout)
            self._sums[(what, when)] = got
        return got

    def counts(self, when: str, slot: int | None) -> dict[int, int]:
        """Per broker of ``ids``, the partitions balanced it holds (slot None), or holds at replica
        index ``slot`` (0: preferred leader)."""
        got = self._sums.get(("count", when, slot))
        if got is None:
            lists = self.assignment(when, True).values()
            c = Counter(chain.from_iterable(lists)) if slot is None else Counter(r[slot] for r in lists if len(r) > slot)
            got = self._sums[("count", when, slot)] = {b: c.get(b, 0) for b in self.ids}
        return got

    def counted(self, when: str, slot: int | None, per_broker: Mapping[int, int]) -> None:
        """What :meth:`counts` would count, counted by the caller (over every broker of ``ids``
        at least): taken, over ``ids``, instead."""
        self._sums[("count", when, slot)] = {b: per_broker[b] for b in self.ids}

    def summed(self, when: str, per_broker: Mapping[int, int]) -> None:
        """The bytes per broker (:meth:`per_broker`, ``size``) summed by the caller over every
        partition from the same sizes, all integers of at least 0 (over every broker of ``ids``
        at least): taken, over ``ids``, as the floats :meth:`per_broker` sums -- the same numbers,
        since a float holds every integer below 2**53 exactly, each partial sum among them (a
        larger sum is summed again)."""
        if all(per_broker[b] < 1 << 53 for b in self.ids):
            self._sums[("size", when)] = {b: float(per_broker[b]) for b in self.ids}

    def largest(self, weight: Mapping[TopicPartition, float | None]) -> float:
        """The largest weight of a partition balanced."""
        return max((weight.get(tp) or 0 for tp in self.bal_after), default=0)

    def cordoned(self) -> list[int]:
        """The brokers of ``ids`` that are cordoned: they keep what they hold and get no new replica."""
        return [b for b in self.ids if (x := self.topo.broker(b)) is not None and x.cordoned]

    def cordon_level(self, total: float, held: Mapping[int, float], cap: Mapping[int, float] | None = None
                     ) -> tuple[dict[int, float], list[int]] | None:
        """Each broker's share when ``total`` of a load is spread over ``ids`` as evenly as the
        cordoned brokers allow (:func:`cordon_level`; ``held``: what each held before the plan,
        ``cap``: capacities, else equal shares), and the cordoned brokers held below the common
        level; None where no cordoned broker is below it."""
        cordoned = self.cordoned()
        if not cordoned:
            return None
        return cordon_level(total, self.ids, {b: held.get(b, 0.0) for b in cordoned}, cap)

    def unknown(self, goal: str, needs: str) -> dict[str, Any]:
        return {"hard": goal in self.hard, "status": "unknown", "needs": needs}

    def figures(self, goal: str, unit: str, before: Any, after: Any, bound: Any, *, met: bool | None,
                **extra: Any) -> dict:
        return figures(goal, unit, before, after, bound, met=met, hard=goal in self.hard, **extra)


def figures(goal: str, unit: str, before: Any, after: Any, bound: Any, *, met: bool | None, hard: bool,
            **extra: Any) -> dict:
    """A goal's entry in the report: its figure before and after, the bound no placement beats,
    its status (met / not met / reported: a figure without a verdict) and what else it says."""
    d = {"hard": hard, "unit": unit, "before": before, "after": after, "bound": bound,
         "status": "met" if met else ("not met" if met is False else "reported")}
    d.update({k: v for k, v in extra.items() if v not in (None, [], ())})
    return d


def spread(values: Iterable[float]) -> float:
    v = list(values)
    return (max(v) - min(v)) if v else 0.0


def pct(x: float) -> float:
    return round(100.0 * x, 1)


def per_broker(assign: Assignment, brokers: Sequence[int], weight, slots: slice | int | None = None) -> dict[int, float]:
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


def cordon_level(total: float, ids: Sequence[int], most: Mapping[int, float], cap: Mapping[int, float] | None = None
                 ) -> tuple[dict[int, float], list[int]] | None:
    """Each broker's share (its load over its capacity, or the load itself) when ``total`` is
    spread over ``ids`` as evenly as the brokers of ``most`` allow: a cordoned broker gets no new
    replica, so it holds at most what it held (``most[b]``), and the others fill to one common
    level (water-filling). Returns the shares and the brokers of ``most`` held below the level,
    or None where none is (or every broker is one of them). A relaxation, like
    :func:`kops.placement.feasible.count_band`: no placement is more even than these shares."""
    weight = {b: (cap[b] if cap is not None else 1.0) for b in ids}
    if not any(b not in most for b in ids):
        return None
    # the level with every broker taking it, then without the cordoned brokers whose tops are
    # below it, lowest first, each holding its top
    rest, w = total, sum(weight.values())
    below: list[int] = []
    for top, b in sorted((most[b] / weight[b], b) for b in ids if b in most):
        if top >= rest / w:
            break
        below.append(b)
        rest -= most[b]
        w -= weight[b]
    if not below:
        return None
    level = rest / w  # (the others' share: the largest of the shares returned)
    held = set(below)
    return {b: (most[b] / weight[b] if b in held else level) for b in ids}, below


def count_bound(total: int, n: int) -> int:
    """The least spread ``total`` units can have over ``n`` brokers."""
    return 0 if n == 0 or total % n == 0 else 1


def off_band(values: Collection[float], lo: float, hi: float) -> float:
    """How far ``values`` are outside ``[lo, hi]``, summed (0: every one within it)."""
    if not lo <= hi:  # (no band, or not a number: every term as it is)
        return sum(max(0.0, v - hi) + max(0.0, lo - v) for v in values)
    # a value within the band adds nothing, so only the others are summed (a float, 0 for none)
    total = 0.0 if values else 0
    for v in values:
        if v > hi:
            total += v - hi
        elif v < lo:
            total += lo - v
    return total


def added(assign: Assignment, other: Assignment, ids: Sequence[int],
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


def network_use(assign: Assignment, ids: Sequence[int], rate: Mapping[TopicPartition, float | None], goal: str,
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
