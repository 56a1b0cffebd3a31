#!/usr/bin/env bash
# Holds two habits: one exported field a line in `go doc -all`, and tests
# (outside examples/) that never wait on the real clock: no time.Sleep,
# time.After (but as a select case that fails the test, a bound on a hang),
# time.Tick, time.NewTicker, time.NewTimer, nor Eventually in a loop, outside
# a testing/synctest bubble. Tests wait on the event, or fake time with
# testing/synctest or track.Clock; tools/realtimewaits says what it allows
# and how an exception is marked (//realtime:ok reason).
#
# A doc is as long as what it has to say: no line counts (bounds on data and
# costs live in the code and the benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
for pkg in $(go list ./... | grep -v '/internal/'); do
  rel=${pkg#github.com/tensorlife/tensorlife}
  rel=${rel#/}
  case "$rel" in examples*|docs) continue ;; esac
  doc=$(go doc -all "./$rel")
  # A field line inside a struct that names several fields: "\tA, B int".
  packed=$(printf '%s\n' "$doc" | awk '/^type .* struct \{$/{s=1;next} s&&/^\}/{s=0} s&&/^\t[A-Z][A-Za-z0-9_]*, *[A-Z]/' || true)
  if [ -n "$packed" ]; then
    echo "check-api: ./$rel has struct lines naming several fields:" >&2
    echo "$packed" >&2
    fail=1
  fi
done

# Every top-level folder but examples/ (whose tests drive whole programs)
# and tools/ (a module of its own).
dirs=()
for d in */; do
  case "$d" in examples/|tools/) continue ;; esac
  dirs+=("$PWD/${d%/}")
done
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go -C tools build -o "$bin/realtimewaits" ./realtimewaits
rc=0
waits=$("$bin/realtimewaits" "${dirs[@]}") || rc=$?
if [ "$rc" -gt 1 ]; then
  exit "$rc" # it could not read the tests; it said why
fi
waits=$(printf '%s\n' "$waits" | sed "s|^$PWD/||")
if [ -n "$waits" ]; then
  echo "check-api: tests wait on the real clock:" >&2
  echo "$waits" >&2
  fail=1
fi
exit "$fail"
