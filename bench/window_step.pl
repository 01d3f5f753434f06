#!/usr/bin/perl
# The latency of single adds while generation steps happen, on a windowed
# filter of 256 MiB generations, against a plain filter of the same size in
# the same run: what README's "Windowed filters" says of steps.
#
#   perl -Mblib bench/window_step.pl [--seconds N] [--procs N] [--nice=-10]
#       [--layout blocked]
#
# Method: `procs` processes add new items one call at a time for `seconds`
# seconds, timing every call (CLOCK_MONOTONIC around it, so each figure
# includes about 0.1 us of timing). The windowed filter has a 3 s window and
# 4 generations: a step every second, taken by whichever add finds it due;
# the generation discarded is cleared by later adds, 64 KiB each. Every
# process's slowest calls are printed with how long after the latest step
# time (a whole second of the filter's grid) they ended, so the calls that
# stepped or cleared (a few ms after one) can be told from the rest. The plain
# filter's rows are the baseline: page faults and scheduling show there
# too. The filters are anonymous shared memory (5 x 256 MiB and 256 MiB).
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use POSIX ();
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

use BenchUtil qw(machine load_line nice_line);
use Data::BloomFilter::Shared;

$| = 1;
my $C = 'Data::BloomFilter::Shared';
my ($seconds, $procs, $layout) = (6, 2, 'standard');
GetOptions('seconds=i' => \$seconds, 'procs=i' => \$procs, 'nice=i' => \my $nice, 'layout=s' => \$layout)
    or die "usage: perl -Mblib bench/window_step.pl [--seconds N] [--procs N] [--nice=N] [--layout L]\n";

say "# bench/window_step.pl  ", POSIX::strftime('%Y-%m-%d %H:%M:%S UTC', gmtime);
say "# ", machine();
print nice_line($nice);
say load_line('at start');

# 200 000 000 items at 0.01: 2**31 bits, 256 MiB, in the standard layout
# (the blocked one, sized for the same rate, takes a little more). Its
# steps also wait for the lock-free adds in flight.
my $CAP = 200_000_000;
say "# layout $layout";

# Run the adders on $f; returns per process: calls, median, 99.9th
# percentile, worst, and the five worst calls with the generation after.
sub run {
    my ($f, $tag, $st) = @_;
    my $period = $f->window ? $st->{window} / ($st->{generations} - 1) : undef;
    my @kids;
    for my $p (1 .. $procs) {
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            my (@lat, @worst);
            my $end = clock_gettime(CLOCK_MONOTONIC) + $seconds;
            my $i = 0;
            my $near = 0;    # the worst call ending within 10 ms after a step time
            while (1) {
                my $t0 = clock_gettime(CLOCK_MONOTONIC);
                $f->add("$tag-$p-" . $i++);
                my $t1 = clock_gettime(CLOCK_MONOTONIC);
                my $us = ($t1 - $t0) * 1e6;
                push @lat, $us;
                if ($period) {
                    my $since = Time::HiRes::time() - $st->{generation_start};
                    $since -= int($since / $period) * $period;
                    $near = $us if $since < 0.01 && $us > $near;
                }
                if (@worst < 5 || $us > $worst[-1][0]) {
                    @worst = (sort { $b->[0] <=> $a->[0] } @worst, [$us, Time::HiRes::time()])[0 .. (@worst < 5 ? $#worst + 1 : 4)];
                }
                last if $t1 > $end;
            }
            @lat = sort { $a <=> $b } @lat;
            syswrite $w, join(' ', scalar @lat, $lat[@lat / 2], $lat[int(@lat * 0.999)], $lat[-1], $near,
                map { sprintf '%.1f@%.6f', @$_ } @worst) . "\n";
            POSIX::_exit(0);
        }
        close $w;
        push @kids, [$pid, $r];
    }
    my @out;
    for my $k (@kids) {
        my $line = readline $k->[1];
        waitpid $k->[0], 0;
        push @out, [split ' ', $line // ''];
    }
    return @out;
}

my @rows;
for my $kind ('plain', 'windowed') {
    my %o = (layout => $layout, $kind eq 'windowed' ? (window => 3, generations => 4) : ());
    my $t = clock_gettime(CLOCK_MONOTONIC);
    my $f = $C->new(undef, $CAP, 0.01, \%o);
    printf "# %s: %d bits per generation (%d MiB), made in %.1f s\n", $kind, $f->bits, $f->bits / 8 / 2**20,
        clock_gettime(CLOCK_MONOTONIC) - $t;
    my $st = $f->stats;
    for my $r (run($f, $kind, $st)) {
        my ($n, $med, $p999, $max, $near, @worst) = @$r;
        # Each worst call: its time in us, then ms since the latest step
        # time before it (the grid: whole periods from a generation start).
        my @shown = map {
            my ($us, $at) = split /@/;
            $f->window
                ? sprintf('%s@+%.1fms', $us, 1e3 * ($at - $st->{generation_start}
                    - int(($at - $st->{generation_start}) / ($st->{window} / 3)) * ($st->{window} / 3)))
                : $us
        } @worst;
        printf "%-9s %8d calls  median %5.2f us  99.9%% %6.2f us  worst %8.1f us%s  five worst: %s\n",
            $kind, $n, $med, $p999, $max, $f->window ? sprintf('  worst within 10 ms after a step %.1f us', $near) : '',
            "@shown";
        push @rows, [$kind, $max];
    }
    printf "# windowed: %d steps during the run\n", $f->stats->{generation} - $st->{generation} if $f->window;
    if ($f->window) {
        my $t0 = clock_gettime(CLOCK_MONOTONIC);
        $f->rotate;
        printf "# windowed: rotate (a step and the whole 256 MiB clear) took %.1f ms\n",
            (clock_gettime(CLOCK_MONOTONIC) - $t0) * 1e3;
    }
}
my ($pw) = sort { $b <=> $a } map { $_->[1] } grep { $_->[0] eq 'plain' } @rows;
my ($ww) = sort { $b <=> $a } map { $_->[1] } grep { $_->[0] eq 'windowed' } @rows;
printf "\n# worst single add: windowed %.1f us, plain %.1f us (%.2fx)\n", $ww, $pw, $ww / $pw;
say load_line('at end');
