#!/usr/bin/env bash
# The version matrix: kops' workflow (tests/compat/test_workflow.py) on a real 6-broker, 3-rack
# cluster of every Kafka version and mode that tests/compat/matrix.py lists, each version in a
# pytest run of its own, then docs/compatibility.md written from the results.
#
#   ./scripts/compat.sh                       # the whole matrix (about 5 minutes a version)
#   ./scripts/compat.sh corners               # the oldest and newest of each mode (what CI runs)
#   ./scripts/compat.sh zookeeper:3.6.2,kraft:4.4.0
#
# Results: build/compat/results.jsonl (KOPS_COMPAT_OUT=DIR elsewhere); exit 1 when a version
# failed. The table is rewritten from the versions this run took; with fewer than all of them,
# pass KOPS_COMPAT_DOC=FILE to write it elsewhere (docs/compatibility.md describes the whole
# matrix: scripts/compat_report.py --check fails on a version missing from it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
spec=${1:-all}
out=${KOPS_COMPAT_OUT:-build/compat}
doc=${KOPS_COMPAT_DOC:-docs/compatibility.md}
mkdir -p "$out"
results="$out/results.jsonl"
: > "$results"
pairs=$(.venv/bin/python -c "import sys; from tests.compat.matrix import selected; print(' '.join(f'{m}:{v}' for m, v in selected(sys.argv[1])))" "$spec")
rc=0
for pair in $pairs; do
  echo "== Kafka $pair" >&2
  KOPS_COMPAT=$pair KOPS_COMPAT_RESULTS=$results .venv/bin/python -m pytest -p no:cacheprovider tests/compat -q || rc=1
done
.venv/bin/python scripts/compat_report.py "$results" --out "$doc"
exit $rc
