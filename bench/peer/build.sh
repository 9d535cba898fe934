#!/usr/bin/env bash
# Builds the controller-runtime peer of the benchmark from this module, once, into a folder keyed
# by its files:
#
#   bench/peer/build.sh      prints the folder holding bin/peer (building it first if needed)
#
# The folder is target/peer/<digest>/ (CARGO_TARGET_DIR is honoured). Progress goes to stderr; a
# concurrent run waits for the first one's lock instead of building twice. Nothing is downloaded
# but Go modules through the module proxy (GOTOOLCHAIN=local: no toolchain either). Exit code 3
# means Go is not installed. The peer reads proto/ at start, so the contract is not in the digest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
[[ "$target" = /* ]] || target="$root/$target"

go_version="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$here/go.mod")"
command -v go >/dev/null 2>&1 || {
  echo "peer: Go is not installed; the peer is built from source with Go $go_version or newer" >&2
  exit 3
}
export GOTOOLCHAIN=local

digest="$(cd "$here" && cat go.mod go.sum build.sh $(find . -name '*.go' | sort) | sha256sum | cut -c1-12)"
out="$target/peer/$digest"

if [[ -x "$out/bin/peer" ]]; then echo "$out"; exit 0; fi

mkdir -p "$target/peer"
exec 9>"$target/peer/.build.lock"
if ! flock -n 9; then
  echo "peer: another build is running; waiting for it" >&2
  flock 9
fi
if [[ -x "$out/bin/peer" ]]; then echo "$out"; exit 0; fi

staging="$out.partial"
rm -rf "$staging"
mkdir -p "$staging/bin"
cd "$here"
started=$SECONDS
echo "peer: building the controller-runtime peer into $out" >&2
CGO_ENABLED=0 go build -trimpath -o "$staging/bin/peer" .
rm -rf "$out"
mv "$staging" "$out"
echo "peer: built in $((SECONDS - started)) s" >&2
echo "$out"
