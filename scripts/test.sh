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
pytest=(.venv/bin/python -m pytest -p no:cacheprovider)
if [ $# -gt 0 ] || [ -n "${KOPS_TEST_SERIAL:-}" ]; then
  exec "${pytest[@]}" "$@"
fi
# The whole suite, in two halves side by side (most of both is waiting on Kafka, not CPU): the
# scenarios of docs/reliability.md -- the fault lab's containerised clusters and the ZooKeeper ->
# KRaft runbook -- in the background, their output in build/test-faults.log (printed when they
# end, times in build/junit-faults.xml); the unit, cluster and version-matrix tests in front
# (build/junit.xml). The rows go to build/fault-results.json (started afresh here, appended to
# under a lock: a test of the front half may record one too). The halves share the Kafka download
# cache (locked per version) and nothing else: each draws its clusters' ports from its own half
# of the range kops draws ports from (kops.sandbox.procs.port_range: $KOPS_PORT_RANGE if set, else
# the 12,288 ports below the kernel's ephemeral range), so neither takes a port the other chose
# and has not bound yet. KOPS_TEST_SERIAL=1: one process, one part after the other.
range=$(.venv/bin/python -c 'from kops.sandbox.procs import port_range; print(*port_range())')
read -r lo hi <<< "$range"
mid=$(( (lo + hi) / 2 ))
mkdir -p build
results=${KOPS_FAULT_RESULTS:-build/fault-results.json}
[ -n "${KOPS_FAULT_RESULTS_APPEND:-}" ] || rm -f "$results"
export KOPS_FAULT_RESULTS_APPEND=1
scenarios=(tests/faults tests/cluster/test_zk_to_kraft_playbook.py tests/cluster/test_zk_to_kraft_secured.py)
KOPS_PORT_RANGE="$lo-$mid" "${pytest[@]}" "${scenarios[@]}" --junitxml=build/junit-faults.xml > build/test-faults.log 2>&1 &
bg=$!
KOPS_PORT_RANGE="$mid-$hi" "${pytest[@]}" "${scenarios[@]/#/--ignore=}" &
fg=$!
trap 'kill "$bg" "$fg" 2>/dev/null || true' INT TERM  # (stopped, both stop: their watchdogs clean up)
rc=0
wait "$fg" || rc=$?
bg_rc=0
wait "$bg" || bg_rc=$?
echo "==================== the fault lab and the runbook (build/test-faults.log) ===================="
cat build/test-faults.log
echo "unit, cluster and version-matrix tests: exit $rc; the fault lab and the runbook: exit $bg_rc"
[ "$rc" = 0 ] && [ "$bg_rc" = 0 ]
