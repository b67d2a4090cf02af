"""The merge's inputs: ``--logs`` values expanded to files, and the record filters, checked.

Pure Python (no Spark): the CLI checks its input with these before a Spark session starts."""

from __future__ import annotations

import glob as _glob
import os
import re
from dataclasses import asdict, dataclass

from kops.pipeline import logformat as lf

STATE_CHANGE_GLOB = "state-change.log*"
CONTROLLER_GLOB = "controller.log*"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_EXPLICIT = re.compile(r"^(\d+)=(.+)$")

#: how ``--topic-regex`` runs (Java's regex, through Spark's rlike): it must match whole names
TOPIC_REGEX_WRAP = "^(?:{})$"


class LogInputError(ValueError):
    """Bad --logs / filter input (the CLI maps it to exit code 2)."""


@dataclass
class LogSource:
    paths: list[str]
    broker: int | None = None  # explicit ID=PATH mapping


@dataclass
class Filters:
    topic: str | None = None
    topic_regex: str | None = None
    partitions: list[int] | None = None
    start: str | None = None  # normalized 'yyyy-MM-dd HH:mm:ss,SSS'
    end: str | None = None
    events: list[str] | None = None
    brokers: list[int] | None = None

    @property
    def active(self) -> bool:
        return any(v for v in asdict(self).values())


def is_remote_path(p: str) -> bool:
    """A path Spark reads itself (``hdfs://``, ``s3a://`` ...), not a local file."""
    return bool(_SCHEME.match(p)) and not p.startswith("file://")


def _local(p: str) -> str:
    return p[len("file://"):] if p.startswith("file://") else p


def local_bytes(sources: list[LogSource]) -> int | None:
    """The inputs' total size, or None when one of them is remote (its size unknown here)."""
    paths = [p for src in sources for p in src.paths]
    if any(is_remote_path(p) for p in paths):
        return None
    try:
        return sum(os.path.getsize(_local(p)) for p in paths)
    except OSError:
        return None


def expand_sources(specs: list[str], *, include_controller: bool = False) -> list[LogSource]:
    """``--logs`` values -> groups of concrete paths.

    A value is a file, a directory (its ``state-change.log*``, plus ``controller.log*`` with
    ``include_controller``), or a glob; ``ID=PATH`` pins the broker id of those files. Remote
    (``hdfs://``, ``s3a://`` ...) values go to Spark unchanged (Spark expands their globs); a remote
    value ending in ``/`` means that directory's state-change logs.
    """
    out: list[LogSource] = []
    for spec in specs:
        broker = None
        m = _EXPLICIT.match(spec)
        if m:
            from kops.inputs import values
            try:
                broker, spec = values.broker_id(m.group(1)), m.group(2)
            except values.Invalid as e:
                raise LogInputError(f"--logs {spec[:60]!r}: {e}") from None
        if is_remote_path(spec):
            paths = [spec + STATE_CHANGE_GLOB] if spec.endswith("/") else [spec]
            if spec.endswith("/") and include_controller:
                paths.append(spec + CONTROLLER_GLOB)
            out.append(LogSource(paths, broker))
            continue
        p = _local(spec)
        if os.path.isdir(p):
            # the directory and the directories below it (a fleet / sandbox root with one dir per broker)
            found = sorted(_glob.glob(os.path.join(p, "**", STATE_CHANGE_GLOB), recursive=True))
            if include_controller:
                found += sorted(_glob.glob(os.path.join(p, "**", CONTROLLER_GLOB), recursive=True))
            found = [f for f in found if os.path.isfile(f)]
            if not found:
                raise LogInputError(f"no state-change.log* in directory {spec} or below it")
        elif _glob.has_magic(p):
            found = sorted(f for f in _glob.glob(p, recursive=True) if os.path.isfile(f))
            if not found:
                raise LogInputError(f"no file matches {spec}")
        elif os.path.isfile(p):
            found = [p]
        else:
            raise LogInputError(f"no such file or directory: {spec}")
        found = [os.path.abspath(f) for f in found]
        out.append(LogSource(found, broker))
    if not out:
        raise LogInputError("no logs given: pass --logs PATH_OR_GLOB (repeatable)")
    return out


def check_path_brokers(sources: list[LogSource], broker_of: str | None) -> None:
    """``--broker-of``'s group, where it matches a local file's path without ``ID=PATH``, must
    capture a broker id (digits, an int32): a group capturing ``a`` from ``host-a/`` is refused,
    naming the path (:class:`LogInputError`), before Spark starts. Checked by Python's ``re`` (a
    pattern only Java reads is Spark's to judge: a capture that is no id then leaves the file
    without a broker, as a remote file's)."""
    if broker_of is None:
        return
    from kops.inputs import values

    try:
        pattern = re.compile(broker_of)
    except re.error:
        return
    for src in sources:
        if src.broker is not None:
            continue
        for p in src.paths:
            m = None if is_remote_path(p) else pattern.search(p)
            if m is None or not m.group(1):
                continue
            try:
                values.broker_id(m.group(1))
            except values.Invalid:
                raise LogInputError(
                    f"--broker-of {broker_of!r}: its group captured {m.group(1)[:40]!r} from {p}, which is no "
                    f"broker id (digits, at most {values.INT32_MAX}); make the group capture the id's digits, "
                    "or pin the files' broker with ID=PATH") from None


def validate_filters(
    *,
    topic: str | None,
    topic_regex: str | None,
    partitions: str | None,
    start_time: str | None,
    end_time: str | None,
    events: str | None = None,
    brokers: str | None = None,
    broker_of: str | None = None,
) -> Filters:
    """The filters, checked (:class:`LogInputError`); the regexes (``--topic-regex``,
    ``--broker-of``) by Java's rules, as Spark will run them (:class:`~kops.errors.BadInput`)."""
    from kops.inputs import javaregex
    from kops.inputs import values
    if topic and topic_regex:
        raise LogInputError("give --topic or --topic-regex, not both")
    if topic:
        why = values.topic_problem(topic)
        if why:
            raise LogInputError(f"--topic: {why}")
    regexes = {k: v for k, v in (("--topic-regex", topic_regex), ("--broker-of", broker_of)) if v is not None}
    if regexes:
        javaregex.check(regexes, wrap={"--topic-regex": TOPIC_REGEX_WRAP}, groups={"--broker-of": 1})
    parts = None
    if partitions:
        if not (topic or topic_regex):
            raise LogInputError("--partitions needs --topic or --topic-regex (as Kafka's merger)")
        try:
            parts = lf.parse_partitions(partitions)
        except ValueError as e:
            raise LogInputError(f"bad --partitions: {e}") from None
    try:
        start = lf.normalize_time(start_time) if start_time else None
        end = lf.normalize_time(end_time, end=True) if end_time else None
    except ValueError as e:
        raise LogInputError(str(e)) from None
    if start and end and start > end:
        raise LogInputError(f"--start-time {start} is after --end-time {end}")
    ev = None
    if events:
        known = {name for name, _ in lf.EVENTS} | {"other"}
        ev = [e.strip() for e in events.split(",") if e.strip()]
        bad = [e for e in ev if e not in known]
        if bad:
            raise LogInputError(f"unknown event(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    br = None
    if brokers:
        try:
            br = sorted(values.broker_ids(brokers))
        except values.Invalid as e:
            raise LogInputError(f"bad --brokers: {e}") from None
    return Filters(topic=topic, topic_regex=topic_regex, partitions=parts, start=start, end=end, events=ev, brokers=br)
