"""What an execution tells: notes for the operator, events in its journal, and the journal saved."""

from __future__ import annotations

import time
from collections.abc import Iterable

from kops.ops.journal import Journal, JournalStore
from kops.ops.progress import NullReporter
from kops.ops.throttle import ThrottleState

#: between forced saves, the journal is saved at most this often (its heartbeat)
SAVE_EVERY_S = 10.0


class Recorder:
    """The execution's voice and memory. A note is shown once (the reporter), kept for the
    outcome and journaled; an announcement is shown and journaled; an event is journaled only;
    :meth:`save` writes the journal.

    ``known``: notes said before the execution started (the preflight's disk warnings, shown
    before the confirmation): kept and journaled, not shown again."""

    def __init__(self, store: JournalStore, journal: Journal, reporter=None, *, known: Iterable[str] = ()):
        self.store = store
        self.journal = journal
        self.reporter = reporter or NullReporter()
        self.notes: list[str] = []
        #: how many times the journal was saved (a caller can tell whether a step saved it)
        self.saves = 0
        self._saved_at = 0.0
        for text in known:
            self.notes.append(text)
            journal.event(text)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self.reporter.message(text)
            self.journal.event(text)

    def event(self, text: str) -> None:
        self.journal.event(text)

    def announce(self, text: str) -> None:
        """Shown now and journaled, but not one of the outcome's notes: a step of a running
        log (the adaptive throttle's changes), not a finding."""
        self.reporter.message(text)
        self.journal.event(text)

    def save(self, force: bool = True) -> None:
        now = time.monotonic()
        if force or now - self._saved_at > SAVE_EVERY_S:
            self.store.save(self.journal)
            self._saved_at = now
            self.saves += 1

    def write_ahead(self, records: ThrottleState) -> None:
        """Journal every throttle that may be in place before changing any (a kill while they
        are applied must not leave throttles the journal does not know of)."""
        self.journal.throttles = records
        self.save()
