#!/usr/bin/perl
# The blocked layout against the standard one, in the same run: cost per
# call (add of a new item, add of a present one, contains hit and miss) and
# per item of a batch of 1000, on a cache-resident filter and on one of
# 256 MiB of bits; and what two processes adding new items at once do
# against one. Every figure is printed as ratios between rows of this run.
#
#   perl -Mblib bench/layouts.pl [--quick]
#
# Method: tight loops over pre-built arrays of 17-byte keys, the same keys
# for both layouts; each row is timed $REPS times, the rows of both layouts
# interleaved, and the median CPU time of the process is printed. The big
# filters are filled with $BIG_FILL items (enough to touch every page; a
# random probe of a 256 MiB array misses the caches at any fill), the small
# ones to half their capacity. "new" rows add keys never added before, each
# repetition to a fresh copy of the filter, so every add really is new.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use POSIX ();

use BenchUtil qw(keys_alike keys_for batches_of fill cpu_now now median machine load_line);
use Data::BloomFilter::Shared;

$| = 1;
my $C = 'Data::BloomFilter::Shared';
GetOptions('quick' => \my $quick) or die "usage: perl -Mblib bench/layouts.pl [--quick]\n";

my $N        = $quick ? 20_000 : 100_000;    # keys per timed row
my $REPS     = $quick ? 3 : 5;
my $BATCH    = 1000;
my $BIG_FILL = $quick ? 1_000_000 : 4_000_000;
my @LAYOUTS  = qw(standard blocked);

say "# bench/layouts.pl  ", POSIX::strftime('%Y-%m-%d %H:%M:%S UTC', gmtime);
say "# ", machine();
say load_line('at start');
say "# $N keys per row, median of $REPS runs; batches of $BATCH items; CPU time per call or item";

my ($fill, $miss) = keys_alike([qw(f m)], 0, $N);
# Keys never added: a set per "new" row and repetition (two rows per run).
my @NEW = map { keys_for('n', $_ * $N, $N) } 0 .. 2 * $REPS - 1;

# A filter of $layout at $cap / 0.01 holding the first $n 'f' keys.
sub filled {
    my ($layout, $cap, $n) = @_;
    my $f = $C->new(undef, $cap, 0.01, { layout => $layout });
    fill($f, $n);
    return $f;
}

# Time $code once: CPU seconds.
sub timed {
    my ($code) = @_;
    my $t = cpu_now();
    $code->();
    return cpu_now() - $t;
}

my @NEW_BATCHES = map { batches_of($_, $BATCH) } @NEW;

# The rows of one filter; the "new" rows take the next unused key set, and a
# fresh copy of the filter from $fresh (made before the timing starts).
sub rows_for {
    my ($f, $fresh) = @_;
    my $bf = batches_of($fill, $BATCH);
    my $bm = batches_of($miss, $BATCH);
    my $next = 0;
    return (
        ['contains, hit'  => sub { sub { $f->contains($_) for @$fill } }],
        ['contains, miss' => sub { sub { $f->contains($_) for @$miss } }],
        ['add, present'   => sub { sub { $f->add($_) for @$fill } }],
        ['add, new item'  => sub {
            my ($g, $keys) = ($fresh->(), $NEW[$next++]);
            sub { $g->add($_) for @$keys }
        }],
        ['contains_many, hits, per item'   => sub { sub { scalar $f->contains_many($_) for @$bf } }],
        ['contains_many, misses, per item' => sub { sub { scalar $f->contains_many($_) for @$bm } }],
        ['add_many, new, per item' => sub {
            my ($g, $batches) = ($fresh->(), $NEW_BATCHES[$next++]);
            sub { $g->add_many($_) for @$batches }
        }],
    );
}

sub measure {
    my ($title, $caps, $nfill) = @_;
    say "\n## $title";
    say load_line('before');
    my (%f, %rows, %t);
    for my $l (@LAYOUTS) {
        my $cap = $caps->{$l};
        $f{$l} = filled($l, $cap, $nfill);
        my $bytes = $cap < 10_000_000 ? $f{$l}->serialize : undef;
        # A fresh copy per "new" repetition: deserialize of the filled one
        # (small), or the filled filter itself (big: N new keys among
        # millions change nothing measurable, and copying 256 MiB per row
        # would cost more than the row).
        my $fresh = defined $bytes ? sub { $C->deserialize($bytes) } : sub { $f{$l} };
        $rows{$l} = [rows_for($f{$l}, $fresh)];
        printf "# %s: %d bits (%s MiB), %d hashes\n", $l, $f{$l}->bits, $f{$l}->bits / 8 / 2**20,
            $f{$l}->hashes;
    }
    for my $rep (1 .. $REPS) {
        for my $i (0 .. $#{ $rows{standard} }) {
            for my $l (@LAYOUTS) {
                my ($name, $make) = @{ $rows{$l}[$i] };
                push @{ $t{$l}{$name} }, timed($make->());
            }
        }
    }
    my %ns;
    for my $l (@LAYOUTS) {
        for my $r (@{ $rows{$l} }) {
            my $name = $r->[0];
            $ns{$l}{$name} = median(@{ $t{$l}{$name} }) / $N * 1e9;
        }
    }
    printf "%-34s %10s %10s %16s\n", 'row (ns per call or item)', 'standard', 'blocked', 'blocked/standard';
    for my $r (@{ $rows{standard} }) {
        my $name = $r->[0];
        printf "%-34s %10.1f %10.1f %16.2f\n", $name, $ns{standard}{$name}, $ns{blocked}{$name},
            $ns{blocked}{$name} / $ns{standard}{$name};
    }
    my %b = %{ $ns{blocked} };
    printf "# blocked add of a new item / blocked contains hit:        %.2f\n",
        $b{'add, new item'} / $b{'contains, hit'};
    printf "# blocked add of a new item / standard add of a new item:  %.2f\n",
        $b{'add, new item'} / $ns{standard}{'add, new item'};
    printf "# blocked single calls / batch per item: contains hit %.2f, miss %.2f, add new %.2f\n",
        $b{'contains, hit'} / $b{'contains_many, hits, per item'},
        $b{'contains, miss'} / $b{'contains_many, misses, per item'},
        $b{'add, new item'} / $b{'add_many, new, per item'};
    say load_line('after');
    return \%f;
}

measure('cache-resident: capacity 100000 at 0.01', { standard => 100_000, blocked => 100_000 }, 50_000);
# 2**31 bits each: the blocked layout needs 12.14 bits per item at 0.01.
my $big = measure('256 MiB of bits: capacity 200000000 (standard), 176000000 (blocked), at 0.01',
    { standard => 200_000_000, blocked => 176_000_000 }, $BIG_FILL);

# --- one process against two, adding new items at once ------------------------------------------
say "\n## new items added by 1 and by 2 processes at once (256 MiB filters, batches of $BATCH)";
for my $l (@LAYOUTS) {
    my $f = $big->{$l};
    my $per = $N * 5;
    my $run = sub {
        my ($procs, $tag) = @_;
        my $t = now();
        my @pids;
        for my $p (1 .. $procs) {
            my $pid = fork // die "fork: $!";
            if (!$pid) {
                for (my $i = 0; $i < $per; $i += $BATCH) {
                    $f->add_many([map { "$tag$p-" . sprintf('%012d', $_) } $i .. $i + $BATCH - 1]);
                }
                POSIX::_exit(0);
            }
            push @pids, $pid;
        }
        waitpid($_, 0) for @pids;
        return $procs * $per / (now() - $t);
    };
    my $one = $run->(1, "a$l");
    my $two = $run->(2, "b$l");
    printf "%-9s 1 process %.2f M adds/s, 2 processes %.2f M adds/s: %.2fx\n", $l, $one / 1e6,
        $two / 1e6, $two / $one;
}
say load_line('at end');
