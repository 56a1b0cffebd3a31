#!/usr/bin/env bash
# contrib.sh: the adapters under contrib/ are Go modules of their own (so
# that the core never requires the frameworks they serve). In each: go vet,
# staticcheck (pinned in tools/go.mod), the tests, and the tests under -race.
# A module that needs settings of its own (build tags, say) lists them in its
# ci.env, one NAME=value a line, exported for its steps alone. Each step's
# time is printed, so CI's log says what every module costs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

timed() { # timed LABEL CMD...: run CMD, then print LABEL and its seconds
	local label=$1 start=$SECONDS
	shift
	"$@"
	echo "contrib: $label: $((SECONDS - start)) s"
}

found=0
for mod in contrib/*/go.mod; do
	[[ -e $mod ]] || continue
	found=1
	dir=$(dirname "$mod")
	echo "== $dir"
	(
		cd "$dir"
		if [[ -f ci.env ]]; then
			while IFS= read -r line; do
				[[ -z $line || $line == \#* ]] && continue
				export "${line?}"
			done <ci.env
		fi
		timed "$dir go vet" go vet ./...
		timed "$dir staticcheck" go tool -modfile="$root/tools/go.mod" staticcheck ./...
		timed "$dir go test" go test ./...
		timed "$dir go test -race" go test -race ./...
	)
done
[[ $found == 1 ]] || echo "contrib: no modules under contrib/"
