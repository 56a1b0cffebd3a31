#!/usr/bin/env bash
# lint.sh: staticcheck on every package, tests included, in three builds
# merged into one report (staticcheck -matrix): plain, -tags cuda and
# -tags race (which also turns the invariants on). staticcheck is pinned in
# tools/go.mod, a module of its own, so it stays out of users' module
# graphs; `go tool -modfile=tools/go.mod` builds it from there. The
# programs of tools/ (scripts/check-api.sh's realtimewaits) are linted too.
#
# The cuda build needs the CUDA headers: run after eval "$(scripts/cuda-env.sh)".
#
# An exception is a `//lint:ignore CHECK reason` beside the code. A directive
# in a file that every build compiles is stale only when it matches in none
# of them: staticcheck's merge reports one that matches in some builds (say
# only without -tags cuda) as unmatched in the others, so those lines are
# dropped here. A file with a //go:build line keeps the report.
set -euo pipefail
cd "$(dirname "$0")/.."

builds='plain:
cuda: -tags=cuda
race: -tags=race'
all_builds=$(printf '%s\n' "$builds" | cut -d: -f1 | sort | paste -sd, -)

# tools/ is a module of its own: its programs are vetted, tested and linted there.
(cd tools && go vet ./... && go test ./... && go tool staticcheck ./...)

rc=0
out=$(printf '%s\n' "$builds" | go tool -modfile=tools/go.mod staticcheck -matrix ./... 2>&1) || rc=$?
if [ "$rc" -gt 1 ]; then # 1: findings; anything else: staticcheck itself failed
  printf '%s\n' "$out" >&2
  exit "$rc"
fi

findings=()
dropped=0 # whether the last finding was dropped: its related lines (a tab first) go with it
while IFS= read -r line; do
  [ -n "$line" ] || continue
  if [[ $line == $'\t'* ]]; then
    [ "$dropped" = 1 ] || findings+=("$line")
    continue
  fi
  dropped=1
  if [[ $line =~ ^([^:]+):[0-9]+:[0-9]+:\ this\ linter\ directive\ didn\'t\ match\ anything.*\ \[([a-z0-9,]+)\]\ \(staticcheck\)$ ]]; then
    file=${BASH_REMATCH[1]} in=${BASH_REMATCH[2]}
    if [ "$in" != "$all_builds" ] && ! grep -q '^//go:build' "$file"; then
      continue # it matches in the other builds
    fi
  fi
  dropped=0
  findings+=("$line")
done <<<"$out"

if [ "${#findings[@]}" -gt 0 ]; then
  echo "lint: staticcheck findings (fix them, or mark an exception with //lint:ignore CHECK reason):" >&2
  printf '%s\n' "${findings[@]}" >&2
  exit 1
fi
