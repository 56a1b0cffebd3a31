#!/usr/bin/env bash
# cuda-testbin.sh: build the CUDA test binaries here, to copy to a GPU
# machine and run there without Go.
#
# Usage: scripts/cuda-testbin.sh [OUT_DIR [PACKAGE...]]
#   OUT_DIR   where to put them (default: .cache/cuda-testbin)
#   PACKAGE   packages to build (default: ./tensor/cuda ./pool); one that
#             does not exist yet, or has no tests, is skipped
#
# Each package's binary goes to OUT_DIR/<package path>/<name>.test, with the
# package's testdata/ beside it, because a test binary reads testdata
# relative to its working directory. OUT_DIR/run.sh runs them all from the
# right directories, passing its arguments to each (-test.v, -test.bench .).
#
# CUDA_TESTBIN_GOFLAGS adds flags to go test -c, one a line, so that a
# flag's value may hold spaces: CUDA_TESTBIN_GOFLAGS='-ldflags=-s -w'.
#
# The binaries need a GPU and its driver to start at all (see the
# documentation of package tensor/cuda): do not run them here.
set -euo pipefail

log() { printf 'cuda-testbin: %s\n' "$*" >&2; }

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root_dir/.cache/cuda-testbin}
shift || true
pkgs=("$@")
((${#pkgs[@]})) || pkgs=(./tensor/cuda ./pool)
goflags=()
while IFS= read -r flag; do
	if [[ -n $flag ]]; then goflags+=("$flag"); fi
done <<<"${CUDA_TESTBIN_GOFLAGS:-}"

mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root_dir"
eval "$(bash scripts/cuda-env.sh)"

built=()
for pkg in "${pkgs[@]}"; do
	rel=${pkg#./}
	rel=${rel%/}
	if [[ ! -d $rel ]]; then
		log "skipping $pkg: no such package yet"
		continue
	fi
	if ! compgen -G "$rel/*_test.go" >/dev/null; then
		log "skipping $pkg: no tests"
		continue
	fi
	name=$(basename "$rel").test
	dir=$out/$rel
	rm -rf "$dir"
	mkdir -p "$dir"
	log "building $pkg -> $dir/$name"
	go test -c -tags cuda ${goflags[@]+"${goflags[@]}"} -o "$dir/$name" "./$rel"
	if [[ -d $rel/testdata ]]; then
		cp -R "$rel/testdata" "$dir/testdata"
	fi
	built+=("$rel/$name")
done

((${#built[@]})) || { log "nothing built"; exit 1; }

# shellcheck disable=SC2016 # $0, $@ and $status are for run.sh to expand
{
	printf '#!/bin/sh\n'
	printf '# Runs each CUDA test binary from its own directory; arguments go to every one.\n'
	printf '# Needs a GPU and its driver (libcuda.so.1). Example: ./run.sh -test.v -test.bench . -test.benchmem\n'
	printf 'cd "$(dirname "$0")" || exit 1\n'
	printf 'status=0\n'
	for b in "${built[@]}"; do
		printf '(cd %q && ./%q "$@") || status=1\n' "$(dirname "$b")" "$(basename "$b")"
	done
	printf 'exit $status\n'
} >"$out/run.sh"
chmod +x "$out/run.sh"

cat <<EOF
Built ${#built[@]} CUDA test binaries in $out:
$(printf '  %s\n' "${built[@]}")

Copy that directory to a machine with an NVIDIA GPU and driver, then run
  ./run.sh -test.v                                      all tests
  ./run.sh -test.run '^\$' -test.bench . -test.benchmem   benchmarks only
or one binary from its directory, e.g.
  cd tensor/cuda && ./cuda.test -test.v
No Go toolchain is needed there. On a machine without a GPU the binaries exit
at start (gorgonia.org/cu's init cannot initialize the driver).
EOF
