#!/usr/bin/perl
# Windowed filters against plain ones of the same layout, in the same run:
# cost per call of `add` (new and present items) and `contains` (hit and
# miss), and per item of batches of 1000, for g = 2, 4 and 8 generations.
# Every figure is printed as a ratio to the plain filter's row of this run.
#
#   perl -Mblib bench/window.pl [--quick] [--nice=-10] [--capacity=N]
#
# Method: as bench/layouts.pl. Tight loops over pre-built arrays of 17-byte
# keys; each row is timed $REPS times, the filters' rows interleaved, and the
# median CPU time of the process is printed. Every filter has capacity
# 100 000 per window at 0.01 (cache-resident; --capacity changes it, e.g.
# 1000 for generations small enough for the first-level cache, which
# separates the work per call from the cache misses). A windowed filter has every
# generation filled to half its capacity (fill, rotate, fill, ...): the
# oldest with keys of the "old hit" rows, the current one with those of the
# "hit" rows. `contains` looks at the newest generation first, so an item
# of the oldest is its slowest hit. "new" rows add keys never added before, each
# repetition to a fresh copy of the filter made before the timing starts.
# The window is 24 h, so no step falls in a timing.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use POSIX ();

use BenchUtil qw(keys_alike keys_for batches_of cpu_now median machine load_line load_verdict nice_line);
use Data::BloomFilter::Shared;

$| = 1;
my $C = 'Data::BloomFilter::Shared';
GetOptions('quick' => \my $quick, 'nice=i' => \my $nice, 'capacity=i' => \my $capacity)
    or die "usage: perl -Mblib bench/window.pl [--quick] [--nice=N] [--capacity=N]\n";
die "bench/window.pl: --capacity must be at least 2\n" if defined $capacity && $capacity < 2;

my $N     = $quick ? 20_000 : 100_000;    # keys per timed row
my $REPS  = $quick ? 3 : 5;
my $BATCH = 1000;
my $CAP   = $capacity // 100_000;
my $HALF  = int($CAP / 2);
my @GENS  = (2, 4, 8);

say "# bench/window.pl  ", POSIX::strftime('%Y-%m-%d %H:%M:%S UTC', gmtime);
say "# ", machine();
print nice_line($nice);
say load_line('at start');
say "# $N keys per row, median of $REPS runs; batches of $BATCH items; CPU time per call or item";
say "# capacity $CAP is below the $N new keys of a row: the new-item rows fill the filters and",
    "\n# mostly add items already present (compare the query rows only)" if $N > $CAP;

my ($hit, $miss) = keys_alike([qw(f m)], 0, $N > $HALF ? $N : $HALF);
$#$miss = $N - 1;
my @NEW = map { keys_for('n', $_ * $N, $N) } 0 .. 2 * $REPS - 1;
# The oldest generation's keys: the hit keys with an 'o' before them.
my @OLD = map { "o$_" } @$hit[ 0 .. $HALF - 1 ];
my @NEW_BATCHES = map { batches_of($_, $BATCH) } @NEW;
my $MISS_BATCHES = batches_of($miss, $BATCH);

# A filled filter of $layout: plain ($g undef) or with $g generations. The
# older generations hold keys of their own ('o'), the current one the first
# $HALF hit keys.
sub filled {
    my ($layout, $g) = @_;
    my %o = (layout => $layout);
    @o{qw(window generations)} = (86_400, $g) if $g;
    my $f = $C->new(undef, $CAP, 0.01, \%o);
    for my $gen (1 .. ($g // 1) - 1) {
        $f->add_many($gen == 1 ? \@OLD : keys_for("o$gen", 0, $HALF));
        $f->rotate;
    }
    $f->add_many(\@OLD) if !$g;    # a plain filter holds them all
    $f->add_many([ @$hit[ 0 .. $HALF - 1 ] ]);
    return $f;
}

sub timed {
    my ($code) = @_;
    my $t = cpu_now();
    $code->();
    return cpu_now() - $t;
}

# The rows of one filter. The hit rows go through the $HALF keys of the
# current generation, round and round, for $N calls.
my @HITS = ((@$hit[ 0 .. $HALF - 1 ]) x (1 + int($N / $HALF)))[ 0 .. $N - 1 ];
my @OLD_HITS = map { "o$_" } @HITS;
sub rows_for {
    my ($f, $fresh) = @_;
    my $next = 0;
    return (
        ['contains, hit'  => sub { sub { $f->contains($_) for @HITS } }],
        ['contains, old hit' => sub { sub { $f->contains($_) for @OLD_HITS } }],
        ['contains, miss' => sub { sub { $f->contains($_) for @$miss } }],
        ['add, present'   => sub { sub { $f->add($_) for @HITS } }],
        ['add, new item'  => sub {
            my ($c, $keys) = (shift @$fresh, $NEW[$next++]);
            sub { $c->add($_) for @$keys }
        }],
        ['contains_many, misses, per item' => sub { sub { scalar $f->contains_many($_) for @$MISS_BATCHES } }],
        ['add_many, new, per item' => sub {
            my ($c, $batches) = (shift @$fresh, $NEW_BATCHES[$next++]);
            sub { $c->add_many($_) for @$batches }
        }],
    );
}

my @worst;
for my $layout (qw(standard blocked)) {
    say "\n## $layout layout: capacity $CAP per window at 0.01";
    say load_line('before');
    my @kinds = ('plain', map { "g=$_" } @GENS);
    my (%rows, %t);
    for my $k (@kinds) {
        my ($g) = $k =~ /g=(\d+)/;
        my $f = filled($layout, $g);
        # Two fresh copies per repetition: the two "new" rows.
        my @fresh = map { filled($layout, $g) } 1 .. 2 * $REPS;
        $rows{$k} = [rows_for($f, \@fresh)];
        printf "# %-5s %d bits per generation (%.0f KiB), %d hashes, %.2f bytes per item in the window\n",
            $k, $f->bits, $f->bits / 8 / 1024, $f->hashes, ($g // 1) * $f->bits / 8 / $CAP;
    }
    for my $rep (1 .. $REPS) {
        for my $i (0 .. $#{ $rows{plain} }) {
            for my $k (@kinds) {
                my ($name, $make) = @{ $rows{$k}[$i] };
                push @{ $t{$k}{$name} }, timed($make->());
            }
        }
    }
    printf "%-34s %9s %s\n", 'row (ns per call or item)', 'plain', join ' ', map { sprintf '%16s', "$_ (x plain)" } @GENS;
    for my $r (@{ $rows{plain} }) {
        my $name = $r->[0];
        my %ns = map { $_ => median(@{ $t{$_}{$name} }) / $N * 1e9 } @kinds;
        printf "%-34s %9.1f %s\n", $name, $ns{plain},
            join ' ', map { sprintf '%8.1f (%5.2f)', $ns{"g=$_"}, $ns{"g=$_"} / $ns{plain} } @GENS;
        for my $g (@GENS) {
            my $x = $ns{"g=$g"} / $ns{plain};
            push @worst, [$x, "$layout g=$g $name"] if $name =~ /^(add|contains), /;
        }
    }
    say load_line('after');
}
my ($w) = sort { $b->[0] <=> $a->[0] } @worst;
printf "\n# the largest single-call ratio to plain: %.2fx (%s)\n", @$w;
print load_verdict(1);
