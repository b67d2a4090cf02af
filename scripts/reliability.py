#!/usr/bin/env python3
"""Write docs/reliability.md from the fault suite's own results (nothing typed by hand).

    ./scripts/test.sh tests/faults            # runs the scenarios, writes build/fault-results.json
    .venv/bin/python scripts/reliability.py   # -> docs/reliability.md

``--results FILE [FILE ...]`` reads other results files (``$KOPS_FAULT_RESULTS`` of a run); with
several, a later file's row replaces an earlier one's for the same test (a re-run of some scenarios);
``--output FILE`` writes elsewhere; ``--check`` exits 1 when a scenario lost an acknowledged
message, left a throttle, or did not pass.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HEADER = """# Reliability: kops under real faults

Written by `scripts/reliability.py` from the results of the fault suite (`tests/faults/`), which
runs each scenario on the containerised sandbox (`kops sandbox up --engine docker`: ZooKeeper
and 6 Kafka {kafka} brokers in racks a,a,b,b,c,c, each in its own container) while an
idempotent `acks=all` producer and a consumer run on RF 3 topics over the 3 racks with
`min.insync.replicas=2`. Regenerate with:

```bash
./scripts/test.sh tests/faults                # writes build/fault-results.json
.venv/bin/python scripts/reliability.py       # writes this file
```

Columns: messages the cluster **acknowledged** during the scenario and how many of those the
consumer never read back (**lost**); kops' **exit** codes (documented in
docs/reassignment.md and docs/leadership.md); **recover** = seconds from the fault until
every partition had its full ISR again; **kops** = how long the kops command under test ran;
**throttles left** = replication throttle settings found on any topic or broker after the
execution ended (directly, or after the documented `resume`); **outcome** = the test's result
(every assertion of the scenario, not only these columns).

"""


def render(doc: dict, source: str) -> str:
    rows = doc.get("results", [])
    out = [HEADER.format(kafka=doc.get("kafka_version", "3.9"))]
    out.append(f"Run: {rows[0]['started'] if rows else '-'} ({len(rows)} scenarios, from `{source}`).\n")
    out.append("| scenario | mode | acknowledged | lost | kops exit | recover (s) | kops (s) | throttles left | outcome | what happened |")
    out.append("|---|---|---:|---:|---|---:|---:|---:|---|---|")
    def cell(r: dict, key: str) -> str:
        v = r.get(key)
        return "-" if v is None else str(v)

    for r in rows:
        out.append(
            f"| {r.get('scenario', r['test'])} | {cell(r, 'mode')} | {cell(r, 'acknowledged')} | {cell(r, 'lost')} | "
            f"{cell(r, 'kops_exit')} | {cell(r, 'recover_s')} | {cell(r, 'kops_s')} | {cell(r, 'throttles_left')} | "
            f"{cell(r, 'outcome')} | {r.get('detail', '')} |"
        )
    acked = sum(r.get("acknowledged") or 0 for r in rows)
    lost = sum(r.get("lost") or 0 for r in rows)
    passed = sum(r.get("outcome") == "passed" for r in rows)
    out.append("")
    out.append(f"In all: {acked} messages acknowledged, {lost} lost; {passed} of {len(rows)} scenarios passed.")
    out.append("")
    return "\n".join(out)


def problems(doc: dict) -> list[str]:
    bad = []
    for r in doc.get("results", []):
        name = r.get("scenario", r["test"])
        if r.get("outcome") != "passed":
            bad.append(f"{name}: {r.get('outcome')}")
        if r.get("lost"):
            bad.append(f"{name}: {r['lost']} acknowledged messages lost")
        if r.get("throttles_left"):
            bad.append(f"{name}: {r['throttles_left']} throttles left")
    return bad


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", nargs="+", default=[str(ROOT / "build" / "fault-results.json")])
    ap.add_argument("--output", default=str(ROOT / "docs" / "reliability.md"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    rows: dict[str, dict] = {}
    shown = []
    for name in a.results:
        src = Path(name)
        try:
            for r in json.loads(src.read_text())["results"]:
                rows[r["test"]] = r
        except (OSError, ValueError, KeyError) as e:
            print(f"error: cannot read the fault suite's results {src}: {e}", file=sys.stderr)
            return 2
        try:
            shown.append(str(src.resolve().relative_to(ROOT)))
        except ValueError:
            shown.append(str(src))
    doc = {"results": list(rows.values())}
    Path(a.output).write_text(render(doc, "`, `".join(shown)))
    print(f"wrote {a.output} ({len(doc.get('results', []))} scenarios) at {time.strftime('%H:%M:%S')}")
    bad = problems(doc)
    for b in bad:
        print(f"problem: {b}", file=sys.stderr)
    return 1 if (a.check and bad) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
