#!/usr/bin/env bash
# readme-shell.sh: run the README's shell blocks as a newcomer would: each
# block that needs nothing but the repository, as written, in a new shell
# (no variables from an earlier block, no profile or rc file) in the root of
# a fresh copy of the checkout (its tracked and unignored files: what a
# clone holds). A block that needs more says so in its first line,
#
#   # needs: a running service with the profile mounted
#
# and is listed, not run. A block meant to fail says which status it ends
# with in its first line, and must end with it:
#
#   # exits with status 1: the leak runs the budget out
#
# The copy shares the checkout's download cache (.cache: promtool, CUDA's
# headers), which a first run fills as a clone's would.
#
# Usage: scripts/readme-shell.sh [check|list]
#   check  (default) runs the blocks; fails if one ends other than it says: what CI runs (.ci/run)
#   list   prints each block's line and what it needs
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

mode=${1:-check}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The blocks, one file each: block-LINE.sh, LINE the README line of the fence.
awk -v dir="$work" '
	/^```(sh|bash)$/ { inb = 1; file = sprintf("%s/block-%04d.sh", dir, NR); printf "" > file; next }
	/^```$/ && inb { inb = 0; close(file); next }
	inb { print >> file }
' README.md
blocks=("$work"/block-*.sh)
[[ -e ${blocks[0]} ]] || { echo "readme-shell: README.md has no shell blocks" >&2; exit 1; }

needs() { # needs FILE: what the block says it needs, or nothing
	sed -n '1s/^# needs: *//p' "$1"
}
status_of() { # status_of FILE: the exit status the block says it ends with
	local s
	s=$(sed -n '1s/^# exits with status \([0-9][0-9]*\).*/\1/p' "$1")
	echo "${s:-0}"
}
line_of() { # line_of FILE: the README line of its fence
	local b=${1##*/block-}
	echo $((10#${b%.sh}))
}

if [[ $mode == list ]]; then
	for b in "${blocks[@]}"; do
		n=$(needs "$b")
		printf 'README.md:%s  %s\n' "$(line_of "$b")" "${n:-the repository (CI runs it), exit status $(status_of "$b")}"
	done
	exit 0
fi
[[ $mode == check ]] || { echo "usage: readme-shell.sh [check|list]" >&2; exit 2; }

clone=$work/clone
mkdir "$clone"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	[[ -e $f ]] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$clone"
mkdir -p "$root/.cache"
ln -s "$root/.cache" "$clone/.cache"

# A new shell's environment: where the tools are, the user's home, and the
# Go settings a user has (GOCACHE, GOFLAGS, ...); nothing else.
envs=("PATH=$PATH" "HOME=${HOME:-/root}" "TMPDIR=${TMPDIR:-/tmp}" "LANG=${LANG:-C.UTF-8}")
while IFS='=' read -r name _; do
	[[ $name == GO* || $name == CGO_* ]] && envs+=("$name=${!name}")
done < <(env)

failed=0
for b in "${blocks[@]}"; do
	line=$(line_of "$b")
	if [[ -n $(needs "$b") ]]; then
		echo "readme-shell: README.md:$line needs $(needs "$b"): not run"
		continue
	fi
	want=$(status_of "$b")
	echo "readme-shell: README.md:$line"
	sed 's/^/    /' "$b"
	set +e
	(cd "$clone" && env -i "${envs[@]}" bash --noprofile --norc -e "$b") >"$work/out" 2>&1
	got=$?
	set -e
	# A block meant to succeed shows its whole output, as the newcomer sees
	# it: the "Two commands" block is where CI runs the README's test
	# command, so go test's lines show here. A block meant to fail (a leak
	# test that fails on purpose) shows its output only when it did not.
	if [[ $want == 0 || $got != "$want" ]]; then
		cat "$work/out"
	fi
	if [[ $got != "$want" ]]; then
		echo "readme-shell: README.md:$line ended with status $got, not $want" >&2
		failed=1
	elif [[ $want != 0 ]]; then
		echo "readme-shell: README.md:$line ended with status $want, as it says"
	fi
done
exit $failed
