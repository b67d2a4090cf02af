"""The fuzzed CLI (issue 17): malformed inputs, command by command, through the real ``kops``.

Hypothesis builds inputs that are wrong by construction — every generator plants at least one
defect Kafka or kops refuses — for each command that takes a file or a value: reassignment,
topics-to-move and election JSON, topology snapshots, playbooks and their state files,
numbers, topic names, output paths, regexes, run and execution ids. Each one must end in exit
2 with exactly one JSON error document on stdout (``--output json``), naming the input, and no
traceback. Commands that talk to a cluster point at 127.0.0.1:1, where nothing listens: the
input must be refused before kops reaches for a cluster (in-process: no connection is made; the
installed script: given a 120 s request timeout, it ends within 60 s, which a run that waited
for the cluster could not).

Runs are reproducible (``derandomize=True``, no example database); the inputs that once
failed are kept in ``tests/fuzz_corpus/`` and ``ARG_CORPUS`` and run every time.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kops.cli.main import app
from kops.inputs.values import INT32_MAX, INT64_MAX, topic_problem

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).parent.parent / "fuzz_corpus"
TOPO = str(DATA / "topo6.json")
NOWHERE = ["--bootstrap-server", "127.0.0.1:1"]  # nothing listens there
#: every client kops reaches a cluster with (kops.cluster.connection, partition_reader)
CLIENTS = ("confluent_kafka.admin.AdminClient", "confluent_kafka.Producer", "kops.cluster.kp_client.KopsAdminClient",
           "kafka.KafkaConsumer", "kazoo.client.KazooClient")
runner = CliRunner()

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=80,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A work dir for the generated files, and KOPS_HOME for playbook runs."""
    d = tmp_path_factory.mktemp("fuzz")
    (d / "home").mkdir()
    return d


_names = itertools.count()


def _file(work: Path, data: bytes, suffix: str) -> str:
    p = work / f"in-{next(_names)}{suffix}"
    p.write_bytes(data)
    return str(p)


def _env(work: Path) -> dict:
    env = {k: None for k in ("KOPS_BOOTSTRAP_SERVER", "KOPS_ZOOKEEPER", "KOPS_REQUEST_TIMEOUT",
                             "KOPS_COMMAND_CONFIG", "KOPS_OUTPUT", "KOPS_ZOOKEEPER_AUTH_FILE",
                             "KOPS_LEADER_STATE_FILE", "KOPS_PLAYBOOK_PATH")}
    return env | {"KOPS_HOME": str(work / "home")}


def refused(work: Path, args: list[str], *, names: str | None = None) -> dict:
    """Run ``kops --output json ARGS`` in-process; it must end in exit 2 with exactly one JSON
    error document (naming ``names`` when given), no traceback, and without a client of the
    cluster made (bad input is refused before kops reaches for the cluster: counted where each
    kind of client is built, not timed)."""
    reached: list[str] = []

    def client(name):
        def made(*_a, **_kw):
            reached.append(name)
            raise AssertionError(f"kops made a {name} before refusing the input")
        return mock.patch(name, side_effect=made)

    with contextlib.ExitStack() as stack:
        for name in CLIENTS:
            stack.enter_context(client(name))
        r = runner.invoke(app, ["--output", "json", *args], env=_env(work))
    shown = f"kops {' '.join(map(repr, args))[:600]}\nstdout: {r.stdout[-1500:]}\nstderr: {r.stderr[-1500:]}"
    assert not reached, f"{shown}\nclients made: {reached}"
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{shown}\n{r.exception!r}"
    assert r.exit_code == 2, shown
    assert "Traceback" not in r.stdout + r.stderr, shown
    doc = json.loads(r.stdout)  # exactly one document: "Extra data" otherwise
    err = doc["error"]
    assert set(doc) == {"error"} and err["exit_code"] == 2 and err["type"] == "bad_input", shown
    if names is not None:
        assert names in err["message"] + " ".join(err["details"]), shown
    return err


# -- building blocks ---------------------------------------------------------------------------
LEGAL_TOPIC = st.from_regex(r"\A[a-zA-Z0-9._-]{1,30}\Z").filter(lambda t: t not in (".", ".."))
ILLEGAL_TOPIC_TEXT = st.one_of(
    st.text(max_size=30).filter(lambda t: topic_problem(t) is not None),
    st.sampled_from(["", ".", "..", "t" * 250, "a b", "a/b", "ä", "a\x00b", "orders\n"]),
)
NOT_A_STRING = st.one_of(st.integers(), st.none(), st.booleans(), st.floats(),
                         st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
ILLEGAL_TOPIC = st.one_of(ILLEGAL_TOPIC_TEXT, NOT_A_STRING)
BIG = "__BIG__"  # replaced by a 5000-digit number once serialised (json.dumps cannot write it)
NOT_AN_INT32 = st.one_of(
    st.integers(max_value=-1), st.integers(min_value=INT32_MAX + 1), st.floats(), st.text(max_size=6),
    st.booleans(), st.none(), st.just(BIG), st.lists(st.integers(), max_size=2),
)
NOT_A_DICT = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=3),
                       st.booleans(), st.floats())
NOT_A_LIST = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.booleans(),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
BAD_BYTES = st.sampled_from([b"\xff", b"\xfe", b"\xc3\x28", b"\xa0\xa1", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])


def _serialise(doc) -> bytes:
    return json.dumps(doc).replace(json.dumps(BIG), "9" * 5000).encode()


@st.composite
def byte_defect(draw, data: bytes) -> bytes:
    """A defect in the file itself: not UTF-8, cut short, nested too deep, empty, garbage."""
    kind = draw(st.sampled_from(["not-utf8", "cut", "deep", "empty", "garbage"]))
    if kind == "not-utf8":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(BAD_BYTES) + data[at:]
    if kind == "cut":
        return data[:draw(st.integers(0, len(data) - 1))]
    if kind == "deep":
        return b"[" * draw(st.integers(20_000, 60_000))
    if kind == "empty":
        return draw(st.sampled_from([b"", b" \n", b"\xef\xbb\xbf"]))
    return draw(st.binary(min_size=1, max_size=200)).replace(b"{", b"<")  # never a JSON object


# -- reassignment JSON -------------------------------------------------------------------------
PLAN_ENTRY = st.fixed_dictionaries({
    "topic": LEGAL_TOPIC, "partition": st.integers(0, 50),
    "replicas": st.lists(st.integers(0, 10), min_size=1, max_size=4, unique=True),
})


@st.composite
def bad_plan(draw) -> bytes:
    entries = draw(st.lists(PLAN_ENTRY, min_size=1, max_size=4, unique_by=lambda e: (e["topic"], e["partition"])))
    doc: object = {"version": 1, "partitions": entries}
    i = draw(st.integers(0, len(entries) - 1))
    e = entries[i]
    kind = draw(st.sampled_from(["topic", "partition", "replica", "dup-replica", "replicas", "log_dirs", "dup-entry",
                                 "missing", "entry", "version", "partitions", "top", "bytes"]))
    if kind == "topic":
        e["topic"] = draw(ILLEGAL_TOPIC)
    elif kind == "partition":
        e["partition"] = draw(NOT_AN_INT32)
    elif kind == "replica":
        e["replicas"][draw(st.integers(0, len(e["replicas"]) - 1))] = draw(NOT_AN_INT32)
    elif kind == "dup-replica":
        e["replicas"].insert(draw(st.integers(0, len(e["replicas"]))), e["replicas"][0])
    elif kind == "replicas":
        e["replicas"] = draw(st.one_of(st.just([]), NOT_A_LIST))
    elif kind == "log_dirs":
        n = len(e["replicas"])
        e["log_dirs"] = draw(st.one_of(
            st.lists(st.just("any"), min_size=0, max_size=6).filter(lambda x: len(x) != n),
            st.lists(st.sampled_from(["relative/dir", "", "data"]), min_size=n, max_size=n),
            NOT_A_LIST.filter(lambda v: v is not None)))
    elif kind == "dup-entry":
        entries.append(dict(e))
    elif kind == "missing":
        del e[draw(st.sampled_from(["topic", "partition", "replicas"]))]
    elif kind == "entry":
        entries[i] = draw(NOT_A_DICT)
    elif kind == "version":
        doc["version"] = draw(st.one_of(st.integers(), st.text(max_size=3), st.floats(), st.none(), st.booleans())
                              .filter(lambda v: not (type(v) in (int, float) and v == 1)))
    elif kind == "partitions":
        doc = {"version": 1} | draw(st.one_of(st.just({}), st.just({"partitions": []}),
                                              NOT_A_LIST.map(lambda v: {"partitions": v})))
    elif kind == "top":
        doc = draw(NOT_A_DICT)
    data = _serialise(doc)
    return draw(byte_defect(data)) if kind == "bytes" else data


@FUZZ
@given(plan=bad_plan(), command=st.sampled_from([["reassign", "execute", "-y"], ["reassign", "verify"],
                                                 ["reassign", "cancel"]]))
def test_bad_reassignment_json_is_refused_without_the_cluster(work, plan, command):
    f = _file(work, plan, ".json")
    refused(work, [*command, "--reassignment-json-file", f, *NOWHERE], names="--reassignment-json-file")


# -- topics-to-move and election JSON ----------------------------------------------------------
@st.composite
def bad_topics(draw) -> bytes:
    topics = [{"topic": t} for t in draw(st.lists(LEGAL_TOPIC, min_size=1, max_size=4))]
    doc: object = {"topics": topics, "version": 1}
    kind = draw(st.sampled_from(["topic", "entry", "missing", "topics", "version", "top", "bytes"]))
    i = draw(st.integers(0, len(topics) - 1))
    if kind == "topic":
        topics[i]["topic"] = draw(ILLEGAL_TOPIC)
    elif kind == "entry":
        topics[i] = draw(NOT_A_DICT)
    elif kind == "missing":
        topics[i] = {"name": topics[i]["topic"]}
    elif kind == "topics":
        doc = {"version": 1} | draw(st.one_of(st.just({}), st.just({"topics": []}), NOT_A_LIST.map(lambda v: {"topics": v})))
    elif kind == "version":
        doc["version"] = draw(st.one_of(st.integers(), st.text(max_size=3), st.none())
                              .filter(lambda v: not (type(v) is int and v == 1)))
    elif kind == "top":
        doc = draw(NOT_A_DICT)
    data = _serialise(doc)
    return draw(byte_defect(data)) if kind == "bytes" else data


@FUZZ
@given(topics=bad_topics(), command=st.sampled_from([
    ["reassign", "generate", "--broker-list", "0,1,2", "--topology", TOPO],
    ["plan", "move-topics", "--broker-list", "0,1,2", "--topology", TOPO],
]))
def test_bad_topics_to_move_json_is_refused(work, topics, command):
    f = _file(work, topics, ".json")
    refused(work, [*command, "--topics-to-move-json-file", f], names="--topics-to-move-json-file")


@st.composite
def bad_election(draw) -> bytes:
    parts = draw(st.lists(st.fixed_dictionaries({"topic": LEGAL_TOPIC, "partition": st.integers(0, 50)}),
                          min_size=1, max_size=4, unique_by=lambda e: (e["topic"], e["partition"])))
    doc: object = {"partitions": parts}
    kind = draw(st.sampled_from(["topic", "partition", "dup", "entry", "missing", "partitions", "top", "bytes"]))
    i = draw(st.integers(0, len(parts) - 1))
    if kind == "topic":
        parts[i]["topic"] = draw(ILLEGAL_TOPIC)
    elif kind == "partition":
        parts[i]["partition"] = draw(NOT_AN_INT32)
    elif kind == "dup":
        parts.append(dict(parts[i]))
    elif kind == "entry":
        parts[i] = draw(NOT_A_DICT)
    elif kind == "missing":
        del parts[i][draw(st.sampled_from(["topic", "partition"]))]
    elif kind == "partitions":
        doc = draw(st.one_of(st.just({}), st.just({"partitions": []}), NOT_A_LIST.map(lambda v: {"partitions": v})))
    elif kind == "top":
        doc = draw(NOT_A_DICT)
    data = _serialise(doc)
    return draw(byte_defect(data)) if kind == "bytes" else data


@FUZZ
@given(election=bad_election())
def test_bad_election_json_is_refused_without_the_cluster(work, election):
    f = _file(work, election, ".json")
    refused(work, ["leader", "elect", "--election-type", "preferred", "--path-to-json-file", f, *NOWHERE],
            names="--path-to-json-file")


# -- topology snapshots ------------------------------------------------------------------------
SNAPSHOT = json.loads(Path(TOPO).read_text())


@st.composite
def bad_snapshot(draw) -> bytes:
    doc = json.loads(json.dumps(SNAPSHOT))
    t = draw(st.sampled_from(doc["topics"]))
    p = draw(st.sampled_from(t["partitions"]))
    b = draw(st.sampled_from(doc["brokers"]))
    kind = draw(st.sampled_from(["replicas-empty", "replicas-dup", "replica", "size", "name", "broker-id", "leader",
                                 "isr", "rack", "port", "configs", "brokers", "version", "top", "dup-broker", "bytes"]))
    if kind == "replicas-empty":
        p["replicas"] = []
    elif kind == "replicas-dup":
        p["replicas"] = p["replicas"] + p["replicas"][:1]
    elif kind == "replica":
        p["replicas"][0] = draw(NOT_AN_INT32)
    elif kind == "size":
        p["size_bytes"] = draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=INT64_MAX + 1),
                                         st.floats(), st.text(max_size=4), st.just(BIG)))
    elif kind == "name":
        t["name"] = draw(ILLEGAL_TOPIC)
    elif kind == "broker-id":
        b["id"] = draw(NOT_AN_INT32)
    elif kind == "leader":
        p["leader"] = draw(st.one_of(st.integers(max_value=-2), st.integers(min_value=INT32_MAX + 1), st.text(max_size=3)))
    elif kind == "isr":
        p["isr"] = draw(st.one_of(NOT_A_LIST.filter(lambda v: v is not None), st.lists(NOT_AN_INT32, min_size=1, max_size=3)))
    elif kind == "rack":
        b["rack"] = draw(st.one_of(st.integers(), st.lists(st.text(max_size=2), max_size=2), st.booleans()))
    elif kind == "port":
        b["port"] = draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=65536)))
    elif kind == "configs":
        t["configs"] = {"min.insync.replicas": draw(st.one_of(st.integers(), st.none(), st.floats(), st.booleans()))}
    elif kind == "brokers":
        doc["brokers"] = draw(NOT_A_LIST)
    elif kind == "version":
        doc["version"] = draw(st.one_of(st.integers(), st.text(max_size=3)).filter(lambda v: v != 1))
    elif kind == "top":
        doc = draw(NOT_A_DICT)
    elif kind == "dup-broker":
        doc["brokers"].append(dict(b))
    data = _serialise(doc)
    return draw(byte_defect(data)) if kind == "bytes" else data


SNAPSHOT_COMMANDS = [["cluster", "describe"], ["cluster", "health"], ["plan", "rebalance"],
                     ["leader", "balance-plan"], ["leader", "rebalance"], ["leader", "demote", "--rack", "a", "--dry-run"]]


@FUZZ
@given(snapshot=bad_snapshot(), command=st.sampled_from(SNAPSHOT_COMMANDS))
def test_bad_snapshot_is_refused(work, snapshot, command):
    f = _file(work, snapshot, ".json")
    refused(work, [*command, "--topology", f], names="--topology")


# -- playbooks and their state files -----------------------------------------------------------
PLAYBOOK = {
    "name": "fuzz",
    "params": {"rack": {"type": "rack", "required": True}, "wait": {"type": "duration", "default": "1m"}},
    "steps": [
        {"id": "gate", "type": "health_gate"},
        {"id": "p", "type": "plan", "goal": "rebalance", "max_moves": 5},
        {"id": "x", "type": "execute", "plan": "p", "throttle": 1000, "max_moves_per_broker": 1, "timeout": 60},
        {"id": "w", "type": "wait_for", "condition": "healthy", "timeout": "{wait}", "interval": 1},
        {"id": "s", "type": "shell", "command": "true", "allow_failure": False},
    ],
}
LETTERS = st.text(alphabet="abcxyzQ_ ", min_size=1, max_size=6)  # never a number, size or duration
NOT_A_BOOL = st.one_of(st.sampled_from(["false", "true", "no", "yes", "0", "1", "False"]), st.integers(), st.none(),
                       st.floats(), st.lists(st.booleans(), max_size=2))
NEGATIVE_OR_NOT_FINITE = st.one_of(st.integers(max_value=-1), st.floats(max_value=-1e-9), st.sampled_from(
    [float("nan"), float("inf"), float("-inf")]), LETTERS, st.booleans(), st.lists(st.integers(), max_size=2))
NOT_AN_ID = st.one_of(st.text(max_size=12).filter(lambda s: not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}", s)),
                      st.sampled_from(["../x", "a/b", "/etc/passwd", ".hidden", "-x", ""]), NOT_A_STRING)


@st.composite
def bad_playbook(draw) -> bytes:
    doc = json.loads(json.dumps(PLAYBOOK))
    steps = doc["steps"]
    kind = draw(st.sampled_from(["required", "param-type", "step-type", "step-id", "name", "number", "bool",
                                 "interval", "zero", "unknown-field", "dup-id", "steps", "top", "tag", "bytes", "yaml"]))
    if kind == "required":
        doc["params"]["rack"]["required"] = draw(NOT_A_BOOL)
    elif kind == "param-type":
        doc["params"]["rack"]["type"] = draw(st.one_of(LETTERS.filter(lambda s: s not in ("str",)), NOT_A_STRING))
    elif kind == "step-type":
        draw(st.sampled_from(steps))["type"] = draw(st.one_of(LETTERS, NOT_A_STRING))
    elif kind == "step-id":
        steps[0]["id"] = draw(NOT_AN_ID)
    elif kind == "name":
        doc["name"] = draw(NOT_AN_ID)
    elif kind == "number":
        step, field = draw(st.sampled_from([(1, "max_moves"), (2, "throttle"), (2, "max_moves_per_broker"),
                                            (2, "timeout"), (3, "interval"), (4, "timeout")]))
        steps[step][field] = draw(NEGATIVE_OR_NOT_FINITE)
    elif kind == "bool":
        steps[4]["allow_failure"] = draw(NOT_A_BOOL)
    elif kind == "interval":
        steps[3]["interval"] = draw(st.floats(min_value=0, max_value=0.099))
    elif kind == "zero":
        step, field = draw(st.sampled_from([(2, "throttle"), (2, "max_moves_per_broker"), (2, "max_moves_in_flight")]))
        steps[step][field] = 0
    elif kind == "unknown-field":
        draw(st.sampled_from(steps))[draw(LETTERS.map(lambda s: "x" + s))] = 1
    elif kind == "dup-id":
        steps.append(dict(steps[0]))
    elif kind == "steps":
        doc["steps"] = draw(st.one_of(st.just([]), NOT_A_LIST))
    elif kind == "top":
        doc = draw(NOT_A_DICT.filter(lambda v: v is not None))
    text = yaml.safe_dump(doc, allow_unicode=True)
    if kind == "tag":
        text = text.replace("name: fuzz", "name: !!python/name:os.system", 1)
    elif kind == "yaml":
        text += draw(st.sampled_from(["  - {id: [\n", "steps: [\n\t- x\n", "\tname: x\n", "name: 'x\n", "? [a]\n: b\n"]))
    data = text.encode()
    if kind == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(BAD_BYTES) + data[at:]
    return data


@FUZZ
@given(playbook=bad_playbook())
def test_bad_playbook_is_refused_before_any_step(work, playbook):
    f = _file(work, playbook, ".yaml")
    refused(work, ["playbook", "run", f, "--param", "rack=a", "--dry-run", "--topology", TOPO], names="playbook")


@st.composite
def bad_state(draw) -> bytes:
    doc = {"run_id": "RUN", "playbook": "rack-maintenance", "source": "x", "sha256": "x", "params": {"rack": "a"},
           "status": "failed", "steps": [{"id": "gate", "type": "health_gate", "status": "done", "result": {}}]}
    kind = draw(st.sampled_from(["missing", "type", "step", "status", "result", "run_id", "top", "bytes"]))
    if kind == "missing":
        del doc[draw(st.sampled_from(["run_id", "playbook", "source", "sha256", "params", "steps"]))]
    elif kind == "type":
        key = draw(st.sampled_from(["playbook", "source", "sha256", "params", "steps"]))
        doc[key] = draw(NOT_A_DICT.filter(lambda v: not isinstance(v, list if key == "steps" else str)))
    elif kind == "step":
        doc["steps"][0] = draw(st.one_of(NOT_A_DICT, st.just({"id": 1, "type": "x", "status": "done"})))
    elif kind == "status":
        doc["steps"][0]["status"] = draw(st.one_of(LETTERS, NOT_A_STRING))
    elif kind == "result":
        doc["steps"][0]["result"] = draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3), st.integers()))
    elif kind == "run_id":
        doc["run_id"] = draw(LEGAL_TOPIC.filter(lambda s: s != "RUN"))
    elif kind == "top":
        doc = draw(NOT_A_DICT)
    data = _serialise(doc)
    return draw(byte_defect(data)) if kind == "bytes" else data


@FUZZ
@given(state=bad_state())
def test_damaged_state_file_is_reported_with_how_to_recover(work, state):
    runs = work / "home" / "playbook-runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_id = f"run-{next(_names)}"
    (runs / f"{run_id}.json").write_bytes(state.replace(b'"RUN"', json.dumps(run_id).encode()))
    err = refused(work, ["playbook", "run", "rack-maintenance", "--resume", run_id])
    assert "restore it from a backup" in err["message"]


# -- values on the command line ----------------------------------------------------------------
NOT_FINITE = st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999"])
GARBAGE = st.one_of(LETTERS, st.sampled_from(["", "1_000", "0x10", "١٢", "1.5.5", "--", "1e", "+", " "]))
HUGE = st.integers(20, 500).map(lambda n: "9" * n)


def _below(lo, integral: bool):
    return (st.integers(max_value=int(lo) - 1) if integral
            else st.floats(max_value=lo - 1e-6, allow_nan=False, allow_infinity=False)).map(str)


def _above(hi, integral: bool):
    return (st.integers(min_value=int(hi) + 1) if integral
            else st.floats(min_value=hi * 1.01 + 1, allow_nan=False, allow_infinity=False)).map(repr)


def bad_value(lo, hi, kind: str):
    """Text no option with range lo..hi takes (kind: int, size (1.5 is a size: 1 byte), float)."""
    integral = kind != "float"
    parts = [NOT_FINITE, GARBAGE, HUGE, _above(hi, integral), _below(lo, integral)]
    if kind == "int":
        parts.append(st.floats(-1e6, 1e6).filter(lambda f: f != int(f)).map(repr))
    return st.one_of(*parts)


_PLAN_OK = json.dumps({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2]}]})
I32, I64, DAYS30 = INT32_MAX, INT64_MAX, 30 * 86400.0
# (args before the value, option, lo, hi, kind)
OPTIONS = [
    (["cluster", "describe", *NOWHERE], "--request-timeout", 0.5, 86400.0, "float"),
    (["plan", "assign", "--brokers", "0,1,2", "--replication-factor", "2"], "--partitions", 1, 1_000_000, "int"),
    (["plan", "assign", "--brokers", "0,1,2", "--replication-factor", "2", "--partitions", "3"], "--start-index",
     -I32 - 1, I32, "int"),
    (["plan", "assign", "--brokers", "0,1,2", "--partitions", "3"], "--replication-factor", 1, 3, "int"),
    (["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", *NOWHERE], "--throttle", 1, I64, "size"),
    (["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", *NOWHERE], "--max-moves-per-broker", 1, I32, "int"),
    (["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", *NOWHERE], "--max-moves-in-flight", 1, I32, "int"),
    (["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", *NOWHERE], "--timeout", 1.0, DAYS30, "float"),
    (["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", *NOWHERE], "--poll-interval", 0.2, 3600.0, "float"),
    (["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", *NOWHERE], "--disk-reserve", 0.0, 100.0, "float"),
    (["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", *NOWHERE], "--disk-threshold", 1.0, 100.0,
     "float"),
    (["reassign", "resume", *NOWHERE], "--disk-threshold", 1.0, 100.0, "float"),
    (["reassign", "resume", *NOWHERE], "--throttle", 1, I64, "size"),
    (["reassign", "cancel", *NOWHERE], "--timeout", 1.0, DAYS30, "float"),
    (["leader", "rebalance", "--topology", TOPO], "--imbalance-threshold", 0.0, 100.0, "float"),
    (["leader", "rebalance", "--topology", TOPO], "--max-elections", 0, I32, "int"),
    (["leader", "rebalance", *NOWHERE], "--batch-size", 1, 100_000, "int"),
    (["leader", "elect", "--election-type", "preferred", "--topic", "orders", *NOWHERE], "--partition", 0, I32, "int"),
    (["leader", "elect", "--election-type", "preferred", "--all-topic-partitions", *NOWHERE], "--batch-wait", 0.0,
     3600.0, "float"),
    (["leader", "demote", "--dry-run", *NOWHERE], "--broker", 0, I32, "int"),
    (["leader", "demote", "--broker", "1", *NOWHERE], "--wait", 1.0, DAYS30, "float"),
    (["plan", "rebalance", "--topology", TOPO], "--max-bytes", 0, I64, "size"),
    (["plan", "rebalance", "--topology", TOPO], "--throttle", 1, I64, "size"),
    (["plan", "rebalance", "--topology", TOPO], "--max-moves", 0, I32, "int"),
    (["plan", "set-replication-factor", "--topic", "orders", "--topology", TOPO], "--replication-factor", 1, 32767, "int"),
]


#: Kafka's own messages (AdminUtils), which kops keeps, for partitions and replicas in int32 but
#: not above 0, and a replication factor above the brokers: they do not name the option
KAFKA_WORDED = {"--partitions": "Number of partitions", "--replication-factor": "Replication factor"}


@pytest.mark.parametrize("before, option, lo, hi, kind", OPTIONS, ids=[f"{o[0][0]}-{o[0][1]}{o[1]}" for o in OPTIONS])
@settings(FUZZ, max_examples=15)
@given(data=st.data())
def test_bad_number_is_refused(work, before, option, lo, hi, kind, data):
    value = data.draw(bad_value(lo, hi, kind))
    plan = _file(work, _PLAN_OK.encode(), ".json")
    args = [plan if a == "PLAN" else a for a in before]
    err = refused(work, [*args, f"{option}={value}"])
    said = err["message"] + " ".join(err["details"])
    assert option in said or (before[:2] == ["plan", "assign"] and KAFKA_WORDED.get(option, option) in said), said


TOPIC_OPTIONS = [
    ["cluster", "describe", *NOWHERE],
    ["cluster", "health", "--topology", TOPO],
    ["leader", "elect", "--election-type", "preferred", *NOWHERE],
    ["leader", "balance-plan", "--topology", TOPO],
    ["plan", "assign", "--brokers", "0,1", "--partitions", "2", "--replication-factor", "1"],
    ["plan", "set-replication-factor", "--replication-factor", "2", "--topology", TOPO],
]


@pytest.mark.parametrize("before", TOPIC_OPTIONS, ids=[" ".join(c[:2]) for c in TOPIC_OPTIONS])
@settings(FUZZ, max_examples=10)
@given(name=ILLEGAL_TOPIC_TEXT)
def test_illegal_topic_name_is_refused(work, before, name):
    if "set-replication-factor" in before:  # takes comma-separated names, each stripped
        parts = [p.strip() for p in name.split(",") if p.strip()]
        assume(not parts or any(topic_problem(p) for p in parts))
    refused(work, [*before, f"--topic={name}"], names="--topic")


@settings(FUZZ, max_examples=20)
@given(ext=st.from_regex(r"\A\.?[a-z0-9]{0,5}\Z").filter(lambda e: e.lstrip(".") not in ("png", "svg", "pdf")),
       as_dir=st.booleans())
def test_chart_in_a_format_kops_cannot_write_is_refused(work, ext, as_dir):
    target = work / "charts"
    target.mkdir(exist_ok=True)
    path = str(target) if as_dir else str(target / f"out{ext}")
    refused(work, ["plan", "rebalance", "--topology", TOPO, "--chart", path], names="--chart")
    assert not list(target.glob("*"))  # nothing written, no DIR.png beside it
    assert not Path(str(target) + ".png").exists()


@settings(FUZZ, max_examples=20)
@given(server=st.one_of(
    st.integers(min_value=65536).map(lambda p: f"127.0.0.1:{p}"), st.just("127.0.0.1:0"),
    st.text(alphabet="abc.-", max_size=8).map(lambda h: h + ":"),  # no port
    st.integers(1, 65535).map(lambda p: f":{p}"),  # no host
    st.text(alphabet="abc:", max_size=8).filter(lambda t: not re.fullmatch(r".+:[0-9]+", t)),
    st.just("127.0.0.1:9092,"), st.just("a b:9092")),
    option=st.sampled_from(["--bootstrap-server", "--zookeeper"]))
def test_bad_server_address_is_refused(work, server, option):
    args = ["cluster", "describe", f"{option}={server}"] + (NOWHERE if option == "--zookeeper" else [])
    refused(work, args, names=option)


@settings(FUZZ, max_examples=20)
@given(run_id=NOT_AN_ID.filter(lambda v: isinstance(v, str)), which=st.sampled_from(["resume", "execution-id"]))
def test_ids_are_never_paths(work, run_id, which):
    if which == "resume":
        refused(work, ["playbook", "run", "rack-maintenance", f"--resume={run_id}"], names="--resume")
    else:
        refused(work, ["reassign", "verify", f"--execution-id={run_id}", *NOWHERE], names="--execution-id")


@pytest.fixture(scope="module")
def logs(work):
    d = work / "logs" / "broker-1"
    d.mkdir(parents=True)
    (d / "state-change.log").write_text(
        "[2026-11-22 01:00:00,000] TRACE [Broker id=1] Cached leader info UpdateMetadataPartitionState(topicName='orders', "
        "partitionIndex=0, controllerEpoch=1, leader=1, leaderEpoch=0, isr=[1], zkVersion=0, replicas=[1], "
        "offlineReplicas=[]) for partition orders-0 in response to UpdateMetadata request sent by controller 1 epoch 1 "
        "with correlation id 0 (state.change.logger)\n")
    return str(work / "logs")


JAVA_ONLY_ERRORS = ["a{", "{", "(?P<n>x)", "(", "[", "[z-a]", "x{2,1}", ")", "(?P=n)", "(?#c)"]


@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="needs a JVM")
@settings(FUZZ, max_examples=15)
@given(prefix=st.text(alphabet="abc.", max_size=3), bad=st.sampled_from(JAVA_ONLY_ERRORS),
       suffix=st.text(alphabet="xyz", max_size=3), option=st.sampled_from(["--topic-regex", "--broker-of"]))
def test_regex_spark_cannot_run_is_refused_before_spark_starts(work, logs, prefix, bad, suffix, option):
    refused(work, ["logs", "merge", "--logs", logs, f"{option}={prefix}{bad}{suffix}"], names=option)


# -- the corpus: inputs that once failed -------------------------------------------------------
def _corpus_commands(kind: str, path: str) -> list[list[str]]:
    return {
        "plan": [["reassign", "execute", "-y", "--reassignment-json-file", path, *NOWHERE],
                 ["reassign", "verify", "--reassignment-json-file", path, *NOWHERE],
                 ["reassign", "cancel", "--reassignment-json-file", path, *NOWHERE]],
        "topics": [["reassign", "generate", "--topics-to-move-json-file", path, "--broker-list", "0,1,2", *NOWHERE],
                   ["plan", "move-topics", "--topics-to-move-json-file", path, "--broker-list", "0,1", "--topology", TOPO]],
        "election": [["leader", "elect", "--election-type", "preferred", "--path-to-json-file", path, *NOWHERE]],
        "snapshot": [[*c, "--topology", path] for c in SNAPSHOT_COMMANDS],
        "playbook": [["playbook", "run", path, "--dry-run", "--topology", TOPO],
                     ["playbook", "show", path]],
        "command-config": [["cluster", "describe", "--command-config", path, *NOWHERE],
                           ["--command-config", path, "reassign", "list", *NOWHERE]],
    }[kind]


CORPUS_FILES = sorted(p.name for p in CORPUS.glob("*--*"))


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_file_is_refused(work, name):
    kind = name.split("--")[0]
    path = str(CORPUS / name)
    if kind == "state":
        runs = work / "home" / "playbook-runs"
        runs.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, runs / "corrupt.json")
        err = refused(work, ["playbook", "run", "rack-maintenance", "--resume", "corrupt"])
        assert "restore it from a backup" in err["message"]
        return
    for args in _corpus_commands(kind, path):
        refused(work, args)


def test_corpus_plan_names_every_problem_it_can_without_a_cluster(work):
    err = refused(work, ["reassign", "execute", "-y", "--reassignment-json-file",
                         str(CORPUS / "plan--duplicate-replica-and-unknown-topic.json"), *NOWHERE])
    assert any("duplicate replica 1" in d for d in err["details"])
    assert "not checked against the cluster" in err["message"]


def test_plan_problems_and_unknown_topics_are_named_together(work):
    """With a snapshot at hand (the same code path as a cluster that answers), a plan with a
    duplicate replica and an unknown topic names both."""
    from kops.cli.common import Context, Output, refuse
    from kops.errors import BadInput
    from kops.inputs.files import read_json
    from kops.model import parse_plan
    from kops.ops.validate import reference_problems

    path = CORPUS / "plan--duplicate-replica-and-unknown-topic.json"
    parsed = parse_plan(read_json(str(path), what="plan"), source="plan", allow_empty=False)
    with pytest.raises(BadInput) as e:
        refuse(Context(None, None, None, 1.0, Output.json), parsed.problems,
               lambda topo: reference_problems(parsed.refs, topo), topology_file=TOPO)
    details = " | ".join(e.value.details)
    assert "duplicate replica 1" in details and "topic 'no-such-topic' does not exist" in details


ARG_CORPUS = [
    ["plan", "rebalance", "--topology", TOPO, "--max-bytes", "9" * 400],
    ["plan", "rebalance", "--topology", TOPO, "--throttle", "9" * 400],
    ["leader", "elect", "--election-type", "preferred", "--topic", "orders", "--partition", str(2**31), *NOWHERE],
    ["leader", "demote", "--broker", str(2**31), *NOWHERE],
    ["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", "--throttle", str(2**63), *NOWHERE],
    ["--request-timeout", "nan", "cluster", "describe", *NOWHERE],
    ["leader", "rebalance", "--imbalance-threshold", "nan", "--topology", TOPO],
    ["plan", "rebalance", "--topology", TOPO, "--chart", "CHARTS/out.xyz"],
    ["plan", "rebalance", "--topology", TOPO, "--chart", "CHARTS"],
    ["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", "--via", "bogus", *NOWHERE],
    ["reassign", "execute", "-y", "--reassignment-json-file", "PLAN", "--via", "zookeeper", *NOWHERE],
    ["reassign", "execute", "-y", "--reassignment-json-file", str(CORPUS / "plan--empty.json"), *NOWHERE],
    ["plan", "assign", "--brokers", "0,1,2", "--partitions", "2000000000", "--replication-factor", "3"],
    ["plan", "assign", "--brokers", "0,1,2", "--partitions", "900000", "--replication-factor", "20"],
    ["plan", "assign", "--brokers", "0,1,2", "--racks", "0:a,9:b", "--partitions", "3", "--replication-factor", "1"],
    ["plan", "decommission", "--brokers", "1,1", "--topology", TOPO],
    ["plan", "drain-rack", "--rack", "", "--topology", TOPO],
    ["playbook", "run", "rack-maintenance", "--resume", "../../x"],
    ["playbook", "run", "rack-maintenance", "--param", "rack=a", "--param", "rack=b", "--dry-run", "--topology", TOPO],
    ["reassign", "verify", "--execution-id", "../../etc/passwd", *NOWHERE],
    ["cluster", "describe", "--topic", "a/b", *NOWHERE],
    ["cluster", "describe", "--bootstrap-server", "127.0.0.1:99999"],
    ["cluster", "describe", *NOWHERE, "--zookeeper", "zk:2181/kafka/"],
    ["logs", "merge", "--logs", "LOGS", "--topic-regex", "a{"],
    ["logs", "merge", "--logs", "LOGS", "--broker-of", "broker-\\d+"],
    ["logs", "merge", "--logs", "LOGS", "--topic", "orders", "--partitions", "0-2000000000"],
    ["logs", "timeline", "--logs", "LOGS", "--bucket", "99999999999999999999 seconds"],
    ["logs", "timeline", "--logs", "LOGS", "--chart", "CHARTS/t.gif"],
    ["leader", "balance-plan", "--topology", TOPO, "--reassignment-json-file", "CHARTS"],
]


@pytest.mark.parametrize("args", ARG_CORPUS, ids=[" ".join(a)[:60] for a in ARG_CORPUS])
def test_argument_corpus_is_refused(work, logs, args):
    charts = work / "corpus-charts"
    charts.mkdir(exist_ok=True)
    plan = _file(work, _PLAN_OK.encode(), ".json")
    subst = {"PLAN": plan, "LOGS": logs}
    args = [subst.get(a, a.replace("CHARTS", str(charts))) for a in args]
    refused(work, args)
    assert not list(charts.glob("*")) and not Path(f"{charts}.png").exists()


# -- the installed script, as cron and operators run it ----------------------------------------
def _kops() -> str:
    here = Path(sys.executable).parent / "kops"
    return str(here) if here.exists() else (shutil.which("kops") or "kops")


SCRIPT_CASES = [
    ["reassign", "execute", "-y", "--reassignment-json-file", str(CORPUS / "plan--non-utf8.json"), *NOWHERE],
    ["leader", "elect", "--election-type", "preferred", "--path-to-json-file",
     str(CORPUS / "election--non-utf8.json"), *NOWHERE],
    ["--request-timeout", "nan", "cluster", "describe", *NOWHERE],
    ["playbook", "run", str(CORPUS / "playbook--type-is-a-list.yaml"), "--dry-run", "--topology", TOPO],
    ["cluster", "health", "--topology", str(CORPUS / "snapshot--negative-size.json")],
    ["plan", "assign", "--brokers", "0,1,2", "--partitions", "2000000000", "--replication-factor", "3"],
]


@pytest.mark.parametrize("args", SCRIPT_CASES, ids=[" ".join(a[:3]) for a in SCRIPT_CASES])
def test_installed_script_refuses_bad_input(work, args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOPS_")} | {"KOPS_HOME": str(work / "home"),
                                                                              "KOPS_REQUEST_TIMEOUT": "120"}
    # (a run that reached for 127.0.0.1:1 would wait out the 120 s request timeout: TimeoutExpired)
    r = subprocess.run([_kops(), "--output", "json", *args], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["error"]["exit_code"] == 2 and doc["error"]["type"] == "bad_input"
    assert r.stderr.startswith("error: ") or "Error: " in r.stderr  # the message for people, on stderr


@pytest.mark.parametrize("content", [b'{"id": "e1", "moves": [', b"\xff\xfe", b'{"id": "e1"}'])
def test_damaged_local_journal_copy_is_bad_input(tmp_path, content):
    """The local copy of a journal is read when the cluster holds none: a damaged one is
    reported (exit 2, what to do), never a Python exception."""
    from kops.errors import BadInput
    from kops.ops.journal import JournalStore

    class NoRemote:
        def get(self, execution_id):
            return None

    store = JournalStore(type("Conn", (), {"zookeeper": None})(), "c1", local_root=tmp_path)
    store.remotes = [NoRemote()]
    store.local.dir.mkdir(parents=True)
    (store.local.dir / "e1.json").write_bytes(content)
    with pytest.raises(BadInput, match="local journal copy"):
        store.load("e1")
