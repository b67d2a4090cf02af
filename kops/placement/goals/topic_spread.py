"""Topic spread: each topic's replicas and preferred leaders per allowed broker within floor/ceil
of the topic's mean (±1) where the brokers allow.

Replicas (:meth:`TopicSpreadGoal.optimize`): per topic, a replica on a broker above the band (or
above the floor, while some broker is below it) moves to a broker short of the topic -- the
round's destination list, least used first on the earliest load goal (:class:`ByCount`) -- if
that keeps every earlier goal; where a single move would make an earlier goal worse (replica
counts held exactly even, say), it swaps with a replica of another topic coming back. Leaders
(:meth:`TopicSpreadGoal.reorder`): the leadership pass of :mod:`~kops.placement.goals.leadership`
with the topic counts. Pure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from heapq import nsmallest
from itertools import islice, repeat
from operator import truediv
from typing import Any

from kops.placement.destinations import ByCount
from kops.placement.goals.base import EPS, LOOK, Move, Mover, PlanGoal, keeps, within
from kops.placement.goals.leadership import Counts, Leadership
from kops.placement.goals.loads import Load
from kops.placement.goals.measure import Assignment, Evaluation, off_band, spread
from kops.placement.state import PlacementState

__all__ = ["TopicSpreadGoal"]

#: swaps tried per replica of topic spread: destinations, and partitions coming back from each
#: (more on a small cluster, where a replica has few destinations; at least these)
PAIR_DSTS, PAIR_QS = 2, 8


class TopicSpreadGoal(PlanGoal):
    """Each topic's replicas per allowed broker, and its band floor/ceil of the mean (of the
    plan's target: its partitions at their target RF). Kept current by the state (:meth:`moved`)."""

    name = "topic-spread"
    checks_leaving = True

    def __init__(self, st: PlacementState, lists: Sequence[Sequence[int]] | None = None):
        self.topic = [tp[0] for tp in st.tps]
        self.count: dict[str, Counter[int]] = defaultdict(Counter)
        self.parts: dict[str, list[int]] = defaultdict(list)
        self.allowed = allowed = st.allowed_set
        target: Counter[str] = Counter()
        for p, r in enumerate(st.reps if lists is None else lists):
            t = self.topic[p]
            self.parts[t].append(p)
            target[t] += st.rf[p]
            c = self.count[t]
            for b in r:
                if b in allowed:
                    c[b] += 1
        n = self.n = len(st.allowed)
        self.band = {t: (k // n, -(-k // n)) for t, k in target.items()}
        self.off = self._off()
        self.pair_dsts = max(PAIR_DSTS, min(16, 512 // max(n, 1)))
        self.pair_qs = max(PAIR_QS, min(64, 2048 // max(n, 1)))

    def dist(self, key: tuple[str, int], delta: int = 0) -> int:
        t, b = key
        lo, hi = self.band[t]
        c = self.count[t][b] + delta
        return max(0, c - hi) + max(0, lo - c)

    def total(self) -> int:
        """How far the topics' replicas per broker are outside their bands, summed (a broker
        holding none of a topic is ``lo`` below it); kept current by :meth:`moved`."""
        return self.off

    def _off(self) -> int:
        n = self.n
        out = 0
        for t, c in self.count.items():
            lo, hi = self.band[t]
            out += sum(max(0, x - hi) + max(0, lo - x) for x in c.values()) + (n - len(c)) * lo
        return out

    def deltas(self, moves: Sequence[Move]) -> dict[tuple[str, int], int]:
        d: dict[tuple[str, int], int] = defaultdict(int)
        for p, src, dst in moves:
            t = self.topic[p]
            d[(t, src)] -= 1
            d[(t, dst)] += 1
        return d

    def moved(self, p: int, old: Sequence[int], new: Sequence[int]) -> None:
        """Partition ``p``'s replicas went from ``old`` to ``new`` (:meth:`PlacementState.move`)."""
        t = self.topic[p]
        c, (lo, hi), allowed = self.count[t], self.band[t], self.allowed
        for b in old:
            if b not in new and b in allowed:
                x = c[b]
                self.off += (max(0, x - 1 - hi) + max(0, lo - x + 1)) - (max(0, x - hi) + max(0, lo - x))
                c[b] = x - 1
        for b in new:
            if b not in old and b in allowed:
                x = c[b]
                self.off += (max(0, x + 1 - hi) + max(0, lo - x - 1)) - (max(0, x - hi) + max(0, lo - x))
                c[b] = x + 1

    # (counts are integers: one replica off a count ``a`` brings it one closer to the band when
    # a > hi, one further when a <= lo; one onto ``b``, closer when b < lo, further when b >= hi)
    def keeps1(self, p: int, src: int, dst: int) -> bool:
        t = self.topic[p]
        return self.keeps_off(p, src) and self.count[t].get(dst, 0) < self.band[t][1]

    def keeps_off(self, p: int, src: int) -> bool:
        """:meth:`keeps1`'s side of ``src``, whatever the destination."""
        t = self.topic[p]
        return self.count[t].get(src, 0) > self.band[t][0]

    def gain1(self, p: int, src: int, dst: int) -> float:
        t = self.topic[p]
        lo, hi = self.band[t]
        get = self.count[t].get
        a, b = get(src, 0), get(dst, 0)
        return (a > hi) - (a <= lo) + (b < lo) - (b >= hi)

    def gain2(self, p: int, q: int, src: int, dst: int) -> float:
        """p's replica src -> dst and q's dst -> src (a swap; of one topic: no change)."""
        if self.topic[p] == self.topic[q]:
            return 0.0
        return self.gain1(p, src, dst) + self.gain1(q, dst, src)

    def keeps2(self, p: int, q: int, src: int, dst: int) -> bool:
        return keeps(self, ((p, src, dst), (q, dst, src)))

    def optimize(self, mover: Mover) -> int:
        st, ts = mover.st, self
        made = 0
        allowed = st.allowed
        # destinations are tried least used first on the earlier goals' first load (keeps them)
        first = next((g for g in mover.guards if isinstance(g, Load)), None)
        fload, fcap = (first.load, first.cap) if first is not None else (None, None)

        def uneven(t: str) -> bool:
            lo, hi = ts.band[t]
            get = ts.count[t].get
            cs = [get(b, 0) for b in allowed]
            return min(cs) < lo or max(cs) > hi

        todo = sorted(ts.parts)
        # a swap evens one topic with a replica of another coming back: a topic evened earlier in
        # the sweep may be uneven again at its end, so the topics still uneven get another sweep
        for _sweep in range(3):
            sweep_made = made
            for t in todo:
                lo, hi = ts.band[t]
                cnt = ts.count[t]
                if not uneven(t):
                    continue
                get = cnt.get
                failed: set[tuple[int, int]] = set()  # (a later round of the topic gives them no new taker)
                for _round in range(3):
                    # the first brokers below the band's top by (count, first load's use, id): keys built
                    # by map and zip (no call per broker), the smallest taken (no sort of them all)
                    counts = map(get, allowed, repeat(0))
                    if fload is not None:
                        uses = map(truediv, map(fload.__getitem__, allowed), map(fcap.__getitem__, allowed))
                        keys = zip(counts, uses, allowed)
                    else:
                        keys = zip(counts, allowed)
                    under = [k[-1] for k in nsmallest(LOOK, (k for k in keys if k[0] < hi))]
                    short = bool(under) and get(under[0], 0) < lo  # a broker below the band
                    head = ByCount(under, cnt, st.limits.takes_none(ts.parts[t]))
                    progressed = False
                    for p in ts.parts[t]:
                        for src in list(st.reps[p]):
                            if src not in st.allowed_set or (p, src) in failed:
                                continue
                            c = get(src, 0)
                            # in the band: moved only to fill a broker below it, from above the floor
                            if lo <= c <= hi and not (c > lo and short):
                                continue
                            dst = self._even_one(mover, p, src, head)
                            if dst is not None:
                                head.moved(src, dst)
                                made += 1
                                progressed = True
                                short = bool(under) and get(under[0], 0) < lo
                            else:
                                failed.add((p, src))
                            if st.budget.hit:
                                return made
                    if not progressed:
                        break
            if made == sweep_made:
                break
            todo = [t for t in todo if uneven(t)]
        return made

    def _even_one(self, mover: Mover, p: int, src: int, head: ByCount) -> int | None:
        """Move p's replica on src to a broker where its topic is short; where that alone would
        make an earlier goal worse (replica counts held at floor/ceil, disks in their band), swap
        it for a replica of another topic coming back, which keeps the brokers' loads. Returns the
        broker the replica went to, or None when nothing moved.

        The earlier goals are checked by interval (:meth:`Load.room`): once per broker, then one
        comparison per goal and candidate."""
        st, ts = mover.st, self
        t = ts.topic[p]
        most = ts.count[t][src] - 2  # (the walk: the round's destinations holding at most this many)
        srooms = mover.rooms(src)
        checked = len(srooms) == len(mover.guards)  # (every guard is a load: the rooms check them all)
        # the earlier goals' side of src does not depend on the destination: checked once; the
        # destinations' rooms first (on a large cluster most of the walk's brokers sit at the top
        # of the network-in band), then the hard checks (passed: try_moves does not repeat them)
        if within(srooms, p, -1.0):
            rooms = mover.rooms
            for dst in _takers(st, p, src, (d for d in head.upto(most) if within(rooms(d), p))):
                if ts.gain1(p, src, dst) <= EPS:
                    continue  # (e.g. off a broker above the band onto one at its top: try_moves refuses it)
                if mover.try_moves(((p, src, dst),), ts, checked, hard=True):
                    return dst
        if not mover.guards:
            return None
        # a swap: with the walk's first brokers that pass the hard checks, whatever their rooms
        cands = list(islice(_takers(st, p, src, head.upto(most)), ts.pair_dsts))
        keeps_q = ts.keeps1
        for dst in cands:
            # the swap's net change x = w(p) - w(q) moves src by -x and dst by +x: per goal, the
            # interval both rooms allow
            xs = [(w, w[p] - min(-slo, dhi), w[p] - max(-shi, dlo))  # bounds on w(q)
                  for (w, slo, shi), (_w, dlo, dhi) in zip(srooms, mover.rooms(dst))]
            looked = scanned = 0
            for q in st.on[dst]:
                scanned += 1
                if scanned > LOOK:
                    break
                # (a replica coming back whose own topic it would take off its band: not tried)
                if ts.topic[q] == t or src in st.reps[q] or not keeps_q(q, dst, src):
                    continue
                looked += 1
                if looked > ts.pair_qs:
                    break
                if within(xs, q) and mover.try_moves(((p, src, dst), (q, dst, src)), ts, checked, hard=True):
                    return dst
        return None

    @classmethod
    def track(cls, st: PlacementState, lists: Sequence[Sequence[int]] | None = None) -> TopicSpreadGoal:
        return cls(st, lists)

    @classmethod
    def reorder(cls, lead: Leadership, guards: list[Counts]) -> dict[str, int]:
        """Each topic's preferred leaders within floor/ceil of its mean (leadership swaps)."""
        reps, topic, scope, n = lead.st.reps, lead.topic, lead.scope, lead.n
        counts = Counter((topic[p], reps[p][0]) for p in scope)
        per_topic = Counter(topic[p] for p in scope)
        obj = Counts("topic", counts, None, topic=topic, bands={t: (k // n, -(-k // n)) for t, k in per_topic.items()})
        made = lead.run(cls.name, obj, guards)
        guards.append(obj)
        return {"topic-spread leaders": made}

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        f = _topic_figures(ev)
        wb, wa, bound = f["uneven_before"], f["uneven_after"], f["bound"]
        (rb, lb), (ra, la) = f["off_before"], f["off_after"]
        # how far: the replicas and leaders a broker holds above or below its topic's floor/ceil
        return ev.figures(cls.name, "topics whose replicas or leaders per broker differ by more than 1",
                          len(wb), len(wa), bound, met=None if bound is None else len(wa) <= bound,
                          blockers=wa[:10], off_band_before=int(rb + lb), off_band_after=int(ra + la),
                          replicas_off_band=[int(rb), int(ra)], leaders_off_band=[int(lb), int(la)])


def _takers(st: PlacementState, p: int, src: int, short: Iterator[int]) -> Iterator[int]:
    """The first brokers of ``short`` (those of the round's destination list holding few
    enough replicas of p's topic, :meth:`ByCount.upto`; for a direct move, those of them with
    room on the earlier goals) that may take p's replica on src at all: not holding p,
    rack-safe, within the disk and network limits (the hard checks of :meth:`Mover.try_moves`)."""
    r = st.reps[p]
    fits = st.limits.fits if st.limits.limited else None
    safe = st.safety.replacing(r, src)
    found = 0
    for d in short:
        if d in r or (fits is not None and not fits(d, p)) or not safe(d):
            continue
        yield d
        found += 1
        if found >= LOOK // 8:
            return


def _topic_counts(assign: Assignment, ids: Sequence[int]) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int]]]:
    """Each topic's replicas and preferred leaders per broker of ``ids``."""
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
    return reps, leads


def _topic_figures(ev: Evaluation) -> dict[str, Any]:
    """Topics whose replicas or leaders per broker (over ``ids``) spread by more than 1, before
    and after; the bound: 0 where every topic can be even (no racks, or racks of equal size),
    None (not computed) where racks of different sizes may force a topic's replicas onto the
    brokers of a small rack; and how far off they are: the replicas and leaders above or below
    their topic's floor/ceil of the mean after the plan (its target), summed over topics and
    brokers -- replicas and leaders apart too."""
    ids = ev.ids
    n = len(ids)
    counts = {when: _topic_counts(ev.assignment(when, True), ids) for when in ("before", "after")}
    bands = [{t: (sum(c.values()) // n, -(-sum(c.values()) // n)) for t, c in part.items()}
             for part in counts["after"]]
    out: dict[str, Any] = {}
    for when, parts in counts.items():
        out[f"uneven_{when}"] = sorted(t for t in parts[0] if spread(parts[0][t].values()) > 1
                                       or spread(parts[1][t].values()) > 1)
        out[f"off_{when}"] = [sum(off_band(c.values(), *band.get(t, (0, 0))) for t, c in part.items())
                              for part, band in zip(parts, bands)]
    sizes: Counter[str | None] = Counter(ev.topo.rack_of(b) for b in ids)
    out["bound"] = 0 if len(set(sizes.values())) <= 1 else None
    return out
