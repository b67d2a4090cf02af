"""What the planner balances and the hard limits it keeps, as a mixin of
:class:`kops.placement.balancer._Planner` (whose state it reads: ``goals``, ``allowed``, ``topo``,
``size``, ``rate``, ``reps``, ``orig``, ``load``): which load phase 2 balances (the first balance
goal with data), each broker's share of it where capacities differ, and the disk (at the peak of
the move) and network-in limits every placement is checked against. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable


class LoadsAndLimits:
    def _primary(self) -> str:
        for g in self.goals:
            if g == "disk-usage" and self.sizes_known and any(s > 0 for s in self.size):
                return g
            if g == "nw-in-usage" and self.rates_known and any(r > 0 for r in self.rate):
                return g
            if g == "replicas":
                return g
        return "count"

    def _capacity_weights(self) -> dict[int, int] | None:
        from kops.placement.goals import disk_capacity, shared_disks

        if not self.weighted:
            return None
        if self.primary == "disk-usage":
            shared = shared_disks(self.topo)
            caps = {b: disk_capacity(self.topo.broker(b), shared) for b in self.allowed}
        else:
            c = {b: self.topo.broker(b).capacity for b in self.allowed}
            caps = {b: (x.nw_in_bytes_per_s if x is not None else None) for b, x in c.items()}
        if not caps or any(not v for v in caps.values()) or len(set(caps.values())) == 1:
            return None
        return {b: int(v) for b, v in caps.items()}

    def _rekey(self, b: int) -> None:
        if self.capw is not None:
            self.key[b] = self.load[b] / self.capw[b]

    def _excess(self, b: int, total: int, capsum: int) -> int:
        """How far ``b`` is above its target share of ``total`` (scaled by ``capsum``: integers;
        negative below it). Equal shares: ``n * load - total``."""
        return self.load[b] * capsum - total * (1 if self.capw is None else self.capw[b])

    def limit_disks(self, threshold: float) -> None:
        """The hard disk limit: ``threshold`` of each allowed broker's disk, where its capacity
        (``Broker.capacity``, else its log dirs' volumes) and every partition's size are known.
        A broker's use now: its volumes' total minus usable bytes where the log dirs say so
        (everything on them), else the sizes of the replicas it holds."""
        from kops.placement.goals import disk_capacity, disk_used, shared_disks

        self.disk_threshold = threshold
        if not self.sizes_known:
            return
        held: dict[int, int] = defaultdict(int)
        for p, r in enumerate(self.orig):
            for b in r:
                held[b] += self.size[p]
        shared = shared_disks(self.topo)
        for b in self.allowed:
            cap = disk_capacity(self.topo.broker(b), shared)
            if cap:
                self.disk_limit[b] = threshold * cap
                self.disk_peak[b] = disk_used(self.topo.broker(b), held[b], shared)

    def limit_network(self, threshold: float) -> None:
        """The hard network-in limit: ``threshold`` of each allowed broker's NW_IN capacity where
        it and every partition's bytes-in rate are known (every replica takes its partition's
        bytes-in: the leader from producers, a follower by fetching)."""
        if not self.rates_known:
            return
        for b in self.allowed:
            c = self.topo.broker(b).capacity
            if c is not None and c.nw_in_bytes_per_s:
                self.nw_limit[b] = threshold * c.nw_in_bytes_per_s
                self.nw_in[b] = 0.0
        for p, r in enumerate(self.orig):
            for b in r:
                if b in self.nw_in:
                    self.nw_in[b] += self.rate[p]

    @property
    def limited(self) -> bool:
        return bool(self.disk_limit or self.nw_limit)

    def _fits_disk(self, b: int, p: int) -> bool:
        """May partition ``p`` get a new replica on broker ``b`` within the disk limit (at the
        peak of the move) and the network-in limit?"""
        limit = self.disk_limit.get(b)
        if limit is not None and b not in self.orig[p] and self.disk_peak[b] + self.size[p] > limit:
            return False
        limit = self.nw_limit.get(b)
        return limit is None or b in self.reps[p] or self.nw_in[b] + self.rate[p] <= limit

    def _disk_takes_none(self, parts: list[int]) -> Callable[[int], bool] | None:
        """A test of whether a broker's disk takes none of ``parts`` within the disk limit at the
        peak of the move, as of now (:meth:`_fits_disk` refuses each: the broker holds none of
        them originally and is too full for the smallest); None without disk limits."""
        if not self.disk_limit or not parts:
            return None
        limit, peak = self.disk_limit, self.disk_peak
        smallest = min(self.size[p] for p in parts)
        held = {b for p in parts for b in self.orig[p]}

        def takes_none(b: int) -> bool:
            lim = limit.get(b)
            return lim is not None and b not in held and peak[b] + smallest > lim
        return takes_none
