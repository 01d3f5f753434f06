#!/usr/bin/perl
# Single adds on a windowed filter whose generations are larger than the
# caches, against a plain filter of the same capacity in the same run:
# what a new item's `add` and a present one's cost, one call at a time.
#
#   perl -Mblib bench/window_add_large.pl [--layout standard|blocked]
#       [--generations G] [--capacity N] [--runs R] [--nice=-10]
#
# Method: each filter (capacity 10 000 000 per window at 0.01 unless
# --capacity says otherwise) has every generation filled to half its
# capacity (fill, rotate, fill, ...); a plain filter gets one such fill.
# Then, in each of --runs rounds, 100 000 keys never added before are added
# one call at a time, and 10 000 keys of the current generation ten times
# over; each figure is wall time per call (the process alone on the
# machine: run it with nothing else busy). The window is 24 h, so no step
# falls in a timing.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;

use BenchUtil qw(machine load_line nice_line now);
use Data::BloomFilter::Shared;

$| = 1;
my ($layout, $g, $cap, $runs) = ('standard', 4, 10_000_000, 3);
GetOptions(
    'layout=s'      => \$layout,
    'generations=i' => \$g,
    'capacity=i'    => \$cap,
    'runs=i'        => \$runs,
    'nice=i'        => \my $nice,
) or die "usage: perl -Mblib bench/window_add_large.pl [--layout L] [--generations G] [--capacity N] [--runs R] [--nice=N]\n";
die "bench/window_add_large.pl: --capacity must be at least 20000\n" if $cap < 20_000;

say "# bench/window_add_large.pl  layout $layout, g = $g, capacity $cap per window at 0.01";
say "# ", machine();
print nice_line($nice);
say load_line('at start');

my $half = int($cap / 2);

# A filter of $gens generations (0: plain), each filled to half capacity.
sub filled {
    my ($gens) = @_;
    my %o = (layout => $layout);
    @o{qw(window generations)} = (86_400, $gens) if $gens;
    my $f = Data::BloomFilter::Shared->new(undef, $cap, 0.01, \%o);
    for my $gen (1 .. ($gens || 1)) {
        $f->rotate if $gen > 1;
        for (my $from = 0; $from < $half; $from += 10_000) {
            $f->add_many([ map {"f$gen-$_"} $from .. $from + 9_999 ]);
        }
    }
    return ($f, [ map { 'f' . ($gens || 1) . "-$_" } 0 .. 9_999 ]);
}

my %f = (plain => [ filled(0) ], "g=$g" => [ filled($g) ]);
say "# ns per call: new item, present item";
for my $r (1 .. $runs) {
    for my $name ('plain', "g=$g") {
        my ($f, $present) = @{ $f{$name} };
        my @new = map {"new$r-$_-abcdefgh"} 1 .. 100_000;
        my $t = now();
        $f->add($_) for @new;
        my $tn = (now() - $t) / @new * 1e9;
        $t = now();
        $f->add($_) for (@$present) x 10;
        my $tp = (now() - $t) / (10 * @$present) * 1e9;
        printf "run %d  %-6s  new %6.0f  present %6.0f\n", $r, $name, $tn, $tp;
    }
}
say load_line('at end');
