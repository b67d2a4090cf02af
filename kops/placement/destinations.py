"""Topic spread's destination walk (:func:`kops.placement.goals.topic_spread._takers`): the head of a
topic round's destination list kept per count asked for. Pure."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator
__all__ = ["ByCount"]


class ByCount:
    """The head of a topic round's destination list (its first ``goals.base.LOOK`` brokers, in the
    list's order) as lists, one per count asked for, of the brokers holding at most that many replicas of
    the topic, kept as replicas move: a walk over the whole head skipped the destinations the round
    had filled again for every replica (on 1,000 brokers, 78 M of the 124 M brokers walked in a
    plan). Brokers ``full`` says take no replica of the topic at all (their disk, at the peak of
    the move: :meth:`kops.placement.state.Limits.takes_none`) are left out until a
    move to or from them changes that (the next 39 M)."""

    def __init__(self, head: list[int], cnt: Counter[int], full: Callable[[int], bool] | None = None):
        self.head = head
        self.cnt = cnt
        self.full = full
        self.at = {b: i for i, b in enumerate(head)}
        self.out = {b for b in head if full(b)} if full is not None else set()
        self.lists: dict[int, list[int]] = {}  # most -> positions in head, ascending

    def moved(self, src: int, dst: int) -> None:
        """After a replica of the topic moved from ``src`` to ``dst``: their counts changed, and
        their disks' peaks (by it, and by a replica of another topic swapped back)."""
        for b in (src, dst):
            i = self.at.get(b)
            if i is None:
                continue
            if self.full is not None:
                if self.full(b):
                    self.out.add(b)
                else:
                    self.out.discard(b)
            c = self.cnt.get(b, 0)
            for most, pos in self.lists.items():
                k = bisect_left(pos, i)
                has = k < len(pos) and pos[k] == i
                want = c <= most and b not in self.out
                if want and not has:
                    pos.insert(k, i)
                elif has and not want:
                    del pos[k]

    def upto(self, most: int) -> Iterator[int]:
        """The head's brokers holding at most ``most`` replicas of the topic and not full, in the
        list's order (lazily; not to be advanced after a move)."""
        pos = self.lists.get(most)
        if pos is None:
            get, out = self.cnt.get, self.out
            pos = self.lists[most] = [i for i, b in enumerate(self.head) if get(b, 0) <= most and b not in out]
        return map(self.head.__getitem__, pos)
