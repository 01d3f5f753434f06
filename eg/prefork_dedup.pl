#!/usr/bin/perl
# Several worker processes, one filter: the main job of Data::BloomFilter::Shared.
#
# A parent creates a filter, forks four workers (as a prefork server does),
# and every worker consumes a stream of event ids in which each id occurs
# several times, scattered over all workers. Each worker handles an id only
# when `add` says it is new, so across all workers every id is handled once.
#
#   perl -Mblib eg/prefork_dedup.pl            (after perl Makefile.PL && make)
use strict;
use warnings;
use Data::BloomFilter::Shared;
use Time::HiRes qw(time);

my $workers  = shift // 4;
my $distinct = shift // 200_000;
my $repeats  = 3;

# Created before the fork: every child inherits the same shared mapping.
my $seen = Data::BloomFilter::Shared->new(undef, $distinct, 0.001);

pipe(my $r, my $w) or die "pipe: $!";
my $t0 = time;
my @pids;
for my $n (0 .. $workers - 1) {
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        close $r;
        my ($handled, $dups) = (0, 0);
        # Each worker sees a different slice of a stream with repeats.
        for my $pass (1 .. $repeats) {
            for (my $id = ($n + $pass) % $workers; $id < $distinct; $id += $workers) {
                if ($seen->add("event:$id")) { $handled++ } else { $dups++ }
            }
        }
        syswrite $w, "$$ $handled $dups\n";
        exit 0;
    }
    push @pids, $pid;
}
close $w;
my ($total, $dups) = (0, 0);
while (my $line = <$r>) {
    my ($pid, $h, $d) = split ' ', $line;
    printf "worker %-7d handled %7d, skipped %7d duplicates\n", $pid, $h, $d;
    $total += $h;
    $dups  += $d;
}
waitpid $_, 0 for @pids;
my $dt = time - $t0;

printf "\n%d workers handled %d events once each (%d distinct ids; %d duplicates skipped)\n",
    $workers, $total, $distinct, $dups;
printf "missed by false positives: %d (%.4f%%; target rate %.2f%%)\n",
    $distinct - $total, 100 * ($distinct - $total) / $distinct, 100 * $seen->fp_rate;
printf "%.0f adds/s across processes; filter: %d bits, %d hashes, ~%d items, %.1f%% full\n",
    $distinct * $repeats / $dt, $seen->bits, $seen->hashes, $seen->count, 100 * $seen->fill_ratio;
