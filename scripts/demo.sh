#!/usr/bin/env bash
# The kops demo: sets everything up, starts a real 6-broker / 3-rack Kafka cluster on 127.0.0.1,
# runs kops' main jobs on it and ends with a summary. Usage: ./scripts/demo.sh [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python scripts/demo.py "$@"
