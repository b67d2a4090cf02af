"""The hard goals: kept on every move of every plan, named in ``--goals`` or not.

* ``rack``: every changed list rack-safe (the state's rack check on every move, the repair of
  phase 1, and a final check of every changed list);
* ``disk-capacity``: no destination past the disk threshold at the peak of the move (the state's
  :class:`~kops.placement.state.Limits`);
* ``nw-in-capacity``: no destination past the network-in threshold (likewise);
* ``nw-out-capacity``: measured and reported (a leader's network-out follows leadership, which
  the leader phase sets after the moves).

Their classes here measure them for the report. Pure."""

from __future__ import annotations

from typing import Any

from kops.placement.capacity import disk_used
from kops.placement.goals.base import PlanGoal
from kops.placement.goals.measure import Assignment, Evaluation, added, pct
from kops.placement.rackcheck import RackSafety
from kops.placement.racks import RackTree


class RackGoal(PlanGoal):
    name = "rack"
    hard = True

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        topo = ev.topo
        safety = RackSafety(RackTree.build({b.id: b.rack for b in topo.brokers}))

        def unsafe(assign: Assignment) -> list[str]:
            keys = list(assign)
            return sorted(f"{keys[i][0]}-{keys[i][1]}" for i in safety.unsafe([assign[k] for k in keys]))
        ub, ua = unsafe(ev.before), unsafe(ev.after)
        return ev.figures(cls.name, "rack-unsafe partitions", len(ub), len(ua), 0, met=not ua, blockers=ua[:10])


class DiskCapacityGoal(PlanGoal):
    name = "disk-capacity"
    hard = True

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        goal = cls.name
        if not ev.sizes_known:
            return ev.unknown(goal, "partition sizes (a live read, or a snapshot with size_bytes)")
        disk_cap, ids = ev.disk_cap, ev.ids
        if not disk_cap:
            running = ev.topo.kafka_versions()
            on = f"; these brokers run Kafka {running}" if running else ""
            return ev.unknown(goal, "disk capacities (measured from the log dirs by a live read on Kafka 3.3 or "
                                    f"later, KIP-827{on}; or a snapshot from cluster describe --capacity-file; "
                                    "brokers sharing one volume need the file)")
        held = ev.per_broker("size", "before")
        incoming, outgoing = added(ev.after, ev.before, ids, ev.size), added(ev.before, ev.after, ids, ev.size)
        ub = {b: disk_used(ev.topo.broker(b), held[b], ev.shared) for b in ids}
        ua = {b: ub[b] + incoming[b] - outgoing[b] for b in ids}
        peak = {b: ub[b] + incoming[b] for b in ids}  # nothing is freed before a move ends
        use = {k: {b: v[b] / disk_cap[b] for b in disk_cap} for k, v in (("before", ub), ("after", ua), ("peak", peak))}
        threshold = ev.threshold
        over = [b for b in disk_cap if use["after"][b] > threshold or use["peak"][b] > threshold]
        # no placement has its largest use below the mean (of the brokers whose capacity is known)
        mean = sum(ua[b] for b in disk_cap) / sum(disk_cap.values())
        return ev.figures(goal, "largest disk use, % of capacity", pct(max(use["before"].values())),
                          pct(max(use["after"].values())), pct(mean), met=not over,
                          blockers=[f"broker {b}: {pct(use['after'][b])} % after, {pct(use['peak'][b])} % "
                                    "at the peak of the move" for b in sorted(over)],
                          peak=pct(max(use["peak"].values())), threshold=pct(threshold),
                          unchecked=sorted(set(ids) - set(disk_cap)),
                          shared_volume=sorted(ev.shared & set(ids) - set(disk_cap)))


class _NetworkCapacity(PlanGoal):
    hard = True

    @classmethod
    def measure(cls, ev: Evaluation) -> dict[str, Any]:
        goal = cls.name
        if not ev.rates_known:
            return ev.unknown(goal, "bytes-in rates (cluster describe --sample-seconds N)")
        caps = ev.in_cap if goal == "nw-in-capacity" else ev.out_cap
        if not caps:
            return ev.unknown(goal, "network capacities (a snapshot from cluster describe --capacity-file with NW_IN / NW_OUT)")
        load_b, load_a = ev.per_broker(goal, "before"), ev.per_broker(goal, "after")
        limit = ev.threshold if ev.nw_threshold is None else ev.nw_threshold
        over = [b for b in caps if load_a[b] / caps[b] > limit]
        return ev.figures(goal, "busiest broker, % of capacity",
                          pct(max(load_b[b] / caps[b] for b in caps)), pct(max(load_a[b] / caps[b] for b in caps)),
                          pct(sum(load_a[b] for b in caps) / sum(caps.values())), met=not over,
                          blockers=[f"broker {b}: {pct(load_a[b] / caps[b])} %" for b in sorted(over)],
                          threshold=pct(limit), unchecked=sorted(set(ev.ids) - set(caps)))


class NwInCapacityGoal(_NetworkCapacity):
    name = "nw-in-capacity"


class NwOutCapacityGoal(_NetworkCapacity):
    name = "nw-out-capacity"
