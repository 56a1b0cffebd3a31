#!/usr/bin/env bash
# stress-test.sh: run every watcher test of the repository 20 times in a row
# under -race, with -cpu 1,2,4, on a machine kept busy by two CPU-bound
# processes, then soak the example server: the fixed one under steady load
# with evictions (12 clients, prompt lengths 1..512, 45 s, default options)
# must log no suspect warning and flag none, the -leak one must be named.
# The watcher's tests drive windows with Tick and time with
# testing/synctest, so they must not depend on scheduling: this is the
# check that they do not.
#
# The two burners are stopped however the script exits (trap).
#
# Usage: scripts/stress-test.sh [COUNT]   (default 20)
set -euo pipefail

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
count=${1:-20}
burners=()
tests=
stop() {
	# The tests run in a process group of their own: killing the group
	# stops go test and the test binaries it started.
	if [[ -n $tests ]]; then kill -- -"$tests" 2>/dev/null || true; fi
	for pid in "${burners[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${burners[@]}" $tests; do
		wait "$pid" 2>/dev/null || true
	done
}
trap stop EXIT
trap 'exit 130' INT TERM

for _ in 1 2; do
	bash -c 'while :; do :; done' &
	burners+=("$!")
done

cd "$root_dir"
# The watcher's own tests, and those of the packages that read its verdicts.
# In the background, waited for: a signal then interrupts the wait and the
# trap stops the tests and the burners alike.
set -m # the next job gets a process group of its own
(
	go test -race -count="$count" -cpu 1,2,4 -timeout 90m ./track/watch/ ./oteltrack/ ./report/ ./mask/ &&
		TENSORLIFE_SOAK=${TENSORLIFE_SOAK:-45s} go test -count=1 -run 'TestSoakWithEvictions' -v ./examples/inferenceserver/
) &
tests=$!
set +m
status=0
wait "$tests" || status=$?
tests=
exit "$status"
