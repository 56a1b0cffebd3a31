#!/usr/bin/env bash
# docs-pictures.sh: draw the pictures in docs/ from the program they show,
# examples/agentleak, leaky and fixed. The tracker reads a clock that moves
# one step per reading (-clock-step), so a run draws the same picture every
# time and a picture that no longer matches the code is caught.
#
# Usage: scripts/docs-pictures.sh [write|check]
#   write  (default) rewrites docs/agentleak-leaky.svg and docs/agentleak-fixed.svg
#   check  draws them into a temporary directory and fails if they differ
#          from docs/'s: what CI runs (.ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-write}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# -trimpath: the pictures name files by module path, the same in every checkout.
go build -trimpath -o "$work/agentleak" ./examples/agentleak

draw() { # draw NAME [FLAGS...]: the picture of one run into $work/NAME.svg
	local name=$1
	shift
	"$work/agentleak" -profile "" -oom-dir "" -clock-step 10us -timeline "$work/$name.svg" "$@" >/dev/null
}
draw agentleak-leaky
draw agentleak-fixed -fixed

case $mode in
write)
	cp "$work/agentleak-leaky.svg" "$work/agentleak-fixed.svg" docs/
	echo "docs-pictures: wrote docs/agentleak-leaky.svg and docs/agentleak-fixed.svg"
	;;
check)
	status=0
	for name in agentleak-leaky agentleak-fixed; do
		if ! cmp -s "$work/$name.svg" "docs/$name.svg"; then
			echo "docs-pictures: docs/$name.svg is not what examples/agentleak draws now; run scripts/docs-pictures.sh" >&2
			status=1
		fi
	done
	exit $status
	;;
*)
	echo "usage: docs-pictures.sh [write|check]" >&2
	exit 2
	;;
esac
