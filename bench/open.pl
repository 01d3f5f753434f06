#!/usr/bin/perl
# The cost of opening an existing filter file, against its size: `new` of
# a grown filter of 1 GiB of bits and of one grown to 16 stages, each as a
# ratio to `new` of a grown filter of 1 KiB of bits, timed in the same run.
# Opening reads the header, the control line and the stage table, never
# the bit array (doc/DESIGN.md, §5), so the target for the 1 GiB filter is
# at most 2x (an open that read the bits would take as long as a read of
# the 1 GiB: thousands of times the small one). The stages are mapped at
# open (a file too short for them is refused then), one mapping each: the
# 16-stage row shows that cost, bounded by the 32 stages a filter can
# have, whatever their size.
#
#   perl -Mblib bench/open.pl [--quick] [--rounds=N] [--dir=DIR]
#
# Method: the three files are made first in DIR (default: the system's
# temporary directory; 1 GiB of space, reserved with posix_fallocate, so
# on tmpfs it is memory). Then each round opens each file once, in turn:
# `new($path, $capacity, 0.01, {grow => 2})` with the file's own first
# capacity (so no reopen warning is due), the handle then dropped (unmapped);
# the wall time of the pair is taken. The median over the rounds (default
# 300, --quick 50) is printed, in microseconds, with its ratio to the 1 KiB
# row. The 1 GiB filter is one stage (its first capacity is sized for it:
# filling a filter to grow that far takes longer than the whole run); the
# 16-stage one (first capacity 1, 65535 items, every stage full) has a
# stage table to walk and 16 stages to map.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use File::Spec;
use File::Temp qw(tempdir);
use Getopt::Long;

use BenchUtil qw(now median spread machine load_line human_bytes);
use Data::BloomFilter::Shared;

$| = 1;
my $C = 'Data::BloomFilter::Shared';
GetOptions('quick' => \my $quick, 'rounds=i' => \my $rounds, 'dir=s' => \my $where)
    or die "usage: perl -Mblib bench/open.pl [--quick] [--rounds=N] [--dir=DIR]\n";
$rounds //= $quick ? 50 : 300;
die "bench/open.pl: --rounds must be at least 1\n" if $rounds < 1;
my $dir = tempdir('bfs-open-XXXXXX', DIR => $where // File::Spec->tmpdir, CLEANUP => 1);

print "# ", machine(), "\n";
print load_line('at start');

# Name => [first capacity, items to add]. A first stage of 500 items at
# 0.01 has 1 KiB of bits in the standard layout (its rate is tighter than
# the filter's, and its size a power of two); of 500 million, 1 GiB.
my @rows = (
    ['1 KiB, 1 stage' => 500,         0],
    ['1 GiB, 1 stage' => 500_000_000, 0],
    ['16 stages'      => 1,           65_535],
);
my %path;
for my $r (@rows) {
    my ($name, $cap, $items) = @$r;
    (my $file = $name) =~ s/\W+/_/g;
    $path{$name} = "$dir/$file.bf";
    my $f = $C->new($path{$name}, $cap, 0.01, { grow => 2 });
    for (my $i = 0; $i < $items; $i += 1000) {
        my $n = $items - $i < 1000 ? $items - $i : 1000;
        $f->add_many([map {"k$_"} $i + 1 .. $i + $n]);
    }
    printf "# %-17s %10s of bits, %2d stage%s, file %s\n", $name, human_bytes($f->bits / 8), $f->stages,
        $f->stages == 1 ? ' ' : 's', human_bytes(-s $path{$name});
}

my %took;
for (1 .. $rounds) {
    for my $r (@rows) {
        my ($name, $cap) = @$r;
        my $t = now();
        my $f = $C->new($path{$name}, $cap, 0.01, { grow => 2 });
        undef $f;
        push @{ $took{$name} }, now() - $t;
    }
}

my $base = median(@{ $took{ $rows[0][0] } });
printf "\n%-18s %12s %8s %8s\n", 'new() of', 'median us', 'spread', 'ratio';
for my $r (@rows) {
    my $name = $r->[0];
    my $m = median(@{ $took{$name} });
    printf "%-18s %12.1f %8.2f %7.2fx\n", $name, 1e6 * $m, spread(@{ $took{$name} }), $m / $base;
}
print "\ntarget: 1 GiB at most 2x (rounds: $rounds); the 16 stages pay one fstat, mmap and munmap each\n";
print load_line('at end');
