#!/usr/bin/perl
# Filters that grow against plain ones of the same layout, in the same run:
# cost per call of `add` (new and present items) and `contains` (hit and
# miss), and per item of batches of 1000, for grow 2 and 4, after the
# filter has grown to 100 times its first capacity; then the cost of a
# query miss against the number of stages. Every figure is printed as a
# ratio to a plain filter's row of this run.
#
#   perl -Mblib bench/grow.pl [--quick] [--nice=-10] [--first=N]
#
# Method: as bench/window.pl. Tight loops over pre-built arrays of 17-byte
# keys; each row is timed $REPS times, the filters' rows interleaved, and
# the median CPU time of the process is printed.
#
# Part 1. A grown filter has first capacity 1000 (--first) at 0.01 and
# holds 100 times that many items (1000 times its first capacity are in
# tests/growth_fp.rs). The targets (grow 4: hits at most 1.5 times,
# misses at most 2 times) are judged against a plain filter of the same
# final size, "same size": the same layout and rate, at most the grow 4
# filter's bits, as near as its layout allows (its capacity scaled up to
# match; the standard layout's power-of-two sizes leave it smaller), and
# holding the same items. Like the grown filter's stages, it outgrows the
# processor's caches. A second plain filter, "plain", is sized for the
# items added (capacity = the items) and holds them: the filter a user who
# knew the count would have made, fewer bits than the grown filter (its
# stages are tighter and its newest stage mostly empty room), all of them
# in a core's second-level cache. The grown filters are printed against
# both; the sizes are printed too. Hit rows query every added item
# (so the stages are hit in proportion to the items they hold), round and
# round for $N calls; miss rows query items never added.
# New-item rows add the last $N items of the 100 times: each repetition
# gets a fresh pair, a grown and a plain filter holding the first
# 100 * first - $N items, made before the timing starts, so that both add
# the same keys at the same fill. With grow 4 the stretch includes a
# growth (the fifth stage is added at 85 times the first capacity), which is
# part of what an add costs on average.
#
# Part 2. Misses against stages: filters of grow 2 and first capacity 1
# filled to the total capacity of 1, 2, 4, 8 and 16 stages (each stage
# full: the most work a miss does in it; 65535 items for 16 stages, whose
# bits stay in the second-level cache, so that the rows count the work per
# stage rather than cache misses, which part 1 has), and a plain filter of
# the same items beside each. A miss asks every stage.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use POSIX ();

use BenchUtil qw(keys_alike batches_of now cpu_now median machine load_line load_verdict nice_line);
use Data::BloomFilter::Shared;

$| = 1;
my $C = 'Data::BloomFilter::Shared';
GetOptions('quick' => \my $quick, 'nice=i' => \my $nice, 'first=i' => \my $first)
    or die "usage: perl -Mblib bench/grow.pl [--quick] [--nice=N] [--first=N]\n";
die "bench/grow.pl: --first must be at least 100\n" if defined $first && $first < 100;

my $FIRST = $first // 1000;
my $TIMES = 100;
my $ITEMS = $FIRST * $TIMES;
my $N     = $quick ? 10_000 : 20_000;    # keys per timed row
$N = int($ITEMS / 5) if $N > $ITEMS / 5;
my $REPS  = $quick ? 3 : 5;
my $BATCH = 1000;
my $FP    = 0.01;
my @GROW  = (2, 4);

say "# bench/grow.pl  ", POSIX::strftime('%Y-%m-%d %H:%M:%S UTC', gmtime);
say "# ", machine();
print nice_line($nice);
say load_line('at start');
say "# $N keys per row, median of $REPS runs; batches of $BATCH items; CPU time per call or item";

# 'f': added (the first $ITEMS - $N before a new-item row, the rest by it),
# 'm': never added.
my ($added, $miss) = keys_alike([qw(f m)], 0, $ITEMS);
$#$miss = $N - 1;
my @BEFORE = @$added[ 0 .. $ITEMS - $N - 1 ];
my @STRETCH = @$added[ $ITEMS - $N .. $ITEMS - 1 ];
my $STRETCH_BATCHES = batches_of(\@STRETCH, $BATCH);
my $MISS_BATCHES = batches_of($miss, $BATCH);
# Every added item once, spread over the whole set, for the hit rows.
my $step = int($ITEMS / $N);
my @HITS = map { $added->[ $_ * $step ] } 0 .. $N - 1;
my $HIT_BATCHES = batches_of(\@HITS, $BATCH);

# CPU and wall time of the timed loops, for the CPU share lines.
my ($cpu_sum, $wall_sum) = (0, 0);

sub timed {
    my ($code) = @_;
    my ($w, $t) = (now(), cpu_now());
    $code->();
    my $cpu = cpu_now() - $t;
    ($cpu_sum, $wall_sum) = ($cpu_sum + $cpu, $wall_sum + now() - $w);
    return $cpu;
}

sub share_line {
    my $l = sprintf "# CPU share while timing: %.0f%% of the wall time\n", $wall_sum ? 100 * $cpu_sum / $wall_sum : 100;
    ($cpu_sum, $wall_sum) = (0, 0);
    return $l;
}

sub make {
    my ($layout, $grow, $items, $capacity) = @_;
    my $f = $grow
        ? $C->new(undef, $FIRST, $FP, { layout => $layout, grow => $grow })
        : $C->new(undef, $capacity // $ITEMS, $FP, { layout => $layout });
    $f->add_many($_) for @{ batches_of($items, 10_000) };
    return $f;
}

sub rows_for {
    my ($f, $fresh) = @_;
    return (
        ['contains, hit'  => sub { sub { $f->contains($_) for @HITS } }],
        ['contains, miss' => sub { sub { $f->contains($_) for @$miss } }],
        ['add, present'   => sub { sub { $f->add($_) for @HITS } }],
        ['add, new item'  => sub {
            my $c = shift @$fresh;
            sub { $c->add($_) for @STRETCH }
        }],
        ['contains_many, hits, per item'   => sub { sub { scalar $f->contains_many($_) for @$HIT_BATCHES } }],
        ['contains_many, misses, per item' => sub { sub { scalar $f->contains_many($_) for @$MISS_BATCHES } }],
        ['add_many, present, per item'     => sub { sub { scalar $f->add_many($_) for @$HIT_BATCHES } }],
        ['add_many, new, per item' => sub {
            my $c = shift @$fresh;
            sub { scalar $c->add_many($_) for @$STRETCH_BATCHES }
        }],
    );
}

my @summary;
for my $layout (qw(standard blocked)) {
    say "\n## $layout layout: first capacity $FIRST at $FP, grown to ${TIMES}x ($ITEMS items);",
        " plain: capacity $ITEMS (the same items); same size: at most the grow 4 filter's bits";
    say load_line('before');
    my @kinds = ('plain', (map { "grow $_" } @GROW), 'same size');
    my (%rows, %t, %bits);
    for my $k (@kinds) {
        my ($g) = $k =~ /grow (\d+)/;
        # The plain filter of the grow 4 filter's size: its capacity scaled
        # by the ratio of their bits, then made smaller until its bits are
        # no more (the standard layout rounds m up to a power of two: the
        # largest one below; the sizes printed say how near it came).
        my $cap;
        if ($k eq 'same size') {
            $cap = int($ITEMS * $bits{'grow 4'} / $bits{plain});
            $cap = int($cap * 0.95) while $C->new(undef, $cap, $FP, { layout => $layout })->bits > $bits{'grow 4'};
        }
        my $f = make($layout, $g, $added, $cap);
        $bits{$k} = $f->bits;
        # Two fresh filters per repetition: the two new-item rows.
        my @fresh = map { make($layout, $g, \@BEFORE, $cap) } 1 .. 2 * $REPS;
        $rows{$k} = [rows_for($f, \@fresh)];
        printf "# %-7s %2d stage(s), %9d bits (%6.0f KiB), %5.2f bits per item\n",
            $k, $f->stages, $f->bits, $f->bits / 8 / 1024, $f->bits / $ITEMS;
    }
    for my $rep (1 .. $REPS) {
        for my $i (0 .. $#{ $rows{plain} }) {
            for my $k (@kinds) {
                my ($name, $make) = @{ $rows{$k}[$i] };
                push @{ $t{$k}{$name} }, timed($make->());
            }
        }
    }
    printf "%-34s %9s %s %9s %9s\n", 'row (ns per call or item)', 'plain',
        (join ' ', map { sprintf '%17s', "grow $_ (x plain)" } @GROW), 'same size', 'g4 x same';
    for my $r (@{ $rows{plain} }) {
        my $name = $r->[0];
        my %ns = map { $_ => median(@{ $t{$_}{$name} }) / $N * 1e9 } @kinds;
        printf "%-34s %9.1f %s %9.1f %9.2f\n", $name, $ns{plain},
            (join ' ', map { sprintf '%9.1f (%5.2f)', $ns{"grow $_"}, $ns{"grow $_"} / $ns{plain} } @GROW),
            $ns{'same size'}, $ns{'grow 4'} / $ns{'same size'};
        push @summary, [$layout, $_, $name, $ns{"grow $_"} / $ns{plain}, $ns{"grow $_"} / $ns{'same size'}]
            for @GROW;
    }
    print share_line();
    say load_line('after');
}

# A row's kind for the targets: a query or an add of a present item is a
# hit, of an absent (new) item a miss.
sub target_of {
    my ($name) = @_;
    return $name =~ /^contains(?:_many)?, hit|^add(?:_many)?, present/ ? 1.5 : 2;
}

say "\n# the targets with grow 4: hits at most 1.5x, misses at most 2x (adds of present items are hits,",
    " of new items misses),\n# judged against the plain filter of the same final size; beside it, against",
    " the plain filter sized for the same items";
for my $s (grep { $_->[1] == 4 } @summary) {
    my ($layout, $g, $name, $x, $y) = @$s;
    my $target = target_of($name);
    my $verdict = sub { $_[0] <= $target ? 'met' : "MISSED (target $target)" };
    printf "#   %-8s %-32s same size %5.2fx %-22s same items %5.2fx %s\n", $layout, $name, $y,
        $verdict->($y), $x, $x <= $target ? "" : "(over $target)";
}

# ---------------------------------------------------------------- part 2

my $SMALL = 1;
my @STAGES = (1, 2, 4, 8, 16);
say "\n## a miss against the number of stages: grow 2, first capacity $SMALL at $FP,",
    " every stage full; plain: a filter of the same items";
say load_line('before');
my $most = $SMALL * (2**$STAGES[-1] - 1);
my ($fill) = keys_alike(['s'], 0, $most);
for my $layout (qw(standard blocked)) {
    say "### $layout";
    my (%f, %t);
    for my $s (@STAGES) {
        my $items = $SMALL * (2**$s - 1);
        my @keys = @$fill[ 0 .. $items - 1 ];
        my $g = $C->new(undef, $SMALL, $FP, { layout => $layout, grow => 2 });
        $g->add_many($_) for @{ batches_of(\@keys, 10_000) };
        my $p = $C->new(undef, $items, $FP, { layout => $layout });
        $p->add_many($_) for @{ batches_of(\@keys, 10_000) };
        $f{$s} = [$g, $p];
    }
    for my $rep (1 .. $REPS) {
        for my $s (@STAGES) {
            my ($g, $p) = @{ $f{$s} };
            push @{ $t{$s}{grown} }, timed(sub { $g->contains($_) for @$miss });
            push @{ $t{$s}{plain} }, timed(sub { $p->contains($_) for @$miss });
        }
    }
    print share_line();
    printf "%8s %8s %10s %10s %9s %9s %10s\n", 'stages', 'items', 'bits', 'grown ns', 'x 1 stage',
        'plain ns', 'x plain';
    my $one;
    my @pts;
    for my $s (@STAGES) {
        my ($g, $p) = @{ $f{$s} };
        my $gn = median(@{ $t{$s}{grown} }) / $N * 1e9;
        my $pn = median(@{ $t{$s}{plain} }) / $N * 1e9;
        $one //= $gn;
        push @pts, [$g->stages, $gn];
        printf "%8d %8d %10d %10.1f %9.2f %9.1f %10.2f\n", $g->stages, $SMALL * (2**$s - 1), $g->bits,
            $gn, $gn / $one, $pn, $gn / $pn;
    }
    # The least-squares slope of ns against stages: what each stage adds.
    my ($mx, $my) = (0, 0);
    $mx += $_->[0] / @pts, $my += $_->[1] / @pts for @pts;
    my ($sxy, $sxx) = (0, 0);
    for (@pts) {
        $sxy += ($_->[0] - $mx) * ($_->[1] - $my);
        $sxx += ($_->[0] - $mx)**2;
    }
    printf "# each further stage adds %.1f ns to a miss (least squares over the rows),"
        . " %.1f ns from 8 to 16 stages\n", $sxy / $sxx, ($pts[-1][1] - $pts[-2][1]) / ($pts[-1][0] - $pts[-2][0]);
}
say load_line('after');
print load_verdict(1);
