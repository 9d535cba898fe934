#!/usr/bin/env bash
# Builds the pinned control plane (kube-apiserver, kube-controller-manager, etcd) from the Go
# modules go.mod names, once, into a folder keyed by the release and by this module's files:
#
#   tests/control-plane/build.sh      prints the folder holding bin/ (building it first if needed)
#
# The folder is target/control-plane/<release>-<digest>/ (CARGO_TARGET_DIR is honoured). Progress
# goes to stderr; a concurrent run waits for the first one's lock instead of building twice.
# Nothing is downloaded but Go modules through the module proxy.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
[[ "$target" = /* ]] || target="$root/$target"

command -v go >/dev/null 2>&1 || {
  echo "control plane: Go is not installed; the real control plane is built from source with Go 1.24 or newer" >&2
  exit 3
}

module_version() { sed -n "s|^\s*$1 \(v[^ ]*\).*|\1|p" "$here/go.mod" | head -n1; }
release="$(module_version 'k8s\.io/kubernetes')"
etcd_release="$(module_version 'go\.etcd\.io/etcd/server/v3')"
digest="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)"
out="$target/control-plane/$release-$digest"
binaries=(kube-apiserver kube-controller-manager etcd)

complete() { for b in "${binaries[@]}"; do [[ -x "$out/bin/$b" ]] || return 1; done; }
if complete; then echo "$out"; exit 0; fi

mkdir -p "$target/control-plane"
exec 9>"$target/control-plane/.build.lock"
if ! flock -n 9; then
  echo "control plane: another build of $release is running; waiting for it" >&2
  flock 9
fi
if complete; then echo "$out"; exit 0; fi

# /version tells the truth: the release, its date, and that it was built from the module.
info="$(go mod download -json "k8s.io/kubernetes@$release" | sed -n 's/^\t"Info": "\(.*\)",$/\1/p')"
build_date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")"
[[ "$release" =~ ^v([0-9]+)\.([0-9]+)\. ]]
kube_ldflags=""
for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $package.gitVersion=$release -X $package.gitMajor=${BASH_REMATCH[1]}"
  kube_ldflags+=" -X $package.gitMinor=${BASH_REMATCH[2]} -X $package.gitTreeState=clean"
  kube_ldflags+=" -X $package.buildDate=$build_date"
done

staging="$out.partial"
rm -rf "$staging"
mkdir -p "$staging/bin"
cd "$here"
started=$SECONDS
build() {
  local name="$1" package="$2" ldflags="$3"
  echo "control plane: building $name ($package) ..." >&2
  local begun=$SECONDS
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$staging/bin/$name" "$package"
  echo "control plane: $name built in $((SECONDS - begun)) s" >&2
}
echo "control plane: building Kubernetes $release and etcd $etcd_release from source into $out" >&2
echo "control plane: the first build takes about 6 minutes on 2 cores (less with a warm Go cache); later runs reuse it" >&2
build etcd go.etcd.io/etcd/server/v3 ""
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
rm -rf "$out"
mv "$staging" "$out"
echo "control plane: done in $((SECONDS - started)) s" >&2
echo "$out"
