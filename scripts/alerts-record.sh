#!/usr/bin/env bash
# alerts-record.sh: record the series docs/alerts/tensorlife.rules.yml reads
# from a run of examples/inferenceserver, as the input_series of a promtool
# rule test. It starts the server, then STEPS times sends REQUESTS POST
# /generate requests and reads /metrics once, and prints one series per
# metric and label set with one value per step. The rule test lays the
# steps out one minute apart: a step stands for a minute of a service
# serving REQUESTS requests a minute. The series get the job and instance
# labels a Prometheus scrape adds.
#
# Usage: scripts/alerts-record.sh BIN_DIR STEPS REQUESTS [SERVER FLAGS...]
#   BIN_DIR   holds the inferenceserver binary
#   STEPS     how many times to scrape
#   REQUESTS  requests served between two scrapes
#
# docs/alerts/tensorlife.rules.test.yml was recorded with
#   scripts/alerts-record.sh BIN 180 10 -leak -capacity 83886080
#   scripts/alerts-record.sh BIN 180 10 -capacity 83886080
# (the leaky server, then the same without the leak), on a 64 MiB budget
# (the server's default) over an 80 MiB device, and its admission series
# and the suspect's of the run under admission with
#   scripts/alerts-record.sh BIN 120 10 -leak -admission -capacity 83886080 -budget 33554432
# It needs bash only.
set -euo pipefail

bin=${1:?usage: alerts-record.sh BIN_DIR STEPS REQUESTS [SERVER FLAGS...]}
steps=${2:?usage: alerts-record.sh BIN_DIR STEPS REQUESTS [SERVER FLAGS...]}
requests=${3:?usage: alerts-record.sh BIN_DIR STEPS REQUESTS [SERVER FLAGS...]}
shift 3
work=$(mktemp -d)
pid=
cleanup() {
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

http() { # METHOD PORT PATH: prints the response body
	local method=$1 port=$2 path=$3
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n' "$method" "$path" >&3
	sed '1,/^\r$/d' <&3
	exec 3<&-
}

: >"$work/log" # made before the server's shell opens it: read at once below
"$bin/inferenceserver" -addr 127.0.0.1:0 -debug-addr 127.0.0.1:0 "$@" >"$work/log" 2>&1 &
pid=$!
port= debug=
for ((i = 0; i < 300; i++)); do
	port=$(sed -n 's/.*msg=serving addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/log" | head -n1)
	debug=$(sed -n 's/.*debug_addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/log" | head -n1)
	[[ -n $port && -n $debug ]] && break
	sleep 0.1
done
if [[ -z $port || -z $debug ]]; then
	echo "alerts-record: the server did not start:" >&2
	cat "$work/log" >&2
	exit 1
fi

# The series the rules read, as the Prometheus exporter names them.
wanted='^(tensorlife_pool_admissions_total|tensorlife_watcher_suspect_active|tensorlife_watcher_suspect_runs_out_in_seconds|tensorlife_device_memory_usage_bytes|tensorlife_device_memory_limit_bytes|tensorlife_pool_memory_usage_bytes|tensorlife_pool_memory_limit_bytes)[{ ]'
for ((step = 0; step < steps; step++)); do
	for ((i = 0; i < requests; i++)); do
		http POST "$port" "/generate?prompt=64&tokens=32&batch=2" >/dev/null
	done
	http GET "$debug" /metrics | grep -E "$wanted" | sed "s/^/$step /" >>"$work/samples"
	printf '%s %s\n' "$step" "$(date +%s.%N)" >>"$work/times"
done

# One series per metric and label set; a step the series was not scraped
# at is "_", promtool's missing value.
#
# The watcher's forecast (tensorlife_watcher_suspect_runs_out_in_seconds) is
# in the recording's real seconds, while the test lays a step out as a
# minute: each value is rescaled by 60 s over the real time of a step,
# averaged over the last 3 steps (about the watcher's 32 windows of
# History, at 10 requests a step).
awk -v steps="$steps" '
FNR == NR { at[$1] = $2; next }
{
	step = $1; value = $NF
	series = $2
	for (i = 3; i < NF; i++) series = series " " $i
	sub(/\{/, "{job=\"inference\",instance=\"inference:6060\",", series)
	if (!(series in seen)) { seen[series] = 1; order[++n] = series }
	if (series ~ /^tensorlife_watcher_suspect_runs_out_in_seconds/) {
		back = step < 3 ? step : 3
		if (back == 0) next # no step time yet
		value = value * 60 * back / (at[step] - at[step - back])
	}
	v[series, step] = sprintf("%.0f", value)
}
END {
	for (k = 1; k <= n; k++) {
		s = order[k]; line = ""
		for (i = 0; i < steps; i++) line = line (i ? " " : "") ((s, i) in v ? v[s, i] : "_")
		printf "      - series: %s\n        values: \"%s\"\n", "\x27" s "\x27", line
	}
}' "$work/times" "$work/samples"
