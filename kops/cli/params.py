"""Option types: the input layer's value checks (:mod:`kops.inputs.values`) as Click types, and
the options several commands share, declared once here as ``Annotated`` types.

A bad value is a usage error, raised while the options are parsed, before the command runs:
exit 2, and with ``--output json`` one JSON error document (see :mod:`kops.cli.main`). The same
checks run for a value from an environment variable (``KOPS_REQUEST_TIMEOUT=nan``). The input
layer is imported when a value is converted, not before: ``kops --help`` does not load it.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer._click.types import ParamType


class Checked(ParamType):
    """A Click type that converts with :mod:`kops.inputs.values`' converter ``convert``."""

    def __init__(self, name: str, convert: str, **kwargs: Any):
        self.name = name
        self._convert = convert
        self._kwargs = kwargs

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from kops.inputs import values

        # a bound named by its constant ("INT64_MAX") is looked up now, with the layer
        kwargs = {k: getattr(values, v) if isinstance(v, str) and v.isupper() else v for k, v in self._kwargs.items()}
        try:
            return getattr(values, self._convert)(value, **kwargs)
        except values.Invalid as e:
            self.fail(str(e), param, ctx)


def count(lo: int | str = 0, hi: int | str | None = None) -> Checked:
    """An integer from ``lo`` to ``hi`` (default Kafka's int32); a bound may be the name of a
    constant of :mod:`kops.inputs.values` (``"INT32_MIN"``, ``"INT64_MAX"``)."""
    return Checked("INTEGER", "integer", lo=lo, **({"hi": hi} if hi is not None else {}))


def seconds(lo: float = 0.0, hi: float | None = None) -> Checked:
    """Seconds: a finite number (``nan`` and ``inf`` refused) from ``lo`` to ``hi`` (default 30 days)."""
    return Checked("SECONDS", "duration", lo=lo, **({"hi": hi} if hi is not None else {}))


def number(lo: float, hi: float) -> Checked:
    return Checked("NUMBER", "number", lo=lo, hi=hi)


def size(lo: int = 0) -> Checked:
    """Bytes (or bytes/s): ``52428800``, ``50M``, ``2GiB``; int64."""
    return Checked("BYTES", "size", lo=lo)


BOOTSTRAP = Checked("HOST:PORT", "host_ports")
ZOOKEEPER = Checked("HOST:PORT[/chroot]", "zookeeper_connect")
BROKER = Checked("BROKER", "broker_id")
TOPIC = Checked("TOPIC", "topic")
RACK = Checked("RACK", "rack")
EXECUTION_ID = Checked("ID", "ident", what="an execution id")
RUN_ID = Checked("RUN_ID", "ident", what="a run id")


# -- options shared by commands, declared once -------------------------------------------------
# the planners' (``kops plan rebalance`` and friends, as the bundle kops.cli.plan.PlanOptions, and
# ``kops rebalance step``)
_GOAL_PANEL = "Plan limits and report"
MaxMovesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-moves",
        click_type=count(0),
        help="Bounded mode: at most N replica copies in this plan (each partial plan is rack-safe and "
        "never worsens balance; run again after executing it to continue). 0 = leadership only.",
        rich_help_panel=_GOAL_PANEL,
    ),
]
MaxBytesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        click_type=size(0),
        help="Bounded mode: at most B bytes copied in this plan (e.g. 500000000, 50G, 2TiB).",
        rich_help_panel=_GOAL_PANEL,
    ),
]
ThrottleOpt = Annotated[
    int | None,
    typer.Option(
        "--throttle",
        click_type=size(1),
        help="Replication throttle in bytes/s (as Kafka's --throttle; 50M = 50 MiB/s) to estimate the duration.",
        rich_help_panel=_GOAL_PANEL,
    ),
]
ChartOpt = Annotated[
    str | None,
    typer.Option("--chart", help="Write a chart (.png, .svg or .pdf) of per-broker replica and leader counts "
                 "before/after.", rich_help_panel=_GOAL_PANEL),
]
NoBalanceOpt = Annotated[
    bool,
    typer.Option(
        "--no-balance",
        help="Only the moves the goal forces (plus leadership reordering); no balancing moves.",
        rich_help_panel=_GOAL_PANEL,
    ),
]

GoalsOpt = Annotated[
    str | None,
    typer.Option("--goals", metavar="G1,G2,...",
                 help="Goals to optimise, in priority order; each later goal moves replicas only where no "
                      "earlier goal gets worse. Hard goals (rack, disk-capacity, nw-in-capacity, "
                      "nw-out-capacity) are always kept. Soft: replicas, disk-usage, topic-spread, leaders, "
                      "first-followers, nw-in-usage, leader-bytes-in. Default (and 'all'): every goal in that "
                      "order; a goal without its data (sizes, rates) is reported, not optimised. Every goal "
                      "is measured in the report either way, with its verdict and, if worse, why.",
                 rich_help_panel=_GOAL_PANEL),
]

_WHAT_IF = "Capacity and what-if"
CapacityFileOpt = Annotated[
    str | None,
    typer.Option("--capacity-file", metavar="FILE",
                 help="Broker capacities in Cruise Control's capacity file format (DISK MB, NW_IN/NW_OUT KB/s, "
                      "CPU; default entry brokerId -1): resized or heterogeneous brokers. Where it is silent on "
                      "DISK, the disk measured from the log dirs counts.", rich_help_panel=_WHAT_IF),
]


def read_capacities(path: str | None) -> dict[int, Any] | None:
    """``--capacity-file``'s ``{broker id: Capacity}`` (None without the option), read when the
    command starts: a bad file is exit 2, before anything connects to the cluster."""
    if not path:
        return None
    from kops.inputs.capacity import read_capacity_file

    return read_capacity_file(path)
DiskThresholdOpt = Annotated[
    float,
    typer.Option("--disk-threshold", click_type=number(1, 100), metavar="PCT",
                 help="Hard limit of a broker's disk use, % of its capacity, at the peak of the move "
                      "(where capacity and sizes are known). Default 80.", rich_help_panel=_WHAT_IF),
]
AddBrokerOpt = Annotated[
    list[str] | None,
    typer.Option("--add-broker", metavar="ID:RACK[:DISK]",
                 help="What-if (with --topology): plan as if an empty broker ID in RACK (empty: no rack) with a "
                      "disk of DISK bytes (e.g. 2T) were there. Repeatable.", rich_help_panel=_WHAT_IF),
]


# -- an execution's throttle (``reassign execute`` / ``resume``) ------------------------------------
ExecThrottleOpt = Annotated[
    Any,
    typer.Option("--throttle", click_type=Checked("RATE|auto[:MIN-MAX]", "throttle_rate"),
                 help="Inter-broker replication throttle, bytes/s per broker (e.g. 50M; set on the brokers in "
                      "flight only). 'auto' or 'auto:MIN-MAX' (default auto = 10M-400M): kops starts at MIN and "
                      "adjusts the rate while the moves run, halving it at once when a partition it is not "
                      "moving loses an in-sync replica (or --probe-topic's latency jumps) and raising it "
                      "step by step while nothing suffers and the copy is held back; each change is shown "
                      "and journaled with its reason."),
]
ProbeTopicOpt = Annotated[
    str | None,
    typer.Option("--probe-topic", click_type=TOPIC,
                 help="With --throttle auto: write one small acks=all record to this existing topic (your "
                      "canary) at each check; a latency over 3x its baseline (and 50 ms above it) counts "
                      "as harm."),
]


# -- the cron jobs' (``rebalance step``, ``heal step``, ``leader rebalance``) ---------------------
TopicsRegexOpt = Annotated[
    Any,
    typer.Option("--topics", metavar="REGEX", click_type=Checked("REGEX", "topic_regex"),
                 help="Only the topics whose whole name matches (Python regex: 'orders', 'orders|payments', "
                      "'logs\\..*'); the others are not moved, the goals balance the "
                      "topics kept (the disk and network limits count every topic). Kafka's internal topics are "
                      "filtered like the others: the report names every topic left out. Default: every topic."),
]
ExcludeTopicsOpt = Annotated[
    Any,
    typer.Option("--exclude-topics", metavar="REGEX", click_type=Checked("REGEX", "topic_regex"),
                 help="Leave out the topics whose whole name matches (after --topics): not moved, not "
                      "balanced; the report names them."),
]
WindowOpt = Annotated[
    Any,
    typer.Option("--window", click_type=Checked("'DAYS HH:MM-HH:MM ZONE'", "window"),
                 help="Act only within this maintenance window, e.g. 'Mon-Fri 01:00-06:00 Europe/Paris' (the time "
                      "zone is required; several: separated by ';'; 22:00-02:00 closes the next day). Outside it "
                      "the run steps aside (exit 0) with one line saying when the next window opens."),
]
MetricsFileOpt = Annotated[
    str | None,
    typer.Option("--metrics-file", help="Write Prometheus textfile metrics here (node_exporter textfile collector)."),
]
#: ``rebalance step`` and ``heal step``: the waves of their executions
class CronBounds:
    """The bounds of one run of a cron job (``kops rebalance step``, ``kops heal step``), declared
    once: ``per`` names the run (``step``, ``run``), ``moves_note`` what the moves bound adds,
    ``mover`` who moves data under the throttle. Each command keeps its own defaults."""

    def __init__(self, per: str, moves_note: str, mover: str):
        self.moves = Annotated[
            int, typer.Option("--max-moves", click_type=count(1),
                              help=f"At most this many replica moves per {per} ({moves_note}).")
        ]
        self.bytes = Annotated[
            int | None, typer.Option("--max-bytes", click_type=size(1),
                                     help=f"At most this many bytes copied per {per} (e.g. 20G).")
        ]
        self.duration = Annotated[
            float | None, typer.Option("--max-duration", click_type=seconds(1.0),
                                       help=f"The {per}'s copy time at --throttle must fit in this (e.g. 30m); "
                                            "kops waits at most 1.5x this (+30 s) for it.")
        ]
        self.throttle = Annotated[
            Any, typer.Option("--throttle", click_type=Checked("RATE|auto[:MIN-MAX]", "throttle_rate"),
                              help=f"Replication throttle while {mover} moves data, bytes/s (e.g. 50M); or "
                                   "auto[:MIN-MAX]: the adaptive throttle of `reassign execute` (the bounds "
                                   "are planned at MIN).")
        ]


CronMovesPerBrokerOpt = Annotated[
    int, typer.Option("--max-moves-per-broker", click_type=count(1), help="Moves in flight per broker at once (waves).")
]
