"""What an execution would do, without doing it (``reassign execute --dry-run``, ``rebalance step
--dry-run``): pure, from a validated plan (:class:`kops.ops.reassign.Prepared`).

- **waves** in order: the engine's own :func:`~kops.ops.reassign.next_wave` over the plan's
  moves, in the plan's order, with the same limits. The first wave is exactly what the engine
  starts first; later waves start as moves finish, so their order is simulated: a move that
  copies ``size`` bytes takes ``size / (throttle / k)`` seconds, ``k`` being the most moves
  sharing one of its destination brokers' follower throttle when it starts (an estimate: new
  writes during the move and disk or network limits below the throttle are not counted);
- the **throttles** the engine would write before each wave (the same
  :func:`~kops.ops.throttle.desired_throttles`): rates per broker, replica lists per topic;
- **bytes** per destination broker and the estimated duration at the throttle;
- each broker's **disk** before, at the peak during the execution (a destination holds the new
  replica before the source drops the old one) and after, where sizes and capacities are known.
"""

from __future__ import annotations

from typing import Any

from kops.ops import throttle
def _throttles(moves: list, rate: int | None, log_dir_rate: int | None) -> dict[str, Any]:
    d = throttle.desired_throttles(moves, rate=rate, log_dir_rate=log_dir_rate)
    return {
        "brokers": {str(b): dict(sorted(v.items())) for b, v in sorted(d.brokers.items())},
        "topics": {t: {k: throttle.format_replicas(v) for k, v in sorted(kv.items())} for t, kv in sorted(d.topics.items())},
    }


def simulate(prepared, opts) -> dict[str, Any]:
    """The dry run's document (JSON-ready)."""
    from kops.ops.reassign import next_wave

    topo = prepared.topology
    work = list(prepared.work)
    rate = opts.throttle
    pending = list(work)
    in_flight: list[tuple[float, Any]] = []  # (finish time, move)
    t = 0.0
    waves: list[dict[str, Any]] = []
    into: dict[int, int] = {}
    # disk: used bytes per broker over the simulated time line
    cap = {b.id: (sum(d.total_bytes for d in b.log_dirs if d.total_bytes is not None),
                  sum(d.usable_bytes for d in b.log_dirs if d.usable_bytes is not None),
                  all(d.capacity_known for d in b.log_dirs) and bool(b.log_dirs)) for b in topo.brokers}
    used = {b: (tot - usable) for b, (tot, usable, known) in cap.items() if known}
    peak = dict(used)
    sizes_known = all(m.size_bytes is not None for m in work if m.moves_data)

    def finish(m) -> None:
        for b in m.removing:
            if b in used:
                used[b] -= m.size_bytes or 0

    while pending or in_flight:
        wave = next_wave(pending, [m for _, m in in_flight], max_per_broker=opts.max_moves_per_broker,
                         max_in_flight=opts.max_moves_in_flight)
        if wave:
            moving = [m for _, m in in_flight] + [m for m in wave if m.moves_data]
            waves.append({
                "wave": len(waves) + 1,
                "disk_stage": min(m.stage for m in wave) + 1,
                "starts_after_s": round(t, 1) if (rate and sizes_known) else None,
                "partitions": [{"topic": m.topic, "partition": m.partition, "original": list(m.original),
                                "target": list(m.target), "adding": list(m.adding), "removing": list(m.removing),
                                "size_bytes": m.size_bytes} for m in wave],
                "bytes": sum((m.size_bytes or 0) * len(m.adding) for m in wave),
                "throttles": _throttles(moving, rate, opts.log_dir_throttle),
            })
            for m in wave:
                pending.remove(m)
                for b in m.adding:
                    into[b] = into.get(b, 0) + (m.size_bytes or 0)
                    if b in used:
                        used[b] += m.size_bytes or 0
                        peak[b] = max(peak[b], used[b])
            for m in wave:
                dur = 0.0
                if m.moves_data and rate and m.size_bytes:
                    share = max((sum(1 for x in moving if b in x.adding) for b in m.adding), default=1)
                    dur = m.size_bytes / (rate / max(1, share))
                in_flight.append((t + dur, m))
        if not in_flight:
            break  # (next_wave always starts something when nothing is in flight)
        in_flight.sort(key=lambda x: x[0])
        t = in_flight[0][0]
        while in_flight and in_flight[0][0] <= t:
            finish(in_flight.pop(0)[1])

    disk = []
    for b, (tot, usable, known) in sorted(cap.items()):
        if not known or (b not in into and not any(b in m.removing for m in work)):
            continue
        before = tot - usable
        disk.append({"broker": b, "total_bytes": tot, "used_before": before, "used_peak": peak[b],
                     "used_after": used[b], "peak_pct": round(100.0 * peak[b] / tot, 1) if tot else None})
    return {
        "dry_run": True,
        "partitions": len(work),
        "data_moves": sum(1 for m in work if m.moves_data),
        "reorders": sum(1 for m in work if not m.moves_data),
        "throttle": rate,
        "waves": waves,
        "bytes_to_move": prepared.bytes_to_move,
        "bytes_by_destination": {str(b): n for b, n in sorted(into.items())},
        "estimated_seconds": round(t, 1) if (rate and sizes_known) else None,
        "estimated_seconds_lower_bound": (None if prepared.estimated_seconds(rate) is None
                                          else round(prepared.estimated_seconds(rate), 1)),
        "disk": disk,
        "disk_check": prepared.disk.to_dict() if prepared.disk is not None else None,
        "assumptions": ("waves after the first start as moves finish; a move takes its bytes / (throttle / "
                        "moves sharing its busiest destination); new writes during the move are not counted"),
    }
