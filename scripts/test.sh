#!/usr/bin/env bash
# The whole test suite: unit tests (no cluster) and integration tests against a real local
# Kafka cluster that the suite starts itself. Usage: ./scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
