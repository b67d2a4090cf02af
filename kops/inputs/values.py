"""Values a user gives kops: numbers, sizes, durations, topic names, broker lists, ids.

Each converter takes what came in (a command-line string, or a value read from JSON / YAML),
returns the checked value, or raises :class:`Invalid` with the reason, without the input's
name: the caller knows it (:func:`check` adds it and turns the reason into a
:class:`~kops.errors.BadInput`; the CLI's option types turn it into a usage error, exit 2 too).

Numbers are finite and within Kafka's ranges: broker ids, partitions and counts are int32,
rates and byte counts int64. Strings of digits are ASCII digits only (``int()`` would take
``1_000`` and other scripts' digits) and at most a few dozen of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kops.errors import BadInput

INT16_MAX = 2**15 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: Kafka's topic names (org.apache.kafka.common.internals.Topic)
TOPIC_MAX_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)

#: seconds: the longest wait, timeout or interval kops accepts (30 days)
MAX_SECONDS = 30 * 86400.0

# digits are matched without a bound and their number checked after: a 400-digit value is
# "out of range", not "not a number"
_INT = re.compile(r"\s*([+-]?)0*([0-9]+)\s*", re.ASCII)
_DECIMAL = re.compile(r"\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*", re.ASCII)
_BYTES = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtTpP]?)(?:i?[bB])?\s*", re.ASCII)
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*", re.ASCII)
_MAX_DIGITS = 60
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}", re.ASCII)
_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)

T = TypeVar("T")


class Invalid(ValueError):
    """A value that kops cannot take; ``str(e)`` is the reason."""


def show(value: Any, limit: int = 40) -> str:
    """A value for a message: quoted strings, long numbers shortened (a 400-digit number
    would drown the message), non-printable characters escaped."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        text = str(value) if value.bit_length() < 4000 else None
        if text is None or len(text) > limit:
            digits = "many" if text is None else str(len(text.lstrip("-")))
            return f"{'-' if value < 0 else ''}a number of {digits} digits"
        return text
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit + 2 else text[:limit] + "...'"
    if isinstance(value, float):
        return repr(value)
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _too_long(text: str, value: Any, lo: Any, hi: Any) -> None:
    if len(text) > _MAX_DIGITS:
        bounds = f" ({show(lo)}..{show(hi)})" if lo is not None and hi is not None else ""
        raise Invalid(f"{show(value)} ({len(text)} characters) is out of range{bounds}")


def _range(v: float | int, lo: float | int | None, hi: float | int | None, *, lo_open: bool = False) -> None:
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise Invalid(f"{show(v)} is {'not above' if lo_open else 'below'} {show(lo)}")
    if hi is not None and v > hi:
        raise Invalid(f"{show(v)} is above {show(hi)}" + (" (Kafka's largest int32)" if hi == INT32_MAX else
                                                          " (Kafka's largest int64)" if hi == INT64_MAX else ""))


def integer(value: Any, *, lo: int | None = 0, hi: int | None = INT32_MAX, what: str = "an integer",
            text: bool = True) -> int:
    """An integer in ``lo..hi`` (default: Kafka's int32, not negative): an ``int``, or (with
    ``text``, as typed on a command line) a string of ASCII digits. Booleans, floats (also
    ``1.0``) and anything else are refused: JSON's ``"1"`` is not Kafka's ``1``."""
    if isinstance(value, bool) or not isinstance(value, (int, str) if text else int):
        raise Invalid(f"{show(value)} is not {what}")
    if isinstance(value, str):
        m = _INT.fullmatch(value)
        if not m:
            raise Invalid(f"{show(value)} is not {what}")
        _too_long(m.group(2), value, lo, hi)
        value = int(m.group(1) + m.group(2))
    _range(value, lo, hi)
    return value


def number(value: Any, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
           what: str = "a number") -> float:
    """A finite number in ``lo..hi`` (``nan``, ``inf`` and friends are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise Invalid(f"{show(value)} is not {what}")
    given = value
    if isinstance(value, str):
        m = _DECIMAL.fullmatch(value)
        if not m:
            raise Invalid(f"{show(value)} is not {what}")
        _too_long(m.group(1), value, lo, hi)
        value = float(m.group(1))
    elif isinstance(value, int):
        if abs(value) > 2**1000:
            raise Invalid(f"{show(value)} is out of range")
        value = float(value)
    if not math.isfinite(value):
        raise Invalid(f"{show(given)} is not a finite number")
    _range(value, lo, hi, lo_open=lo_open)
    return value


def size(value: Any, *, lo: int = 0, hi: int = INT64_MAX, what: str = "a byte count") -> int:
    """Bytes: an integer, or ``500000``, ``50M``, ``2GiB``, ``1.5T`` (binary units, as Kafka's
    tools print them), within ``lo..hi`` (default Kafka's int64)."""
    if isinstance(value, int) and not isinstance(value, bool):
        _range(value, lo, hi)
        return value
    m = _BYTES.fullmatch(value) if isinstance(value, str) else None
    if not m:
        raise Invalid(f"{show(value)} is not {what} (e.g. 1048576, 50M, 2GiB)")
    from fractions import Fraction

    _too_long(m.group(1), value, lo, hi)
    n = int(Fraction(m.group(1)) * _UNITS[m.group(2).lower()])
    _range(n, lo, hi)
    return n


def human_bytes(n: float | None) -> str:
    """Bytes for people, in binary units: ``512 B``, ``9.8 KiB``, ``1.0 GiB``; ``-`` when unknown."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)  # pragma: no cover


def duration(value: Any, *, lo: float = 0.0, hi: float = MAX_SECONDS, lo_open: bool = False) -> float:
    """Seconds: a number, or ``30``, ``90s``, ``5m``, ``2h``, ``1d``, ``250ms``; finite, within
    ``lo..hi`` (default up to 30 days)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(value, lo=lo, hi=hi, lo_open=lo_open, what="a duration")
    m = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if not m:
        raise Invalid(f"{show(value)} is not a duration (e.g. 30, 90s, 5m, 2h)")
    _too_long(m.group(1), value, lo, hi)
    return number(float(m.group(1)) * _SECONDS[m.group(2)], lo=lo, hi=hi, lo_open=lo_open)


def boolean(value: Any) -> bool:
    """A YAML / JSON boolean. A string such as ``"false"`` is refused: it would be true in a
    boolean context, the opposite of what it says."""
    if isinstance(value, bool):
        return value
    raise Invalid(f"{show(value)} is not true or false" + (" (a string: write it without quotes)"
                                                           if isinstance(value, str) else ""))


def flag(value: str) -> bool:
    """A boolean typed on the command line: true/false, yes/no, 1/0."""
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise Invalid(f"{show(value)} is not true or false")


def topic_problem(name: Any) -> str | None:
    """Why Kafka would refuse this topic name (None: it is legal)."""
    if not isinstance(name, str):
        return f"{show(name)} is not a topic name (a string)"
    if not name:
        return "a topic name cannot be empty"
    if name in (".", ".."):
        return f"{name!r} is not a legal topic name"
    if len(name) > TOPIC_MAX_LENGTH:
        return f"a topic name is at most {TOPIC_MAX_LENGTH} characters, not {len(name)}"
    if not _TOPIC_CHARS.fullmatch(name):
        bad = sorted({c for c in name if not _TOPIC_CHARS.fullmatch(c)})
        return (f"{show(name)} is not a legal topic name: {', '.join(repr(c) for c in bad[:5])} "
                "(Kafka allows ASCII letters, digits, '.', '_' and '-')")
    return None


def topic(name: Any) -> str:
    why = topic_problem(name)
    if why:
        raise Invalid(why)
    return name


def topics(values: Any) -> list[str]:
    """Topic names from repeated and comma-separated options, each checked, first order kept."""
    items = [values] if isinstance(values, str) else list(values or [])
    out: list[str] = []
    for v in items:
        for name in (s.strip() for s in str(v).split(",")):
            if name and name not in out:
                out.append(topic(name))
    return out


def rack(value: Any) -> str:
    """A rack name (broker.rack): any non-empty text, or a path such as /dc1/r2."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"{show(value)} is not a rack name (non-empty text, e.g. b or /dc1/r2)")
    if not value.isprintable():
        raise Invalid(f"{show(value)} is not a rack name (it holds control characters)")
    return value


def broker_id(value: Any, *, text: bool = True) -> int:
    return integer(value, lo=0, hi=INT32_MAX, what="a broker id", text=text)


def broker_ids(value: Any, *, allow_empty: bool = False, text: bool = True) -> list[int]:
    """Broker ids: ``"0,1,2"``, a list, or one id; int32, not negative, none twice. Without
    ``text`` (a JSON document), only a list of integers."""
    if isinstance(value, int) and not isinstance(value, bool) and text:
        items: list[Any] = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str) and text:
        items = [s.strip() for s in value.split(",") if s.strip()]
    else:
        raise Invalid(f"{show(value)} is not a list of broker ids (e.g. 0,1,2)")
    ids: list[int] = []
    for item in items:
        try:
            b = broker_id(item, text=text)
        except Invalid:
            raise Invalid(f"{show(item)} is not a broker id (0..{INT32_MAX}; e.g. 0,1,2)") from None
        if b in ids:
            raise Invalid(f"broker {b} is listed twice")
        ids.append(b)
    if not ids and not allow_empty:
        raise Invalid("no broker ids given")
    return ids


def host_ports(value: Any, *, what: str = "HOST:PORT[,HOST:PORT...]") -> str:
    """``host:port`` pairs, comma-separated (``[::1]:9092`` for IPv6): a host, and a port in
    1..65535 (librdkafka would only time out on port 99999)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"{show(value)} is not {what}")
    for hp in value.split(","):
        host, _, port = hp.strip().rpartition(":")
        if not host.strip("[]") or not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535 \
                or any(c.isspace() for c in host) or not host.isprintable():
            raise Invalid(f"{show(hp.strip())} is not HOST:PORT (e.g. 127.0.0.1:9092; a port 1..65535)")
    return value


def zookeeper_connect(value: Any) -> str:
    """ZooKeeper's ``host:port[,host:port...][/chroot]``."""
    text = value if isinstance(value, str) else ""
    servers, slash, chroot = text.partition("/")
    host_ports(servers, what="HOST:PORT[,HOST:PORT...][/chroot]")
    if slash and (chroot.endswith("/") or "//" in chroot or not chroot.isprintable()):
        raise Invalid(f"{show(value)}: the chroot /{chroot} is not a ZooKeeper path")
    return value


def ident(value: Any, *, what: str = "an id") -> str:
    """A run or execution id: letters, digits, '.', '_' and '-', not starting with '.' or '-'
    (an id is used as a file name: never a path)."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise Invalid(f"{show(value)} is not {what} (letters, digits, '.', '_', '-'; not a path)")
    return value


def topic_regex(value: Any):
    """A topic filter's regular expression (``--topics`` / ``--exclude-topics``), compiled: a
    topic is matched by its whole name (:mod:`kops.placement.topic_filter`)."""
    import re

    text = str(value)
    if not text.strip():
        raise Invalid("an empty regular expression: give one, or leave the option out")
    try:
        return re.compile(text)
    except re.error as e:
        raise Invalid(f"{show(value)} is not a valid regular expression ({e})") from None


#: ``--throttle auto`` without bounds: from 10 MiB/s (a rate any production link takes beside its
#: traffic) up to 400 MiB/s
AUTO_THROTTLE_DEFAULT = (10 * 1024**2, 400 * 1024**2)


@dataclass(frozen=True)
class AutoRate:
    """``--throttle auto[:MIN-MAX]``: kops chooses the rate, in bytes/s per broker, within
    ``lo``..``hi`` (:mod:`kops.ops.reassign.auto_throttle`)."""

    lo: int
    hi: int

    def __str__(self) -> str:
        return f"auto:{human_bytes(self.lo)}/s-{human_bytes(self.hi)}/s".replace(" ", "")

    def to_dict(self) -> dict[str, int]:
        return {"min": self.lo, "max": self.hi}


def throttle_rate(value: Any) -> int | AutoRate:
    """A replication throttle: bytes/s per broker (``52428800``, ``50M``, ``1GiB``), or
    ``auto`` / ``auto:MIN-MAX`` (``auto:10M-200M``): kops adjusts the rate within the bounds."""
    if isinstance(value, AutoRate):
        return value
    text = value.strip() if isinstance(value, str) else value
    if not (isinstance(text, str) and text.lower().startswith("auto")):
        return size(text, lo=1, what="a rate in bytes/s (or auto[:MIN-MAX])")
    rest = text[4:]
    if not rest:
        return AutoRate(*AUTO_THROTTLE_DEFAULT)
    lo_text, dash, hi_text = rest[1:].partition("-") if rest.startswith(":") else ("", "", "")
    if not dash:
        raise Invalid(f"{show(value)} is not auto or auto:MIN-MAX (e.g. auto:10M-200M)")
    lo = size(lo_text, lo=1, what="a minimum rate (auto:MIN-MAX, e.g. auto:10M-200M)")
    hi = size(hi_text, lo=1, what="a maximum rate (auto:MIN-MAX, e.g. auto:10M-200M)")
    if lo > hi:
        raise Invalid(f"{show(value)}: the minimum {human_bytes(lo)}/s is above the maximum {human_bytes(hi)}/s")
    return AutoRate(lo, hi)


def window(value: Any):
    """Maintenance windows (``--window``): see :mod:`kops.inputs.window`."""
    from kops.inputs.window import InvalidWindow, parse

    try:
        return parse(str(value))
    except InvalidWindow as e:
        raise Invalid(str(e)) from None


def check(option: str, convert: Callable[..., T], value: Any, **kwargs: Any) -> T:
    """``convert(value, **kwargs)``, its :class:`Invalid` as a :class:`BadInput` naming ``option``."""
    try:
        return convert(value, **kwargs)
    except Invalid as e:
        raise BadInput(f"{option}: {e}") from None
