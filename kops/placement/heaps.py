"""Lazy min/max heaps of ``(key, broker)`` over a set of brokers: the least and the most loaded
broker in O(log n), for the repair and the balance phases (:mod:`kops.placement.repair`,
:mod:`kops.placement.balance`). Entries go stale when a broker's key changes; a popped entry
whose key is no longer current is skipped. Pure."""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = ["BrokerHeaps"]


class BrokerHeaps:
    """``key``: the live dict of each broker's key (the state's ``key``, read, never written).
    While ``live``, the state pushes a broker again after every move that changes its load
    (:meth:`kops.placement.state.PlacementState.move`); once a phase lets them go nothing does,
    and a phase that reads them rebuilds them first."""

    def __init__(self, key: dict[int, float], members: list[int]):
        self.key = key
        self.members = members
        self.minheap: list[tuple[float, int]] = []
        self.maxheap: list[tuple[float, int]] = []
        self.live = True

    def push(self, b: int) -> None:
        k = self.key[b]
        heapq.heappush(self.minheap, (k, b))
        heapq.heappush(self.maxheap, (-k, b))

    def rebuild(self, members: list[int]) -> None:
        """Heaps over ``members`` as they are now; they follow moves again."""
        self.live, self.members = True, members
        key = self.key
        self.minheap = [(key[b], b) for b in members]
        heapq.heapify(self.minheap)
        self.maxheap = [(-key[b], b) for b in members]
        heapq.heapify(self.maxheap)

    def let_go(self) -> None:
        """No phase reads the heaps again unless it rebuilds them: moves stop pushing onto them."""
        self.live = False

    def ascending(self, accept: Callable[[int], int]) -> int | None:
        """Pop brokers by (key, id) until ``accept(b)`` returns 1 (found) or -1 (stop)."""
        assert self.live, "the heaps were let go after phase 2: rebuild them first"
        heap, key = self.minheap, self.key
        popped: list[tuple[float, int]] = []
        seen: set[int] = set()
        found = None
        while heap:
            entry = heapq.heappop(heap)
            ld, b = entry
            if key[b] != ld or b in seen:
                continue
            seen.add(b)
            popped.append(entry)
            verdict = accept(b)
            if verdict > 0:
                found = b
                break
            if verdict < 0:
                break
        for e in popped:
            heapq.heappush(heap, e)
        if len(heap) > 4 * len(self.members) + 64:
            self.minheap = [(key[b], b) for b in self.members]
            heapq.heapify(self.minheap)
        return found
