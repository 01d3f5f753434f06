#!/usr/bin/env bash
# AddressSanitizer over the XS layer and the Rust core, driven by the Perl
# test suite.
#
# Usage: xt/asan.sh [t/FILE.t ...]        (default: every t/*.t)
#
# How: a copy of the tree is built in a temporary directory with Shared.xs
# compiled and linked with gcc's -fsanitize=address, and the Rust staticlib
# compiled with -Zsanitizer=address (stable rustc takes it with
# RUSTC_BOOTSTRAP=1; std itself stays uninstrumented, our crate is not).
# Both use gcc's ASan runtime (libasan), whose interface (v8) LLVM's
# instrumentation also calls.
#
# Perl itself is not built with ASan, and the runtime must be the first
# library loaded, so it is preloaded: LD_PRELOAD=libasan.so perl ...
# Leak detection is off (detect_leaks=0): perl does not free everything at
# exit, and LeakSanitizer cannot tell its leaks from ours through an
# uninstrumented interpreter; xt/valgrind.sh reports leaks instead. What ASan
# finds here: out-of-bounds reads and writes, use after free, double free,
# in our C and Rust code (heap, stack and globals), and in perl's own heap
# where our code is the one touching it.
#
# The verdict: the script fails when any process wrote an ASan report
# (log files asan.PID in the work directory). The tests' own verdicts are
# printed too (they should pass, a little slower).
# Needs gcc's libasan (Debian: libasan8, with gcc) and cargo.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -d "${CARGO_HOME:-$HOME/.cargo}/bin" ]; then
  PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
libasan=$(gcc -print-file-name=libasan.so)
[ -e "$libasan" ] || { echo "no libasan for gcc (apt-get install libasan8)" >&2; exit 2; }

work=${ASAN_WORKDIR:-/tmp/bfs-asan}
mkdir -p "$work/tree"
# Sources only; target/ is kept between runs (an instrumented build of its own).
tar -C "$src" --exclude=./target --exclude=./fuzz --exclude=./blib --exclude=./.git \
  --exclude='./Shared.[co]' --exclude=./Makefile -cf - . | tar -C "$work/tree" -xf -
cd "$work/tree"

export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=address -Cforce-frame-pointers=yes"
lddlflags=$(perl -MConfig -e 'print $Config{lddlflags}')
perl Makefile.PL OPTIMIZE="-O1 -g -fsanitize=address -fno-omit-frame-pointer" \
  LDDLFLAGS="$lddlflags -fsanitize=address" > "$work/build.log"
make >> "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 2; }
# Both layers instrumented: the XS glue, and the Rust core (its own checks,
# not just the std it links).
so=blib/arch/auto/Data/BloomFilter/Shared/Shared.so
objdump -d --no-show-raw-insn "$so" > "$work/Shared.dis"
for fn in XS_Data__BloomFilter__Shared_add bfs_add; do
  n=$(awk -v f="<$fn>:" '$2 == f {p=1; next} /^$/ {p=0} p' "$work/Shared.dis" | grep -c __asan_ || true)
  [ "$n" -gt 0 ] || { echo "$fn in Shared.so is not instrumented" >&2; exit 2; }
done

files=("$@")
[ ${#files[@]} -gt 0 ] || files=(t/*.t)
rm -f "$work"/asan.*
set +e
LD_PRELOAD="$libasan" \
ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:exitcode=86:log_path=$work/asan:detect_stack_use_after_return=0" \
  prove -b "${files[@]}"
rc=$?
set -e
shopt -s nullglob
reports=("$work"/asan.*)
echo "xt/asan.sh: test suite exit $rc; ASan reports: ${#reports[@]} (in $work)"
if [ ${#reports[@]} -gt 0 ]; then
  head -60 "${reports[@]}"
  exit 1
fi
