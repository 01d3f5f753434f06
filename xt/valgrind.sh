#!/usr/bin/env bash
# Memory errors and leaks of the XS layer and the Rust core, under valgrind.
#
# Usage: xt/valgrind.sh [t/FILE.t ...]        (default: every t/*.t)
#
# Runs each test file with `valgrind --leak-check=full`, one log per process
# (the tests fork: valgrind follows forks; children that exec perl are
# followed too). Perl itself is not valgrind-clean at exit (it does not free
# everything it allocated), so the verdict is ours alone: the script fails
# when any error or definite leak has a frame in our code (Shared.so, the
# bfs_* C API, the bloomfilter_shared crate). Perl's own reports are counted
# and listed, not judged; xt/valgrind.supp silences the known ones.
#
# Tests run 20-50 times slower under valgrind. Their own verdicts (which may
# trip over their alarm guards at that speed) are printed but not judged.
# Needs a built tree (perl Makefile.PL && make) and valgrind.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f blib/arch/auto/Data/BloomFilter/Shared/Shared.so ] || { echo "build first: perl Makefile.PL && make" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }

files=("$@")
[ ${#files[@]} -gt 0 ] || files=(t/*.t)
logs=$(mktemp -d /tmp/bfs-valgrind.XXXXXX)
echo "valgrind logs: $logs"

# The Rust panic machinery and std keep a few allocations for the life of
# the process ("still reachable"), which is not a leak: only definite and
# indirect losses count.
VG=(valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite --error-exitcode=99 --num-callers=40
    --trace-children=yes --child-silent-after-fork=no
    --suppressions=xt/valgrind.supp --gen-suppressions=all)

for t in "${files[@]}"; do
  name=$(basename "$t" .t)
  mkdir -p "$logs/$name"
  start=$(date +%s)
  PERL_DESTRUCT_LEVEL=2 "${VG[@]}" --log-file="$logs/$name/%p.log" \
    perl -Mblib "$t" > "$logs/$name/tap.txt" 2>&1
  rc=$?
  printf '%-22s test exit %-3s %4ss\n' "$name" "$rc" "$(( $(date +%s) - start ))"
done

# Classify every error block in every log: ours when a frame is in our code.
perl - "$logs" <<'PERL'
use strict;
use warnings;
my ($dir) = @_ ? @_ : @ARGV;
my $ours = qr/\bShared\.(?:so|xs|c)\b|\bbfs_|bloomfilter_shared|XS_Data__BloomFilter/;
my (%count, @ours);
for my $log (glob "$dir/*/*.log") {
    open(my $fh, '<', $log) or die "$log: $!";
    my $text = do { local $/; <$fh> };
    $text =~ s/^==\d+== ?//mg;
    $text =~ s/^\{\n.*?^\}\n/\n/msg;    # generated suppressions
    # Records are separated by (prefixed) empty lines.
    for my $rec (split /\n\s*\n/, $text) {
        next unless $rec =~ /^\s+(?:at|by) 0x/m;    # an error or a leak: it has a stack
        my ($kind) = $rec =~ /\A\s*([^\n]*)/;
        $kind =~ s/\d[\d,]* (\(\d[\d,]* direct, \d[\d,]* indirect\) )?bytes in \d[\d,]* blocks/N bytes/;
        $kind =~ s/ in loss record.*//;
        $kind =~ s/0x[0-9A-Fa-f]+/ADDR/g;
        my $who = $rec =~ $ours ? 'ours' : 'perl';
        $count{$who}{$kind}++;
        push @ours, "$log:\n$rec" if $who eq 'ours';
    }
}
for my $who (qw(ours perl)) {
    my $n = 0;
    $n += $_ for values %{ $count{$who} || {} };
    print "\n$who: $n error records\n";
    print "  $count{$who}{$_} x $_\n" for sort keys %{ $count{$who} || {} };
}
if (@ours) {
    print "\n==== records with a frame in our code\n", join("\n", @ours[0 .. ($#ours < 19 ? $#ours : 19)]);
    exit 1;
}
print "\nno error or leak in our code\n";
exit 0;
PERL
