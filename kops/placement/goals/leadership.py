"""Leadership goals, by reordering replica lists (no data moves), after the leader phase.

The leader phase (:func:`kops.placement.leaders.balance_orders`, run by the optimizer when
``leaders`` is a goal) evens preferred leaders and then first followers exactly. Then, in the
goals' order, ``leader-bytes-in`` (each broker's leaders' bytes-in within its band) and the
leader half of ``topic-spread`` (each topic's preferred leaders per broker within floor/ceil of
its mean) step by :class:`Leadership`: a step swaps a partition's leader with one of its
followers -- alone, or paired with the opposite swap in a partition the follower leads and the
leader follows, which keeps every broker's leader count -- where it gains on the goal and leaves
the leader and first-follower counts (where those goals are on) within their floor/ceil band and
every earlier leadership goal no worse: leadership goals act inside the cluster's leader
balance, never at its cost. Topic leaders also go by chains (:meth:`Leadership._chain`). Pure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from heapq import heapify, heappop
from typing import Any

from kops.placement.goals.base import EPS, PlanGoal, band
from kops.placement.goals.loads import RATES, count_figures
from kops.placement.goals.measure import Evaluation, off_band, per_broker, spread
from kops.placement.state import PlacementState

__all__ = ["Counts", "FirstFollowersGoal", "LeaderBytesInGoal", "LeadersGoal", "Leadership", "LedBy"]


class Leadership:
    """The leadership passes over a planned state: the partitions that may be reordered (RF 2 or
    more, not left by a bounded plan) and who leads what (:class:`LedBy`)."""

    def __init__(self, st: PlacementState):
        self.st = st
        reps = st.reps
        self.n = len(st.allowed)
        self.topic = [tp[0] for tp in st.parts.tps]
        self.scope = [p for p in range(len(reps)) if p not in st.unrepaired and len(reps[p]) > 1]
        self.led_by = LedBy(reps, self.scope, self.topic)
        #: per goal: how far off its band it was when its pass began, and after it
        self.turns: dict[str, tuple[float, float]] = {}

    def run(self, name: str, obj: Counts, guards: list[Counts]) -> int:
        """Steps toward ``obj``'s band that keep every guard (see the module doc); returns the
        swaps made (and keeps, for goal ``name``, how far off its band it was before and after)."""
        at = obj.total(self.st.allowed)
        made = self._run(obj, guards)
        self.turns[name] = (at, obj.total(self.st.allowed))
        return made

    def _run(self, obj: Counts, guards: list[Counts]) -> int:
        st, led_by, scope = self.st, self.led_by, self.scope
        reps, allowed = st.reps, st.allowed_set

        def try_swaps(swaps, gain: float | None = None) -> bool:
            # (``gain``: the caller's sum of the swaps' gains, where they touch cells apart)
            if (obj.gain(swaps, reps) if gain is None else gain) <= EPS:
                return False
            if not all(g.keeps(swaps, reps) for g in guards):
                return False
            for g in (obj, *guards):
                g.apply(swaps, reps)
            for p, i in swaps:
                r = reps[p]
                led_by.drop(p, r)
                new = list(r)
                new[0], new[i] = r[i], r[0]
                st.move(p, new)
                led_by.add(p, new)
            return True

        # the first-followers guard, whose verdict on a chain back's step is known from its indexes
        ff = next((g for g in guards if g.slot == 1), None)
        made = 0
        for _round in range(8):
            before = made
            for p in obj.candidates(scope, reps, led_by):
                r = reps[p]
                a = r[0]
                if not obj.over(p, a):
                    continue
                for i in sorted(range(1, len(r)), key=lambda j: obj.level(p, r[j])):
                    b = r[i]
                    if b not in allowed or not obj.worth(p, a, b):
                        continue
                    if try_swaps(((p, i),)):
                        made += 1
                        break
                    # paired with a partition b leads and a follows (b gives one back to a)
                    looked = 0
                    done = False
                    # topic leaders: the pair's gain is p's and q's topic's, apart (the pair is of
                    # two topics), so a topic whose hand-back costs what p gains is not tried again
                    alone = obj.gain(((p, i),), reps) if obj.slot == "topic" else None
                    handed = obj.hand_gains()
                    # lightest first, popped from a heap: at most 64 are tried, of sets of hundreds
                    # on big topics (a sort of the whole set cost more than the tries)
                    queue = [(obj.weight_of(x), x) for x in led_by.get((b, a), ())]
                    heapify(queue)
                    while queue:
                        q = heappop(queue)[1]
                        if q == p or not obj.pairs(p, q):
                            continue
                        looked += 1
                        if looked > 64:
                            break
                        known = alone + handed(obj.topic[q], b, a) if alone is not None else None
                        if known is not None and known <= EPS:
                            continue
                        if try_swaps(((p, i), (q, reps[q].index(a))), known):
                            made += 2
                            done = True
                            break
                    if done:
                        break
                else:
                    if obj.slot == "topic" and self._chain(p, obj, try_swaps, ff):
                        made += 2
            if made == before:
                break
        return made

    def _chain(self, p: int, obj: Counts, try_swaps, ff: Counts | None = None) -> bool:
        """Topic leaders: p's leader a hands its leadership to a follower x, and x hands the
        leadership of another partition of the topic to one of that partition's followers c,
        where the topic has fewer leaders: x keeps its count, a gives one to c. (With racks of two
        brokers, the broker short of the topic's leaders is often in no partition that a leads.)"""
        reps, allowed, led_by = self.st.reps, self.st.allowed_set, self.led_by
        r = reps[p]
        a, t = r[0], obj.topic[p]
        tries = Tries(CHAIN_TRIES)
        for i in range(1, len(r)):
            x = r[i]
            if x not in allowed:
                continue
            for q in sorted(led_by.tlead.get((t, x), ())):
                if q == p:
                    continue
                rq = reps[q]
                for j in range(1, len(rq)):
                    c = rq[j]
                    if c == a or c not in allowed or not obj.worth(p, a, c):
                        continue
                    if not tries.take():
                        return False
                    chain = ((p, i), (q, j))
                    if try_swaps(chain) or self._chain_back(obj, a, c, chain, try_swaps, tries, ff):
                        return True
        return False

    def _chain_back(self, obj: Counts, a: int, c: int, chain, try_swaps, tries: Tries,
                    ff: Counts | None = None) -> bool:
        """Where the chain a -> x -> c would take a's leader count out of its band (or c's), the
        same chain back, c -> y -> a, through partitions of any topic, in one step with it: every
        broker keeps its leader count.

        ``ff``: the first-followers guard. A step's first-follower changes depend only on which of
        its four swaps is at index 1 (:class:`_FirstFollowersBack`), so its verdict is known before
        the step is built: a hand-back whose every step it refuses is counted as tried at once
        (:meth:`Tries.spend`), a refused step counted and skipped -- the same tries in the same
        order as trying each, so the same decisions."""
        reps, allowed, led_by = self.st.reps, self.st.allowed_set, self.led_by
        used = {q for q, _i in chain}
        (p, i), (q, j) = chain
        x = reps[p][i]
        # the step's gain is the chain's and each hand-back's where the three are of three topics:
        # a step that gains nothing is counted as tried, not computed again
        t = obj.topic[p]
        gain = obj.gain(chain, reps)
        handed = obj.hand_gains()
        fit = _FirstFollowersBack(ff, a, x, c, i, j).fit if ff is not None else None
        for q1 in sorted(led_by.lead.get(c, ())):
            if q1 in used:
                continue
            r1 = reps[q1]
            t1 = obj.topic[q1]
            for k in range(1, len(r1)):
                y = r1[k]
                if y == a or y not in allowed:
                    continue
                # the partitions y leads with a among their followers: mostly none (a broker leads
                # with a given follower a partition or two, of hundreds) -- no step back, no try
                backs = led_by.get((y, a), ())
                if not backs:
                    continue
                if fit is None:
                    fit_at1 = fit_else = True
                else:  # (the verdict where a is y's partition's first follower, and where not)
                    fit_at1, fit_else = fit(y, k, 1), fit(y, k, 2)
                    if not (fit_at1 or fit_else):  # every step refused: each one a try, at once
                        n = len(backs) - (p in backs) - (q in backs) - (q1 in backs)
                        if not tries.spend(n):
                            return False
                        continue
                g1 = handed(t1, c, y) if t1 != t else None
                for q2 in sorted(backs):
                    if q2 in used or q2 == q1:
                        continue
                    if not tries.take():
                        return False
                    m = reps[q2].index(a)
                    if not (fit_at1 if m == 1 else fit_else):  # (refused: a try, skipped)
                        continue
                    t2 = obj.topic[q2]
                    # (three topics: the step's gain is the sum, computed once, not again by the try)
                    known = gain + g1 + handed(t2, y, a) if g1 is not None and t2 != t and t2 != t1 else None
                    if known is not None and known <= EPS:
                        continue
                    if try_swaps((*chain, (q1, k), (q2, m)), known):
                        return True
        return False


class _FirstFollowersBack:
    """Does the first-followers guard ``ff`` keep a chain back's step, a -> x -> c -> y -> a (the
    leaderships of four partitions, each handed from its leader to the follower at index ``i``,
    ``j``, ``k``, ``m``)? Leader counts never change in such a step, and first followers only where
    a swap is at index 1: its leader becomes the first follower (+1), the follower that takes the
    leadership stops being it (-1) -- a's count changes by ``[i=1] - [m=1]``, x's by ``[j=1] - [i=1]``,
    c's by ``[k=1] - [j=1]``, y's by ``[m=1] - [k=1]`` (x's and y's summed where y is x; a, x, c
    are three brokers, and y is neither a nor c). :meth:`Counts.keeps` of the step, from the four
    indexes; for one chain a -> x -> c (``i``, ``j``), the verdicts on a, x and c that do not
    depend on the step back are worked out once, for all its steps back (:meth:`fit`)."""

    def __init__(self, ff: Counts, a: int, x: int, c: int, i: int, j: int):
        keeps_at = self._keeps_at = ff.keeps_at
        i1, j1 = i == 1, j == 1
        self.x, self.dx = x, j1 - i1
        self.x_keeps = keeps_at(x, self.dx)
        # (indexed by whether the step back's last swap, and its first, is at index 1)
        self.a_keeps = (keeps_at(a, i1 - 0), keeps_at(a, i1 - 1))
        self.c_keeps = (keeps_at(c, 0 - j1), keeps_at(c, 1 - j1))

    def fit(self, y: int, k: int, m: int) -> bool:
        """The verdict on the step back c -> y (at index ``k``) -> a (at index ``m``)."""
        k1, m1 = k == 1, m == 1
        if not (self.a_keeps[m1] and self.c_keeps[k1]):
            return False
        if y == self.x:
            return self._keeps_at(y, self.dx + m1 - k1)
        return self.x_keeps and self._keeps_at(y, m1 - k1)


#: the swaps one candidate's chains may try, the chains back included: a topic whose leaders are
#: off by one on many brokers (a decommission of a 9-broker cluster with 50 topics of 200
#: partitions) has thousands of candidates, each with dozens of chains (64 tries per chain back,
#: unbounded over the chains, took minutes there)
CHAIN_TRIES = 256


class Tries:
    """A budget of tries, shared by one candidate's chains."""

    def __init__(self, left: int):
        self.left = left

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def spend(self, n: int) -> bool:
        """``n`` tries at once: exactly :meth:`take` called ``n`` times, stopping at the first it
        refuses (then none is left, and False)."""
        if n <= max(self.left, 0):
            self.left -= n
            return True
        self.left = min(self.left, 0)
        return False


class LedBy:
    """Who leads what: leader -> its partitions, (topic, leader) -> its partitions of the topic;
    where a leader swap is paired with the opposite one, the partitions a broker leads with
    another among their followers are found among the first's (:meth:`get`), not searched."""

    def __init__(self, reps, scope: list[int], topic: Sequence[str]):
        self.reps = reps
        self.topic = topic
        self.tlead: dict[tuple[str, int], set[int]] = {}  # (topic, leader) -> its partitions
        self.lead: dict[int, set[int]] = {}  # leader -> its partitions
        # leader -> follower -> the partitions, for the leaders asked about (then kept current)
        self._pairs: dict[int, dict[int, set[int]]] = {}
        tlead, lead = self.tlead, self.lead
        for p in scope:
            a = reps[p][0]
            x = lead.get(a)
            if x is None:
                x = lead[a] = set()
            x.add(p)
            k = (topic[p], a)
            x = tlead.get(k)
            if x is None:
                x = tlead[k] = set()
            x.add(p)

    def get(self, pair: tuple[int, int], default: Any = ()) -> set[int] | Any:
        """The partitions ``pair[0]`` leads with ``pair[1]`` among their followers."""
        a, f = pair
        by = self._pairs.get(a)
        if by is None:
            by = self._pairs[a] = {}
            reps = self.reps
            for q in self.lead.get(a, ()):
                for x in reps[q][1:]:
                    s = by.get(x)
                    if s is None:  # (not ``setdefault``: no new set per follower)
                        s = by[x] = set()
                    s.add(q)
        return by.get(f, default)

    def add(self, p: int, r: Sequence[int]) -> None:
        a = r[0]
        self.tlead.setdefault((self.topic[p], a), set()).add(p)
        self.lead.setdefault(a, set()).add(p)
        by = self._pairs.get(a)
        if by is not None:
            for x in r[1:]:
                by.setdefault(x, set()).add(p)

    def drop(self, p: int, r: Sequence[int]) -> None:
        a = r[0]
        for s in (self.tlead.get((self.topic[p], a)), self.lead.get(a)):
            if s is not None:
                s.discard(p)
        by = self._pairs.get(a)
        if by is not None:
            for x in r[1:]:
                s = by.get(x)
                if s is not None:
                    s.discard(p)


class Counts:
    """A per-broker (or per topic and broker) leadership count or weight and its band:
    ``slot`` 0 / 1 (preferred leaders, first followers), ``"lbi"`` (leaders' bytes-in),
    ``"topic"`` (each topic's preferred leaders)."""

    def __init__(self, slot, count: Counter, band, *, weight=None, topic=None, bands=None):
        self.slot, self.count, self.band = slot, count, band
        self.weight, self.topic, self.bands = weight, topic, bands
        self._fixed: list[int] | None = None

    def _key(self, p: int, b: int):
        return (self.topic[p], b) if self.slot == "topic" else b

    def _band(self, key):
        return self.bands[key[0]] if self.slot == "topic" else self.band

    def dist(self, key, delta: float = 0) -> float:
        # (:meth:`_band` and ``max(0.0, ...)`` inlined: a hot call of the leadership passes)
        lo, hi = self.bands[key[0]] if self.slot == "topic" else self.band
        c = self.count.get(key, 0) + delta
        return (c - hi if c > hi else 0.0) + (lo - c if lo > c else 0.0)

    def total(self, brokers: Sequence[int]) -> float:
        """How far ``brokers`` (per topic, for topic leaders) are outside the band, summed."""
        if self.slot != "topic":
            return sum(self.dist(b) for b in brokers)
        ids = set(brokers)
        out, held = 0.0, Counter()
        for (t, b), c in self.count.items():
            if b in ids:
                lo, hi = self.bands[t]
                out += (c - hi if c > hi else 0.0) + (lo - c if lo > c else 0.0)  # (as :meth:`dist`)
                held[t] += 1
        return out + sum((len(ids) - held[t]) * lo for t, (lo, _hi) in self.bands.items())

    def deltas(self, swaps, reps) -> dict:
        d: dict = defaultdict(float)
        slot = self.slot
        for p, i in swaps:
            r = reps[p]
            a, b = r[0], r[i]
            if slot == 1:
                if i == 1:
                    d[b] -= 1
                    d[a] += 1
            elif slot == "topic":  # (:meth:`_key`, inlined: a hot call of the topic leaders' tries)
                t = self.topic[p]
                d[(t, a)] -= 1
                d[(t, b)] += 1
            else:
                w = self.weight[p] if slot == "lbi" else 1
                d[a] -= w
                d[b] += w
        return d

    def gain(self, swaps, reps) -> float:
        # (a key whose delta is 0 -- a chain back's brokers, each giving one and taking one --
        # adds 0: left out)
        dist = self.dist
        return sum(dist(k) - dist(k, x) for k, x in self.deltas(swaps, reps).items() if x)

    def hand_gains(self) -> Callable[[str, int, int], float]:
        """Topic leaders: ``(t, frm, to)`` -> the gain of one of ``t``'s leaderships handed from
        ``frm`` to ``to``: :meth:`gain` of that one step, from the two counts. (Counts and bands
        are whole numbers: one off a count ``a`` brings it one nearer the band when a > hi, one
        further when a <= lo; one onto ``b``, nearer when b < lo, further when b >= hi -- the
        same sum of :meth:`dist` differences, without computing four distances.)"""
        count, bands = self.count, self.bands

        def gain(t: str, frm: int, to: int) -> float:
            lo, hi = bands[t]
            a, b = count.get((t, frm), 0), count.get((t, to), 0)
            return (a > hi) - (a <= lo) + (b < lo) - (b >= hi)

        return gain

    def keeps(self, swaps, reps) -> bool:
        keeps_at = self.keeps_at
        for k, x in self.deltas(swaps, reps).items():
            if not keeps_at(k, x):
                return False
        return True

    def keeps_at(self, key, delta: float) -> bool:
        """Does ``delta`` on ``key`` leave it no further from the band? (A delta of 0 keeps its key.)"""
        return not delta or self.dist(key, delta) <= self.dist(key) + EPS

    def apply(self, swaps, reps) -> None:
        for k, x in self.deltas(swaps, reps).items():
            self.count[k] += x

    # -- candidate order for a pass --------------------------------------------------------------
    def candidates(self, scope: list[int], reps, led_by: LedBy) -> Iterator[int]:
        """A round's partitions in the order its steps are tried, lazily (leaders' bytes-in: the
        busiest leaders as of the round's start first, each one's heaviest first; only a partition
        led by one over the band steps, so the rest is sorted only if one of them then is)."""
        if self.slot == "topic":  # (the partitions of the cells that may hand a leadership on)
            bands, tlead = self.bands, led_by.tlead
            cells = sorted(k for k, c in self.count.items() if c >= 2 and c > bands[k[0]][0])
            yield from sorted((p for k in cells for p in tlead.get(k, ())), key=lambda p: (self.topic[p], p))
            return
        count, hi, lead = self.count.copy(), self.band[1] + EPS, [r[0] if r else None for r in reps]
        key = lambda p: (-count[lead[p]], -self.weight[p], p)  # noqa: E731
        yield from sorted((p for p in scope if count[lead[p]] > hi), key=key)
        over = {b for b, c in self.count.items() if c > hi}
        rest = [p for p in scope if count[lead[p]] <= hi] if over else []
        if any(reps[p][0] in over for p in rest):
            yield from sorted(rest, key=key)

    def level(self, p: int, b: int) -> float:
        return self.count[self._key(p, b)]

    def over(self, p: int, a: int) -> bool:
        """May p's leader ``a`` hand its leadership on? Above the band (topic leaders: above the
        floor, and with two or more of the topic's leaders, which :meth:`worth` asks of every
        step)."""
        key = self._key(p, a)
        lo, hi = self._band(key)
        if self.slot == "topic":
            c = self.count[key]
            return c > lo and c >= 2
        return self.count[key] > hi + EPS

    def worth(self, p: int, a: int, b: int) -> bool:
        gap = self.count[self._key(p, a)] - self.count[self._key(p, b)]
        return gap >= 2 if self.slot == "topic" else gap > EPS

    def weight_of(self, q: int) -> float:
        return self.weight[q] if self.slot == "lbi" else 0.0

    def pairs(self, p: int, q: int) -> bool:
        if self.slot == "topic":
            return self.topic[q] != self.topic[p]
        return self.weight[q] < self.weight[p]


class _SlotGoal(PlanGoal):
    """A count per broker of one slot of the replica lists, balanced by the leader phase."""

    slot: int

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        return count_figures(cls.name, ev, cls.slot)

    @classmethod
    def leader_guard(cls, st: PlacementState) -> Counts | None:
        reps, n = st.reps, len(st.allowed)
        slot = cls.slot
        c = Counter([r[slot] for r in reps if len(r) > slot])
        total = sum(c.values())  # (the lists holding the slot: each counted once)
        return Counts(slot, c, (total // n, -(-total // n)))


class LeadersGoal(_SlotGoal):
    """Preferred leaders (replica index 0) per broker: the least spread the replica sets allow."""

    name = "leaders"
    slot = 0


class FirstFollowersGoal(_SlotGoal):
    """First followers (replica index 1) per broker, given the leaders: who takes over when a
    leader fails."""

    name = "first-followers"
    slot = 1


class LeaderBytesInGoal(PlanGoal):
    """Each broker's leaders' bytes-in within the band of the mean."""

    name = "leader-bytes-in"

    @classmethod
    def missing(cls, st: PlacementState) -> str | None:
        return None if st.parts.rates_known else RATES

    @classmethod
    def reorder(cls, lead: Leadership, guards: list[Counts]) -> dict[str, int]:
        st = lead.st
        rate, reps = st.parts.rate, st.reps
        if not (st.parts.rates_known and any(rate)):
            return {}
        obj = Counts("lbi", Counter(), None, weight=rate)
        for p in lead.scope:
            obj.count[reps[p][0]] += rate[p]
        obj.band = band(sum(obj.count.values()) / lead.n, max(rate), st.band_share)
        made = lead.run(cls.name, obj, guards)
        guards.append(obj)
        return {cls.name: made}

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        goal = cls.name
        if not ev.rates_known:
            return ev.unknown(goal, RATES)
        ids, rate = ev.ids, ev.rate
        lb = per_broker(ev.bal_before, ids, rate.get, 0)
        la = per_broker(ev.bal_after, ids, rate.get, 0)
        lo, hi = band(sum(la.values()) / len(ids), ev.largest(rate), ev.band_share)
        out_of = [f"broker {b}: {v:.0f} B/s" for b, v in sorted(la.items()) if not lo - 1e-9 <= v <= hi + 1e-9]
        return ev.figures(goal, "spread of leaders' bytes-in, bytes/s", round(spread(lb.values()), 1),
                          round(spread(la.values()), 1), 0.0, met=not out_of, blockers=out_of[:10],
                          band=[round(lo, 1), round(hi, 1)], off_band_before=round(off_band(lb.values(), lo, hi), 1),
                          off_band_after=round(off_band(la.values(), lo, hi), 1))
