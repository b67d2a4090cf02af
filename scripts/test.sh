#!/usr/bin/env bash
# The whole test suite: unit tests (no cluster), integration tests against a real local Kafka
# cluster that the suite starts itself, and the fault lab (tests/faults/) on a containerised
# cluster. Usage: ./scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
# The fault lab runs the cluster in containers on a Docker engine: Debian's docker.io (the suite
# starts a private dockerd when none answers), iptables, and debootstrap to build the image's
# base locally (no image registry needed); docker-compose checks docker/compose.yml.
missing=()
for cmd in dockerd iptables debootstrap docker-compose; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing docker.io iptables debootstrap docker-compose for the fault lab (missing: ${missing[*]})" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      docker.io iptables debootstrap docker-compose >/dev/null
  else
    echo "warning: ${missing[*]} missing and cannot be installed here (needs root and apt-get): tests/faults will fail" >&2
  fi
fi
./scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
