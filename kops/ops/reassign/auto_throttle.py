"""The adaptive throttle (``--throttle auto[:MIN-MAX]``): when to change the rate, and why (pure).

The runner gives :class:`AutoThrottle` what each check read (:class:`Signals`); it answers with a
:class:`RateChange` (the new rate and its reason, which the runner applies, journals and shows)
or ``None``. The rules, in bytes/s per broker as Kafka's throttle is:

- **harm → down at once**: a partition *not being moved* has fewer in-sync replicas than when
  the execution started (a follower fell behind for ``replica.lag.time.max.ms``: Kafka's own
  judgement of follower lag, read without a metrics stack), is under its
  ``min.insync.replicas`` or offline; or the ``--probe-topic`` producer's ``acks=all`` latency
  (the median of its last :data:`PROBE_WINDOW` samples) is over :data:`PROBE_FACTOR` times its
  baseline (the lowest such median seen) and :data:`PROBE_MARGIN_MS` above it. The rate halves,
  not below MIN (again after :data:`STEP_S` if the harm is still there); it is not raised
  again for :data:`HOLD_S`, and for :data:`CEILING_S` not past :data:`CEILING_SHARE` of the
  rate at which harm was seen.
- **headroom → up, step by step**: no harm for :data:`HOLD_S`, the last change
  :data:`STEP_S` ago, and the copy held back by the throttle (the bytes copied since the last
  change at least :data:`LIMITED_SHARE` of what the rate allowed the brokers receiving data
  over each interval between checks, so that a destination that finished does not make the
  others look held back; bytes not known say nothing, and raise nothing). The rate grows by
  :data:`RAISE_FACTOR`, not above MAX.

- **past its maintenance window → MIN**: an execution of a cron step given ``--window`` that
  is still running when its window closes drops to MIN and stays there while the window is
  closed (its copy goes on, gently, instead of hammering peak traffic).

It starts at MIN: the first minute copies at a rate the cluster is known to take, and grows
while nothing suffers. Times are ``time.monotonic()`` values passed in by the caller.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kops.inputs.values import AutoRate, human_bytes
from kops.model import Topology, TopicPartition

#: after harm, no raise for this long
HOLD_S = 30.0
#: at least this long between two raises
STEP_S = 10.0
#: a raise multiplies the rate by this
RAISE_FACTOR = 1.5
#: harm halves the rate
CUT_FACTOR = 0.5
#: after harm at rate R, raises stop at CEILING_SHARE x R for CEILING_S
CEILING_S = 300.0
CEILING_SHARE = 0.8
#: the copy counts as held back by the throttle when it moved at least this share of what the
#: rate allows the brokers receiving data
LIMITED_SHARE = 0.5
#: the probe: a harmful latency is the median of the last PROBE_WINDOW samples over
#: PROBE_FACTOR x the baseline and PROBE_MARGIN_MS above it
PROBE_WINDOW = 3
PROBE_FACTOR = 3.0
PROBE_MARGIN_MS = 50.0


def isr_sizes(topo: Topology) -> dict[TopicPartition, int]:
    """Each partition's in-sync replica count: the baseline harm is judged against."""
    return {p.tp: len(p.isr) for t in topo.topics for p in t.partitions}


def harm(topo: Topology, baseline: Mapping[TopicPartition, int], moving: Collection[TopicPartition], *,
         ignore: Collection[str] = ()) -> list[str]:
    """Partitions not in ``moving`` that are worse than at the ``baseline`` (their ISR count when
    the execution started; a partition created since: its replica count): one text each.
    ``ignore``: topics not judged (kops' own lock topic: one replica by design)."""
    out = []
    for t in topo.topics:
        if t.name in ignore:
            continue
        min_isr = t.min_insync_replicas(1)
        for p in t.partitions:
            if p.tp in moving:
                continue
            was = baseline.get(p.tp, len(p.replicas))
            if p.offline and was > 0:
                out.append(f"{p.topic}-{p.partition} offline")
            elif len(p.isr) < min(was, min_isr):
                out.append(f"{p.topic}-{p.partition} under min ISR (ISR {list(p.isr)})")
            elif len(p.isr) < was:
                out.append(f"{p.topic}-{p.partition} lost an in-sync replica (ISR {list(p.isr)} of {list(p.replicas)})")
    return out


@dataclass(frozen=True)
class Signals:
    """What one check read. ``harmed``: :func:`harm`'s texts; ``copied``: bytes the execution has
    copied so far (None: unknown); ``receiving``: brokers receiving data now; ``probe_ms``: the
    probe's latency at this check (None: no probe, or no answer); ``closed``: why the
    execution's maintenance window is closed now (None: open, or no window)."""

    now: float
    harmed: Sequence[str] = ()
    copied: int | None = None
    receiving: int = 0
    probe_ms: float | None = None
    closed: str | None = None


@dataclass(frozen=True)
class RateChange:
    before: int
    after: int
    reason: str

    def __str__(self) -> str:
        return f"throttle auto: {human_bytes(self.before)}/s -> {human_bytes(self.after)}/s ({self.reason})"

    def to_dict(self) -> dict:
        return {"from": self.before, "to": self.after, "reason": self.reason}


class AutoThrottle:
    """The rate of one execution under ``--throttle auto``. ``rate``: where it starts (MIN for a
    new execution; a resumed one continues at its journaled rate). :meth:`check` judges a
    check's read against :attr:`baseline` (each partition's ISR count when the execution started,
    or resumed: :meth:`start`, else the first read), ``ignore``'s topics left out;
    :meth:`decide` is the rule itself."""

    def __init__(self, bounds: AutoRate, *, rate: int | None = None, ignore: Collection[str] = ()):
        self.bounds = bounds
        self.ignore = frozenset(ignore)
        self.rate = min(bounds.hi, max(bounds.lo, rate if rate is not None else bounds.lo))
        self.baseline: dict[TopicPartition, int] | None = None
        #: every change made, in order
        self.changes: list[RateChange] = []
        self._changed_at: float | None = None
        # what the copy could have moved and did move since the last change (or since its bytes
        # became known): bytes the rate allowed the brokers receiving over each interval between
        # checks, and the bytes copied when the window started (None: not known yet)
        self._allowed = 0.0
        self._copied_from: int | None = None
        self._checked_at: float | None = None
        self._receiving = 0
        self._harm_at: float | None = None
        self._cut_at: float | None = None
        self._ceiling: int | None = None
        self._probe: deque[float] = deque(maxlen=PROBE_WINDOW)
        self._probe_base: float | None = None

    def start(self, topo: Topology) -> None:
        """The cluster as the execution found it: what harm is judged against."""
        self.baseline = isr_sizes(topo)

    def check(self, topo: Topology, moving: Collection[TopicPartition], *, now: float, copied: int | None,
              receiving: int, probe_ms: float | None = None, closed: str | None = None) -> RateChange | None:
        """One check's read: ``moving``, the partitions being reassigned (not judged)."""
        if self.baseline is None:
            self.start(topo)
        change = self.decide(Signals(now=now, harmed=harm(topo, self.baseline, moving, ignore=self.ignore), copied=copied,
                                     receiving=receiving, probe_ms=probe_ms, closed=closed))
        if change is not None:
            self.changes.append(change)
        return change

    def summary(self) -> str | None:
        """One line on what the rate did (None: it never changed)."""
        if not self.changes:
            return None
        rates = [c.after for c in self.changes]
        return (f"throttle auto: {len(rates)} change(s) between {human_bytes(min(rates))}/s and "
                f"{human_bytes(max(rates))}/s, the last to {human_bytes(rates[-1])}/s (the journal's events say "
                "when and why)")

    def _probe_harm(self, probe_ms: float | None) -> str | None:
        if probe_ms is None:
            return None
        self._probe.append(probe_ms)
        if len(self._probe) < PROBE_WINDOW:
            return None
        median = statistics.median(self._probe)
        base = self._probe_base
        if base is None or median < base:
            self._probe_base = median
            return None
        if median > PROBE_FACTOR * base and median - base > PROBE_MARGIN_MS:
            return f"probe latency {median:.0f} ms, {median / base:.1f}x its baseline {base:.0f} ms"
        return None

    def decide(self, s: Signals) -> RateChange | None:
        if self._changed_at is None:  # the first check: the clock starts
            self._changed_at = s.now
        self._measure(s)
        reasons = list(s.harmed[:3]) + ([f"{len(s.harmed) - 3} more partition(s)"] if len(s.harmed) > 3 else [])
        probe = self._probe_harm(s.probe_ms)
        if probe:
            reasons.append(probe)
        if reasons:
            cut_lately = self._cut_at is not None and s.now - self._cut_at < STEP_S
            self._harm_at = s.now
            if cut_lately:  # the cluster needs a moment to show what the last cut did
                return None
            self._ceiling = int(CEILING_SHARE * self.rate)
            self._cut_at = s.now
            return self._set(max(self.bounds.lo, int(self.rate * CUT_FACTOR)), s, "harm: " + "; ".join(reasons))
        if s.closed:
            return self._set(self.bounds.lo, s, s.closed)
        if self._harm_at is not None and s.now - self._harm_at < HOLD_S:
            return None
        if s.now - self._changed_at < STEP_S or not self._held_back(s):
            return None
        cap = self.bounds.hi
        if self._ceiling is not None and self._harm_at is not None and s.now - self._harm_at < CEILING_S:
            cap = min(cap, max(self._ceiling, self.bounds.lo))
        quiet = f"no harm for {s.now - self._harm_at:.0f} s" if self._harm_at is not None else "no harm seen"
        return self._set(min(cap, int(self.rate * RAISE_FACTOR)), s, f"{quiet}, the copy held back by the throttle")

    def _measure(self, s: Signals) -> None:
        """Add the interval since the last check to the window (at the rate, for the brokers
        that were receiving over it); a window whose start is not known starts now."""
        if self._copied_from is None or s.copied is None:
            self._allowed, self._copied_from = 0.0, s.copied
        elif self._checked_at is not None:
            self._allowed += self.rate * self._receiving * (s.now - self._checked_at)
        self._checked_at, self._receiving = s.now, s.receiving

    def _held_back(self, s: Signals) -> bool:
        """Did the copy move at least :data:`LIMITED_SHARE` of what the rate allowed since the
        window started? Unknown bytes say nothing: no raise on them."""
        if s.receiving == 0 or s.copied is None or self._copied_from is None or self._allowed <= 0:
            return False
        return s.copied - self._copied_from >= LIMITED_SHARE * self._allowed

    def _set(self, rate: int, s: Signals, reason: str) -> RateChange | None:
        if rate == self.rate:
            return None
        change = RateChange(self.rate, rate, reason)
        self.rate = rate
        self._changed_at = s.now
        self._allowed, self._copied_from = 0.0, s.copied  # a new window, at the new rate
        return change
