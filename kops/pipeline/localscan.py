"""What the merge needs to know about local log files before Spark reads them, learned with a byte scan.

Spark's numbering pass (:func:`kops.pipeline.statechange.number_lines`) reads every line once more
than the merge itself: for each file split, its lines, its first id, its continuation lines and its
first and last times. For local, uncompressed files the merge reads each file as one Spark partition
instead (a line's number is then its row's position in the partition), and this module gives the
rest from a scan in C-speed byte searches (``bytes.count``, ``find`` and one regex over the file's
bytes, ~1 s per GB): each file's line count, its continuation lines (text and number), the times of
its first and last record (for the sort's time ranges) and whether it holds a line terminator of
Java's other than the line feed (where it does not, the layout is checked without a regex over
whole lines). Pure: reads files, no Spark.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass, field

#: extensions Spark's text source decompresses (read whole, line positions unknown to a byte scan)
COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd", ".br", ".xz", ".lzo")
#: the largest file read as one Spark partition (one task reads it whole)
MAX_FILE_BYTES = 1 << 30
#: continuation lines handed from the driver to Spark; with more, the numbering pass finds them
MAX_CONTINUATIONS = 100_000
#: local paths Spark names ``file:<path>`` with nothing escaped (others take the numbering pass)
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9/._+,=~@-]*$")
_NOT_START = re.compile(rb"\n(?=[^\[])")  # a line that does not start with '[' (a continuation line)
_TS = re.compile(rb"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3})\] ")
#: Java's line terminators other than the line feed (UTF-8): where a file holds none, ``.`` in a Java
#: regex matches any of its characters and ``$`` only a line's end (see ``linecols.with_layout_ok``)
TERMINATORS = (b"\r", "\u0085".encode(), "\u2028".encode(), "\u2029".encode())
_WIDE_TERMINATOR = re.compile(b"|".join(re.escape(t) for t in TERMINATORS if len(t) > 1))
_CHUNK = 1 << 24
_EDGE = 1 << 16  # bytes read at each end of a file for its first and last record time


@dataclass
class FileScan:
    path: str  # absolute local path
    size: int
    lines: int
    first_ts: int | None  # yyyyMMddHHmmssSSS of the first line that starts with a time, else None
    last_ts: int | None  # ... of the last such line
    #: (line number, bytes without the line feed) of each line that does not start with '['
    continuations: list[tuple[int, bytes]] = field(default_factory=list)
    #: no :data:`TERMINATORS` in the file
    clean: bool = True

    @property
    def uri(self) -> str:
        """The path as Spark's ``_metadata.file_path`` names it."""
        return "file:" + self.path


def eligible(path: str) -> bool:
    """Can this file be read as one partition and described by :func:`scan_file`?"""
    return (bool(_PLAIN_PATH.match(path)) and not path.lower().endswith(COMPRESSED)
            and os.path.isfile(path) and os.path.getsize(path) <= MAX_FILE_BYTES)


def _ts_of(line: bytes) -> int | None:
    m = _TS.match(line)
    return int(b"".join(m.groups())) if m else None


def _edge_ts(mm: mmap.mmap, size: int, last: bool) -> int | None:
    if last:
        lo = max(0, size - _EDGE)
        lines = mm[lo:size].split(b"\n")
        lines = lines[1:] if lo else lines  # the first piece may be the end of a longer line
        lines.reverse()
    else:
        lines = mm[0:_EDGE].split(b"\n")
    for ln in lines:
        t = _ts_of(ln)
        if t is not None:
            return t
    return None


def _clean(mm: mmap.mmap) -> bool:
    """No :data:`TERMINATORS` in the file: single bytes are searched first (memchr, ~0.1 s per GB), the
    byte sequences only in a file that has their lead bytes (not ASCII)."""
    if mm.find(b"\r") >= 0:
        return False
    if mm.find(b"\xc2") < 0 and mm.find(b"\xe2") < 0:
        return True
    return _WIDE_TERMINATOR.search(mm) is None


def scan_file(path: str, max_continuations: int = MAX_CONTINUATIONS) -> FileScan | None:
    """The file's lines as Spark's text source (line feed separated) reads them; None when it has more
    than ``max_continuations`` continuation lines."""
    size = os.path.getsize(path)
    if size == 0:
        return FileScan(path, 0, 0, None, None)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        lines = sum(mm[a:a + _CHUNK].count(b"\n") for a in range(0, size, _CHUNK))
        if mm[size - 1:size] != b"\n":
            lines += 1  # a last line with no line feed
        starts = [0] if mm[0:1] != b"[" else []
        for m in _NOT_START.finditer(mm):
            starts.append(m.end())
            if len(starts) > max_continuations:
                return None
        conts = []
        pos, n = 0, 1  # line n starts at or after pos
        for s in starts:
            n += mm[pos:s].count(b"\n")
            pos = s
            end = mm.find(b"\n", s)
            conts.append((n, mm[s:end if end >= 0 else size]))
        clean = _clean(mm)
        return FileScan(path, size, lines, _edge_ts(mm, size, False), _edge_ts(mm, size, True), conts, clean)


def scan(paths: list[str], max_continuations: int = MAX_CONTINUATIONS) -> list[FileScan] | None:
    """Every file scanned, or None when one is not :func:`eligible` or the files have more than
    ``max_continuations`` continuation lines in all."""
    if not all(eligible(p) for p in paths):
        return None
    out = []
    left = max_continuations
    for p in paths:
        s = scan_file(p, left)
        if s is None:
            return None
        left -= len(s.continuations)
        out.append(s)
    return out
