"""Topic spread: each topic's replicas and preferred leaders per allowed broker within floor/ceil
of the topic's mean (±1) where the brokers allow.

Replicas (:meth:`TopicSpreadGoal.optimize`): brokers are paired, and between two brokers a
replica of each topic one holds too many of and the other too few goes across -- alone where the
earlier goals allow it, else swapped for a replica of another topic coming back (replica counts
held within floor/ceil, disks in their band). Each broker keeps, per topic number, whether its
cell is above the band, above its floor, below it, at its top (sets kept current on every move),
so that the topics a pair may exchange are a few set operations. Leaders
(:meth:`TopicSpreadGoal.reorder`): the leadership pass of :mod:`~kops.placement.goals.leadership`
with the topic counts. Pure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any

from kops.placement.goals.base import Move, Mover, PlanGoal
from kops.placement.goals.leadership import Counts, Leadership
from kops.placement.goals.measure import Assignment, Evaluation, off_band
from kops.placement.state import PlacementState

__all__ = ["TopicSpreadGoal"]

#: rounds of pairing; brokers of other racks each broker is paired with per round; pairs in a
#: row that move nothing before a broker's round ends; replicas coming back tried per swap (the
#: nearest in size)
ROUNDS, PARTNERS, IDLE, PAIR_QS = 4, 8, 4, 8


class TopicSpreadGoal(PlanGoal):
    """Each topic's replicas per allowed broker, and its band floor/ceil of the mean (of the
    plan's target: its partitions at their target RF). Kept current by the state (:meth:`moved`)."""

    name = "topic-spread"
    checks_leaving = True

    def __init__(self, st: PlacementState, lists: Sequence[Sequence[int]] | None = None):
        # topics by number (in the partitions' order): each partition's topic, each topic's name
        ids: dict[str, int] = {}
        self.topic = [ids.setdefault(tp[0], len(ids)) for tp in st.parts.tps]
        self.names = list(ids)
        k = len(ids)
        self.parts: list[list[int]] = [[] for _ in range(k)]
        self.allowed = allowed = st.allowed_set
        target = [0] * k
        held: list[list[Sequence[int]]] = [[] for _ in range(k)]  # (each topic's lists)
        topic, parts, rf = self.topic, self.parts, st.parts.rf
        for p, r in enumerate(st.reps if lists is None else lists):
            t = topic[p]
            parts[t].append(p)
            target[t] += rf[p]
            held[t].append(r)
        # (a topic's replicas per broker counted by :class:`Counter` in C, the brokers not
        # allowed left out after: the same counts, in the same order, as one replica at a time)
        self.count: list[Counter[int]] = []
        for rs in held:
            c = Counter(chain.from_iterable(rs))
            if not allowed.issuperset(c):
                c = Counter({b: x for b, x in c.items() if b in allowed})
            self.count.append(c)
        n = self.n = len(st.allowed)
        self.band = [(x // n, -(-x // n)) for x in target]
        self.off = self._off()
        # per broker, the topics whose cell is above the band (``over``), above its floor
        # (``spare``: may give one), below the floor (``under``, a topic it holds none of too) and
        # at its top or above (``full``: may take none); kept current by :meth:`moved`. (Sets of
        # topic numbers: their order does not depend on the hash seed.)
        self.over: dict[int, set[int]] = {}
        self.spare: dict[int, set[int]] = {}
        self.under: dict[int, set[int]] = {}
        self.full: dict[int, set[int]] = {}
        self._sets(st.allowed)
        #: per broker (asked for), its partitions by topic
        self._by_topic: dict[int, dict[int, list[int]]] = {}
        self._on = st.index.on
        #: the partitions moved while :meth:`optimize` runs (None: not logged)
        self._log: list[int] | None = None

    def dist(self, key: tuple[int, int], delta: int = 0) -> int:
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
        for c, (lo, hi) in zip(self.count, self.band):
            # (integers: a count within the band adds 0, one above it only x - hi, below only lo - x)
            out += sum(x - hi if x > hi else lo - x for x in c.values() if x > hi or x < lo) + (n - len(c)) * lo
        return out

    def deltas(self, moves: Sequence[Move]) -> dict[tuple[int, int], int]:
        d: dict[tuple[int, int], int] = defaultdict(int)
        for p, src, dst in moves:
            t = self.topic[p]
            d[(t, src)] -= 1
            d[(t, dst)] += 1
        return d

    def moved(self, p: int, gone: Sequence[int], came: Sequence[int]) -> None:
        """Partition ``p`` left the brokers ``gone`` and came to ``came`` (:meth:`PlacementState.move`)."""
        t = self.topic[p]
        c, (lo, hi), allowed, by_topic = self.count[t], self.band[t], self.allowed, self._by_topic
        over, full, spare, under = self.over, self.full, self.spare, self.under
        if self._log is not None:
            self._log.append(p)
        off = 0  # (the change of :attr:`off`, added once)
        for b in gone:
            if b in allowed:
                x = c.get(b, 0)
                # (one off a cell above the band brings it nearer; at or below the floor, further)
                off += (x <= lo) - (x > hi)
                c[b] = x - 1
                # its place in b's sets (x -> x - 1: it may leave over / spare / full, join under)
                if x == hi + 1:
                    over[b].discard(t)
                elif x == hi:
                    full[b].discard(t)
                if x == lo + 1:
                    spare[b].discard(t)
                elif x == lo:
                    under[b].add(t)
                if b in by_topic:
                    by_topic[b][t].remove(p)
        for b in came:
            if b in allowed:
                x = c.get(b, 0)
                off += (x >= hi) - (x < lo)
                c[b] = x + 1
                if x == hi:
                    over[b].add(t)
                elif x == hi - 1:
                    full[b].add(t)
                if x == lo:
                    spare[b].add(t)
                elif x == lo - 1:
                    under[b].discard(t)
                if b in by_topic:
                    by_topic[b][t].append(p)
        self.off += off

    def _sets(self, ids: Sequence[int]) -> None:
        """Each broker's sets from the counts, a broker at a time, its cells in topic order (a
        comprehension per set, not four set operations per cell): ``over`` and ``spare`` from
        empty, ``under`` from every topic whose floor is 1 or more less those held at or above it,
        ``full`` from every topic whose top is 0 plus those held at or above it. (The order each
        set gets its elements in is that of topics: a set's iteration order follows it.)"""
        band = self.band
        lo_of, hi_of = [lo for lo, _hi in band], [hi for _lo, hi in band]
        floor1 = {t for t, lo in enumerate(lo_of) if lo >= 1}
        full0 = {t for t, hi in enumerate(hi_of) if hi <= 0}
        cells: dict[int, list[tuple[int, int]]] = {b: [] for b in ids}  # (per broker: its topics in order)
        for t, c in enumerate(self.count):
            for b, x in c.items():
                cells[b].append((t, x))
        for b in ids:
            held = cells[b]
            self.over[b] = {t for t, x in held if x > hi_of[t]}
            self.spare[b] = {t for t, x in held if x > lo_of[t]}
            # (a count is 1 or more: a topic held below its floor has a floor of 2 or more, in
            # ``floor1`` already; one held at or above it leaves)
            under = self.under[b] = set(floor1)
            full = self.full[b] = set(full0)
            for t, x in held:  # (one discard at a time: ``difference_update`` resizes the table after)
                if x >= lo_of[t]:
                    under.discard(t)
                if x >= hi_of[t]:
                    full.add(t)

    def by_topic(self, b: int) -> dict[int, list[int]]:
        """Broker ``b``'s partitions by topic (kept current once asked for)."""
        got = self._by_topic.get(b)
        if got is None:
            got = self._by_topic[b] = defaultdict(list)
            topic = self.topic
            for p in self._on[b]:
                got[topic[p]].append(p)
        return got

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
        """A swap of two replicas of one topic changes no count; of two topics, each of its four
        cells by one, which keeps a cell iff it was above the floor (one less) or below the top
        (one more): :func:`~kops.placement.goals.base.keeps` of the two moves, without building their deltas."""
        return self.topic[p] == self.topic[q] or (self.keeps1(p, src, dst) and self.keeps1(q, dst, src))

    def swappable(self, ps: Sequence[int], qs: Sequence[int], src: int, dst: int) -> bool:
        """A swap keeps the counts when its two replicas are of one topic, else when each side
        keeps them (:meth:`keeps2`): none of ``ps`` x ``qs`` can when no topic is on both sides
        and no replica of one side may move."""
        # (:meth:`keeps1` of a replica of topic t going src -> dst is ``t in spare[src] - full[dst]``:
        # the sets are the counts' ``> lo`` and ``>= hi``, kept current by :meth:`moved`)
        # (each side's few topics looked up in the sets, not the sets' difference built: a broker
        # is above its floor in hundreds of topics)
        at = self.topic.__getitem__
        tp = set(map(at, ps))
        if not tp.isdisjoint(map(at, qs)):
            return True
        s, f = self.spare[src], self.full[dst]
        if not any(t in s and t not in f for t in tp):
            return False
        s, f = self.spare[dst], self.full[src]
        return any(t in s and t not in f for t in map(at, qs))

    def optimize(self, mover: Mover) -> int:
        """Brokers paired, the most off their topics' bands first: between two brokers, a replica
        of each topic one holds above its band (or above its floor, where the other is below it)
        and the other holds below its top goes across -- taking no topic cell further off its
        band -- alone where the earlier goals' rooms take it, else swapped for a replica coming
        back (one that gains too, else one that keeps its own topic), the nearest in size that
        the rooms take (the disk band). Partners: the broker's rack first (always rack-safe), then
        :data:`PARTNERS` others, from a place that moves on every round; rounds repeat while they
        make progress, and a pass that moved anything starts again as a fresh plan of its result
        would, until such a start moves nothing (the plan is its own fixed point)."""
        st = mover.st
        made = 0
        self._log = []
        # passes of rounds until one makes no move, then again as a fresh plan of the result would
        # start (nothing stuck, nothing to try first, round 0's partners): a pass that ends after
        # its first round moved nothing leaves a result a fresh plan's first round moves nothing
        # in, so moves nothing at all in (each move takes the topics' sum off the bands one
        # nearer: the passes end; bounded by the brokers besides)
        for _cycle in range(len(st.allowed)):
            moved, hit = self._pass(mover)
            made += moved
            if hit or not moved:
                break
        self._log = None
        return made

    def _pass(self, mover: Mover) -> tuple[int, bool]:
        """Rounds of pairs from a fresh start, until one makes no move: (moves made, whether the
        plan's budget was hit)."""
        st = mover.st
        made = 0
        # brokers a whole round found nothing for, each with the brokers its pairs looked at
        # (itself and its partners, in order): not tried again until a move changes one of those
        # (the brokers of a moved partition's list: their cells, rooms and partitions); then its
        # next round pairs it first with the partners that changed (all of them where it changed
        # itself), whatever the round's partners are. A broker left stuck after such a change may
        # have a move a fresh plan of the result makes (a replica onto it lifts it above the
        # replica counts' floor, one off its partner makes room there): the next pass tries it
        stuck: set[int] = set()
        looked: dict[int, dict[int, None]] = {}  # (stuck, or to be tried again: what its pairs looked at)
        again: dict[int, dict[int, None]] = {}  # (the partners to try first)
        log = self._log
        for turn in range(ROUNDS):
            before = made
            weight = {b: len(self.over[b]) + len(self.under[b]) for b in st.allowed}
            for a in sorted((b for b in st.allowed if weight[b] and b not in stuck), key=lambda b: (-weight[b], b)):
                got, idle = made, 0
                seen = {a: None}
                first = list(again.pop(a, ()))
                looked.pop(a, None)
                partners = first + [b for b in self._partners(st, a, turn) if b not in first]
                for i, b in enumerate(partners):
                    # (the partners that changed are all tried: the idle ones count after them)
                    if not (self.over[a] or self.under[a]) or (idle >= IDLE and i >= len(first)):
                        break
                    seen[b] = None
                    step = self._pair(mover, a, b)
                    made += step
                    idle = 0 if step else idle + 1
                    if step:
                        touched = {a, b}
                        for p in log:
                            touched.update(st.reps[p])
                        log.clear()
                        for x, xs in looked.items():
                            if x != a and not touched.isdisjoint(xs):
                                stuck.discard(x)
                                redo = again.setdefault(x, {})
                                for y in xs:
                                    if y != x and (x in touched or y in touched):
                                        redo[y] = None
                    if st.budget.hit:
                        return made, True
                if made == got:
                    stuck.add(a)
                    looked[a] = seen
            if made == before:
                break
        return made, False

    def _partners(self, st: PlacementState, a: int, turn: int) -> list[int]:
        """The brokers ``a`` is paired with in round ``turn``: its rack's, then others."""
        leaf_of = st.racks.leaf
        leaf = leaf_of[a]
        mates = [b for b in st.racks.leaf_members[leaf] if b != a]
        ids = st.allowed
        k = len(ids)
        start = ids.index(a) + 1 + turn * PARTNERS
        others = []
        for i in range(k):
            b = ids[(start + i) % k]
            if leaf_of[b] != leaf:
                others.append(b)
                if len(others) == PARTNERS:
                    break
        return mates + others

    def _pair(self, mover: Mover, a: int, b: int) -> int:
        """Replicas across between brokers ``a`` and ``b``, both ways (see :meth:`optimize`): the
        replicas that gain going a -> b swapped for those that gain coming back first, then what
        is left of either way for replicas that keep their topic."""
        st = mover.st
        over, full, spare, under = self.over, self.full, self.spare, self.under
        # topics that gain going src -> dst (no cell further off): src above its band and dst below
        # its top, or src above its floor and dst below it
        ab = (over[a] - full[b]) | (spare[a] & under[b])
        ba = (over[b] - full[a]) | (spare[b] & under[a])
        if not ab and not ba:
            return 0
        made = 0
        if ab:
            back = _Backs(self, st, b, a, ba)
            made += self._across(mover, a, b, self._replicas(st, a, b, ab), [back, _Backs(self, st, b, a, None)])
        if not st.budget.hit:
            ba = (over[b] - full[a]) | (spare[b] & under[a])
            if ba:
                made += self._across(mover, b, a, self._replicas(st, b, a, ba), [_Backs(self, st, a, b, None)])
        return made

    def _replicas(self, st: PlacementState, src: int, dst: int, topics: set[int]) -> list[int]:
        """A replica on src of each of ``topics`` that dst does not hold, the first that may go
        rack-safe (whether it fits the limits is checked when tried). (A topic with none is
        left out: no move of the pair changes those lists, so :meth:`_across` could not move one.)"""
        by_topic, reps, replaced = self.by_topic(src), st.reps, st.racks.safety.replaced
        out = []
        for t in topics:
            for p in by_topic.get(t, ()):
                r = reps[p]
                if dst not in r and replaced(r, src, dst):
                    out.append(p)
                    break
        return out

    def _across(self, mover: Mover, src: int, dst: int, goes: list[int], backs: list[_Backs]) -> int:
        """Each replica of ``goes`` from src to dst, alone if the earlier goals' rooms take it,
        else swapped for the first replica of ``backs`` (those that gain coming back, then those
        that keep their topic) the swap with which the rooms take."""
        st, ts = mover.st, self
        made = 0
        count, band, topic, on_src = ts.count, ts.band, ts.topic, st.index.on[src]
        # (:meth:`PlacementState.may_go`, :func:`within` and :meth:`keeps1` inlined: the same checks, in hot loops;
        # the limits' dicts and the rack tree do not change during a pass, only their values)
        reps, unrepaired, limits = st.reps, st.unrepaired, st.limits
        limited, lfits, replaced = limits.limited, limits.fits, st.racks.safety.replaced
        rooms, try_moves, budget = mover.rooms, mover.try_moves, st.budget
        # (:meth:`Limits.fits` of a replica coming back to src, inlined: src's limits looked up once)
        s_closed, s_disk, s_nw = src in limits.closed, limits.disk_limit.get(src), limits.nw_limit.get(src)
        peak, nw_in, orig, size, rate = limits.disk_peak, limits.nw_in, limits._orig, limits._size, limits._rate
        # whether a replica may come back whatever goes (its topic's cells, its list, src's limits,
        # rack safety: what only a move changes), kept per replica until this pair makes one
        back_ok: dict[int, bool] = {}
        # whether the last swap search of the pair found nothing and refused only replicas that may
        # not come back (what no replica going changes): the next one, before a move, finds nothing
        # too -- it tries the same replicas (those kept, in order), so it is skipped
        futile = False
        other = False  # (a refusal that depends on the replica going: its topic, the rooms)

        def comes_back(q: int) -> bool:
            u = topic[q]
            cu, bu = count[u], band[u]
            if not (cu.get(dst, 0) > bu[0] and cu.get(src, 0) < bu[1]):
                return False
            r = reps[q]
            if src in r or q in unrepaired:
                return False
            if (s_closed or s_disk is not None) and src not in orig[q]:
                if s_closed or peak[src] + size[q] > s_disk:
                    return False
            if s_nw is not None and not nw_in[src] + rate[q] <= s_nw:
                return False
            return replaced(r, dst, src)

        for p in goes:
            t = topic[p]
            c, (lo, hi) = count[t], band[t]
            x, y = c.get(src, 0), c.get(dst, 0)
            if p not in on_src or not (x > lo and y < hi and (x > hi or y < lo)):
                continue  # (an earlier move of the pair filled the topic's cell)
            # (not on dst and rack-safe there: :meth:`_replicas` took it so, and only p's own move
            # changes its list)
            if p in unrepaired or (limited and not lfits(dst, p)):
                continue
            srooms, drooms = rooms(src), rooms(dst)
            for w, rlo, rhi in srooms:
                if not rlo <= -1.0 * w[p] <= rhi:
                    break
            else:
                for w, rlo, rhi in drooms:
                    if not rlo <= 1.0 * w[p] <= rhi:
                        break
                else:
                    if try_moves(((p, src, dst),), ts, checked=True, hard=True):
                        made += 1
                        back_ok.clear()
                        futile = False
                        continue
            if futile:
                continue
            # the swap's net change x = w(p) - w(q) moves src by -x and dst by +x: per goal, the
            # interval both rooms allow, as bounds on w(q)
            xs = [(w, w[p] - min(-slo, dhi), w[p] - max(-shi, dlo))
                  for (w, slo, shi), (_w, dlo, dhi) in zip(srooms, drooms)]

            def fits(q: int) -> bool:
                nonlocal other
                if topic[q] == t:
                    other = True
                    return False
                ok = back_ok.get(q)
                if ok is None:
                    ok = back_ok[q] = comes_back(q)
                if not ok:
                    return False
                for w, qlo, qhi in xs:
                    if not qlo <= 1.0 * w[q] <= qhi:
                        other = True
                        return False
                return True

            other = False
            for back in backs:
                q = back.take(fits)
                if q is not None:
                    if try_moves(((p, src, dst), (q, dst, src)), ts, checked=True, hard=True):
                        made += 2
                        back_ok.clear()
                        break
                    other = True  # (refused by a later check: not this replica's alone)
            else:
                futile = not other
            if budget.hit:
                break
        return made

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


class _Backs:
    """The replicas of ``src`` (a pair's broker sending them back) that may come back to ``dst``,
    taken as they are needed: a replica of each topic of ``topics`` (those that gain coming back),
    or, with None, of each topic src may give one of (above its floor) and dst take one of (below
    its top) that does not gain -- drawn lazily, and those a swap did not take kept for the next."""

    def __init__(self, ts: TopicSpreadGoal, st: PlacementState, src: int, dst: int, topics: set[int] | None):
        self.ts, self.st, self.src, self.dst = ts, st, src, dst
        self.topics = topics
        self._draw: Iterator[int] | None = None
        self.kept: list[int] = []

    def _drawn(self) -> Iterator[int]:
        ts, src, dst = self.ts, self.src, self.dst
        topics = self.topics
        if topics is None:  # (as of the first asking: the topics that keep theirs)
            gain = (ts.over[src] - ts.full[dst]) | (ts.spare[src] & ts.under[dst])
            topics = (ts.spare[src] - ts.full[dst]) - gain
        by_topic, reps = ts.by_topic(src), self.st.reps
        for u in list(topics):
            for q in by_topic.get(u, ()):
                if dst not in reps[q]:
                    yield q
                    break

    def take(self, fits: Callable[[int], bool]) -> int | None:
        """The first replica ``fits`` takes (of those kept, then of those not drawn yet), trying at
        most :data:`PAIR_QS`; it is used up."""
        on, tried = self.st.index.on[self.src], 0
        for i, q in enumerate(self.kept):
            if q not in on:
                continue
            tried += 1
            if fits(q):
                del self.kept[i]
                return q
            if tried >= PAIR_QS:
                return None
        if self._draw is None:
            self._draw = self._drawn()
        for q in self._draw:
            tried += 1
            if fits(q):
                return q
            self.kept.append(q)
            if tried >= PAIR_QS:
                break
        return None


def _topic_counts(assign: Assignment, ids: set[int]) -> tuple[dict[str, Counter[int]], dict[str, Counter[int]]]:
    """Each topic's replicas and preferred leaders per broker of ``ids`` (brokers holding none
    of a topic absent). (A topic's lists gathered first, then counted a topic at a time by
    :class:`Counter` in C, not a replica at a time.)"""
    lists: dict[str, list[Sequence[int]]] = {}
    last = None
    for (t, _p), r in assign.items():
        if not r:
            continue
        if t != last:  # (a topic's partitions mostly come one after the other)
            got, last = lists.get(t), t
            if got is None:
                got = lists[t] = []
        got.append(r)
    reps: dict[str, Counter[int]] = {}
    leads: dict[str, Counter[int]] = {}
    for t, ls in lists.items():
        rt, lt = Counter(chain.from_iterable(ls)), Counter([r[0] for r in ls])
        # (in the order of first appearance, as counted one at a time; brokers out of ``ids`` left out)
        if not ids.issuperset(rt):
            rt = Counter({b: x for b, x in rt.items() if b in ids})
        if not ids.issuperset(lt):
            lt = Counter({b: x for b, x in lt.items() if b in ids})
        reps[t], leads[t] = rt, lt
    return reps, leads


def _topic_figures(ev: Evaluation) -> dict[str, Any]:
    """Topics whose replicas or leaders per broker (over ``ids``) spread by more than 1, before
    and after; the bound: 0 where every topic can be even (no racks, or racks of equal size),
    None (not computed) where racks of different sizes may force a topic's replicas onto the
    brokers of a small rack; and how far off they are: the replicas and leaders above or below
    their topic's floor/ceil of the mean after the plan (its target), summed over topics and
    brokers -- replicas and leaders apart too (a broker holding none of a topic is its floor
    below it)."""
    ids = set(ev.ids)
    n = len(ids)
    counts = {when: _topic_counts(ev.assignment(when, True), ids) for when in ("before", "after")}
    bands = [{t: (sum(c.values()) // n, -(-sum(c.values()) // n)) for t, c in part.items()}
             for part in counts["after"]]

    def uneven(c: Counter[int]) -> bool:
        return bool(c) and max(c.values()) - (min(c.values()) if len(c) == n else 0) > 1

    def off(c: Counter[int], lo: int, hi: int) -> float:
        return off_band(c.values(), lo, hi) + (n - len(c)) * lo

    out: dict[str, Any] = {}
    for when, parts in counts.items():
        out[f"uneven_{when}"] = sorted(t for t in parts[0] if uneven(parts[0][t]) or uneven(parts[1][t]))
        out[f"off_{when}"] = [sum(off(c, *band.get(t, (0, 0))) for t, c in part.items())
                              for part, band in zip(parts, bands)]
    sizes: Counter[str | None] = Counter(ev.topo.rack_of(b) for b in ids)
    # (not computed either where a cordoned broker holds fewer replicas than the others: it gets
    # no new replica, so the topics it lacks cannot be even; cordoned() asked first: the counts
    # are a pass over every partition)
    held = ev.cordoned() and ev.cordon_level(sum(ev.counts("after", None).values()), ev.counts("before", None))
    out["bound"] = 0 if len(set(sizes.values())) <= 1 and not held else None
    return out
