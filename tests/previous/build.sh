#!/usr/bin/env bash
# Builds the previous release of the reconciler (the binary the rolling-upgrade test runs beside
# this one), once, and keeps it:
#
#   tests/previous/build.sh      prints the folder of the previous release, building it if needed
#
# The folder holds `nauthera-reconciler` (that release's binary) and `crds/` (its CRDs, as
# deploy/crds shipped them).
#
# The previous release is the commit in `tests/previous/COMMIT`. Its source is taken with
# `git archive` into target/previous/<commit>/src and built with the project's own target folder
# (CARGO_TARGET_DIR is honoured): Cargo.lock is the same at both commits, so every dependency
# already compiled is reused and only the workspace's crates compile (about 1.5 min on a shared
# 2-core machine). The binary is kept as target/previous/<commit>/nauthera-reconciler, and the
# copy cargo put in target/debug is removed, so the next `cargo build` puts this version's binary
# back there. The workspace crates' own artifacts have the same names at both commits, so that
# next build compiles them again once (under a minute); nothing else is rebuilt. Progress goes to stderr; a
# concurrent run waits for the first one's lock instead of building twice.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
[[ "$target" = /* ]] || target="$root/$target"
commit="$(tr -d '[:space:]' <"$here/COMMIT")"
out="$target/previous/$commit"
binary="$out/nauthera-reconciler"

complete() { [[ -x "$binary" && -d "$out/crds" ]]; }
if complete; then echo "$out"; exit 0; fi

# A shallow clone lacks it: the history is fetched once, where a remote has it.
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "previous release: commit $commit is not in this clone; fetching it" >&2
  git -C "$root" fetch --quiet --unshallow 2>/dev/null ||
    git -C "$root" fetch --quiet origin "$commit" 2>/dev/null || true
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "previous release: commit $commit is not in this clone; the rolling-upgrade test builds the" >&2
  echo "reconciler from it. Fetch the history (git fetch --unshallow, or clone without --depth)." >&2
  exit 3
fi

mkdir -p "$out"
exec 9>"$out/.build.lock"
if ! flock -n 9; then
  echo "previous release: another build of $commit is running; waiting for it" >&2
  flock 9
fi
if complete; then echo "$out"; exit 0; fi

rm -rf "$out/src"
mkdir -p "$out/src"
git -C "$root" archive "$commit" | tar -x -C "$out/src"
echo "previous release: building nauthera-reconciler at $commit ..." >&2
started=$SECONDS
# The same selection as the tests' own build (the whole workspace's features), so the compiled
# dependencies match and are reused.
(cd "$out/src" && CARGO_TARGET_DIR="$target" cargo build --quiet --locked --workspace \
  --bin nauthera-reconciler)
uplifted="$target/debug/nauthera-reconciler"
cp "$uplifted" "$binary.partial"
# The uplifted file is the previous release now: removed, so that the next build of this
# workspace links its own reconciler there again instead of taking the old one as fresh.
rm -f "$uplifted"
rm -rf "$out/crds"
cp -r "$out/src/deploy/crds" "$out/crds"
mv "$binary.partial" "$binary"
rm -rf "$out/src"
echo "previous release: built in $((SECONDS - started)) s" >&2
echo "$out"
