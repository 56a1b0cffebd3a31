#!/usr/bin/env bash
# cuda-env.sh: make `go build -tags cuda` work on a machine without a CUDA
# toolkit, by fetching what cgo needs for gorgonia.org/cu from Debian's own
# packages:
#
#   nvidia-cuda-dev  the CUDA headers (cuda.h and the headers it includes)
#   libcuda1         the driver library (libcuda.so*), to link against
#
# Both live in Debian's non-free component; the script adds that component to
# the apt sources when it is missing (it must then run as root). Only the
# needed files are extracted, into a cache folder (default: .cache/cuda in the
# repository root, git-ignored; override with CUDA_CACHE_DIR). A filled cache
# is reused without touching apt, so a second run is instant.
#
# Usage:
#   eval "$(scripts/cuda-env.sh)"
#   go build -tags cuda ./...
#
# stdout carries only the `export` lines; progress goes to stderr.
#
# The binaries built this way link libcuda.so.1 by name with no rpath: at run
# time they use the driver installed on the GPU machine, not the copy here.
set -euo pipefail

log() { printf 'cuda-env: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${CUDA_CACHE_DIR:-$root_dir/.cache/cuda}
header_pkg=nvidia-cuda-dev
lib_pkg=libcuda1

print_env() {
	# Go's default CGO_CFLAGS is "-O2 -g"; setting the variable replaces it.
	printf 'export CGO_ENABLED=1\n'
	printf 'export CGO_CFLAGS=%q\n' "-O2 -g -I$cache/include"
	printf 'export CGO_LDFLAGS=%q\n' "-L$cache/lib"
}

cache_filled() {
	[[ -f $cache/.complete && -f $cache/include/cuda.h && -e $cache/lib/libcuda.so ]]
}

if cache_filled; then
	log "using cached CUDA headers and driver library in $cache"
	print_env
	exit 0
fi

command -v apt-get >/dev/null || die "apt-get not found: this script needs a Debian-based system"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found"

# package_known reports whether apt has a download candidate for a package.
package_known() {
	local candidate
	candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
	[[ -n $candidate && $candidate != "(none)" ]]
}

# shellcheck disable=SC1091 # the running system's file
codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)

# add_nonfree_list edits a one-line-style sources.list: every deb/deb-src line
# for this release that lacks the non-free component gets it. Prints whether
# it changed anything.
add_nonfree_list() {
	local file=$1 tmp rc
	tmp=$(mktemp)
	awk -v codename="$codename" '
		/^[[:space:]]*deb(-src)?[[:space:]]/ {
			# Fields: deb [options] URI suite component...
			i = 2
			if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
			suite = $(i + 1)
			has = 0
			for (j = i + 2; j <= NF; j++) if ($j == "non-free") has = 1
			if (!has && (codename == "" || index(suite, codename) == 1) && $0 !~ /^[[:space:]]*#/) {
				$0 = $0 " non-free"; changed = 1
			}
		}
		{ print }
		END { exit changed ? 0 : 3 }
	' "$file" >"$tmp" && rc=0 || rc=$?
	if [[ $rc == 0 ]]; then
		cat "$tmp" >"$file"
		log "added the non-free component to $file"
	fi
	rm -f "$tmp"
	[[ $rc == 0 || $rc == 3 ]] || die "could not edit $file"
}

# add_nonfree_deb822 does the same for a deb822 .sources file: each stanza
# whose Suites name this release gets non-free in its Components.
add_nonfree_deb822() {
	local file=$1 tmp rc
	tmp=$(mktemp)
	awk -v codename="$codename" '
		function flush(   k, suites_ok, has) {
			if (n == 0) return
			suites_ok = (codename == "" || suites ~ ("(^|[[:space:]])" codename))
			if (comp_line > 0 && suites_ok) {
				has = (stanza[comp_line] ~ /[[:space:]]non-free([[:space:]]|$)/)
				if (!has) { stanza[comp_line] = stanza[comp_line] " non-free"; changed = 1 }
			}
			for (k = 1; k <= n; k++) print stanza[k]
			n = 0; comp_line = 0; suites = ""
		}
		/^[[:space:]]*$/ { flush(); print; next }
		{
			stanza[++n] = $0
			if ($0 ~ /^Components:/) comp_line = n
			if ($0 ~ /^Suites:/) suites = substr($0, 8)
		}
		END { flush(); exit changed ? 0 : 3 }
	' "$file" >"$tmp" && rc=0 || rc=$?
	if [[ $rc == 0 ]]; then
		cat "$tmp" >"$file"
		log "added the non-free component to $file"
	fi
	rm -f "$tmp"
	[[ $rc == 0 || $rc == 3 ]] || die "could not edit $file"
}

ensure_packages_known() {
	if package_known "$header_pkg" && package_known "$lib_pkg"; then
		return
	fi
	[[ $(id -u) == 0 ]] || die "$header_pkg/$lib_pkg are unknown to apt; run as root so the script can add the non-free component and run apt-get update"
	if [[ -f /etc/apt/sources.list ]]; then
		add_nonfree_list /etc/apt/sources.list
	fi
	local f
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
		[[ -f $f ]] || continue
		case $f in
		*.sources) add_nonfree_deb822 "$f" ;;
		*.list) add_nonfree_list "$f" ;;
		esac
	done
	log "running apt-get update"
	apt-get update -q >&2 || die "apt-get update failed"
	package_known "$header_pkg" || die "apt has no candidate for $header_pkg (is the non-free component enabled?)"
	package_known "$lib_pkg" || die "apt has no candidate for $lib_pkg (is the non-free component enabled?)"
}

ensure_packages_known

mkdir -p "$(dirname "$cache")"
work=$(mktemp -d "$cache.partial.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/tree" "$work/out/include" "$work/out/lib"
# apt drops privileges to _apt for downloads; let it write here.
chmod 755 "$work"
chmod 777 "$work/debs"

log "downloading $header_pkg and $lib_pkg (the headers package is large, several hundred MB)"
(cd "$work/debs" && apt-get download -q "$header_pkg" "$lib_pkg") >&2 || die "apt-get download failed"

header_deb=$(ls "$work"/debs/"$header_pkg"_*.deb)
lib_deb=$(ls "$work"/debs/"$lib_pkg"_*.deb)

# The headers package unpacks to about 3 GB, nearly all static libraries;
# decompressing it all takes a minute. Its headers come first in the
# archive, so list the members only until the usr/include entries end, then
# extract exactly those, with --occurrence making tar stop once it has them.
# Both pipelines end early on purpose (dpkg-deb then dies of SIGPIPE), so
# their exit status is not checked; the results are.
log "extracting headers"
set +o pipefail
dpkg-deb --fsys-tarfile "$header_deb" 2>/dev/null |
	stdbuf -oL tar -t 2>/dev/null |
	sed -n -u \
		-e '/^\.\/usr\/include\//{x;s/.*/in/;x;/^\.\/usr\/include\/[^/]*\.h$/p;b' -e '}' \
		-e 'x;/^in$/{x;q' -e '};x' >"$work/headers.txt"
[[ -s $work/headers.txt ]] || die "no headers in usr/include of $header_deb"
dpkg-deb --fsys-tarfile "$header_deb" 2>/dev/null |
	tar -x -C "$work/tree" --occurrence -T "$work/headers.txt" || die "extracting headers from $header_deb failed"
set -o pipefail
# cuda.h and friends, plus every local header they include, transitively.
# The rest of /usr/include in that package (cuBLAS, cuFFT, thrust...) is not
# needed for the driver API.
inc="$work/tree/usr/include"
queue=()
for h in "$inc"/cuda*.h; do queue+=("$(basename "$h")"); done
declare -A seen=()
while ((${#queue[@]})); do
	h=${queue[0]}
	queue=("${queue[@]:1}")
	[[ -n ${seen[$h]:-} ]] && continue
	seen[$h]=1
	[[ -f $inc/$h ]] || continue # a system header (stdlib.h, ...)
	cp "$inc/$h" "$work/out/include/$h"
	while IFS= read -r dep; do
		queue+=("$dep")
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^>"/]*\.h\)[>"].*/\1/p' "$inc/$h")
done
[[ -f $work/out/include/cuda.h ]] || die "cuda.h not found in $header_deb"

log "extracting the driver library"
dpkg-deb --fsys-tarfile "$lib_deb" | tar -x -C "$work/tree" --wildcards '*/libcuda.so*'
found=0
while IFS= read -r -d '' f; do
	cp -P "$f" "$work/out/lib/"
	found=1
done < <(find "$work/tree" -name 'libcuda.so*' \( -type f -o -type l \) -print0)
((found)) || die "libcuda.so* not found in $lib_deb"
# Symlinks in the package may point to absolute paths that do not exist
# here; repoint every link at the real file copied beside it.
real=$(find "$work/out/lib" -name 'libcuda.so.*' -type f | head -n1)
[[ -n $real ]] || die "no regular libcuda.so.* file in $lib_deb"
for l in "$work"/out/lib/libcuda.so*; do
	if [[ -L $l ]]; then ln -sfn "$(basename "$real")" "$l"; fi
done
[[ -e $work/out/lib/libcuda.so.1 ]] || ln -s "$(basename "$real")" "$work/out/lib/libcuda.so.1"
[[ -e $work/out/lib/libcuda.so ]] || ln -s libcuda.so.1 "$work/out/lib/libcuda.so"

touch "$work/out/.complete"
rm -rf "$cache"
mv "$work/out" "$cache"
log "CUDA headers and driver library cached in $cache"
print_env
