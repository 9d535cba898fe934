#!/usr/bin/env bash
# Builds the pinned Helm (helm.sh/helm/v4, the `tool` of go.mod) from source, once, into a folder
# keyed by the release and by this module's files:
#
#   tests/helm/build.sh      prints the folder holding bin/helm (building it first if needed)
#
# The folder is target/helm/<release>-<digest>/ (CARGO_TARGET_DIR is honoured). Progress goes to
# stderr; a concurrent run waits for the first one's lock instead of building twice. Nothing is
# downloaded but Go modules through the module proxy. To move to another release:
#
#   cd tests/helm && go get -tool helm.sh/helm/v4/cmd/helm@vX.Y.Z && go mod tidy
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
[[ "$target" = /* ]] || target="$root/$target"

go_version="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$here/go.mod")"
command -v go >/dev/null 2>&1 || {
  echo "helm: Go is not installed; Helm is built from source with Go $go_version or newer" >&2
  exit 3
}
# An older Go fails here instead of fetching a newer toolchain, which is a prebuilt binary.
export GOTOOLCHAIN=local

release="$(sed -n 's|^\s*helm\.sh/helm/v4 \(v[^ ]*\).*|\1|p' "$here/go.mod" | head -n1)"
[[ -n "$release" ]] || { echo "helm: $here/go.mod requires no helm.sh/helm/v4" >&2; exit 1; }
digest="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)"
out="$target/helm/$release-$digest"

if [[ -x "$out/bin/helm" ]]; then echo "$out"; exit 0; fi

mkdir -p "$target/helm"
exec 9>"$target/helm/.build.lock"
if ! flock -n 9; then
  echo "helm: another build of $release is running; waiting for it" >&2
  flock 9
fi
if [[ -x "$out/bin/helm" ]]; then echo "$out"; exit 0; fi

# `helm version` tells the truth: the release, from a clean tree. The module proxy does not say
# which commit the tag is, so the commit stays empty rather than made up.
ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$release"
ldflags+=" -X helm.sh/helm/v4/internal/version.metadata="
ldflags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

staging="$out.partial"
rm -rf "$staging"
mkdir -p "$staging/bin"
cd "$here"
started=$SECONDS
echo "helm: building Helm $release (helm.sh/helm/v4/cmd/helm) from source into $out" >&2
echo "helm: the first build takes a few minutes on 2 cores (less with a warm Go cache); later runs reuse it" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$staging/bin/helm" helm.sh/helm/v4/cmd/helm
rm -rf "$out"
mv "$staging" "$out"
echo "helm: done in $((SECONDS - started)) s" >&2
echo "$out"
