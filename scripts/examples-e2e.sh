#!/usr/bin/env bash
# examples-e2e.sh: run both example programs end to end on one device, as a
# person would: the binaries, their flags, their output, their exit status,
# and the server over HTTP. CI runs it on the fake CUDA driver, with the
# binaries built normally and with -race; scripts/gpu-check.sh runs it on a
# real GPU. It needs bash only (HTTP goes through bash's /dev/tcp).
#
# Usage: scripts/examples-e2e.sh BIN_DIR [DEVICE]
#   BIN_DIR  holds the agentleak and inferenceserver binaries (built with
#            -tags cuda for a cuda:N device)
#   DEVICE   their -device value (default cuda:0)
#
# Each check prints one line, ok or FAIL, and a failing one the program's
# output; the exit status is 1 if any check failed.
set -uo pipefail

bin=${1:?usage: examples-e2e.sh BIN_DIR [DEVICE]}
device=${2:-cuda:0}
bin=$(cd "$bin" && pwd) || exit 1
work=$(mktemp -d)
server_pid=
cleanup() {
	if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null; fi
	rm -rf "$work"
}
trap cleanup EXIT

failed=0
ok() { printf 'ok    %s\n' "$1"; }
fail() {
	printf 'FAIL  %s: %s\n' "$1" "$2"
	if [[ -n ${3:-} && -f $3 ]]; then sed 's/^/      | /' "$3" | tail -n 60; fi
	failed=1
}

# expect NAME FILE PATTERN...: every PATTERN (grep -E) occurs in FILE.
expect() {
	local name=$1 file=$2 p
	shift 2
	for p in "$@"; do
		if ! grep -Eq -- "$p" "$file"; then
			fail "$name" "output lacks /$p/" "$file"
			return 1
		fi
	done
	ok "$name"
}

# ---- agentleak ----------------------------------------------------------

agentleak() { # NAME WANT_STATUS ARGS...
	local name=$1 want=$2 status
	shift 2
	"$bin/agentleak" -device "$device" "$@" >"$work/$name.out" 2>&1
	status=$?
	if [[ $status != "$want" ]]; then
		fail "$name" "exit status $status, want $want" "$work/$name.out"
		return 1
	fi
}

agentleak "agentleak leaky" 0 -profile "$work/tensors.pb.gz" -oom-dir "" &&
	expect "agentleak leaky" "$work/agentleak leaky.out" \
		'^leak suspect after [0-9]+ requests' 'decodeLeaky' "$device" &&
	{ [[ -s $work/tensors.pb.gz ]] || fail "agentleak profile" "no profile written"; }
agentleak "agentleak fixed" 0 -fixed -profile "" -oom-dir "" &&
	expect "agentleak fixed" "$work/agentleak fixed.out" '^no leak suspect' "$device"
# The leak runs the budget out: the run stops early, which is exit status 1,
# and the first out-of-memory error leaves its dump (profile, summary,
# trace, picture) in -oom-dir.
agentleak "agentleak oom" 1 -requests 2000 -budget 2097152 -profile "" -oom-dir "$work/oom" &&
	expect "agentleak oom" "$work/agentleak oom.out" "out of memory on $device" 'decodeLeaky' \
		'^out-of-memory dump, written when' &&
	{ [[ $(find "$work/oom" -name 'agentleak-oom-*' -size +0 | wc -l) == 4 ]] ||
		fail "agentleak oom dump" "want 4 files in -oom-dir, got: $(ls "$work/oom" 2>&1)"; }
agentleak "agentleak bad device" 2 -device nope -profile "" &&
	expect "agentleak bad device" "$work/agentleak bad device.out" 'invalid value "nope" for flag -device'

# ---- inferenceserver ------------------------------------------------------

# http METHOD PORT PATH: prints the response (status line, headers, body).
http() {
	local method=$1 port=$2 path=$3
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n' "$method" "$path" >&3
	cat <&3
	exec 3<&-
}

# server NAME WANT_STATUS REQUESTS ARGS...: starts the server on free ports,
# sends REQUESTS POST /generate requests to the public listener and reads
# /metrics and the summary from the debug listener, then stops it with
# SIGTERM and checks its exit status.
server() {
	local name=$1 want=$2 requests=$3 log=$work/$1.log port= debug= i status
	shift 3
	"$bin/inferenceserver" -device "$device" -addr 127.0.0.1:0 -debug-addr 127.0.0.1:0 -drain 10s "$@" >"$log" 2>&1 &
	server_pid=$!
	for ((i = 0; i < 300; i++)); do
		port=$(sed -n 's/.*msg=serving addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n1)
		debug=$(sed -n 's/.*debug_addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n1)
		[[ -n $port && -n $debug ]] && break
		if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
		sleep 0.1
	done
	if [[ -z $port || -z $debug ]]; then
		fail "$name" "the server did not start" "$log"
		kill "$server_pid" 2>/dev/null
		wait "$server_pid" 2>/dev/null
		server_pid=
		return 1
	fi
	local bad=0
	for ((i = 0; i < requests; i++)); do
		if ! http POST "$port" "/generate?prompt=64&tokens=16&batch=2" >"$work/resp" 2>&1 ||
			! head -n1 "$work/resp" | grep -Eq '^HTTP/1\.[01] 200'; then
			bad=1
			cp "$work/resp" "$work/$name.bad"
		fi
	done
	http GET "$debug" /metrics >"$work/$name.metrics" 2>&1
	http GET "$debug" /debug/tensors/summary >"$work/$name.summary" 2>&1
	kill -TERM "$server_pid"
	wait "$server_pid"
	status=$?
	server_pid=
	if ((bad)); then
		fail "$name" "a /generate request failed" "$work/$name.bad"
		return 1
	fi
	if [[ $status != "$want" ]]; then
		fail "$name" "exit status $status after SIGTERM, want $want" "$log"
		return 1
	fi
	expect "$name metrics" "$work/$name.metrics" "tensorlife_pool_memory_usage_bytes\\{.*tensorlife_device=\"$device\"" &&
		expect "$name summary" "$work/$name.summary" "$device"
}

server "inferenceserver" 0 32 &&
	expect "inferenceserver shutdown" "$work/inferenceserver.log" 'no tensor left live'
server "inferenceserver leak" 1 32 -leak &&
	expect "inferenceserver leak shutdown" "$work/inferenceserver leak.log" \
		'tensors still live at shutdown' 'decodeLeaky'

if ((failed)); then
	printf 'examples-e2e: FAILED on %s\n' "$device"
	exit 1
fi
printf 'examples-e2e: both examples ran end to end on %s\n' "$device"
