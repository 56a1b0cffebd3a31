#!/usr/bin/env bash
# stress-test.sh: run every watcher test of the repository 20 times in a row
# under -race, with -cpu 1,2,4, on a machine kept busy by two CPU-bound
# processes. The watcher's tests drive windows with Tick and time with
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
	for pid in "${burners[@]}" $tests; do
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
go test -race -count="$count" -cpu 1,2,4 -timeout 90m ./track/watch/ ./track/oteltrack/ ./report/ &
tests=$!
status=0
wait "$tests" || status=$?
tests=
exit "$status"
