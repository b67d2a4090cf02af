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
# (wide lines: the short test summary's FAILED lines carry the assertion's message)
pytest=(env COLUMNS="${COLUMNS:-240}" .venv/bin/python -m pytest -p no:cacheprovider)
if [ $# -gt 0 ] || [ -n "${KOPS_TEST_SERIAL:-}" ]; then
  exec "${pytest[@]}" "$@"
fi
# The whole suite, in three processes side by side (most of it is waiting on Kafka): the fault
# lab's containerised clusters (build/test-faults.log, build/junit-faults.xml); the tests across
# Kafka versions -- the ZooKeeper -> KRaft -> Kafka 4 runbooks (plain and secured) and the version
# matrix's corners -- then the unit tests (build/test-versions.log, build/junit-versions.xml), both
# in the background and printed when they end; the cluster tests in front (build/junit.xml, build/test-cluster.log). (The
# unit tests follow the shortest lane: on a slow 2-core host, load 30-50 with the three lanes, the
# lab took 73 min, the version lane 62, the cluster tests 72 and the unit tests after them 6 more.) The rows of
# docs/reliability.md (the fault lab's and the runbooks') go to build/fault-results.json (started
# afresh here, appended to under a lock). The three share the Kafka download cache (locked per
# version) and nothing else: each draws its clusters' ports from its own third of the range kops
# draws ports from (kops.sandbox.procs.port_range: $KOPS_PORT_RANGE if set, else the 12,288 ports
# below the kernel's ephemeral range), so none takes a port another chose and has not bound yet.
# KOPS_TEST_SERIAL=1: one process, one part after the other.
range=$(.venv/bin/python -c 'from kops.sandbox.procs import port_range; print(*port_range())')
read -r lo hi <<< "$range"
third=$(( (hi - lo) / 3 ))
p1=$(( lo + third )); p2=$(( lo + 2 * third ))
mkdir -p build
results=${KOPS_FAULT_RESULTS:-build/fault-results.json}
[ -n "${KOPS_FAULT_RESULTS_APPEND:-}" ] || rm -f "$results"
export KOPS_FAULT_RESULTS_APPEND=1
faults=(tests/faults)
versions=(tests/cluster/test_zk_to_kraft_playbook.py tests/cluster/test_zk_to_kraft_secured.py tests/compat tests/unit)
KOPS_PORT_RANGE="$lo-$p1" "${pytest[@]}" "${faults[@]}" --junitxml=build/junit-faults.xml > build/test-faults.log 2>&1 &
faults_pid=$!
KOPS_PORT_RANGE="$p1-$p2" "${pytest[@]}" "${versions[@]}" --junitxml=build/junit-versions.xml > build/test-versions.log 2>&1 &
versions_pid=$!
ignore=("${faults[@]/#/--ignore=}" "${versions[@]/#/--ignore=}")
KOPS_PORT_RANGE="$p2-$hi" "${pytest[@]}" "${ignore[@]}" > >(tee build/test-cluster.log) 2>&1 &
fg=$!
# (stopped, all three stop: their watchdogs clean up)
trap 'kill "$faults_pid" "$versions_pid" "$fg" 2>/dev/null || true' INT TERM
rc=0
wait "$fg" || rc=$?
faults_rc=0
wait "$faults_pid" || faults_rc=$?
versions_rc=0
wait "$versions_pid" || versions_rc=$?
echo "==================== the fault lab (build/test-faults.log) ===================="
cat build/test-faults.log
echo "==================== the runbooks, the version matrix and the unit tests (build/test-versions.log) ===================="
cat build/test-versions.log
# last, where a reader of the end of the output sees them: each part's short test summary (its
# FAILED lines name the test and the assertion's message)
echo "==================== the short test summary of each part ===================="
for log in build/test-cluster.log build/test-faults.log build/test-versions.log; do
  echo "-- $log"
  sed -n '/short test summary info/,$p' "$log" | cut -c1-1000
done
echo "cluster tests: exit $rc; the fault lab: exit $faults_rc; the runbooks, the version matrix and the unit tests: exit $versions_rc"
[ "$rc" = 0 ] && [ "$faults_rc" = 0 ] && [ "$versions_rc" = 0 ]
