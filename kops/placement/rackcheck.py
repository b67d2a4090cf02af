"""A memoised front for :func:`kops.placement.racks.rack_violation` (the one definition of rack-safe).

Whether a replica list is rack-safe depends only on the multiset of leaf domains (racks) it uses:
every level's counts and every domain's capacity follow from it. So the answer of
``rack_violation`` is cached per sorted tuple of leaf-domain indexes; with 50 racks and RF 3 that
is at most ~23k distinct keys however many partitions there are, and each lookup costs a sort of
RF small integers instead of ~25 us. Duplicates and unknown brokers are answered directly, and
so are distinct racks on a one-level tree (safe: spread as evenly as can be).
"""

from __future__ import annotations

from collections.abc import Sequence

from kops.placement.racks import RackTree, rack_violation

__all__ = ["RackSafety"]


class RackSafety:
    def __init__(self, tree: RackTree):
        self.tree = tree
        leaves = tree.level_of[tree.depth - 1]
        index: dict[tuple[str, ...], int] = {}
        for b in sorted(leaves):
            index.setdefault(leaves[b], len(index))
        self.leaf: dict[int, int] = {b: index[leaves[b]] for b in leaves}
        self.leaf_name: dict[int, tuple[str, ...]] = {i: d for d, i in index.items()}
        # one broker per leaf and one level: safe <=> no duplicates
        self.trivial = tree.depth == 1 and len(index) == len(leaves)
        # one level: replicas in distinct racks are spread as evenly as can be (safe, no sort)
        self.flat = tree.depth == 1
        self._cache: dict[tuple[int, ...], bool] = {}

    def safe(self, replicas: Sequence[int]) -> bool:
        """``rack_violation(replicas, tree) is None``, memoised."""
        leaf = self.leaf
        if any(b not in leaf for b in replicas) or len(set(replicas)) != len(replicas):
            return False
        return self.safe_distinct(replicas)

    def safe_distinct(self, replicas: Sequence[int]) -> bool:
        """Like :meth:`safe` for lists known to hold distinct, known brokers (hot loops)."""
        if self.trivial:
            return True
        leaf = self.leaf
        if self.flat and len({leaf[b] for b in replicas}) == len(replicas):
            return True
        key = tuple(sorted([leaf[b] for b in replicas]))
        ok = self._cache.get(key)
        if ok is None:
            ok = rack_violation(replicas, self.tree) is None
            self._cache[key] = ok
        return ok

    def replaced(self, replicas: Sequence[int], src: int, dst: int) -> bool:
        """:meth:`safe_distinct` of ``replicas`` with ``src`` replaced by ``dst`` (known, not among
        them), without building the list where the others' racks and dst's are distinct on a
        one-level tree (safe)."""
        if self.trivial:
            return True
        leaf = self.leaf
        if self.flat:
            seen = {leaf[dst]}
            for b in replicas:
                if b != src:
                    x = leaf[b]
                    if x in seen:
                        break
                    seen.add(x)
            else:
                return True
        return self.safe_distinct([dst if b == src else b for b in replicas])

    def unsafe(self, lists: Sequence[Sequence[int]]) -> list[int]:
        """Indexes of the lists that are not rack-safe (one tight pass; empty lists are skipped)."""
        out: list[int] = []
        leaf, cache, tree = self.leaf, self._cache, self.tree
        trivial, flat = self.trivial, self.flat
        for i, r in enumerate(lists):
            if not r:
                continue
            try:
                leaves = [leaf[b] for b in r]
            except KeyError:
                out.append(i)
                continue
            if flat and len(set(leaves)) == len(leaves):
                continue  # (distinct racks, so distinct brokers, on one level: safe, without the sort)
            key = tuple(sorted(leaves))
            if len(set(r)) != len(r):
                out.append(i)
                continue
            if trivial:
                continue
            ok = cache.get(key)
            if ok is None:
                ok = rack_violation(r, tree) is None
                cache[key] = ok
            if not ok:
                out.append(i)
        return out

    def violation(self, replicas: Sequence[int]) -> str | None:
        """The explanation from :func:`rack_violation` (not cached; for reports)."""
        if self.safe(replicas):
            return None
        return rack_violation(replicas, self.tree) or "not rack-safe"
