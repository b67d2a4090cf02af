"""kops' Kafka-exact assignment against Kafka's own ``AdminUtils.assignReplicasToBrokers`` (the sandbox's 3.9 jars).

A small Java driver (tests/java/AssignDriver.java) is compiled into a tmp dir and runs every case
in ONE JVM. Cases: 1-60 brokers (ids scattered, caller order shuffled), 0-8 racks (even and uneven,
unicode names, the empty rack name), RF 1-5, fixed and random start indexes (Kafka's static
``Random`` is seeded through reflection; kops gets a :class:`JavaRandom` with the same seed),
start partition ids, Kafka's error cases (partitions <= 0, RF <= 0, RF > brokers, partial racks),
``--disable-rack-aware``, duplicate broker ids, and start indexes large enough to overflow Kafka's
32-bit arithmetic.

Needs Java and the Kafka jars (fetched once by kops.sandbox.dist), not a running cluster. It fails
loudly when either is missing.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kops.placement.kafka_assign import (
    INT_MAX,
    JavaRandom,
    KafkaAssignmentError,
    assign_replicas_to_brokers,
)
from kops.sandbox.dist import DEFAULT_VERSION, kafka_classpath

pytestmark = pytest.mark.cluster

DRIVER = Path(__file__).resolve().parents[1] / "java" / "AssignDriver.java"
N_CASES = 600

RACK_NAMES = ["rack1", "rack2", "rack3", "a", "B", "zone-é", "\uff21", "\U0001f600", "", "r10", "r9", "us-east-1a"]


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> tuple[str, str]:
    """(classpath, output dir) of the compiled driver."""
    javac = shutil.which("javac")
    assert javac, "javac is not on PATH: the differential test needs a JDK 17 (apt-get install openjdk-17-jdk-headless)"
    cp = kafka_classpath(DEFAULT_VERSION)
    out = tmp_path_factory.mktemp("assign-driver")
    proc = subprocess.run(
        [javac, "-nowarn", "-cp", cp, "-d", str(out), str(DRIVER)], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return cp, str(out)


def _case(rng: random.Random, i: int) -> dict:
    n = rng.randint(1, 60)
    ids = rng.sample(range(0, 300), n)
    if rng.random() < 0.3:
        ids.sort()
    n_racks = rng.choice([0, 0, 1, 2, 3, 3, 4, 5, 6, 7, 8])
    names = rng.sample(RACK_NAMES, min(n_racks, len(RACK_NAMES))) if n_racks else []
    if names and rng.random() < 0.5:
        racks = [names[j % len(names)] for j in range(n)]  # even (as far as n allows)
    elif names:
        weights = [rng.random() ** 2 + 0.05 for _ in names]  # uneven
        racks = rng.choices(names, weights, k=n)
    else:
        racks = [None] * n
    kind = rng.random()
    rack_aware = True
    if names and kind < 0.05:
        racks[rng.randrange(n)] = None  # some brokers without a rack -> AdminOperationException
    elif names and kind < 0.12:
        rack_aware = False  # --disable-rack-aware: Kafka gets no racks
    elif kind < 0.15 and n > 1:
        j = rng.randrange(n)  # a duplicate broker id: Kafka does not reject it
        ids.append(ids[j])
        racks.append(racks[j])
    rf = rng.choice([1, 2, 2, 3, 3, 3, 4, 5])
    if rng.random() < 0.04:
        rf = rng.choice([0, -1])
    elif rng.random() < 0.05:
        rf = len(ids) + 1
    parts = rng.choice([1, 2, 3, 6, 12, 13, 50, 100, rng.randint(1, 400)])
    if rng.random() < 0.03:
        parts = rng.choice([0, -2])
    r = rng.random()
    if r < 0.35:
        fixed = -1
    elif r < 0.85:
        fixed = rng.randint(0, 3 * len(ids))
    elif r < 0.93:
        fixed = rng.randint(1000, 10**6)
    else:
        fixed = rng.choice([INT_MAX, INT_MAX - 3, 2**30 + 7, 300_000_001])  # Java int overflow
    sp = rng.choice([-1, -1, 0, 0, rng.randint(1, 60), rng.randint(60, 5000)])
    if rng.random() < 0.02:
        sp = INT_MAX - rng.randint(0, 3)
    seed = rng.randrange(-(2**40), 2**40) if fixed < 0 else None
    return {
        "id": f"c{i}",
        "brokers": list(zip(ids, racks)),
        "parts": parts,
        "rf": rf,
        "fixed": fixed,
        "sp": sp,
        "seed": seed,
        "rack_aware": rack_aware,
    }


def _line(c: dict) -> str:
    brokers = [(b, r if c["rack_aware"] else None) for b, r in c["brokers"]]
    enc = ",".join(str(b) if r is None else f"{b}={r.encode().hex()}" for b, r in brokers)
    seed = "-" if c["seed"] is None else str(c["seed"])
    return "\t".join([c["id"], str(c["parts"]), str(c["rf"]), str(c["fixed"]), str(c["sp"]), seed, enc])


def _kops(c: dict) -> str:
    rng = JavaRandom(c["seed"]) if c["seed"] is not None else None
    try:
        got = assign_replicas_to_brokers(
            c["brokers"], c["parts"], c["rf"], c["fixed"], c["sp"], rack_aware=c["rack_aware"], rng=rng
        )
    except KafkaAssignmentError as e:
        return f"ERR {e.kafka_exception} {e.message}"
    return "OK " + ";".join(f"{p}:{','.join(map(str, r))}" for p, r in sorted(got.items()))


def _run_java(driver: tuple[str, str], lines: list[str]) -> dict[str, str]:
    cp, out = driver
    java = shutil.which("java")
    assert java, "java is not on PATH"
    proc = subprocess.run(
        [java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{cp}:{out}", "AssignDriver"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"driver failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    results = {}
    for line in proc.stdout.splitlines():
        cid, _, rest = line.partition(" ")
        results[cid] = rest
    return results


def test_kafka_assign_matches_kafka_jar(driver):
    rng = random.Random(20240914)
    cases = [_case(rng, i) for i in range(N_CASES)]
    java = _run_java(driver, [_line(c) for c in cases])
    assert len(java) == len(cases)

    mismatches = []
    kinds = {"ok": 0, "err": 0, "random": 0, "rack_aware": 0, "uneven": 0, "overflow_err": 0}
    for c in cases:
        want = java[c["id"]]
        got = _kops(c)
        if want.startswith("ERR"):
            kinds["err"] += 1
            _, jcls, jmsg = want.split(" ", 2)
            _, kcls, kmsg = got.split(" ", 2) if got.startswith("ERR") else ("", "", got)
            if jcls in ("IndexOutOfBoundsException", "ArithmeticException"):
                kinds["overflow_err"] += 1
                ok = kcls == jcls and jmsg in kmsg  # kops adds an explanation around Java's message
            else:
                ok = kcls == jcls and kmsg == jmsg
        else:
            kinds["ok"] += 1
            ok = got == want
            racks = {r for _, r in c["brokers"]} if c["rack_aware"] else {None}
            if None not in racks:
                kinds["rack_aware"] += 1
                counts = [sum(1 for _, r in c["brokers"] if r == x) for x in racks]
                kinds["uneven"] += max(counts) != min(counts)
        kinds["random"] += c["seed"] is not None
        if not ok:
            mismatches.append(f"{_line(c)!r}\n  kafka: {want[:300]}\n  kops:  {got[:300]}")
    assert not mismatches, f"{len(mismatches)} of {len(cases)} cases differ:\n" + "\n".join(mismatches[:10])
    # the generator really covered what the brief asks for
    assert kinds["ok"] >= 300 and kinds["err"] >= 20 and kinds["random"] >= 100
    assert kinds["rack_aware"] >= 150 and kinds["uneven"] >= 50 and kinds["overflow_err"] >= 1, kinds


def test_rack_alternated_list_and_javadoc_example(driver):
    """The KIP-36 / Javadoc example through the jar and through kops, side by side."""
    rack_map = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    c = {"id": "kip36", "brokers": list(rack_map.items()), "parts": 12, "rf": 3, "fixed": 0, "sp": 0,
         "seed": None, "rack_aware": True}
    java = _run_java(driver, [_line(c)])
    assert java["kip36"] == _kops(c)
    assert java["kip36"].startswith("OK 0:0,3,1;1:3,1,5;2:1,5,4;3:5,4,2;4:4,2,0;5:2,0,3;6:0,4,2;")
