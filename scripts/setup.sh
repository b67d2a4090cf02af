#!/usr/bin/env bash
# Set-up shared by the demo and the tests: a virtualenv with kops and its extras, and the
# Apache Kafka jars from Maven Central (cached in ~/.cache/kops, reused on re-runs).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# re-install only when pyproject.toml changed since the last install
stamp=.venv/.kops-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test,spark]'
  touch "$stamp"
fi
command -v java >/dev/null || { echo "Java 17 is required (java not found)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "Maven is required to fetch the Kafka jars (mvn not found)" >&2; exit 1; }
.venv/bin/python -c "from kops.sandbox.dist import ensure_kafka; ensure_kafka()"
