"""Maintenance windows: when kops' cron jobs may move data or leaders (``--window``).

A window is ``DAYS HH:MM-HH:MM ZONE``, the zone always given (an IANA name such as
``Europe/Paris``, or ``UTC``): a cron job run by hosts in several zones, or across a change of
summer time, must mean one time. Several windows are separated by ``;`` in one ``--window``;
kops may act when any is open.

- DAYS: ``Mon``…``Sun`` (or ``Monday``…), a range ``Mon-Fri`` (``Fri-Mon`` wraps over the
  week-end), a list ``Sat,Sun``, or ``daily`` / ``*``.
- The window opens on each of its days at the first time and closes at the second, which may be
  ``24:00``; a second time earlier than the first closes the next day (``Fri 22:00-02:00``
  opens on Friday evening and closes on Saturday night).
- Times are wall-clock times in the zone: on the night summer time starts, ``02:30`` does not
  exist and a window from it opens an hour later (``03:30``); on the night it ends, the first
  ``01:30`` counts.

Pure: :meth:`Windows.open_at` and :meth:`Windows.next_open` take the time to judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_LONG = {d: i for i, d in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
_ONE = re.compile(r"^\s*(\S+)\s+(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s+(\S+)\s*$", re.ASCII)


class InvalidWindow(ValueError):
    """A window kops cannot read; ``str(e)`` says why."""


def _day(name: str) -> int:
    n = name.lower()
    if n in DAYS:
        return DAYS.index(n)
    if n in _LONG:
        return _LONG[n]
    raise InvalidWindow(f"{name!r} is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun)")


def _days(text: str) -> frozenset[int]:
    if text.lower() in ("daily", "*"):
        return frozenset(range(7))
    out: set[int] = set()
    for part in text.split(","):
        if "-" in part:
            a, b = (_day(x) for x in part.split("-", 1))
            out.update((a + i) % 7 for i in range((b - a) % 7 + 1))
        else:
            out.add(_day(part))
    return frozenset(out)


def _minutes(h: str, m: str, *, end: bool) -> int:
    hh, mm = int(h), int(m)
    if mm > 59 or hh > 24 or (hh == 24 and (mm or not end)):
        raise InvalidWindow(f"{h}:{m} is not a time of day (00:00 to 23:59{', or 24:00 to end' if end else ''})")
    return hh * 60 + mm


def _zone(name: str) -> ZoneInfo | timezone:
    if name.upper() in ("UTC", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidWindow(f"{name!r} is not a time zone: give an IANA name (Europe/Paris, America/New_York) "
                            "or UTC") from None


@dataclass(frozen=True)
class Window:
    days: frozenset[int]  # 0 = Monday
    start_min: int
    end_min: int  # < start_min: closes the next day; 1440: at midnight
    zone: ZoneInfo | timezone
    text: str

    def _opening(self, day: datetime) -> tuple[datetime, datetime]:
        """This window's opening on ``day`` (a date in its zone): (opens, closes) in UTC (times
        in the hour repeated when summer time ends compare unequal across zones: PEP 495)."""
        base = datetime(day.year, day.month, day.day)
        opens = _wall(base + timedelta(minutes=self.start_min), self.zone)
        end_day = base + timedelta(days=1 if self.end_min <= self.start_min else 0)
        closes = _wall(end_day + timedelta(minutes=self.end_min), self.zone)
        return opens.astimezone(timezone.utc), closes.astimezone(timezone.utc)

    def openings(self, now: datetime):
        """The openings that may hold ``now`` or come after it, earliest first (8 days' worth)."""
        local = now.astimezone(self.zone)
        for i in range(-1, 8):
            day = local + timedelta(days=i)
            if day.weekday() in self.days:
                yield self._opening(day)


def _wall(naive: datetime, zone) -> datetime:
    """A wall-clock time in ``zone``, aware and normalised: one that does not exist (the hour
    skipped when summer time starts) moves on by the skipped hour; an ambiguous one (the hour
    repeated when it ends) is its first occurrence."""
    return naive.replace(tzinfo=zone).astimezone(timezone.utc).astimezone(zone)


@dataclass(frozen=True)
class Windows:
    windows: tuple[Window, ...]

    @property
    def text(self) -> str:
        return "; ".join(w.text for w in self.windows)

    def open_at(self, now: datetime) -> datetime | None:
        """When the window ``now`` is in closes (the latest of the open ones, in its zone), or
        None when none is open. ``now`` must be aware."""
        closes = [(c, w.zone) for w in self.windows for o, c in w.openings(now) if o <= now < c]
        if not closes:
            return None
        c, zone = max(closes, key=lambda x: x[0])
        return c.astimezone(zone)

    def next_open(self, now: datetime) -> datetime:
        """The next time a window opens after ``now``, in that window's zone."""
        o, zone = min(((o, w.zone) for w in self.windows for o, _ in w.openings(now) if o > now), key=lambda x: x[0])
        return o.astimezone(zone)

    def closed_reason(self, now: datetime) -> str | None:
        """None when a window is open at ``now``; else one line saying when the next opens."""
        if self.open_at(now) is not None:
            return None
        nxt = self.next_open(now)
        wait = nxt - now
        h, m = divmod(int(wait.total_seconds() // 60), 60)
        d, h = divmod(h, 24)
        left = (f"{d} d " if d else "") + (f"{h} h " if h or d else "") + f"{m} min"
        return (f"outside the maintenance window ({self.text}): the next opens {nxt.strftime('%a %Y-%m-%d %H:%M %Z')} "
                f"(in {left})")


def parse(text: str) -> Windows:
    """``--window``'s value: windows separated by ``;`` (see the module doc)."""
    parts = [p for p in (text or "").split(";") if p.strip()]
    if not parts:
        raise InvalidWindow("no window given: e.g. 'Mon-Fri 01:00-06:00 Europe/Paris'")
    out = []
    for p in parts:
        m = _ONE.match(p)
        if not m:
            raise InvalidWindow(f"{p.strip()!r} is not DAYS HH:MM-HH:MM ZONE (e.g. 'Mon-Fri 01:00-06:00 Europe/Paris'; "
                                "the time zone is required)")
        days, h1, m1, h2, m2, zone = m.groups()
        start, end = _minutes(h1, m1, end=False), _minutes(h2, m2, end=True)
        if start == end:
            raise InvalidWindow(f"{p.strip()!r} opens and closes at the same time")
        out.append(Window(_days(days), start, end, _zone(zone), " ".join(p.split())))
    return Windows(tuple(out))
