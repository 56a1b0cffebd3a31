#!/usr/bin/env bash
# check-alerts.sh: check the Prometheus rules in docs/alerts with promtool:
# `promtool check rules` on tensorlife.rules.yml, then `promtool test rules`
# on tensorlife.rules.test.yml, the recorded run of the leaky example that
# the alerts must fire on (and the run without the leak they must not).
#
# promtool comes from PATH, or else from Debian's prometheus package: the
# script downloads the package with apt-get and extracts promtool alone into
# a cache folder (default .cache/promtool in the repository root,
# git-ignored; override with PROMTOOL_CACHE_DIR), so nothing is installed
# and no Prometheus server is started. A filled cache is reused without
# touching apt. When apt knows no prometheus package yet, the script runs
# apt-get update, which needs root.
#
# The Go test examples/inferenceserver TestAlertRulesFireOnTheRecordedLeak
# runs the same checks when it finds promtool (on PATH or in the cache).
#
# Usage: scripts/check-alerts.sh
set -euo pipefail

log() { printf 'check-alerts: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${PROMTOOL_CACHE_DIR:-$root_dir/.cache/promtool}
rules=$root_dir/docs/alerts/tensorlife.rules.yml
tests=$root_dir/docs/alerts/tensorlife.rules.test.yml

fetch_promtool() {
	command -v apt-get >/dev/null || die "promtool not found and apt-get missing: install Prometheus's promtool"
	local candidate
	candidate=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')
	if [[ -z $candidate || $candidate == "(none)" ]]; then
		[[ $(id -u) == 0 ]] || die "apt knows no prometheus package; run as root so the script can run apt-get update"
		log "running apt-get update"
		apt-get update -q >&2 || die "apt-get update failed"
	fi
	mkdir -p "$(dirname "$cache")"
	local work
	work=$(mktemp -d "$cache.partial.XXXXXX")
	# apt drops privileges to _apt for downloads; let it write here.
	chmod 777 "$work"
	log "downloading Debian's prometheus package for its promtool"
	(cd "$work" && apt-get download -q prometheus) >&2 || { rm -rf "$work"; die "apt-get download prometheus failed"; }
	mkdir -p "$work/tree"
	dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work/tree" ./usr/bin/promtool ||
		{ rm -rf "$work"; die "no usr/bin/promtool in the prometheus package"; }
	rm -rf "$cache"
	mkdir -p "$cache/bin"
	mv "$work/tree/usr/bin/promtool" "$cache/bin/promtool"
	rm -rf "$work"
}

if command -v promtool >/dev/null; then
	promtool=$(command -v promtool)
elif [[ -x $cache/bin/promtool ]]; then
	promtool=$cache/bin/promtool
else
	fetch_promtool
	promtool=$cache/bin/promtool
fi
log "using $promtool ($("$promtool" --version 2>&1 | head -n1))"

"$promtool" check rules "$rules"
# promtool test rules reads rule_files relative to the test file.
"$promtool" test rules "$tests"
