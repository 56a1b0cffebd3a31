#!/usr/bin/env bash
# Holds the API to the size a reader can take in: `go doc -all` of package
# track within 450 lines and of every other package within 600, one
# exported field a line, at most 12 internal packages, and no time.Sleep in
# tests outside examples/ (tests fake time with testing/synctest or
# track.Clock).
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
for pkg in $(go list ./... | grep -v '/internal/'); do
  rel=${pkg#github.com/tensorlife/tensorlife}
  rel=${rel#/}
  case "$rel" in examples*|docs) continue ;; esac
  doc=$(go doc -all "./$rel")
  limit=600
  [ "$rel" = track ] && limit=450
  lines=$(printf '%s\n' "$doc" | wc -l)
  if [ "$lines" -gt "$limit" ]; then
    echo "check-api: go doc -all ./$rel is $lines lines, more than $limit" >&2
    fail=1
  fi
  # A field line inside a struct that names several fields: "\tA, B int".
  packed=$(printf '%s\n' "$doc" | awk '/^type .* struct \{$/{s=1;next} s&&/^\}/{s=0} s&&/^\t[A-Z][A-Za-z0-9_]*, *[A-Z]/' || true)
  if [ -n "$packed" ]; then
    echo "check-api: ./$rel has struct lines naming several fields:" >&2
    echo "$packed" >&2
    fail=1
  fi
done

internal=$(find internal -mindepth 1 -maxdepth 1 -type d | wc -l)
if [ "$internal" -gt 12 ]; then
  echo "check-api: $internal internal packages, more than 12" >&2
  fail=1
fi

sleeps=$(grep -rln --include='*_test.go' 'time\.Sleep(' . | grep -v '^\./examples/' || true)
if [ -n "$sleeps" ]; then
  echo "check-api: tests outside examples/ call time.Sleep (use testing/synctest or track.Clock):" >&2
  echo "$sleeps" >&2
  fail=1
fi
exit "$fail"
