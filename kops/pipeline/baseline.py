"""Single-process reference merge (no Spark): a streaming k-way heap merge in pure Python.

It is the baseline of ``bench/bench_logs.py`` and the reference the Spark job is checked against in
the unit tests. Same output as ``kops logs merge --format text`` for the same inputs *when every file is
already in time order* (a heap merge, like Kafka's own merger, assumes that; log4j files written by
several threads can step back by a few milliseconds, which the Spark job's full sort handles).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from kops.pipeline import logformat as lf


class Rec(NamedTuple):
    ts: str
    broker: int
    file: str
    line: int
    lines: list[str]  # first line + continuation lines
    parsed: lf.ParsedLine | None


def read_records(path: str, broker: int | None, *, parse: bool = False) -> Iterator[Rec]:
    """Records of one file in file order. Lines that break the layout, and continuation lines with
    no record above them, are skipped here (the Spark job counts and reports them)."""
    cur: list[str] | None = None
    head: tuple = ()
    parsed: lf.ParsedLine | None = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, raw in enumerate(f, 1):
            text = raw.rstrip("\n")
            if not text.startswith("["):
                if cur is not None:
                    cur.append(text)
                continue
            if cur is not None:
                yield Rec(*head, cur, parsed)
            parsed = lf.parse_line(text) if parse else None
            if not (parsed is not None if parse else _quick_ok(text)):
                cur = None
                continue
            b = _prefix_broker(text)
            if b is None:
                b = broker
            head = (text[1:24], b if b is not None else -1, path, n)
            cur = [text]
    if cur is not None:
        yield Rec(*head, cur, parsed)


def _quick_ok(text: str) -> bool:
    return lf.compiled(lf.LINE_RE).match(text) is not None


def _prefix_broker(text: str) -> int | None:
    m = lf.compiled(r"^\[" + lf.TS_RE + r"\] [A-Z]+ \[(?:Broker|Controller) id=(\d+)").match(text)
    return int(m.group(1)) if m else None


def heap_merge(files: Iterable[tuple[str, int | None]], *, parse: bool = False) -> Iterator[Rec]:
    """k-way merge by (time, broker, file, line) of already time-ordered files."""
    its = [read_records(p, b, parse=parse) for p, b in files]
    return heapq.merge(*its, key=lambda r: (r.ts, r.broker, r.file, r.line))


def merge_to(out, files: list[tuple[str, int | None]]) -> int:
    """Write the merged text (``broker=N <line>``) to ``out``; return the number of lines written."""
    n = 0
    for r in heap_merge(files):
        b = str(r.broker) if r.broker >= 0 else "?"
        for ln in r.lines:
            out.write(f"broker={b} {ln}\n")
            n += 1
    return n


def files_of(root: str) -> list[tuple[str, int | None]]:
    out = []
    for d, _, names in os.walk(root):
        for name in sorted(names):
            if name.startswith("state-change.log"):
                p = os.path.join(d, name)
                out.append((p, lf.broker_of_path(p)))
    return sorted(out)
