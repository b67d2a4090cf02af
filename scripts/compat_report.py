#!/usr/bin/env python3
"""Write docs/compatibility.md from the version matrix's results (nothing typed by hand).

    ./scripts/compat.sh                                   # runs the matrix, then this
    .venv/bin/python scripts/compat_report.py build/compat/results.jsonl --out docs/compatibility.md
    .venv/bin/python scripts/compat_report.py --check     # exit 1 unless the doc covers the whole
                                                          # matrix, every step passed or was n/a,
                                                          # and it was written from this kops code

The results file holds one JSON line per test and version (tests/compat/conftest.py, with
``KOPS_COMPAT_RESULTS``); a later line for the same (mode, version, test) replaces an earlier one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import provenance  # noqa: E402
from tests.compat import matrix  # noqa: E402

#: workflow steps, in the order they run: test name -> column header
STEPS = {
    "test_describe_reads_mode_version_controller_racks_and_health": "describe, health",
    "test_cordon_sets_kafkas_own_where_the_version_has_one": "broker cordon",
    "test_zookeeper_only_options_refused_nothing_changed": "ZooKeeper options refused",
    "test_reassignment_through_zookeeper": "--via zookeeper",
    "test_plan_rebalance_of_a_stacked_topic": "plan rebalance, dry run",
    "test_throttled_reassignment_execute_and_verify": "execute --wait, verify",
    "test_cancel_mid_move_rolls_back": "cancel",
    "test_preferred_election_and_cron_rebalance": "elect, leader rebalance",
    "test_rebalance_asks_the_controller_when_the_preferred_replica_is_out_of_the_isr": "out-of-ISR election",
    "test_demote_and_restore_a_rack": "demote, restore",
    "test_rebalance_step_moves_a_bounded_step": "rebalance step",
    "test_rack_maintenance_playbook_with_the_rack_down": "playbook",
    "test_logs_merge_reads_this_versions_logs": "logs merge",
}
#: the marker of the line that names the commit the table was written from
COMMIT_LINE = "Written from kops commit "
MARK = {"passed": "ok", "failed": "**FAILED**", "skipped": "n/a"}


def load(path: Path) -> dict[tuple[str, str], dict[str, dict]]:
    rows: dict[tuple[str, str], dict[str, dict]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows.setdefault((r["mode"], r["version"]), {})[r["test"]] = r
    return rows


#: the code the table describes: kops and the matrix
CODE_PATHS = ("kops", "tests/compat", "pyproject.toml")


def code_commit() -> str:
    """The newest commit that changed :data:`CODE_PATHS` (scripts/provenance.py)."""
    return provenance.code_commit(*CODE_PATHS)


def code_id() -> str:
    """A fingerprint of :data:`CODE_PATHS`' content, the same in a shallow clone (``-dirty``
    with uncommitted changes there: never a match)."""
    return provenance.code_id("HEAD", *CODE_PATHS) + (provenance.DIRTY if code_commit().endswith(provenance.DIRTY)
                                                      else "")


def _sort_key(pair: tuple[str, str]) -> tuple:
    mode, version = pair
    return (0 if mode == "zookeeper" else 1, tuple(int(x) for x in version.split(".")))


def render(rows: dict[tuple[str, str], dict[str, dict]], source: str) -> str:
    from importlib.metadata import version as pkg

    from kops.cluster import versions

    out = [
        "# Compatibility: kops on every Kafka from 2.8 to 4.4",
        "",
        "Written by `scripts/compat_report.py` from the results of the version matrix "
        "(`./scripts/compat.sh`): for each Kafka version and mode, a real 6-broker cluster in racks "
        "a,a,b,b,c,c (`kops sandbox up --kafka-version V`, ZooKeeper or one KRaft controller, Kafka's "
        "jars from Maven Central, Java 17) with data on it, and kops' workflow as an operator runs it, "
        "through the CLI (`tests/compat/test_workflow.py`; what each step asserts is in its docstring "
        "and code). CI runs the four corners (the oldest and newest of each mode) on every "
        "submission; the whole matrix runs with the script.",
        "",
        f"{COMMIT_LINE}`{code_commit()}` (code id `{code_id()}`) on {time.strftime('%Y-%m-%d', time.gmtime())}, from `{source}`; "
        f"confluent-kafka {pkg('confluent-kafka')}, kafka-python {pkg('kafka-python')}.",
        "",
        "```bash",
        "./scripts/compat.sh                 # every version below, then this file",
        "./scripts/compat.sh corners         # 2.8.2 and 3.9.2 (ZooKeeper), 3.7.2 and 4.4.0 (KRaft)",
        "KOPS_COMPAT=zookeeper:3.6.2 ./scripts/test.sh tests/compat   # one version",
        "```",
        "",
        "`ok` passed; `n/a` does not apply to the mode (ZooKeeper-only options: refused on KRaft, "
        "used on ZooKeeper); **FAILED** did not pass (see below).",
        "",
    ]
    steps = list(STEPS)
    out.append("| mode | Kafka | " + " | ".join(STEPS[s] for s in steps) + " | time (s) |")
    out.append("|---|---|" + "---|" * len(steps) + "---:|")
    pairs = sorted(rows, key=_sort_key)
    for pair in pairs:
        got = rows[pair]
        cells = [MARK.get(got[s]["outcome"], got[s]["outcome"]) if s in got else "-" for s in steps]
        total = sum(r["seconds"] for r in got.values())
        out.append(f"| {pair[0]} | {pair[1]} | " + " | ".join(cells) + f" | {total:.0f} |")
    missing = [p for p in matrix.MATRIX if p not in rows]
    if missing:
        out += ["", "Not run this time: " + ", ".join(f"{m} {v}" for m, v in missing) + "."]

    out += ["", "## What each version lacks, and what kops does about it", ""]
    out.append("kops reads each broker's ApiVersions answer (`kops cluster describe` shows the release per "
               "broker, `kafka_version` in the snapshot) and gates what a Kafka line lacks "
               "(`kops/cluster/versions.py`): refused with exit 2 naming the version it needs, or, where "
               "kops can go on without it, done without it and said so.")
    out += ["", "| feature | needs | on an older Kafka |", "|---|---|---|"]
    effect = {
        versions.DESCRIBE_CLUSTER: "refused: kops supports Kafka 2.8 and later (exit 2, names the version)",
        versions.REASSIGNMENTS: "(every supported Kafka has it)",
        versions.ELECTIONS: "(every supported Kafka has it)",
        versions.DISK_CAPACITY: "the disk-fit check of an execution skips those brokers, with a warning naming "
                                "Kafka 3.3; the planner's disk goals are reported as not measured unless "
                                "`--capacity-file` gives the capacities",
        versions.METADATA_QUORUM: "(KRaft: every KRaft version kops supports has it)",
        versions.UPDATE_FEATURES: "`cluster features upgrade` and the `upgrade` playbook refuse (exit 2, names the "
                                  "version); ZooKeeper mode has no metadata.version at all",
        versions.DYNAMIC_QUORUM: "the `replace-controller` playbook refuses before any change (exit 2), naming "
                                 "Kafka 3.9 and kraft.version feature level 1; a static quorum "
                                 "(controller.quorum.voters, kraft.version 0) is refused the same way",
        versions.FENCED_BROKERS: "fenced KRaft brokers are simply not listed (as down brokers are)",
    }
    for f in versions.FEATURES:
        out.append(f"| {f.what} | {f.needs()} | {effect[f]} |")

    notes = []
    for pair in pairs:
        for s in steps:
            r = rows[pair].get(s)
            if r is None:
                continue
            for n in r.get("notes", []):
                notes.append(f"- {pair[0]} {pair[1]}, {STEPS[s]}: {n}")
            if r["outcome"] == "failed":
                notes.append(f"- {pair[0]} {pair[1]}, {STEPS[s]}: **failed**: {r.get('error', '')}")
    if notes:
        out += ["", "## Notes from the run", "", *notes]
    out += ["", TAIL]
    return "\n".join(out) + "\n"


TAIL = """## The sandbox on each version

`kops sandbox up --kafka-version V` runs any Kafka from 2.8: ZooKeeper mode up to 3.9 (4.0 removed
it) and KRaft mode from 3.7 (`--mode kraft`), on local JVMs or in containers (`--engine docker`).
Every one of them runs on Java 17, as the matrix shows (Kafka 2.8 names Java 8, 11 and 15 as
supported, 3.0 added 17, the 4.x brokers need 17), so no line needs another Java. Per version the sandbox takes Kafka's own logging (log4j 1.x through reload4j
up to 3.9, with the log4j 1.2.17 / slf4j-log4j12 jars of 2.8 - 3.1 left out so that every line
logs through one binding; log4j2 from 4.0) and Kafka's command classes (moved from `kafka.admin`
to `org.apache.kafka.tools` in 3.7: `kops.sandbox.dist.tool_class`).

## Library faults worked around

kops works around a library's fault on a Kafka version in one place (`kops/cluster/kp_client.py`),
with a unit test that fails once the library is fixed (`tests/unit/test_kp_client.py`).

Both are reported with the texts below (to be filed at github.com/dpkp/kafka-python/issues: this
machine reaches no GitHub; the texts are what kops' maintainers file).

**kafka-python 3.0.12: `describe_cluster()` fails on Kafka 2.8 - 3.6 with `KeyError: 'endpoint_type'`.**
The report for dpkp/kafka-python:

> `KafkaAdminClient.describe_cluster()` raises `KeyError: 'endpoint_type'` against any broker before
> Kafka 3.7. Those brokers support DescribeCluster v0 only (KIP-700); `endpoint_type` came with v1
> (KIP-919, Kafka 3.7). `ClusterAdminMixin._describe_cluster` (kafka/admin/_cluster.py) pops it
> unconditionally: `metadata.pop('endpoint_type')`, where the other optional field is popped with a
> default (`metadata.pop('throttle_time_ms', None)`).
>
> Reproduce: start a Kafka 3.6.2 broker (or 2.8.2 - 3.6.x), then
> `KafkaAdminClient(bootstrap_servers="127.0.0.1:9092").describe_cluster()` →
> `KeyError: 'endpoint_type'`. Against 3.7+ it returns the brokers. Without a broker: decode a v0
> `DescribeClusterResponse` and pass it through `_describe_cluster` with a stub manager.
>
> Fix: `metadata.pop('endpoint_type', None)`. Versions: kafka-python 3.0.12 (newest), Python 3.11.

**kafka-python 3.0.12: `describe_metadata_quorum()` fails on KRaft 3.3 - 3.8 with `KeyError: 'error_message'`.**
The report for dpkp/kafka-python:

> `KafkaAdminClient.describe_metadata_quorum()` raises `KeyError: 'error_message'` against a KRaft
> cluster before Kafka 3.9. Those brokers answer DescribeQuorum v0 or v1; the partition-level
> `ErrorMessage` came with v2 (KIP-853, Kafka 3.9). `ClusterAdminMixin._async_describe_quorum`
> (kafka/admin/_cluster.py) does `partition.pop('error_message')` without a default (the top-level
> one is popped with `None`).
>
> Reproduce: a Kafka 3.7.2 KRaft cluster, then
> `KafkaAdminClient(bootstrap_servers="127.0.0.1:9092").describe_metadata_quorum()` →
> `KeyError: 'error_message'`; against 3.9+ it returns the quorum. Without a broker: decode a v1
> `DescribeQuorumResponse` and pass it through `_async_describe_quorum` with a stub manager.
>
> Fix: `partition.pop('error_message', None)`. Versions: kafka-python 3.0.12 (newest), Python 3.11.
"""


def check(doc_path: Path) -> list[str]:
    """What makes the committed table wrong: a version of the matrix missing, a step failed, or a
    table written before kops' code last changed."""
    text = doc_path.read_text() if doc_path.exists() else ""
    problems = []
    if not text:
        return [f"{doc_path} does not exist: run ./scripts/compat.sh"]
    for mode, version in matrix.MATRIX:
        if f"| {mode} | {version} |" not in text:
            problems.append(f"{mode} {version} is not in {doc_path}")
    if any(f"| {MARK['failed']} |" in line for line in text.splitlines() if line.startswith("| ")):  # a table cell, not the legend
        problems.append(f"{doc_path} has failed steps")
    code = code_id()
    if code.endswith(provenance.DIRTY) or f"(code id `{code}`)" not in text:
        problems.append(f"{doc_path} was not written from kops' code as it is here (code id {code}, commit "
                        f"{code_commit()}): run ./scripts/compat.sh")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", default=str(ROOT / "build" / "compat" / "results.jsonl"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "compatibility.md"))
    ap.add_argument("--check", action="store_true", help="check the written doc instead of writing it")
    a = ap.parse_args(argv)
    if a.check:
        problems = check(Path(a.out))
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    rows = load(Path(a.results))
    if not rows:
        print(f"{a.results}: no results", file=sys.stderr)
        return 1
    try:
        source = str(Path(a.results).resolve().relative_to(ROOT))
    except ValueError:
        source = a.results
    Path(a.out).write_text(render(rows, source))
    print(f"wrote {a.out} ({len(rows)} versions)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
