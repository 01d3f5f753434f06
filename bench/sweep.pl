#!/usr/bin/perl
# Per-item cost of add / contains (single calls) and add_many / contains_many
# (batches of 1000) as the filter grows from 64 KiB to 256 MiB of bits, each
# filter half full. Writes a data file for bench/plot.sh (ns per item, and
# the bare accessor call $f->bits as the baseline of the same run) and
# prints the same figures as ratios to that baseline.
#
#   perl -Mblib bench/sweep.pl [--quick] [--nice N] [--out FILE]
#
# Sizes double (x4 with --quick, up to 16 MiB). Fill: m*ln2/k items, which
# sets about half the bits. Rows, as in bench/calls.pl: contains of present
# items; add of new items, spread over fresh copies of the filled filter so
# that no copy grows by more than a tenth of its capacity (the copies are
# made untimed). Median of the runs; CPU time of this process.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use POSIX ();

use BenchUtil qw(
    keys_for keys_alike batches_of now cpu_now median load_line load_verdict machine
    nice_line human_bytes thp_setting note warm_copies
);
use Data::BloomFilter::Shared;

$| = 1;    # progress is visible when the output goes to a file
my $CLASS = 'Data::BloomFilter::Shared';

my $out = "$FindBin::Bin/out/sweep.dat";
GetOptions('quick' => \my $quick, 'nice=i' => \my $nice, 'out=s' => \$out)
    or die "usage: perl -Mblib bench/sweep.pl [--quick] [--nice N] [--out FILE]\n";

my $N     = $quick ? 20_000 : 100_000;
my $REPS  = $quick ? 3 : 5;
my $BATCH = 1000;
my $K     = 7;    # hashes at fp 0.01
my @bits  = map { 2**$_ } $quick ? (19, 21, 23, 25, 27) : (19 .. 31);

my ($hit, $new) = keys_alike([qw(f n)], 0, $N);
my $hitb = batches_of($hit, $BATCH);
my $warm = keys_for('w', 0, 500);    # see the add-new rows

sub caches {
    my @c;
    for my $d (glob '/sys/devices/system/cpu/cpu0/cache/index*') {
        open my $t, '<', "$d/type" or next;
        next if <$t> =~ /Instruction/;
        open my $l, '<', "$d/level" or next;
        open my $s, '<', "$d/size" or next;
        my ($level, $size) = (scalar <$l>, scalar <$s>);
        chomp($level, $size);
        $size = $1 * ($2 eq 'M' ? 1 << 20 : 1 << 10) if $size =~ /^(\d+)([KM])$/;
        push @c, [ "L$level", $size ];
    }
    return @c;
}

my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my @head = (
    "bench/sweep.pl" . ($quick ? ' --quick' : '') . "  $started",
    machine(),
    nice_line($nice) =~ s/^# //r =~ s/\n//r,
    'shmem_enabled (transparent huge pages for shared memory): ['
        . (thp_setting() // 'unknown') . ']',
    "$N items per row, median of $REPS runs, CPU time; batches of $BATCH (scalar context)",
);
print "# $_\n" for @head;
print load_line('at start');

my @rows = (
    [ 'contains', 'contains, hit (single calls)' ],
    [ 'add', 'add, new items (single calls)' ],
    [ 'contains_many', 'contains_many hit, per item' ],
    [ 'add_many', 'add_many new, per item' ],
);

# All filters are filled together: each batch of keys is made once (making
# keys in Perl is most of the filling time) and goes to every filter that
# still takes keys.
my %filter;
my $maxcap = 0;
for my $m (@bits) {
    my $cap = int($m * log(2) / $K);
    my $f = $CLASS->new(undef, $cap, 0.01);
    die "capacity $cap gave " . $f->bits . " bits, not $m\n" if $f->bits != $m;
    $filter{$m} = [ $f, $cap ];
    $maxcap = $cap if $cap > $maxcap;
}
note("filling the filters with up to $maxcap items in batches of 10000...");
my $t0 = now();
for (my $i = 0; $i < $maxcap; $i += 10_000) {
    my $keys = keys_for('f', $i, $maxcap - $i < 10_000 ? $maxcap - $i : 10_000);
    for my $m (@bits) {
        my ($f, $cap) = @{ $filter{$m} };
        next if $cap <= $i;
        $f->add_many($cap >= $i + @$keys ? $keys : [ @$keys[ 0 .. $cap - $i - 1 ] ]);
    }
}
printf "# filled with add_many in batches of 10000 in %.0f s\n", now() - $t0;

my @data;
my ($cpu, $wall) = (0, 0);
printf "\n%10s %10s %9s %9s %9s %9s   (x accessor)\n", 'bits', 'accessor',
    map { $_->[0] } @rows;
for my $m (@bits) {
    my ($f, $cap) = @{ delete $filter{$m} };
    note('measuring ' . human_bytes($m / 8) . '...');

    # Add-new rows: $per new items into each of $ncopies fresh copies.
    my $per = int(($cap / 10 < $N ? $cap / 10 : $N) / $BATCH) * $BATCH;
    $per = $BATCH if $per < $BATCH;
    my $ncopies = int(($N + $per - 1) / $per);
    my @chunks  = map { [ grep defined, @$new[ $_ * $per .. ($_ + 1) * $per - 1 ] ] }
        0 .. $ncopies - 1;
    my @bchunks = map { batches_of($_, $BATCH) } @chunks;
    my $copies = sub { warm_copies($f, $cap, $ncopies, $warm) };

    my %run = (
        accessor => sub { for my $k (@$hit) { $f->bits } },
        contains => sub { for my $k (@$hit) { $f->contains($k) } },
        contains_many => sub { for my $b (@$hitb) { my $n = $f->contains_many($b) } },
        add => sub {
            my ($gs) = @_;
            for my $j (0 .. $#$gs) {
                my $g = $gs->[$j];
                for my $k (@{ $chunks[$j] }) { $g->add($k) }
            }
        },
        add_many => sub {
            my ($gs) = @_;
            for my $j (0 .. $#$gs) {
                my $g = $gs->[$j];
                for my $b (@{ $bchunks[$j] }) { my $n = $g->add_many($b) }
            }
        },
    );
    my %ns;
    for my $rep (1 .. $REPS) {
        for my $name (qw(accessor contains add contains_many add_many)) {
            my $ctx = $name =~ /^add/ ? $copies->() : undef;
            my $w0 = now();
            my $t0 = cpu_now();
            $run{$name}->($ctx);
            my $dt = cpu_now() - $t0;
            $wall += now() - $w0;
            $cpu += $dt;
            push @{ $ns{$name} }, $dt * 1e9 / $N;
        }
    }
    my %med = map { $_ => median(@{ $ns{$_} }) } keys %ns;
    push @data, [ $m / 8, map { $med{$_} } qw(accessor contains add contains_many add_many) ];
    printf "%10s %8.1fns %8.2fx %8.2fx %8.2fx %8.2fx   fill %.2f\n",
        human_bytes($m / 8), $med{accessor},
        (map { $med{ $_->[0] } / $med{accessor} } @rows), $f->fill_ratio;
}
printf "\n# CPU share while timing: %.0f%% of the wall time\n", 100 * $cpu / $wall;
print load_line('at end'), load_verdict(1);

open my $fh, '>', $out or die "$out: $!\n";
print {$fh} "# $_\n" for @head;
print {$fh} "# cache $_->[0] $_->[1]\n" for caches();
print {$fh} "# bytes_of_bits accessor_ns ", join(' ', map { "$_->[0]_ns" } @rows), "\n";
printf {$fh} "%d %.2f %.2f %.2f %.2f %.2f\n", @$_ for @data;
close $fh or die "$out: $!\n";
note("wrote $out");
