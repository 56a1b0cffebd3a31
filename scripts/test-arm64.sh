#!/usr/bin/env bash
# Runs internal/fpstack's tests, the frame-pointer walk and its differential
# test among them, as arm64 code under user-mode emulation (qemu-user), so
# that the arm64 frame layout is checked on an amd64 CI machine. Installs
# qemu-user with apt-get when it is missing; exits 0 with a "skipped" line
# when it is missing and cannot be installed. Cross-compiled, so without cgo.
set -euo pipefail
cd "$(dirname "$0")/.."

install_qemu() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || return 1
    sudo="sudo -n"
  fi
  command -v apt-get >/dev/null 2>&1 || return 1
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq qemu-user >/dev/null 2>&1 ||
    { $sudo apt-get update -qq >/dev/null 2>&1 && $sudo apt-get install -y -qq qemu-user >/dev/null 2>&1; }
}

if ! command -v qemu-aarch64 >/dev/null 2>&1; then
  echo "test-arm64: installing qemu-user"
  install_qemu || true
fi
if ! command -v qemu-aarch64 >/dev/null 2>&1; then
  echo "test-arm64: skipped: qemu-aarch64 is missing and qemu-user could not be installed"
  exit 0
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin="$dir/fpstack-arm64.test"
GOARCH=arm64 CGO_ENABLED=0 go test -c -o "$bin" ./internal/fpstack

# TestEnvVar runs the test binary again as a child process, which the host
# cannot execute (no binfmt registration is assumed); the child's check is
# run here through qemu instead.
qemu-aarch64 "$bin" -test.count=1 -test.skip '^TestEnvVar$'
out=$(TENSORLIFE_STACK=callers FPSTACK_ENV_CHILD=1 qemu-aarch64 "$bin" -test.count=1 -test.run '^TestEnvVarChild$' -test.v)
if ! grep -q '^enabled=false$' <<<"$out"; then
  echo "test-arm64: TENSORLIFE_STACK=callers did not turn frame-pointer capture off:" >&2
  echo "$out" >&2
  exit 1
fi
echo "test-arm64: ok (internal/fpstack under qemu-aarch64)"
