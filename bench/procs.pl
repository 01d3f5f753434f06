#!/usr/bin/perl
# One process against two on one anonymous filter: aggregate throughput of
# two processes divided by that of one, measured in the same run.
#
#   perl -Mblib bench/procs.pl [--quick] [--nice N]
#
# Filter: capacity 10_000_000 at 0.01 (2**27 bits, 16 MiB). Workloads:
#   add       disjoint new items (each worker its own keys) into an empty filter
#   contains  queries, half present and half absent, on a filter holding
#             5_000_000 items
#   mix       90% contains / 10% add of new items, on a copy of that filter
# each with single calls and with batches of 1000 (add_many / contains_many;
# the mix batches are 9 contains_many to 1 add_many).
#
# Every worker is a forked child that builds its keys, waits at a barrier,
# then works for a fixed time and counts its operations. Throughput is the
# sum over workers of ops / own elapsed time. The fixed time is chosen from
# a short calibration run so that no worker runs out of new keys. Each
# configuration runs 3 times, the one- and two-process runs alternating;
# the ratio is median(two) / median(one). A fresh filter is made (untimed,
# its pages touched) for every add and mix run, so every run starts from
# the same state.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use POSIX ();

use BenchUtil qw(
    keys_for batches_of fill now cpu_now median load_line load_verdict machine nice_line note
);
use Data::BloomFilter::Shared;

$| = 1;    # progress is visible when the output goes to a file
my $CLASS = 'Data::BloomFilter::Shared';

GetOptions('quick' => \my $quick, 'nice=i' => \my $nice)
    or die "usage: perl -Mblib bench/procs.pl [--quick] [--nice N]\n";

my $CAP      = 10_000_000;
my $PREFILL  = 5_000_000;
my $RUNS     = 3;
my $DURATION = $quick ? 0.3 : 1.0;     # seconds per run, at most
my $BATCH    = 1000;
my $K_QUERY  = $quick ? 200_000 : 1_000_000;    # query keys per worker, reused
my $K_NEW    = $quick ? 1_000_000 : 4_000_000;    # new keys per worker, used once
my $NPROCS   = 2;

my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
print "# bench/procs.pl", ($quick ? ' --quick' : ''), "  $started\n";
print "# ", machine(), "\n";
print nice_line($nice);
print load_line('at start');
print "# filter: capacity $CAP, fp 0.01; $RUNS runs per configuration, median;",
    " at most $DURATION s per run\n";
print "# ratio = aggregate throughput of $NPROCS processes / throughput of 1;",
    " the original C module gave 0.90x (add), 1.51x (contains), 0.71x (mix)\n";
print "# cpu = lowest share of its wall time a worker had a CPU (below ~95%:",
    " other work took CPU time)\n";
print "# per-cpu = the same ratio from ops per CPU-second x workers:",
    " what sharing the filter costs, with waiting for a CPU left out\n";

note("filling the shared query filter with $PREFILL items...");
my $prefilled = $CLASS->new(undef, $CAP, 0.01);
fill($prefilled, $PREFILL, 10_000);
printf "# the contains and mix filter holds %d items: fill ratio %.2f\n",
    $PREFILL, $prefilled->fill_ratio;

# ------------------------------------------------ workloads

# Keys of worker $w. Query keys alternate present ('f', from the prefilled
# set) and absent ('m'); new keys ('n') are disjoint between workers.
sub query_chunks {
    my ($w) = @_;
    my $half = $K_QUERY / 2;
    my $from = ($w * $half) % ($PREFILL - $half);
    my $f = keys_for('f', $from, $half);
    my $m = keys_for('m', $w * $half, $half);
    return batches_of([ map { ($f->[$_], $m->[$_]) } 0 .. $half - 1 ], $BATCH);
}

sub new_chunks {
    my ($w, $size) = @_;
    return batches_of(keys_for('n', $w * $K_NEW, $K_NEW), $size);
}

sub fresh_empty {
    my $f = $CLASS->new(undef, $CAP, 0.01);
    $f->invert;    # touch every page now, not while timing
    $f->invert;
    return $f;
}

sub fresh_copy {
    my $f = $CLASS->new(undef, $CAP, 0.01);
    $f->merge($prefilled);
    return $f;
}

# Each workload: the filter for a run, the worker's keys, and the worker
# loop: work until $deadline, return (ops, ran out of keys).
my @WORKLOADS = (
    {   name => 'add', filter => \&fresh_empty, new_share => 1,
        keys => sub { { new => new_chunks($_[0], $BATCH) } },
        single => sub {
            my ($f, $k, $deadline) = @_;
            my $ops = 0;
            for my $c (@{ $k->{new} }) {
                for my $item (@$c) { $f->add($item) }
                $ops += @$c;
                return ($ops, 0) if now() >= $deadline;
            }
            return ($ops, 1);
        },
        batch => sub {
            my ($f, $k, $deadline) = @_;
            my $ops = 0;
            for my $c (@{ $k->{new} }) {
                $f->add_many($c);
                $ops += @$c;
                return ($ops, 0) if now() >= $deadline;
            }
            return ($ops, 1);
        },
    },
    {   name => 'contains', filter => sub { $prefilled }, new_share => 0,
        keys => sub { { query => query_chunks($_[0]) } },
        single => sub {
            my ($f, $k, $deadline) = @_;
            my $ops = 0;
            while (1) {
                for my $c (@{ $k->{query} }) {
                    for my $item (@$c) { $f->contains($item) }
                    $ops += @$c;
                    return ($ops, 0) if now() >= $deadline;
                }
            }
        },
        batch => sub {
            my ($f, $k, $deadline) = @_;
            my $ops = 0;
            while (1) {
                for my $c (@{ $k->{query} }) {
                    $f->contains_many($c);
                    $ops += @$c;
                    return ($ops, 0) if now() >= $deadline;
                }
            }
        },
    },
    {   name => 'mix 90/10', filter => \&fresh_copy, new_share => 0.1,
        # single: 900 queries and 100 adds per round, 9 queries then 1 add;
        # batch: 9 contains_many and 1 add_many of 1000 per round.
        keys => sub {
            my ($w, $mode) = @_;
            return { query => query_chunks($w),
                     new => new_chunks($w, $mode eq 'single' ? $BATCH / 10 : $BATCH) };
        },
        single => sub {
            my ($f, $k, $deadline) = @_;
            my ($ops, $q) = (0, $k->{query});
            my $qi = 0;
            for my $n (@{ $k->{new} }) {
                my $c = $q->[ $qi++ % @$q ];
                for my $i (0 .. $#$n) {
                    $f->contains($_) for @$c[ 9 * $i .. 9 * $i + 8 ];
                    $f->add($n->[$i]);
                }
                $ops += 10 * @$n;
                return ($ops, 0) if now() >= $deadline;
            }
            return ($ops, 1);
        },
        batch => sub {
            my ($f, $k, $deadline) = @_;
            my ($ops, $q) = (0, $k->{query});
            my $qi = 0;
            for my $n (@{ $k->{new} }) {
                for (1 .. 9) { $f->contains_many($q->[ $qi++ % @$q ]) }
                $f->add_many($n);
                $ops += 10 * @$n;
                return ($ops, 0) if now() >= $deadline;
            }
            return ($ops, 1);
        },
    },
);

# ------------------------------------------------ running workers

# Run $nproc workers for at most $duration s; returns a hash of results.
sub run_config {
    my ($wl, $mode, $nproc, $duration) = @_;
    my $f = $wl->{filter}->();
    pipe(my $ready_r, my $ready_w) or die "pipe: $!";
    pipe(my $go_r, my $go_w) or die "pipe: $!";
    pipe(my $res_r, my $res_w) or die "pipe: $!";
    my @pids;
    for my $w (0 .. $nproc - 1) {
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            close $_ for $ready_r, $go_w, $res_r;
            my $keys = $wl->{keys}->($w, $mode);
            # Claim this process's slot (and warm the code) before timing.
            $f->add("warm-up $w") if $wl->{new_share};
            syswrite $ready_w, 'r';
            sysread $go_r, my $buf, 1;    # EOF: the parent closed it for all
            my $c0 = cpu_now();
            my $t0 = now();
            my ($ops, $out) = $wl->{$mode}->($f, $keys, $t0 + $duration);
            my $t = now() - $t0;
            my $c = cpu_now() - $c0;
            syswrite $res_w, "$ops $t $c $out\n";
            POSIX::_exit(0);    # skip freeing millions of keys
        }
        push @pids, $pid;
    }
    close $_ for $ready_w, $go_r, $res_w;
    for (1 .. $nproc) {
        (sysread($ready_r, my $buf, 1) // 0) == 1 or die "a worker died before the start\n";
    }
    close $go_w;    # go
    my @res = map { [ split ' ' ] } <$res_r>;
    waitpid $_, 0 for @pids;
    die "only " . @res . " of $nproc workers reported\n" if @res != $nproc;
    my %r = (rate => 0, cpu_rate => 0, cpu => 1, out => 0);
    for (@res) {
        my ($ops, $t, $c, $out) = @$_;
        $r{rate} += $ops / $t;
        $r{cpu_rate} += $ops / $c;
        $r{cpu} = $c / $t if $c / $t < $r{cpu};
        $r{out} ||= $out;
    }
    $r{cpu_rate} /= $nproc;    # per worker: compared with one worker's
    return \%r;
}

# ------------------------------------------------ measuring

printf "\n%-10s %-7s %6s %13s %13s %7s %5s %5s %8s %6s\n",
    'workload', 'calls', 'time', '1 proc Mop/s', "$NPROCS proc Mop/s", 'ratio',
    'cpu1', 'cpu2', 'per-cpu', 'goal';
my @loads = (load_line('before timing'));
for my $wl (@WORKLOADS) {
    for my $mode (qw(single batch)) {
        note("$wl->{name}, $mode: calibrating...");
        # Long enough to count well, short enough that no worker runs out of
        # new keys (a two-process worker is never faster than one alone; the
        # margin is for a one-process run that finds the machine quieter).
        my $cal = run_config($wl, $mode, 1, $DURATION / 4);
        my $duration = $DURATION;
        if ($wl->{new_share}) {
            my $max = 0.4 * $K_NEW / $wl->{new_share} / $cal->{rate};
            $duration = $max if $max < $duration;
        }
        my (%rate, %cpu_rate, %cpu, $out);
        for my $run (1 .. $RUNS) {
            for my $n (1, $NPROCS) {
                note(sprintf "%s, %s: run %d, %d process(es), %.2f s", $wl->{name}, $mode, $run, $n, $duration);
                my $r = run_config($wl, $mode, $n, $duration);
                push @{ $rate{$n} }, $r->{rate};
                push @{ $cpu_rate{$n} }, $r->{cpu_rate};
                push @{ $cpu{$n} }, $r->{cpu};
                $out ||= $r->{out} if $n > 1;    # harmless alone: ops / own time
            }
        }
        my $ratio = median(@{ $rate{$NPROCS} }) / median(@{ $rate{1} });
        my $per_cpu = $NPROCS * median(@{ $cpu_rate{$NPROCS} }) / median(@{ $cpu_rate{1} });
        printf "%-10s %-7s %5.2fs %13.2f %13.2f %6.2fx %4.0f%% %4.0f%% %7.2fx %6s%s\n",
            $wl->{name}, $mode, $duration, median(@{ $rate{1} }) / 1e6,
            median(@{ $rate{$NPROCS} }) / 1e6, $ratio,
            100 * median(@{ $cpu{1} }), 100 * median(@{ $cpu{$NPROCS} }),
            $per_cpu, '>= 1.8', $out ? '  (a worker ran out of keys: ratio overstated)' : '';
    }
    push @loads, load_line("after $wl->{name}");
}
print "\n", @loads, load_verdict($NPROCS);
