#!/usr/bin/env bash
# Builds the fuzz targets and runs each for a bounded time: `bash fuzz/run.sh [SECONDS] [TARGET...]`
# (20 s each and every target by default). A crash, a failed property or a hang fails the run;
# the input is left under target/fuzz/artifacts/<target>/ (README.md says how to replay it).
# The committed corpus is read, never written: what a run finds goes to target/fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-20}"
shift || true

# cargo-fuzz from crates.io, built from source into the cargo home once, like every tool CI adds.
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

# `--sanitizer none`: no nightly flags are needed (the code under test forbids `unsafe`, so the
# address sanitizer would mostly watch dependencies; panics and failed assertions are caught
# either way). The build goes under the main target folder, apart from the workspace's.
build=(--sanitizer none --target-dir ../target/fuzz)
cargo fuzz build "${build[@]}"

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(cargo fuzz list)
fi
for target in "${targets[@]}"; do
  echo "--- fuzz ${target} (${seconds} s)"
  found="../target/fuzz/corpus/${target}"
  artifacts="../target/fuzz/artifacts/${target}"
  mkdir -p "$found" "$artifacts"
  log="../target/fuzz/${target}.log"
  if ! cargo fuzz run "${build[@]}" "$target" "$found" "corpus/${target}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="${artifacts}/" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz target ${target} failed; the input is in target/fuzz/artifacts/${target}/" >&2
    exit 1
  fi
  grep -E '^(Done|stat::(number_of_executed_units|new_units_added|peak_rss_mb))' "$log" || true
done
