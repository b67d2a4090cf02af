#!/usr/bin/env python3
"""Write docs/reliability.md from the fault suite's own results (nothing typed by hand).

    ./scripts/test.sh tests/faults tests/cluster/test_zk_to_kraft_playbook.py tests/cluster/test_zk_to_kraft_secured.py
    .venv/bin/python scripts/reliability.py   # -> docs/reliability.md
    .venv/bin/python scripts/reliability.py --check   # what CI runs after the suite

``--results FILE [FILE ...]`` reads other results files (``$KOPS_FAULT_RESULTS`` of a run); with
several, a later file's row replaces an earlier one's for the same test (a re-run of some scenarios);
``--output FILE`` writes elsewhere. ``--check`` writes nothing and exits 1 when the results or the
table are wrong: a scenario of the suite (every test in SCENARIO_PATHS that records a row) missing,
failed, with an acknowledged message lost or a throttle left, or run on other code than this
commit's (the results' rows, and the table's "Written from" line).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import provenance  # noqa: E402

#: the code a row's figures depend on (the ``record`` fixture, tests/recording.py, stamps each row)
CODE_PATHS = ("kops", "tests/faults", "tests/recording.py", "tests/sampling.py",
              "tests/cluster/test_zk_to_kraft_playbook.py", "tests/cluster/test_zk_to_kraft_secured.py",
              "tests/cluster/migration_helpers.py", "pyproject.toml")
#: where the scenarios are: the fault lab, and the cluster tests that record a row
SCENARIO_PATHS = ("tests/faults", "tests/cluster/test_zk_to_kraft_playbook.py", "tests/cluster/test_zk_to_kraft_secured.py")
#: the modes of the runbook tests' rows: the migration, the migrated cluster's upgrade, and the
#: migration of a secured cluster (SASL/SCRAM, ACLs)
MIGRATION, UPGRADED, MIGRATION_SECURED = "zookeeper -> kraft", "kraft, migrated", "zookeeper -> kraft, secured"
#: the marker of the line that names the commit the table was written from
COMMIT_LINE = "Written from kops commit "


def code_commit() -> str:
    return provenance.code_commit(*CODE_PATHS)


def code_id(rev: str = "HEAD") -> str:
    return provenance.code_id(rev, *CODE_PATHS)


def scenarios() -> list[str]:
    """The suite's scenarios: the node ids of the tests in SCENARIO_PATHS that ask for ``record``
    (collected by pytest, so a new or renamed scenario is known without a list to keep)."""
    import pytest

    class Collect:
        ids: list[str] = []

        def pytest_collection_finish(self, session) -> None:
            self.ids = [i.nodeid for i in session.items if "record" in getattr(i, "fixturenames", ())]

    grab = Collect()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # (--junitxml: not over the suite's build/junit.xml, which pyproject's addopts names)
        rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--junitxml", os.devnull, "--rootdir", str(ROOT),
                          *(str(ROOT / p) for p in SCENARIO_PATHS)], plugins=[grab])
    if rc != 0 or not grab.ids:
        raise SystemExit(f"error: cannot collect the fault suite's scenarios (pytest exit {rc}):\n{out.getvalue()[-2000:]}")
    return grab.ids


HEADER = """# Reliability: kops under real faults

Written by `scripts/reliability.py` from the results of the fault suite (`tests/faults/`), which
runs each scenario on the containerised sandbox (`kops sandbox up --engine docker`, each node in
its own container), and of the ZooKeeper -> KRaft -> Kafka 4 runbook tests
(`tests/cluster/test_zk_to_kraft_playbook.py`, `tests/cluster/test_zk_to_kraft_secured.py`, on sandboxes of local
processes), while an
idempotent `acks=all` producer and a consumer run on RF 3 topics over the 3 racks with
`min.insync.replicas=2`. The clusters: {clusters}. Regenerate with:

```bash
./scripts/test.sh tests/faults tests/cluster/test_zk_to_kraft_playbook.py tests/cluster/test_zk_to_kraft_secured.py
.venv/bin/python scripts/reliability.py       # writes this file
.venv/bin/python scripts/reliability.py --check   # CI: every scenario there, passed, of this code
```

Columns: the metadata **mode** and **Kafka** version of the cluster the scenario ran on;
messages the cluster **acknowledged** during the scenario and how many of those the consumer
never read back (**lost**); kops' **exit** codes (documented in docs/reassignment.md and
docs/leadership.md); **recover** = seconds from the fault until every partition had its full
ISR again ("-" where nothing was broken: a plan refused before any write, a move with no
fault); **kops** = how long the kops command under test ran; **throttles left** = replication
throttle settings counted on every topic (internal ones too) and every registered broker of
the cluster after the scenario (directly, or after the documented `resume`); **outcome** = the
test's result (every assertion of the scenario, not only these columns).

"""
CLUSTERS = {"zookeeper": "ZooKeeper and 6 Kafka {v} brokers in racks a,a,b,b,c,c",
            "kraft": "a KRaft quorum of 3 controllers and 6 Kafka {v} brokers in racks a,a,b,b,c,c",
            MIGRATION: "ZooKeeper and 6 Kafka {v} brokers in racks a,a,b,b,c,c migrated to a KRaft quorum of 3 "
                       "controllers (mode zookeeper -> kraft)",
            UPGRADED: "the migrated cluster (3 KRaft controllers, 6 brokers) upgraded from Kafka {v} (mode kraft, "
                      "migrated)",
            MIGRATION_SECURED: "ZooKeeper (SASL) and 6 Kafka {v} brokers in racks a,a,b,b,c,c with SASL/SCRAM and ACLs "
                               "migrated to a KRaft quorum of 3 controllers (mode zookeeper -> kraft, secured)"}


def run_commit(doc: dict) -> str:
    """The code the rows were measured on (every row of one run carries the same)."""
    return ", ".join(sorted({str(r.get("commit")) for r in doc.get("results", [])})) or "-"


def render(doc: dict, source: str) -> str:
    rows = doc.get("results", [])
    kinds = sorted({(r.get("mode"), r.get("kafka_version")) for r in rows if r.get("mode")},
                   key=lambda k: (k[0] != "zookeeper", str(k)))
    clusters = "; ".join(CLUSTERS.get(m, f"{m} mode, Kafka {{v}}").format(v=v or "?") for m, v in kinds) or "-"
    out = [HEADER.format(clusters=clusters)]
    commit = run_commit(doc)
    fp = code_id(commit) if "," not in commit and not commit.endswith(provenance.DIRTY) else "?"
    out.append(f"{COMMIT_LINE}`{commit}` (code id `{fp}`): run {rows[0]['started'] if rows else '-'} ({len(rows)} scenarios, "
               f"from `{source}`).\n")
    out.append("| scenario | mode | Kafka | acknowledged | lost | kops exit | recover (s) | kops (s) | throttles left "
               "| outcome | what happened |")
    out.append("|---|---|---|---:|---:|---|---:|---:|---:|---|---|")

    def cell(r: dict, key: str) -> str:
        v = r.get(key)
        return "-" if v is None else str(v)

    for r in rows:
        out.append(
            f"| {r.get('scenario', r['test'])} | {cell(r, 'mode')} | {cell(r, 'kafka_version')} | "
            f"{cell(r, 'acknowledged')} | {cell(r, 'lost')} | {cell(r, 'kops_exit')} | {cell(r, 'recover_s')} | "
            f"{cell(r, 'kops_s')} | {cell(r, 'throttles_left')} | {cell(r, 'outcome')} | {r.get('detail', '')} |"
        )
    acked = sum(r.get("acknowledged") or 0 for r in rows)
    lost = sum(r.get("lost") or 0 for r in rows)
    passed = sum(r.get("outcome") == "passed" for r in rows)
    out.append("")
    out.append(f"In all: {acked} messages acknowledged, {lost} lost; {passed} of {len(rows)} scenarios passed.")
    out.append("")
    return "\n".join(out)


def problems(doc: dict, expected: list[str], commit: str) -> list[str]:
    """What is wrong with a run's results: a scenario missing, not passed, with a loss or a
    throttle left, or run on other code than ``commit`` (or on uncommitted changes)."""
    bad = []
    rows = {r["test"]: r for r in doc.get("results", [])}
    for test in expected:
        if test not in rows:
            bad.append(f"{test}: no result (not run, or its row was lost)")
    for test, r in rows.items():
        name = r.get("scenario", test)
        if r.get("outcome") != "passed":
            bad.append(f"{name}: {r.get('outcome')}")
        if r.get("lost"):
            bad.append(f"{name}: {r['lost']} acknowledged messages lost")
        if r.get("throttles_left"):
            bad.append(f"{name}: {r['throttles_left']} throttles left")
        if r.get("commit") != commit or commit.endswith(provenance.DIRTY):
            bad.append(f"{name}: run on kops commit {r.get('commit')}, not on this code ({commit})")
    return bad


def check_table(text: str, expected_scenarios: list[str], code: str, path: str) -> list[str]:
    """What is wrong with the committed table: written from other code (its code id is not
    ``code``, this checkout's: :func:`code_id`, which a shallow clone can tell as well), or a row
    missing or failed."""
    bad = []
    if code.endswith(provenance.DIRTY) or f"(code id `{code}`)" not in text:
        bad.append(f"{path} was not written from a run of this code (code id {code}): run the fault suite "
                   "and scripts/reliability.py")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| scenario ")]
    if len(rows) < len(expected_scenarios):
        bad.append(f"{path} has {len(rows)} rows, the suite {len(expected_scenarios)} scenarios")
    if any("| passed |" not in line for line in rows):
        bad.append(f"{path} has scenarios that did not pass")
    return bad


def _load(names: list[str]) -> tuple[dict, list[str]]:
    rows: dict[str, dict] = {}
    shown = []
    for name in names:
        src = Path(name)
        try:
            for r in json.loads(src.read_text())["results"]:
                rows[r["test"]] = r
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"error: cannot read the fault suite's results {src}: {e}") from None
        try:
            shown.append(str(src.resolve().relative_to(ROOT)))
        except ValueError:
            shown.append(str(src))
    return {"results": list(rows.values())}, shown


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", nargs="+", default=[str(ROOT / "build" / "fault-results.json")])
    ap.add_argument("--output", default=str(ROOT / "docs" / "reliability.md"))
    ap.add_argument("--check", action="store_true", help="check the results and the table; write nothing")
    a = ap.parse_args(argv)
    doc, shown = _load(a.results)
    commit = code_commit()
    if a.check:
        expected = scenarios()
        out = Path(a.output)
        here = code_id() + (provenance.DIRTY if commit.endswith(provenance.DIRTY) else "")
        bad = problems(doc, expected, commit) + check_table(out.read_text() if out.exists() else "", expected,
                                                            here, a.output)
        for b in bad:
            print(f"problem: {b}", file=sys.stderr)
        print(f"{len(doc['results'])} results, {len(expected)} scenarios, code {commit}: "
              f"{'ok' if not bad else f'{len(bad)} problems'}")
        return 1 if bad else 0
    bad = problems(doc, [], commit)
    Path(a.output).write_text(render(doc, "`, `".join(shown)))
    print(f"wrote {a.output} ({len(doc['results'])} scenarios) at {time.strftime('%H:%M:%S')}")
    for b in bad:
        print(f"problem: {b}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
