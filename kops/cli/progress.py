"""Progress for people: the CLI's implementations of :class:`kops.ops.progress.NullReporter`.

A rich progress bar (partitions, bytes in binary units, the copy rate over the last 30 s, the
throttle, ETA) when stderr is a terminal; one line per change (at most every few seconds)
otherwise, so that logs and cron mails stay readable; with ``--progress json``, one JSON object
per line and per poll on stderr, for a program watching the execution (stdout keeps its one
document).
"""

from __future__ import annotations

import json
import sys
import time
from enum import Enum

from kops.cli.common import err_console
from kops.inputs.values import human_bytes
from kops.ops.progress import NullReporter, RecentRate, Snapshot

#: the copy rate shown is over this many seconds
RATE_WINDOW_S = 30.0


def rate_text(rate: float | None, throttle: int | None) -> str:
    """``12.3 MiB/s (throttle 50.0 MiB/s per broker)``: the rate of the whole copy, over every
    destination; Kafka's throttle is per broker. ``-`` for a rate not known yet."""
    text = f"{human_bytes(rate)}/s" if rate is not None else "-"
    return text + (f" (throttle {human_bytes(throttle)}/s per broker)" if throttle else "")


class LineReporter(NullReporter):
    """One line on stderr when something changes (or every ``every_s`` seconds)."""

    def __init__(self, stream=None, every_s: float = 10.0):
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._last: tuple | None = None
        self._last_t = 0.0
        self._t0 = time.monotonic()
        self._rate = RecentRate(RATE_WINDOW_S)

    def start(self, total: int, bytes_total: int | None) -> None:
        self._t0 = time.monotonic()

    def update(self, s: Snapshot) -> None:
        now = time.monotonic()
        rate = self._rate.add(now, s.bytes_done) if s.bytes_done is not None else None
        key = (s.done, s.in_flight, s.pending, s.note)
        if key == self._last and now - self._last_t < self.every_s:
            return
        self._last, self._last_t = key, now
        b = ""
        if s.bytes_total:
            b = f", {human_bytes(s.bytes_done)} / {human_bytes(s.bytes_total)} at {rate_text(rate, s.throttle)}"
        line = (
            f"[{now - self._t0:6.0f}s] {s.done}/{s.total} partitions done, {s.in_flight} moving, "
            f"{s.pending} waiting{b}"
        )
        if s.note:
            line += f" — {s.note}"
        print(line, file=self.stream, flush=True)

    def message(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


def _amount_column():
    """done / total: partitions as counts (rich's MofNCompleteColumn), bytes in binary units
    (rich's DownloadColumn: ``120.3/152.8 MiB``), chosen by the task's ``bytes`` field."""
    from rich.progress import DownloadColumn, MofNCompleteColumn, ProgressColumn

    class Amount(ProgressColumn):
        def __init__(self):
            super().__init__()
            self.count, self.size = MofNCompleteColumn(), DownloadColumn(binary_units=True)

        def render(self, task):
            return (self.size if task.fields.get("bytes") else self.count).render(task)

    return Amount()


class RichReporter(NullReporter):
    """A rich progress bar: partitions done/total; bytes moved in binary units, the copy rate
    over the last 30 s and the throttle; ETA."""

    def __init__(self, console):
        self.console = console
        self.progress = None
        self.task = None
        self.bytes_task = None
        self._rate = RecentRate(RATE_WINDOW_S)

    def start(self, total: int, bytes_total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            _amount_column(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[note]}"),
            console=self.console,
            transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task("partitions", total=total, note="")
        if bytes_total:
            self.bytes_task = self.progress.add_task("bytes", total=bytes_total, note="", bytes=True)

    def update(self, s: Snapshot) -> None:
        if self.progress is None:
            return
        note = f"{s.in_flight} moving, {s.pending} waiting" + (f" — {s.note}" if s.note else "")
        self.progress.update(self.task, completed=s.done, note=note)
        if self.bytes_task is not None and s.bytes_done is not None:
            rate = self._rate.add(time.monotonic(), s.bytes_done)
            self.progress.update(self.bytes_task, completed=s.bytes_done, note=rate_text(rate, s.throttle))

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False)
        else:
            self.console.print(text, markup=False, highlight=False)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


class JsonReporter(NullReporter):
    """One JSON object per line on stderr for every event, each poll included: ``{"event":
    "start" | "progress" | "message" | "stop", "elapsed_s": ...}`` and, for progress, the
    partitions ``done`` / ``total`` / ``in_flight`` / ``pending``, ``bytes_done`` / ``bytes_total``,
    ``rate_bytes_per_s`` (over the last 30 s; null until known), ``throttle_bytes_per_s`` (per
    broker; null: none) and ``note``."""

    def __init__(self, stream=None, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self._clock = clock
        self._t0 = clock()
        self._rate = RecentRate(RATE_WINDOW_S)

    def _emit(self, event: str, now: float, **fields) -> None:
        doc = {"event": event, "elapsed_s": round(now - self._t0, 3), **fields}
        print(json.dumps(doc, separators=(",", ":")), file=self.stream, flush=True)

    def start(self, total: int, bytes_total: int | None) -> None:
        self._t0 = self._clock()
        self._emit("start", self._t0, total=total, bytes_total=bytes_total)

    def update(self, s: Snapshot) -> None:
        now = self._clock()
        rate = self._rate.add(now, s.bytes_done) if s.bytes_done is not None else None
        self._emit("progress", now, done=s.done, total=s.total, in_flight=s.in_flight, pending=s.pending,
                   bytes_done=s.bytes_done, bytes_total=s.bytes_total,
                   rate_bytes_per_s=None if rate is None else round(rate, 1), throttle_bytes_per_s=s.throttle,
                   note=s.note)

    def message(self, text: str) -> None:
        self._emit("message", self._clock(), text=text)

    def stop(self) -> None:
        self._emit("stop", self._clock())


class ProgressStyle(str, Enum):
    """``--progress``: how an execution shows its progress on stderr."""

    auto = "auto"  # a bar on a terminal, lines otherwise
    bar = "bar"
    lines = "lines"
    json = "json"
    none = "none"


def make_reporter(*, quiet: bool = False, style: ProgressStyle | str = ProgressStyle.auto) -> NullReporter:
    """A reporter for the current stderr: ``style`` as ``--progress`` names it; ``auto``: a rich
    progress bar on a terminal, lines otherwise."""
    style = ProgressStyle(style)
    if quiet or style is ProgressStyle.none:
        return NullReporter()
    if style is ProgressStyle.json:
        return JsonReporter()
    if style is ProgressStyle.bar or (style is ProgressStyle.auto and sys.stderr.isatty()):
        return RichReporter(err_console())
    return LineReporter()
