"""Stand-ins for what the reassignment engine's parts talk to: a journal store, a reporter, a
connection whose Admin client records the config changes sent, and a listener for notes and
events."""

from __future__ import annotations

from kops.ops.progress import NullReporter


class Store:
    """A journal store that counts its saves."""

    def __init__(self):
        self.saved = 0

    def save(self, j):
        self.saved += 1


class Reporter(NullReporter):
    """A reporter that keeps the messages shown."""

    def __init__(self):
        self.messages: list[str] = []

    def message(self, text: str) -> None:
        self.messages.append(text)


class Heard:
    """What a tracker told (``record``): ("note" | "event", text), in order."""

    def __init__(self):
        self.said: list[tuple[str, str]] = []

    def note(self, text: str) -> None:
        self.said.append(("note", text))

    def event(self, text: str) -> None:
        self.said.append(("event", text))

    @property
    def notes(self) -> list[str]:
        return [t for kind, t in self.said if kind == "note"]


class _Future:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def result(self, timeout=None):
        self.log.append(("done", self.name))


class _Admin:
    def __init__(self):
        self.log = []
        self.configs = []

    def incremental_alter_configs(self, resources, request_timeout=None):
        out = {}
        for r in resources:
            self.log.append(("sent", r.name))
            self.configs.append((r.restype.name.lower(), r.name,
                                 {e.name: e.value for e in r.incremental_configs}))
            out[r] = _Future(self.log, r.name)
        return out


class AdminConn:
    """A connection whose IncrementalAlterConfigs always succeeds: ``a.log`` holds the order in
    which requests were sent and completed, ``a.configs`` what each asked to set (None: delete)."""

    timeout_s = 5.0

    def __init__(self):
        self.a = _Admin()

    def admin(self):
        return self.a

    def wait(self, fut, what, timeout=None):
        return fut.result()
