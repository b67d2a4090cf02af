"""The optimizer: the goals of a plan, run in priority order on a placement state, so that a later
goal never makes an earlier one worse (Cruise Control's analyzer shape, with kops' guarantees:
minimal movement, rack safety on every move, Kafka's own formats).

1. **repair** (:mod:`kops.placement.repair`): what the hard goals and the plan's kind force --
   replicas off removed brokers, RF changes, rack repairs;
2. **phase 2** (:mod:`kops.placement.balance`): the first balance goal whose data is there
   (disk use, network-in use, replica counts; replica counts when none is) with the
   minimal-movement balancer;
3. **the replica goals** in order: each goal that tracks a plan
   (:meth:`~kops.placement.goals.base.PlanGoal.track`) proposes moves
   (:meth:`~kops.placement.goals.base.PlanGoal.optimize`); :meth:`Optimizer.try_moves` makes one
   only when it gains on that goal and keeps every hard goal and every goal before it (the
   *guards*), then the goal guards the later ones;
4. **leadership** without data movement: the leader phase (:func:`kops.placement.leaders.balance_orders`:
   preferred leaders, then first followers), orders put back where balance did not need the
   change, then each leadership goal in order (:meth:`~kops.placement.goals.base.PlanGoal.reorder`)
   inside the leader and first-follower bands;
5. every changed list is checked against the hard constraints with the one definition.

Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kops.model import TopicPartition
from kops.placement.balance import Balancer
from kops.placement.goals import by_name
from kops.placement.goals.base import EPS, Move
from kops.placement.goals.leadership import Leadership
from kops.placement.goals.loads import Load
from kops.placement.leaders import balance_orders, restore_orders
from kops.placement.racks import rack_violation
from kops.placement.repair import Prepared, Repair, in_place, prepare
from kops.placement.state import PlacementState

__all__ = ["FORCED", "Optimized", "Optimizer"]

#: the stage of the moves a plan must make (replicas off removed brokers, RF changes, rack repairs)
FORCED = "forced"


@dataclass
class Optimized:
    #: full target assignment of the partitions in scope
    target: dict[TopicPartition, tuple[int, ...]]
    #: only the partitions whose list changes (set or order)
    changes: dict[TopicPartition, tuple[int, ...]]
    #: True when the plan reaches its goal (False: a bounded step)
    complete: bool
    #: the moves (or leadership swaps) each goal after phase 2 made
    moves_per_goal: dict[str, int]
    #: what the repair's first pass found (the lower bound's counts)
    prepared: Prepared
    #: the stages that may move replicas, in order: (what, replica lists changed, how far off its
    #: band each goal that tracks the plan was after it, in its report unit); the first is the
    #: start, :data:`FORCED` the plan's forced moves, then phase 2 and each replica goal's pass
    stages: list[tuple[str, int, dict[str, float]]]
    #: the leadership goals (and topic spread's leaders, "topic-spread leaders"): how far off their
    #: band they were before the leader phase or their pass, and after it
    leadership: dict[str, tuple[float, float]]
    #: goals of the set whose data is missing: what each needs
    without_data: dict[str, str]


class Optimizer:
    """Runs ``goals`` (names, in priority order; :func:`kops.placement.goals.select_goals`) on
    ``st``. ``followers``: balance first followers when that goal is on; ``rebalance=False``:
    only the forced moves and leadership reordering."""

    def __init__(self, st: PlacementState, goals: Sequence[str], followers: bool = True, rebalance: bool = True):
        self.st = st
        self.goals = tuple(goals)
        self.followers = followers
        self.rebalance = rebalance
        #: the goals before the one running, which every move must keep
        self.guards: list[Any] = []
        self.moves: dict[str, int] = {}
        self.stages: list[tuple[str, int, dict[str, float]]] = []
        self.leadership: dict[str, tuple[float, float]] = {}
        self.without_data = {name: needs for name in self.goals if (needs := by_name(name).missing(st))}
        #: the goals that track the plan's replicas (their data is there), by name, in order
        self.tracked: dict[str, Any] = {}
        # each broker's rooms on the guards that are loads (:meth:`rooms`); a broker's rooms change
        # only when a move to or from it is made (:meth:`try_moves`) or a guard is added
        self._room_of: dict[int, list[tuple[Sequence[float], float, float]]] = {}
        # what phase 2 balances: the first balance goal whose data is there, else replica counts
        first = next((g for g in map(by_name, self.goals)
                      if issubclass(g, Load) and g.has_data(st)), None)
        if first is not None:
            w, capw = first.phase2(st)
            st.loads.balance_by(first.name, w, capw)
        else:
            st.loads.balance_by("count", [1] * len(st.reps), None)

    def run(self) -> Optimized:
        st = self.st
        prepared = prepare(st)
        # every goal that tracks replicas follows the plan from its start (the replicas each
        # partition keeps), so that each stage's effect on each goal is known
        for name in self.goals:
            goal = by_name(name).track(st, prepared.keeps)
            if goal is not None:
                self.tracked[name] = goal
                if goal.load is not st.loads.load if isinstance(goal, Load) else True:
                    st.watchers.append(goal)  # (a load that is the state's own follows it already)
        self._stage("start", st.moved)
        moved = st.moved
        Repair(st, self._lookahead()).run(prepared)
        self._stage(FORCED, moved)
        if self.rebalance:
            moved = st.moved
            Balancer(st, self._lookahead()).balance()
            st.end_balance()
            self._stage(st.loads.primary if st.loads.primary in self.goals else "replica counts", moved)
            self._replica_goals()
        complete = not st.budget.hit and not st.unrepaired
        st.watchers.clear()
        self._leadership()
        tps = st.parts.tps
        target = {tp: tuple(r) for tp, r in zip(tps, st.reps)}
        lists = list(target.values())
        changed = [p for p, (r, o) in enumerate(zip(lists, st.parts.orig)) if r != tuple(o)]
        changes = {tps[p]: lists[p] for p in changed}
        self.verify(changed)
        return Optimized(target, changes, complete, self.moves, prepared, self.stages, self.leadership,
                         self.without_data)

    def _lookahead(self) -> Later | None:
        """Where a move of one replica or another is as good for the goal being served (phase 2
        by count, the repair's placements), the later goals' choice: topic spread, then disk use,
        where they are in the set and their data is there."""
        st = self.st
        if st.loads.weighted:
            return None
        later = self.goals[self.goals.index(st.loads.primary) + 1:] if st.loads.primary in self.goals else self.goals
        topic, disk = (self.tracked.get(g) if g in later else None for g in ("topic-spread", "disk-usage"))
        return Later(topic, disk) if topic is not None or disk is not None else None

    def _stage(self, name: str, moved_before: int) -> None:
        """A stage that may move replicas ended: it changed ``st.moved - moved_before`` lists;
        how far off its band each tracked goal is now."""
        self.stages.append((name, self.st.moved - moved_before,
                            {g: goal.total() for g, goal in self.tracked.items()}))

    # -- the replica goals -----------------------------------------------------------------------
    def _replica_goals(self) -> None:
        """Replica-moving passes for the goals in order (phase 2's own goal only guards the later
        ones: phase 2 balanced it)."""
        st = self.st
        for name, goal in self.tracked.items():
            if st.budget.hit:
                break
            if name != st.loads.primary:
                moved = st.moved
                self.moves[name] = goal.optimize(self)
                self._stage(name, moved)
            self.guards.append(goal)
            self._room_of.clear()

    def try_moves(self, moves: Sequence[Move], goal: Any, checked: bool = False, hard: bool = False) -> bool:
        """Make ``moves`` (one, or two that are a swap: ``(p, src, dst), (q, dst, src)``; each a
        partition's replica from one broker to another, same slot) if
        together they gain on ``goal`` and keep every hard and earlier goal; returns whether.
        ``checked``: the caller found that they keep every earlier goal (the guards); ``hard``:
        that every move is rack-safe and within the disk and network limits, as of now."""
        st = self.st
        for p, src, dst in moves:
            r = st.reps[p]
            if dst in r or src not in r or p in st.unrepaired:
                return False
        if len(moves) == 1:
            p, src, dst = moves[0]
            if goal.gain1(p, src, dst) <= EPS:
                return False
            if not checked:
                for g in self.guards:
                    if not g.keeps1(p, src, dst):
                        return False
        else:
            (p, src, dst), (q, _d, _s) = moves
            if not checked:
                for g in self.guards:  # (the guards first: they refuse most swaps, cheaply)
                    if not g.keeps2(p, q, src, dst):
                        return False
            if goal.gain2(p, q, src, dst) <= EPS:
                return False
        if not hard:  # (the hard goals: each half alone, as a swap's other half changes neither)
            for p, src, dst in moves:
                if not st.may_go(p, src, dst):
                    return False
        budget = st.budget
        if budget.bounded:
            cost_mv = cost_by = 0
            for p, src, dst in moves:
                mv, by = st.parts.cost(p, [dst if b == src else b for b in st.reps[p]])
                omv, oby = st.parts.cost(p, st.reps[p])
                cost_mv += mv - omv
                cost_by += by - oby
            if not budget.fits(cost_mv, cost_by):
                # a step that spent nothing yet takes one move (or swap) over its budget, so that
                # bounded runs always progress (a swap is two moves: --max-moves 1 alone never fits it)
                if not (budget.may_force() and cost_mv > 0):
                    budget.hit = True
                    return False
                budget.forced = True
            budget.spend(cost_mv, cost_by)
        # (every goal tracking the plan follows: PlacementState.watchers)
        if len(moves) == 1:
            st.replace(*moves[0])
        else:
            (p, src, dst), (q, _dst, _src) = moves
            st.swap(p, q, src, dst)
        for _p, src, dst in moves:
            self._room_of.pop(src, None)
            self._room_of.pop(dst, None)
        return True

    def rooms(self, b: int) -> list[tuple[Sequence[float], float, float]]:
        """Per earlier goal that is a load: its weights and ``b``'s room (:meth:`Load.room`) --
        a move of partition p off b keeps the goal iff ``lo <= -w[p] <= hi``, onto b iff
        ``lo <= w[p] <= hi``. (A necessary check: other guards are checked by :meth:`try_moves`.)
        Kept per broker until a move changes its load."""
        r = self._room_of.get(b)
        if r is None:
            r = self._room_of[b] = [(g.w, *g.room(b)) for g in self.guards if isinstance(g, Load)]
        return r

    # -- leadership, by reordering -----------------------------------------------------------------
    def _leadership(self) -> None:
        """The leader phase (always complete; costs no data), orders put back where it did not
        need the change, then the leadership goals in order (when rebalancing)."""
        st, goals = self.st, self.goals
        reps, orig = st.reps, st.parts.orig
        scope_idx = [p for p in range(len(reps)) if p not in st.unrepaired]
        moved_parts = [p for p in scope_idx if reps[p] is not orig[p] and set(reps[p]) != set(orig[p])]
        followers = self.followers and "first-followers" in goals
        at = {name: g.total(st.allowed) for name in goals if (g := by_name(name).leader_guard(st)) is not None}
        slots = list(at)
        if "leaders" in goals:
            balance_orders(reps, scope_idx, st.allowed, followers=followers, prefer=moved_parts)
        # no needless leadership change: a replacement keeps the slot of the replica it replaces
        # and an order goes back to what it was wherever balance did not need the change -- the
        # spread it may not widen left without the cordoned brokers holding fewer replicas than
        # the mean leaders per broker (they cannot lead more, and get no new replica)
        mean = len(scope_idx) / len(st.allowed) if st.allowed else 0.0
        held = [b for b in st.limits.closed if b in st.index.on and len(st.index.on[b]) < mean]
        restore_orders(reps, {p: in_place(orig[p], reps[p]) for p in scope_idx if not _natural(orig[p], reps[p])},
                       st.allowed, followers=followers, held=held)
        guards = [by_name(name).leader_guard(st) for name in slots]
        for name, g in zip(slots, guards):
            self.leadership[name] = (at[name], g.total(st.allowed))
        if not self.rebalance:
            return
        lead = Leadership(st)
        for name in goals:
            self.moves.update(by_name(name).reorder(lead, guards))
        for name, turn in lead.turns.items():
            self.leadership[name if name != "topic-spread" else "topic-spread leaders"] = turn

    def verify(self, changed: Sequence[int]) -> None:
        """Hard constraints of every changed partition (``changed``: their indexes), checked with
        the one definition."""
        st = self.st
        reps, rf, allowed, safety = st.reps, st.parts.rf, st.allowed_set, st.racks.safety
        for p in changed:
            r = reps[p]
            if p in st.unrepaired or (len(r) == rf[p] and allowed.issuperset(r) and safety.safe(r)):
                continue  # (safe: distinct brokers, rack-safe -- no problem below)
            r = tuple(r)
            problems = []
            if len(set(r)) != len(r):
                problems.append("duplicate broker")
            if len(r) != rf[p]:
                problems.append(f"{len(r)} replicas, expected {rf[p]}")
            if any(b not in allowed for b in r):
                problems.append("broker not allowed")
            if not safety.safe(r):
                problems.append(rack_violation(r, st.racks.tree) or "not rack-safe")
            if problems:  # a planner bug: never emit such a plan
                tp = st.parts.tps[p]
                raise AssertionError(f"planner produced an invalid list for {tp[0]}-{tp[1]}: {r}: {problems}")


class Later:
    """The later goals' choice (:class:`kops.placement.balance.Lookahead`), in their order: the
    move that takes the brokers least further from the disk band first (in steps of a hundredth
    of the band's width: a replica of a few bytes takes nothing from it), then its gain on topic
    spread (its topic's count on both brokers toward the band: -2 to 2), then on disk use. Both
    goals follow the plan (state watchers)."""

    def __init__(self, topic: Any | None, disk: Any | None):
        self.topic, self.disk = topic, disk
        self.step = max((disk.hi - disk.lo) / 100, EPS) if disk is not None else 1.0

    def pair(self, src: int, dst: int) -> Callable[[int], tuple[float, float, float]]:
        """The score of moving a replica of ``p`` from src to dst, as a function of p (what does not
        depend on p computed once: each goal's state on the two brokers)."""
        t, d, step = self.topic, self.disk, self.step
        if t is not None:
            topic, count, band = t.topic, t.count, t.band
        if d is not None:
            w, lo, hi = d.w, d.lo, d.hi
            ls, ld, cs, cd = d.load[src], d.load[dst], d.cap[src], d.cap[dst]
            base = d.dist(src) + d.dist(dst)

        def score(p: int) -> tuple[float, float, float]:
            g = 0.0
            if d is not None:
                us, ud = (ls - w[p]) / cs, (ld + w[p]) / cd
                g = base - (us - hi if us > hi else lo - us if us < lo else 0.0) \
                    - (ud - hi if ud > hi else lo - ud if ud < lo else 0.0)
            tg = 0
            if t is not None:
                x = topic[p]
                c, (tlo, thi) = count[x], band[x]
                a, b = c.get(src, 0), c.get(dst, 0)
                tg = (a > thi) - (a <= tlo) + (b < tlo) - (b >= thi)
            return (min(0.0, float(int(g / step))), tg, g)
        return score

    def best(self) -> tuple[float, float, float]:
        # (no harm to the disk band worth a step of it, and both cells of the topic nearer theirs)
        return (0.0, 2.0 if self.topic is not None else 0.0, float("-inf"))

    def first(self, src: int, dst: int) -> Iterator[int]:
        """src's replicas of the topics above their band on src, then of those above their floor
        with dst below it (the moves that gain on topic spread), lazily: looked at first."""
        t = self.topic
        if t is None:
            return
        by_topic = t.by_topic(src)
        for u in t.over[src]:
            yield from by_topic.get(u, ())
        for u in t.spare[src] & t.under[dst]:
            yield from by_topic.get(u, ())

    def placing(self, p: int, b: int) -> tuple[float, float, float]:
        """A new replica of ``p`` on ``b`` (a repair): lower is better, in the same order."""
        t, d = self.topic, self.disk
        disk = d.dist(b, d.w[p]) - d.dist(b) if d is not None else 0.0
        return (max(0.0, float(int(disk / self.step))),
                t.dist((t.topic[p], b), 1) - t.dist((t.topic[p], b)) if t is not None else 0.0, disk)


def _natural(old: Sequence[int], new: Sequence[int]) -> bool:
    """Is ``new`` in its natural order against ``old`` (:func:`kops.placement.repair.in_place`):
    every broker it keeps in its old slot, so that the newcomers hold the freed slots in order?"""
    if len(old) != len(new):
        return False
    for b, x in zip(old, new):
        if b != x and b in new:
            return False
    return True
