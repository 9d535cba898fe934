#!/usr/bin/env bash
# Builds the GitOps checkers of the tests from this module, once, into a folder keyed by its files:
#
#   tests/gitops/build.sh      prints the folder holding bin/ (building it first if needed)
#
# bin/kstatus computes an object's kstatus result with sigs.k8s.io/cli-utils; bin/argocd-lua runs
# an Argo CD health or action script with gopher-lua (both pinned in go.mod). The folder is
# target/gitops/<digest>/ (CARGO_TARGET_DIR is honoured). Progress goes to stderr; a concurrent
# run waits for the first one's lock instead of building twice. Nothing is downloaded but Go
# modules through the module proxy (GOTOOLCHAIN=local: no toolchain either).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
[[ "$target" = /* ]] || target="$root/$target"

command -v go >/dev/null 2>&1 || {
  echo "gitops checkers: Go is not installed; they are built from source with Go 1.24 or newer" >&2
  exit 3
}

digest="$(cd "$here" && cat go.mod go.sum build.sh $(find cmd -name '*.go' | sort) | sha256sum | cut -c1-12)"
out="$target/gitops/$digest"
binaries=(kstatus argocd-lua)

complete() { for b in "${binaries[@]}"; do [[ -x "$out/bin/$b" ]] || return 1; done; }
if complete; then echo "$out"; exit 0; fi

mkdir -p "$target/gitops"
exec 9>"$target/gitops/.build.lock"
if ! flock -n 9; then
  echo "gitops checkers: another build is running; waiting for it" >&2
  flock 9
fi
if complete; then echo "$out"; exit 0; fi

staging="$out.partial"
rm -rf "$staging"
mkdir -p "$staging/bin"
cd "$here"
started=$SECONDS
for b in "${binaries[@]}"; do
  echo "gitops checkers: building $b ..." >&2
  GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -o "$staging/bin/$b" "./cmd/$b"
done
rm -rf "$out"
mv "$staging" "$out"
echo "gitops checkers: built in $((SECONDS - started)) s" >&2
echo "$out"
