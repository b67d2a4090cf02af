"""What every goal shares: its class (:class:`PlanGoal`), bands, and what a goal's pass may ask
of the optimizer that runs it (:class:`Mover`). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

#: default capacity threshold: a broker's disk / network use kept at or below this share
DEFAULT_THRESHOLD = 0.80
#: consumers per partition assumed for a leader's network-out (each reads what is written once)
DEFAULT_FANOUT = 1.0
#: a balance goal (disk use, network-in use, leaders' bytes-in) is met when every broker is within
#: ±10 % of the mean use (Cruise Control's default balance threshold, 1.10), or within one
#: partition of it where a partition is more than that (no placement does better)
BAND = 0.10
#: slack of float comparisons of distances and rooms
EPS = 1e-9
#: candidates looked at per broker and pass: a bound on very large clusters
LOOK = 256

Move = tuple[int, int, int]  # (partition, from broker, to broker)


def band(mean: float, largest: float, share: float = BAND) -> tuple[float, float]:
    """The band a balance goal holds every broker in: ``mean`` ± max(``share`` of it (default
    :data:`BAND`), the ``largest`` single replica's share), in the goal's units."""
    half = max(share * mean, largest)
    return mean - half, mean + half


def within(bounds, x: int, sign: float = 1.0) -> bool:
    """``lo <= sign * w[x] <= hi`` for each ``(w, lo, hi)`` of ``bounds`` (rooms: :meth:`Mover.rooms`)."""
    for w, lo, hi in bounds:
        if not lo <= sign * w[x] <= hi:
            return False
    return True


def keeps(goal, moves: Sequence[Move]) -> bool:
    """No broker (or topic and broker) ends further outside ``goal``'s band."""
    return all(goal.dist(k, x) <= goal.dist(k) + EPS for k, x in goal.deltas(moves).items())


class PlanGoal:
    """One goal of ``--goals``. The class measures the goal on any assignment for the report
    (:meth:`measure`); an instance tracks it over a plan in progress: its band, each broker's
    distance from it (``dist``), whether a move keeps it (``keeps1`` / ``keeps2``, for goals that
    guard later ones) and the moves it proposes (:meth:`optimize`, replicas;
    :meth:`reorder`, leadership). A goal is registered once, in :data:`kops.placement.goals.REGISTRY`."""

    #: the name ``--goals`` and the report use
    name: ClassVar[str]
    #: a hard goal holds on every move of every plan, named or not
    hard: ClassVar[bool] = False
    #: as a guard, it may refuse a replica leaving its broker whatever the destination
    #: (``keeps_off(p, src)``), which a pass checks once per replica
    checks_leaving: ClassVar[bool] = False

    @classmethod
    def measure(cls, ev: Any) -> dict[str, Any]:
        """The goal's figure before and after a plan (:class:`kops.placement.goals.measure.Evaluation`)."""
        raise NotImplementedError

    @classmethod
    def missing(cls, st: Any) -> str | None:
        """What the goal needs that the plan's data lacks (None: nothing): it then optimises
        nothing, and the report says so."""
        return None

    @classmethod
    def track(cls, st: Any, lists: Sequence[Sequence[int]] | None = None) -> PlanGoal | None:
        """The goal tracking the placement state ``st`` (its replica lists as they are, or
        ``lists``), to move replicas toward its band and then guard the later goals; it follows
        every move (``moved(p, gone, came)``: the brokers p left and came to; a state watcher). None: it moves no replicas, or its
        data is missing."""
        return None

    def swapped(self, p: int, q: int, src: int, dst: int) -> None:
        """As a state watcher: p's replica went src -> dst and q's dst -> src, in one step
        (:meth:`~kops.placement.state.PlacementState.swap`): its ``moved`` of each in turn, unless
        the goal follows a swap more cheaply to the same result. While watchers follow a swap,
        ``st.reps`` still holds both partitions' old lists (the state sets them after the last
        watcher): a watcher whose ``moved`` reads ``st.reps`` must override this."""
        self.moved(p, (src,), (dst,))  # type: ignore[attr-defined]
        self.moved(q, (dst,), (src,))  # type: ignore[attr-defined]

    def optimize(self, mover: Mover) -> int:
        """Replica moves toward the goal's band that keep every goal before it; returns how many."""
        return 0

    def swappable(self, ps: Sequence[int], qs: Sequence[int], src: int, dst: int) -> bool:
        """As a guard: may a swap of one of ``ps``' replicas (src -> dst) with one of ``qs``'
        (dst -> src) keep the goal? False only where none can (a pass then tries none of them)."""
        return True

    @classmethod
    def leader_guard(cls, st: Any) -> Any | None:
        """A leadership count the leadership goals must keep within its band (None: not one)."""
        return None

    @classmethod
    def reorder(cls, lead: Any, guards: list[Any]) -> dict[str, int]:
        """Leadership swaps toward the goal's band that keep ``guards`` (:class:`kops.placement.goals.
        leadership.Leadership`); the goal then guards the later ones. Returns the swaps made, by name."""
        return {}


class Mover(Protocol):
    """What a goal's pass asks of the optimizer running it (:class:`kops.placement.optimizer.Optimizer`)."""

    st: Any
    #: the goals before the one running (their instances), which every move must keep
    guards: list[Any]

    def try_moves(self, moves: Sequence[Move], goal: Any, checked: bool = False, hard: bool = False) -> bool:
        """Make ``moves`` if together they gain on ``goal`` and keep every hard and earlier goal."""

    def rooms(self, b: int) -> list[tuple[Sequence[float], float, float]]:
        """Per earlier goal that is a load: its weights and ``b``'s room on it."""

