#!/usr/bin/env bash
# gpu-check.sh: the one-shot check of tensorlife on a real GPU, for the few
# minutes a GPU machine is lent. That machine has the NVIDIA driver (and
# maybe PyTorch) but no Go, so the check is built here and run there:
#
#   scripts/gpu-check.sh build [DIR]   here: cross-build everything it runs into
#                                      DIR (default .cache/gpu-check), under 64 MiB
#   DIR/gpu-check.sh run [RESULTS]     there: run it all, write one results file
#                                      (default DIR/results.md), in under 5 minutes
#
# The run step, in order:
#   1. the machine: GPU, driver, the libcuda.so.1 the binaries load;
#   2. the tests built with -tags cuda: tensor/cuda (the device, context
#      handling across OS threads, driver errors), tensor/tensortest (the
#      conformance suite on every GPU), tensor/devflag, and pool's CUDA
#      tests (the pool on the device, concurrent goroutines);
#   3. benchmarks: the pool against cuMemAlloc+cuMemFree per size
#      (BenchmarkCUDAPoolVsDevice) and what tracking adds to an allocation on
#      the device (BenchmarkCUDATrackedOverhead), 3 runs each, medians;
#   4. both examples end to end on cuda:0 (examples-e2e.sh);
#   5. where `python3 -c 'import torch'` works, PyTorch's figures in the same
#      run (torch_figures.py): its caching allocator per size against the
#      driver, and the per-event cost of _record_memory_history.
# The results file opens with tables that set tensorlife's ratios beside
# PyTorch's, each against its own same-run driver baseline, then the raw
# outputs. The exit status is 1 if a test or an example failed.
#
# Dry run where there is no GPU, on the fake driver (scripts/fakecuda.sh);
# GPU_CHECK_QUICK=1 shortens the benchmarks:
#   scripts/gpu-check.sh build /tmp/gc
#   LD_LIBRARY_PATH=$(scripts/fakecuda.sh) GPU_CHECK_QUICK=1 /tmp/gc/gpu-check.sh run
set -uo pipefail

log() { printf 'gpu-check: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The packages whose CUDA tests the check builds and runs, each to
# test/<package>/<name>.test.
test_pkgs=(tensor/cuda tensor/tensortest tensor/devflag pool)

# ---- build (here, with Go) ------------------------------------------------

build() {
	set -e
	local root_dir out
	root_dir=$(cd "$here/.." && pwd)
	out=${1:-$root_dir/.cache/gpu-check}
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	cd "$root_dir"
	eval "$(bash scripts/cuda-env.sh)"
	rm -rf "$out/bin" "$out/test"
	mkdir -p "$out/bin" "$out/test"
	# Stripped: the check reads no symbols from them, and 64 MiB must hold
	# all. No -trimpath, so that the packages come from the build cache.
	local ldflags='-ldflags=-s -w'
	log "building the examples"
	go build -tags cuda "$ldflags" -o "$out/bin/" ./examples/agentleak ./examples/inferenceserver
	log "building the tests of ${test_pkgs[*]}"
	CUDA_TESTBIN_GOFLAGS=$ldflags bash scripts/cuda-testbin.sh "$out/test" "${test_pkgs[@]}" >/dev/null
	local pkg
	for pkg in "${test_pkgs[@]}"; do
		[[ -x $out/test/$pkg/$(basename "$pkg").test ]] || die "no test binary for $pkg"
	done
	cp "$here/gpu-check.sh" "$here/examples-e2e.sh" "$here/gpu-check/torch_figures.py" "$out/"
	local size
	size=$(du -sb "$out" | cut -f1)
	((size < 64 << 20)) || die "$out holds $((size >> 20)) MiB, over the 64 MiB a GPU machine takes"
	log "$out holds $((size >> 20)) MiB"
	cat >&2 <<EOF
Copy $out to the GPU machine and run there (no Go needed):
  $(basename "$out")/gpu-check.sh run results.md
EOF
}

# ---- run (there, without Go) ----------------------------------------------

# step SECONDS LOG CMD...: runs CMD with a time limit (where timeout(1)
# exists), its output in LOG; returns its status.
step() {
	local limit=$1 logf=$2
	shift 2
	if command -v timeout >/dev/null; then
		timeout --kill-after=10 "$limit" "$@" >"$logf" 2>&1
	else
		"$@" >"$logf" 2>&1
	fi
}

# medians reads `go test -bench` output and prints "NAME UNIT MEDIAN" for
# every metric of every benchmark (NAME without its -GOMAXPROCS suffix).
medians() {
	awk '
		/^Benchmark/ {
			name = $1; sub(/-[0-9]+$/, "", name)
			for (i = 3; i + 1 <= NF; i += 2) {
				key = name " " $(i + 1)
				n[key]++; v[key, n[key]] = $i
			}
		}
		END {
			for (key in n) {
				m = n[key]
				for (i = 1; i <= m; i++) s[i] = v[key, i] + 0
				for (i = 2; i <= m; i++) for (j = i; j > 1 && s[j - 1] > s[j]; j--) { t = s[j]; s[j] = s[j - 1]; s[j - 1] = t }
				print key, s[int((m + 1) / 2)]
			}
		}' "$@"
}

# fig KEY: the value of KEY in $figs ("-" when absent).
fig() {
	local v
	v=$(awk -v k="$1" '$1 " " $2 == k || $1 == k { print $NF; exit }' "$figs")
	printf '%s' "${v:--}"
}

# num VALUE: VALUE with at most 3 significant decimals; ratio A B: A/B.
num() { awk -v x="$1" 'BEGIN { if (x == "-" || x == "") print "-"; else if (x >= 100) printf "%.0f", x; else printf "%.3g", x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else if (a / b >= 100) printf "%.0f", a / b; else printf "%.3g", a / b }'; }

run() {
	local results=${1:-$here/results.md}
	local quick=${GPU_CHECK_QUICK:-0}
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	figs=$work/figures
	: >"$figs"
	local start=$SECONDS failed=0

	# 1. The machine.
	{
		printf 'date: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
		printf 'kernel: %s\n' "$(uname -sr)"
		if command -v nvidia-smi >/dev/null; then
			nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_mode --format=csv,noheader 2>&1 |
				sed 's/^/gpu: /'
		else
			printf 'gpu: nvidia-smi not found\n'
		fi
		printf 'libcuda: %s\n' "$(ldd "$here/bin/agentleak" 2>&1 | awk '/libcuda/ { print $3 }')"
		printf 'cpus: %s\n' "$(nproc 2>/dev/null || echo '?')"
	} >"$work/machine"
	log "machine: $(grep '^gpu:' "$work/machine" | head -n1)"

	# 2. Tests.
	local pkg bin status tests_summary=""
	for pkg in "${test_pkgs[@]}"; do
		bin=$(basename "$pkg").test
		local args=(-test.v -test.count=1 -test.timeout=100s)
		[[ $pkg == pool ]] && args+=(-test.run=CUDA)
		log "testing $pkg"
		(cd "$here/test/$pkg" && step 110 "$work/test-${pkg//\//-}.log" "./$bin" "${args[@]}")
		status=$?
		local pass skip fail
		pass=$(grep -c '^--- PASS' "$work/test-${pkg//\//-}.log")
		skip=$(grep -c '^--- SKIP' "$work/test-${pkg//\//-}.log")
		fail=$(grep -c '^--- FAIL' "$work/test-${pkg//\//-}.log")
		if ((status != 0)); then failed=1; fi
		tests_summary+="| $pkg | $( ((status == 0)) && echo ok || echo "FAIL ($status)") | $pass | $skip | $fail |"$'\n'
	done

	# 3. Benchmarks.
	local benchtime=200ms count=3
	if [[ $quick == 1 ]]; then benchtime=20x count=1; fi
	log "benchmarking (-test.benchtime=$benchtime, $count runs)"
	(cd "$here/test/pool" && step 150 "$work/bench.log" ./pool.test -test.run='^$' \
		-test.bench='^(BenchmarkCUDAPoolVsDevice|BenchmarkCUDATrackedOverhead)$' \
		-test.benchtime="$benchtime" -test.count="$count" -test.benchmem)
	status=$?
	if ((status != 0)); then log "the benchmarks failed ($status)"; failed=1; fi
	(cd "$here/test/tensor/cuda" && step 60 "$work/bench-device.log" ./cuda.test -test.run='^$' \
		-test.bench='^BenchmarkDeviceAllocFreeParallel$' -test.benchtime="$benchtime" -test.benchmem) || failed=1
	medians "$work/bench.log" "$work/bench-device.log" >>"$figs"

	# 4. The examples end to end.
	log "running the examples on cuda:0"
	step 90 "$work/examples.log" bash "$here/examples-e2e.sh" "$here/bin" cuda:0
	local examples_status=$?
	if ((examples_status != 0)); then failed=1; fi

	# 5. PyTorch.
	local torch_note
	if python3 -c 'import torch' >/dev/null 2>&1; then
		log "measuring PyTorch"
		local budget=0.2 rounds=15
		if [[ $quick == 1 ]]; then budget=0.02 rounds=3; fi
		step 120 "$work/torch.log" python3 "$here/torch_figures.py" --budget "$budget" --rounds "$rounds"
		status=$?
		awk '$1 == "figure" { print $2, $3 }' "$work/torch.log" >>"$figs"
		if grep -q '^skip ' "$work/torch.log"; then
			torch_note="skipped: $(sed -n 's/^skip //p' "$work/torch.log")"
		elif ((status != 0)); then
			torch_note="failed (status $status); see its output below"
		else
			torch_note="measured in this run: $(sed -n 's/^# //p' "$work/torch.log" | head -n1)"
		fi
	else
		torch_note="skipped: python3 -c 'import torch' fails here"
		printf '%s\n' "$torch_note" >"$work/torch.log"
	fi
	log "PyTorch: $torch_note"

	# The results file.
	local size name pool dev tcache tdrv tempty
	{
		printf '# tensorlife GPU check\n\n'
		printf '```text\n'
		cat "$work/machine"
		printf 'took: %ds%s\n' "$((SECONDS - start))" "$([[ $quick == 1 ]] && echo ' (GPU_CHECK_QUICK=1: short benchmarks)')"
		printf '```\n\n'
		printf '## Tests (built with -tags cuda)\n\n'
		printf '| package | result | passed | skipped | failed |\n| --- | --- | --- | --- | --- |\n%s\n' "$tests_summary"
		printf 'Examples end to end on cuda:0: %s\n\n' "$( ((examples_status == 0)) && echo ok || echo FAILED)"
		printf 'PyTorch: %s\n\n' "$torch_note"

		printf '## Allocation: cached against the driver, per size\n\n'
		printf 'ns per allocation and free (medians of %s runs); each ratio is against the driver baseline of\n' "$count"
		printf 'the same run: tensorlife'"'"'s pool hit (pool.Allocate+Release) against cuMemAlloc+cuMemFree through\n'
		printf 'the Device, PyTorch'"'"'s caching allocator (caching_allocator_alloc+delete) against cuMemAlloc+cuMemFree\n'
		printf 'through ctypes.\n\n'
		printf '| size | pool hit | driver | driver/pool | torch cache hit | torch driver | driver/torch cache | torch.empty+del |\n'
		printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
		for size in 4 256 1024 16384 65536; do
			if ((size < 1024)); then name="${size}KiB"; else name="$((size / 1024))MiB"; fi
			local goname=${name/KiB/_KiB}
			goname=${goname/MiB/_MiB}
			pool=$(fig "BenchmarkCUDAPoolVsDevice/pool/$goname ns/op")
			dev=$(fig "BenchmarkCUDAPoolVsDevice/device/$goname ns/op")
			tcache=$(fig "torch.cache.$name.ns")
			tdrv=$(fig "torch.driver.$name.ns")
			tempty=$(fig "torch.empty.$name.ns")
			printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$(num "$pool")" "$(num "$dev")" \
				"$(ratio "$dev" "$pool")" "$(num "$tcache")" "$(num "$tdrv")" "$(ratio "$tdrv" "$tcache")" "$(num "$tempty")"
		done
		printf '\n## What tracking adds to an allocation on the device\n\n'
		printf 'tensorlife: tensor.New+Free through a warm pool, tracked against untracked, interleaved in rounds\n'
		printf '(BenchmarkCUDATrackedOverhead; ratios are medians of per-round ratios). PyTorch: a warm\n'
		printf 'torch.empty+del with _record_memory_history on against off, interleaved the same way. An\n'
		printf 'allocation and a free are two events.\n\n'
		printf '| what | size | on ns | off ns | ns per event | on/off |\n| --- | --- | --- | --- | --- | --- |\n'
		for name in 4KiB 1MiB 16MiB; do
			local b="BenchmarkCUDATrackedOverhead/$name"
			printf '| tensorlife tracking | %s | %s | %s | %s | %s |\n' "$name" "$(num "$(fig "$b ns/tracked")")" \
				"$(num "$(fig "$b ns/untracked")")" "$(num "$(fig "$b ns/event-tracking")")" "$(num "$(fig "$b tracked/untracked")")"
		done
		printf '| torch _record_memory_history | 4KiB | %s | %s | %s | %s |\n\n' "$(num "$(fig torch.history.on.ns)")" \
			"$(num "$(fig torch.history.off.ns)")" "$(num "$(fig torch.history.event.ns)")" "$(num "$(fig torch.history.on_over_off)")"

		printf '## Raw output\n\n'
		for f in "$work"/test-*.log; do
			pkg=$(basename "$f" .log)
			printf '### %s\n\n```text\n' "${pkg#test-}"
			grep -E '^(--- |ok|PASS|FAIL)' "$f"
			if grep -q '^--- FAIL\|^FAIL\|^panic' "$f"; then
				printf '\n(failing run, last 80 lines)\n'
				tail -n 80 "$f"
			fi
			printf '```\n\n'
		done
		printf '### benchmarks\n\n```text\n'
		cat "$work/bench.log" "$work/bench-device.log"
		printf '```\n\n### examples\n\n```text\n'
		cat "$work/examples.log"
		printf '```\n\n### PyTorch\n\n```text\n'
		cat "$work/torch.log"
		printf '```\n'
	} >"$results"
	log "results in $results ($((SECONDS - start))s)"
	return $failed
}

case ${1:-} in
build)
	shift
	build "$@"
	;;
run)
	shift
	run "$@"
	;;
*)
	die "usage: gpu-check.sh build [DIR] | gpu-check.sh run [RESULTS]"
	;;
esac
