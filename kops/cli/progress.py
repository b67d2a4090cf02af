"""Progress for people: the CLI's implementations of :class:`kops.ops.progress.NullReporter`.

A rich progress bar (partitions, bytes, ETA) when stderr is a terminal; one line per change (at
most every few seconds) otherwise, so that logs and cron mails stay readable.
"""

from __future__ import annotations

import sys
import time

from kops.cli.common import err_console
from kops.inputs.values import human_bytes
from kops.ops.progress import NullReporter, Snapshot


class LineReporter(NullReporter):
    """One line on stderr when something changes (or every ``every_s`` seconds)."""

    def __init__(self, stream=None, every_s: float = 10.0):
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._last: tuple | None = None
        self._last_t = 0.0
        self._t0 = time.monotonic()

    def start(self, total: int, bytes_total: int | None) -> None:
        self._t0 = time.monotonic()

    def update(self, s: Snapshot) -> None:
        key = (s.done, s.in_flight, s.pending, s.note)
        now = time.monotonic()
        if key == self._last and now - self._last_t < self.every_s:
            return
        self._last, self._last_t = key, now
        b = ""
        if s.bytes_total:
            b = f", {human_bytes(s.bytes_done)}/{human_bytes(s.bytes_total)}"
        line = (
            f"[{now - self._t0:6.0f}s] {s.done}/{s.total} partitions done, {s.in_flight} moving, "
            f"{s.pending} waiting{b}"
        )
        if s.note:
            line += f" — {s.note}"
        print(line, file=self.stream, flush=True)

    def message(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class RichReporter(NullReporter):
    """A rich progress bar: partitions done/total, bytes moved, ETA."""

    def __init__(self, console):
        self.console = console
        self.progress = None
        self.task = None
        self.bytes_task = None

    def start(self, total: int, bytes_total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[note]}"),
            console=self.console,
            transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task("partitions", total=total, note="")
        if bytes_total:
            self.bytes_task = self.progress.add_task("bytes", total=bytes_total, note="")

    def update(self, s: Snapshot) -> None:
        if self.progress is None:
            return
        note = f"{s.in_flight} moving, {s.pending} waiting" + (f" — {s.note}" if s.note else "")
        self.progress.update(self.task, completed=s.done, note=note)
        if self.bytes_task is not None and s.bytes_done is not None:
            self.progress.update(self.bytes_task, completed=s.bytes_done, note="")

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False)
        else:
            self.console.print(text, markup=False, highlight=False)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def make_reporter(*, quiet: bool = False) -> NullReporter:
    """A reporter for the current stderr: a rich progress bar on a terminal, lines otherwise."""
    if quiet:
        return NullReporter()
    if sys.stderr.isatty():
        return RichReporter(err_console())
    return LineReporter()
