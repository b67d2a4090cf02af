"""Java ``.properties`` text, read and written as ``java.util.Properties`` does.

One implementation for every properties file kops touches: a user's ``--command-config`` (Kafka's
tools read it with ``Properties.load``, so kops must read it the same way) and the files the sandbox
writes for its brokers, controllers and clients.

Reading follows ``Properties.load``: ``#`` / ``!`` comment lines, a line ending in an odd number
of backslashes continues on the next (whose leading blanks are dropped), the key ends at the first
unescaped ``=``, ``:`` or blank, escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\x`` -> ``x``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_UNICODE = re.compile(r"[0-9a-fA-F]{4}")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str):
    buf: str | None = None
    for raw in _LINE_BREAK.split(text):  # Java breaks lines at \n and \r only
        line = raw.lstrip(_BLANK)
        if buf is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line goes on
            buf = (buf or "") + line[:-1]
            continue
        yield (buf or "") + line
        buf = None
    if buf is not None:
        yield buf


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u" and _UNICODE.fullmatch(s[i + 2:i + 6]):
            out.append(chr(int(s[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(n, n))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """Properties text -> ``{key: value}`` (a later key wins, as in Java)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props


def value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _escape(s: str, *, key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c in "=:#!" and (key or i == 0):
            out.append("\\" + c)
        elif c == " " and (key or i == 0):
            out.append("\\ ")
        else:
            out.append(c)
    return "".join(out)


def render_properties(props: Mapping[str, Any], header: str = "") -> str:
    """``{key: value}`` -> properties text (each header line a ``#`` comment; values escaped so that
    :func:`parse_properties` and Java read back exactly what was given)."""
    lines = [f"# {h}" for h in _LINE_BREAK.split(header)] if header else []
    for k, v in props.items():
        lines.append(f"{_escape(str(k), key=True)}={_escape(value_text(v), key=False)}")
    return "\n".join(lines) + "\n"
