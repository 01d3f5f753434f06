#!/usr/bin/env bash
# Coverage-guided fuzzing of the Rust core with libFuzzer (cargo-fuzz), over
# the oracles of tests/fuzz/oracles.rs:
#   decode  format::decode, the shared header's validation
#   serial  serial::parse and Filter::deserialize (portable bytes)
#   open    a hostile file behind a descriptor: Filter::from_fd and its use
#   reply   resp::parse_reply, what a Redis server sends a remote copy
#   image   a DataSketches Bloom filter image: parse, deserialize, write
#
# Usage: xt/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]   (default: 60 s, all)
#
# Needs cargo-fuzz (cargo install cargo-fuzz --locked). Stable Rust does:
# RUSTC_BOOTSTRAP=1 lets it take the sanitizer options cargo-fuzz passes.
# The first build compiles libFuzzer (a few minutes on two cores).
#
# Inputs found interesting go to fuzz/corpus/TARGET (not committed); the
# committed seeds in tests/corpus/TARGET are read, never written. A failing
# input is saved in fuzz/artifacts/TARGET/; shrink it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz tmin --fuzz-dir fuzz TARGET ARTIFACT
# and commit it to tests/corpus/TARGET/, where `cargo test` replays it from
# then on. To fold a long run's corpus into the committed one:
#   RUSTC_BOOTSTRAP=1 cargo fuzz cmin --fuzz-dir fuzz TARGET fuzz/corpus/TARGET
# then copy what is left and is small into tests/corpus/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d "${CARGO_HOME:-$HOME/.cargo}/bin" ]; then
  PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
export RUSTC_BOOTSTRAP=1

secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decode serial open reply image)

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "xt/fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz --locked)" >&2
  exit 2
fi

# FUZZ_TARGET_DIR: where the instrumented build goes (default fuzz/target);
# CI points it at a cache outside its fresh checkout.
tdir=()
[ -z "${FUZZ_TARGET_DIR:-}" ] || tdir=(--target-dir "$FUZZ_TARGET_DIR")
cargo fuzz build --fuzz-dir fuzz "${tdir[@]}"
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  echo "==== fuzz $t for $secs s"
  # -max_len: a header page plus the selector bytes (open), and serialized
  # filters of a few thousand bits (serial).
  cargo fuzz run --fuzz-dir fuzz "${tdir[@]}" "$t" "fuzz/corpus/$t" "tests/corpus/$t" -- \
    -max_total_time="$secs" -max_len=4200 -print_final_stats=1
done
