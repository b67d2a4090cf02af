"""Execution options and the engine's timing constants (how long to wait for what)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kops.errors import EXIT_FAILURE, BadInput, KopsError
from kops.inputs.values import AutoRate
from kops.ops.disk_fit import DEFAULT_DISK_RESERVE_PCT, DEFAULT_DISK_THRESHOLD_PCT

#: after a submission, a partition that is not reassigning and not at its target yet is given
#: this long before it counts as a mismatch (metadata propagates asynchronously)
SETTLE_S = 15.0

#: a topology read this recently (validation, just before the execution starts) is used for the
#: first wave's health check and throttles instead of reading the whole cluster again
FRESH_S = 5.0

#: how long after the controller finished a move kops keeps re-checking at the wake-up rate
#: (not the poll interval) while broker metadata still shows the old replicas
LAG_RECHECK_S = 5.0
#: while metadata lags: a full check again after this many seconds
LAG_RECHECK_EVERY_S = 0.15
#: between checks, one ListPartitionReassignments every WAKE_S seconds notices finished moves;
#: every WAKE_SOON_S when a move is expected to end soon (less than ENDING_SOON_S of copying
#: left at the throttle, or under 5 % of its bytes, or sizes unknown)
WAKE_S = 0.5
WAKE_SOON_S = 0.1
ENDING_SOON_S = 3.0
#: the throttles of finished moves are lifted at the latest this long after they finished
LIFT_DEFER_MAX_S = 2 * ENDING_SOON_S


@dataclass
class ExecuteOptions:
    #: the replication throttle, bytes/s per broker; under ``auto_throttle``, the rate it starts at
    throttle: int | None = None
    #: ``--throttle auto[:MIN-MAX]``: kops adjusts the rate within these bounds
    #: (:mod:`kops.ops.reassign.auto_throttle`)
    auto_throttle: AutoRate | None = None
    #: ``--probe-topic``: the topic whose ``acks=all`` latency the adaptive throttle watches
    probe_topic: str | None = None
    #: a cron step's maintenance windows (:class:`kops.inputs.window.Windows`): an adaptive
    #: throttle still running when they close drops to its minimum (not journaled: each step
    #: that resumes the execution gives its own)
    window: Any = None
    log_dir_throttle: int | None = None
    max_moves_per_broker: int | None = None
    max_moves_in_flight: int | None = None
    wait: bool = False
    timeout_s: float | None = None
    allow_offline: bool = False
    poll_interval_s: float = 2.0
    #: stop waiting when every move in flight waits on a down broker for this long
    stall_after_s: float = 60.0
    #: "admin" (AlterPartitionReassignments) or "zookeeper" (/admin/reassign_partitions)
    via: str = "admin"
    #: percent of each destination volume the disk check keeps free (None: the default, 5 %)
    disk_reserve_pct: float | None = None
    #: how full a destination volume may be at the peak of the move, percent (None: the
    #: default, 80 %; 100: no threshold beyond the reserve)
    disk_threshold_pct: float | None = None
    #: who started the execution, kept in the journal (``rebalance-step``: a cron step's own)
    origin: str | None = None

    @staticmethod
    def rate(value: int | AutoRate | None) -> dict[str, Any]:
        """``--throttle``'s value as options: a fixed rate, or ``auto`` starting at its minimum."""
        if isinstance(value, AutoRate):
            return {"throttle": value.lo, "auto_throttle": value}
        return {"throttle": value}

    @property
    def reserve_pct(self) -> float:
        return DEFAULT_DISK_RESERVE_PCT if self.disk_reserve_pct is None else self.disk_reserve_pct

    @property
    def threshold_pct(self) -> float:
        return DEFAULT_DISK_THRESHOLD_PCT if self.disk_threshold_pct is None else self.disk_threshold_pct

    def check(self, *, zookeeper: bool) -> None:
        """What can be judged without the cluster (exit 2 before connecting): the way moves
        are submitted. ``zookeeper``: a ZooKeeper connect string was given."""
        if self.via not in ("admin", "zookeeper"):
            raise BadInput(f"--via must be admin or zookeeper, not {self.via!r}")
        if self.via == "zookeeper" and not zookeeper:
            raise BadInput("--via zookeeper needs --zookeeper HOST:PORT (a ZooKeeper-mode cluster)")
        if self.probe_topic and self.auto_throttle is None:
            raise BadInput("--probe-topic is read by the adaptive throttle: give --throttle auto[:MIN-MAX] too")

    def to_dict(self) -> dict[str, Any]:
        return {
            "via": self.via,
            "throttle": self.throttle,
            **({"throttle_auto": self.auto_throttle.to_dict()} if self.auto_throttle else {}),
            **({"probe_topic": self.probe_topic} if self.probe_topic else {}),
            "log_dir_throttle": self.log_dir_throttle,
            "max_moves_per_broker": self.max_moves_per_broker,
            "max_moves_in_flight": self.max_moves_in_flight,
            "allow_offline": self.allow_offline,
            "poll_interval_s": self.poll_interval_s,
            "disk_reserve_pct": self.reserve_pct,
            "disk_threshold_pct": self.threshold_pct,
            **({"origin": self.origin} if self.origin else {}),
        }

    def with_journal(self, opts: Mapping[str, Any]) -> ExecuteOptions:
        """Options of a resumed execution: the journal's unless given again (``--throttle N``
        on resume ends the adaptive throttle; ``--throttle auto`` starts it at the execution's
        last rate)."""
        auto = opts.get("throttle_auto")
        if self.auto_throttle is not None:
            rate = {"throttle": opts.get("throttle"), "auto_throttle": self.auto_throttle}
        elif self.throttle is not None:
            rate = {"throttle": self.throttle}
        else:
            rate = {"throttle": opts.get("throttle"),
                    "auto_throttle": AutoRate(auto["min"], auto["max"]) if auto else None}
        return ExecuteOptions(
            **rate,
            probe_topic=self.probe_topic or (opts.get("probe_topic") if rate.get("auto_throttle") else None),
            log_dir_throttle=self.log_dir_throttle if self.log_dir_throttle is not None else opts.get("log_dir_throttle"),
            max_moves_per_broker=self.max_moves_per_broker or opts.get("max_moves_per_broker"),
            max_moves_in_flight=self.max_moves_in_flight or opts.get("max_moves_in_flight"),
            wait=self.wait,
            timeout_s=self.timeout_s,
            allow_offline=self.allow_offline or bool(opts.get("allow_offline")),
            poll_interval_s=self.poll_interval_s,
            stall_after_s=self.stall_after_s,
            via=opts.get("via", "admin"),
            disk_reserve_pct=(self.disk_reserve_pct if self.disk_reserve_pct is not None
                              else opts.get("disk_reserve_pct")),
            # an execution journaled before the threshold existed keeps running without one
            disk_threshold_pct=(self.disk_threshold_pct if self.disk_threshold_pct is not None
                                else opts.get("disk_threshold_pct", 100.0)),
            origin=opts.get("origin", self.origin),
            window=self.window,
        )


class HealthStop(KopsError):
    """The cluster is not healthy enough to start (more) moves."""

    exit_code = EXIT_FAILURE


#: a data move in flight whose new replicas copy nothing for this long (every broker up; more at a
#: very low throttle) is stuck: when every move in flight is, waiting ends (resume or cancel)
NO_PROGRESS_S = 120.0

#: how long a wave of a later disk stage waits for the space the stages before it free (Kafka
#: deletes a moved-away replica's files log.segment.delete.delay.ms after the move: 60 s by default)
SPACE_WAIT_S = 300.0

#: what halted an execution (``Runner.halted_by``)
HALT_HEALTH = "health check"
HALT_DISK = "disk check"
#: the final removal of an execution's throttles is sent this many times at most while some of
#: it fails on brokers that are up (a slow or lossy link)
LIFT_ATTEMPTS = 3
