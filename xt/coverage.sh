#!/usr/bin/env bash
# Coverage: Rust lines and branches (cargo test, and the Perl tests driving
# the staticlib through Shared.so), and the Perl layer (Devel::Cover).
#
# Usage: xt/coverage.sh            (reports in $COVERAGE_WORKDIR, default /tmp/bfs-coverage)
#
# Needs: llvm-tools (rustup component add llvm-tools-preview), Devel::Cover
# (Debian: libdevel-cover-perl). Branch coverage is unstable in rustc
# (-Zcoverage-options=branch): stable rustc takes it with RUSTC_BOOTSTRAP=1.
# Everything is built in the work directory; the tree's own target/ and
# blib/ are left alone. Takes a few minutes on two cores.
#
# Prints: the Rust summary for cargo test alone and for cargo test plus the
# Perl tests, the Rust lines and branches no test reaches (file:line), and
# Devel::Cover's summary of lib/. Full reports: rust-*.txt, uncovered.txt,
# cover_db/ (cover -report html cover_db) in the work directory.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -d "${CARGO_HOME:-$HOME/.cargo}/bin" ]; then
  PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
tools=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin
[ -x "$tools/llvm-profdata" ] || { echo "no llvm-tools: rustup component add llvm-tools-preview" >&2; exit 2; }
command -v cover >/dev/null || { echo "no Devel::Cover (apt-get install libdevel-cover-perl)" >&2; exit 2; }

work=${COVERAGE_WORKDIR:-/tmp/bfs-coverage}
rm -rf "$work/prof" "$work/cover_db" "$work/tree"
mkdir -p "$work/prof/cargo" "$work/prof/perl" "$work/prof/discard" "$work/tree"

export RUSTC_BOOTSTRAP=1
# The copy of the tree built for the Perl tests maps its paths back to ours,
# so that both builds' counters land on the same source files.
#
# Continuous mode (%c in LLVM_PROFILE_FILE, which needs counter relocation):
# the counters live in the profile file itself, mapped shared, so that
# forked children, which leave with _exit(2) or are killed, count too (into
# their parent's file; an exec'd process gets its own).
export RUSTFLAGS="-Cinstrument-coverage -Zcoverage-options=branch -Cllvm-args=-runtime-counter-relocation --remap-path-prefix=$work/tree=$src"

echo "==== cargo test (instrumented)"
cd "$src"
export CARGO_TARGET_DIR="$work/target"
FUZZ_ITERS=20 LLVM_PROFILE_FILE="$work/prof/cargo/%c%p.profraw" cargo test --locked --tests > "$work/cargo-test.txt" 2>&1 || true
grep -E '^test result|FAILED|panicked|^error' "$work/cargo-test.txt" || true
mapfile -t objects < <(cargo test --locked --tests --no-run --message-format=json 2>/dev/null \
  | perl -MJSON::PP -ne 'my $m = eval { decode_json($_) } or next; print "$m->{executable}\n" if $m->{executable}')
unset CARGO_TARGET_DIR

echo "==== Perl tests, with the staticlib instrumented"
tar -C "$src" --exclude=./target --exclude=./fuzz --exclude=./blib --exclude=./.git \
  --exclude=./cover_db --exclude='./Shared.[co]' --exclude=./Makefile -cf - . | tar -C "$work/tree" -xf -
cd "$work/tree"
# Optimised as shipped (the timing-sensitive crash tests need the speed),
# without LTO to build faster.
export CARGO_PROFILE_RELEASE_LTO=off
# Shared.so must pull in the profiler's runtime from the staticlib
# (executables get it from rustc; a shared object linked by gcc does not).
lddlflags=$(perl -MConfig -e 'print $Config{lddlflags}')
perl Makefile.PL LDDLFLAGS="$lddlflags -Wl,-u,__llvm_profile_runtime" > "$work/build.log"
make >> "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 2; }
so=$work/tree/blib/arch/auto/Data/BloomFilter/Shared/Shared.so
LLVM_PROFILE_FILE="$work/prof/perl/%c%p.profraw" prove -b t > "$work/prove.txt" 2>&1 || true
grep -E '^(Failed|t/.*(Wstat|Non-zero))|^Result' "$work/prove.txt" || true
# Devel::Cover in a run of its own: it slows perl down enough to trip the
# crash tests' expectations of how far a victim gets before it is killed.
echo "==== Perl tests under Devel::Cover"
LLVM_PROFILE_FILE="$work/prof/discard/%c%p.profraw" \
HARNESS_PERL_SWITCHES="-MDevel::Cover=-db,$work/cover_db,-silent,1,+select,^blib/lib/,+ignore,^t/" \
  prove -b t > "$work/prove-cover.txt" 2>&1 || true
grep -E '^(Failed|t/.*(Wstat|Non-zero))|^Result' "$work/prove-cover.txt" || true
cd "$src"

ignore='(/\.cargo/registry/|^/rustc/|/library/|/tests/)'
objargs=()
for o in "${objects[@]}"; do objargs+=(--object "$o"); done
"$tools/llvm-profdata" merge -sparse "$work"/prof/cargo/*.profraw -o "$work/cargo.profdata"
"$tools/llvm-profdata" merge -sparse "$work"/prof/perl/*.profraw -o "$work/perl.profdata"
# One lcov file per build: the C API's functions have the same (unmangled)
# names in the test binaries and in Shared.so, so one llvm-cov run over both
# would call their counts mismatched; the union is taken below instead.
"$tools/llvm-cov" export --format=lcov --instr-profile="$work/cargo.profdata" \
  --ignore-filename-regex="$ignore" "${objargs[@]}" > "$work/cargo.lcov"
"$tools/llvm-cov" export --format=lcov --instr-profile="$work/perl.profdata" \
  --ignore-filename-regex="$ignore" --object "$so" > "$work/perl.lcov"
"$tools/llvm-cov" report --instr-profile="$work/cargo.profdata" \
  --ignore-filename-regex="$ignore" "${objargs[@]}" > "$work/rust-cargo-test.txt"

# Lines (DA) and branches (BRDA) per file: covered when any run covered them.
# Prints the summaries and writes uncovered.txt (file: line numbers).
perl - "$src" "$work" <<'PERL'
use strict;
use warnings;
my ($src, $work) = @ARGV;
my %runs;    # run => file => { l => {line => hit}, b => {key => hit} }
for my $run (qw(cargo perl)) {
    open(my $fh, '<', "$work/$run.lcov") or die "$run.lcov: $!";
    my $f;
    while (<$fh>) {
        if (/^SF:(.*)/) { ($f = $1) =~ s{^\Q$src\E/}{}; next }
        if (/^DA:(\d+),(\d+)/) { $runs{$run}{$f}{l}{$1} ||= $2 > 0; next }
        if (/^BRDA:(\d+),(\d+),(\d+),(\S+)/) { $runs{$run}{$f}{b}{"$1,$2,$3"} ||= $4 ne '-' && $4 > 0 }
    }
}
sub union {
    my %u;
    for my $run (@_) {
        for my $f (keys %{ $runs{$run} }) {
            for my $k (qw(l b)) {
                my $h = $runs{$run}{$f}{$k} or next;
                $u{$f}{$k}{$_} ||= $h->{$_} for keys %$h;
            }
        }
    }
    return \%u;
}
sub summary {
    my ($name, $u) = @_;
    my ($lf, $lh, $bf, $bh) = (0) x 4;
    print "---- Rust, $name\n";
    printf "  %-16s %6s %6s\n", 'file', 'lines', 'branch';
    for my $f (sort keys %$u) {
        my @l = values %{ $u->{$f}{l} || {} };
        my @b = values %{ $u->{$f}{b} || {} };
        my ($fl, $hl, $fb, $hb) = (scalar @l, scalar(grep { $_ } @l), scalar @b, scalar(grep { $_ } @b));
        ($lf, $lh, $bf, $bh) = ($lf + $fl, $lh + $hl, $bf + $fb, $bh + $hb);
        printf "  %-16s %5.1f%% %5s\n", $f, 100 * $hl / ($fl || 1), $fb ? sprintf('%.1f%%', 100 * $hb / $fb) : '-';
    }
    printf "  %-16s %5.1f%% %5.1f%%   (lines %d/%d, branches %d/%d)\n", 'TOTAL',
        100 * $lh / ($lf || 1), 100 * $bh / ($bf || 1), $lh, $lf, $bh, $bf;
}
summary('cargo test', union('cargo'));
my $all = union('cargo', 'perl');
summary('cargo test + Perl tests', $all);
open(my $out, '>', "$work/uncovered.txt") or die;
for my $f (sort keys %$all) {
    my @l = sort { $a <=> $b } grep { !$all->{$f}{l}{$_} } keys %{ $all->{$f}{l} || {} };
    my %bl;
    $bl{ (split /,/)[0] } = 1 for grep { !$all->{$f}{b}{$_} } keys %{ $all->{$f}{b} || {} };
    print $out "lines  $f: @l\n" if @l;
    print $out "branch $f: @{[ sort { $a <=> $b } keys %bl ]}\n" if %bl;
}
PERL
echo "---- Rust lines, and lines with a branch side, no test reaches ($work/uncovered.txt)"
cat "$work/uncovered.txt"

echo "---- Perl layer (Devel::Cover)"
cover -silent -report text "$work/cover_db" 2>/dev/null | sed -n '/^File/,/^Total/p'
