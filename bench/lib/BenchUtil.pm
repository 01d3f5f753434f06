package BenchUtil;
# What the Perl benchmarks under bench/ share: item keys, timing, medians,
# machine facts, and the transparent huge page switch for shared memory.

use 5.022;
use strict;
use warnings;

use Exporter 'import';
use POSIX ();
use Time::HiRes ();

our @EXPORT_OK = qw(
    keys_for keys_alike batches_of fill now cpu_now median spread loadavg load1 load_line load_verdict machine
    nice_line human_bytes thp_path thp_setting thp_set shmem_huge_mib note
    warm_copies redis_server
);

# Every key is a one-letter prefix and a 16-digit number: 17 bytes, so that
# every row hashes items of the same length. The prefix keeps the sets
# apart: 'f' filled, 'm' never added (misses), 'n' new for add rows.
my $BASE = 1_000_000_000_000_000;

sub keys_for {
    my ($prefix, $from, $n) = @_;
    my ($keys) = keys_alike([$prefix], $from, $n);
    return $keys;
}

# Several key sets of $n keys each (one per prefix), made in alternation so
# that their scalars and strings lie alike in memory. Sets made one after the
# other do not: the first, made on a fresh heap, is contiguous and streams
# through the caches; a later one is scattered over reused memory, and its
# rows came out 10-25% slower for that alone.
sub keys_alike {
    my ($prefixes, $from, $n) = @_;
    my @sets = map { [] } @$prefixes;
    my $s = $BASE + $from;
    for my $i ($s .. $s + $n - 1) {
        push @{ $sets[$_] }, $prefixes->[$_] . $i for 0 .. $#$prefixes;
    }
    return @sets;
}

# The keys of $keys in array refs of $size (pre-built: no slicing while timed).
# $n fresh copies of filter $source (capacity $cap, rate 0.01), each with
# this process's slot claimed and most pages of the add stripes touched by
# adding the items of @$warm, so that no first-touch fault lands in a timing.
sub warm_copies {
    my ($source, $cap, $n, $warm) = @_;
    return [ map {
        my $g = ref($source)->new(undef, $cap, 0.01);
        $g->merge($source);
        $g->add_many($warm);
        $g;
    } 1 .. $n ];
}

sub batches_of {
    my ($keys, $size) = @_;
    my @b;
    for (my $i = 0; $i < @$keys; $i += $size) {
        my $end = $i + $size - 1;
        $end = $#$keys if $end > $#$keys;
        push @b, [ @$keys[ $i .. $end ] ];
    }
    return \@b;
}

# Add $n keys 'f' 0..$n-1 with add_many in batches of $batch.
sub fill {
    my ($f, $n, $batch) = @_;
    $batch //= 10_000;
    for (my $i = 0; $i < $n; $i += $batch) {
        my $m = $n - $i < $batch ? $n - $i : $batch;
        $f->add_many(keys_for('f', $i, $m));
    }
    return;
}

sub now { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) }

# CPU time of this process (user + system). On a machine shared with other
# work it leaves out the time spent waiting for a CPU, which wall time does not.
sub cpu_now { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_PROCESS_CPUTIME_ID()) }

sub median {
    my @s = sort { $a <=> $b } @_;
    return undef if !@s;
    return @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2;
}

# (max - min) / median: how much the repetitions disagreed.
sub spread {
    my @s = sort { $a <=> $b } @_;
    my $m = median(@s);
    return $m ? ($s[-1] - $s[0]) / $m : 0;
}

sub loadavg {
    open my $fh, '<', '/proc/loadavg' or return '?';
    my @f = split ' ', scalar <$fh>;
    return "@f[0..2]";
}

sub load1 { (split ' ', loadavg())[0] }

# Set by nice_line when it raised the session's autogroup priority.
my ($autogroup_old, $autogroup_owner);

# A "# load average WHEN: ..." line; remembers the highest 1-minute figure.
my $max_load = 0;

sub load_line {
    my ($when) = @_;
    my $l = loadavg();
    my ($l1) = split ' ', $l;
    $max_load = $l1 if $l1 ne '?' && $l1 > $max_load;
    return "# load average $when: $l\n";
}

# The closing verdict on the load: the benchmark itself accounts for $own
# (the processes it keeps busy); more than half a core beyond that means
# other work shared the machine. Under --nice the benchmark ran ahead of it,
# and the CPU share lines tell how much it was still disturbed.
sub load_verdict {
    my ($own) = @_;
    my $limit = $own + 0.5;
    my $with = "this benchmark accounts for about $own";
    return "# the 1-minute load average stayed at or below $max_load ($with)\n"
        if $max_load <= $limit;
    return "# the 1-minute load average reached $max_load ($with): other work ran"
        . " too; the benchmark had priority (--nice): see the CPU share lines\n"
        if defined $autogroup_old;
    return "# WARNING: the 1-minute load average reached $max_load ($with):"
        . " other work shared the CPUs; re-run when quiet, or with --nice=-10 as root\n";
}

sub _first_line {
    my ($cmd) = @_;
    my $out = `$cmd 2>/dev/null` // '';
    chomp $out;
    return $out;
}

sub machine {
    my $cpu = '?';
    if (open my $fh, '<', '/proc/cpuinfo') {
        while (<$fh>) {
            if (/^model name\s*:\s*(.*)/) { $cpu = $1; last }
        }
    }
    my $nproc = _first_line('nproc') || '?';
    my $kernel = (POSIX::uname())[2];
    return "nproc $nproc, CPU $cpu, Linux $kernel, perl $^V";
}

sub human_bytes {
    my ($b) = @_;
    for my $u (qw(B KiB MiB GiB)) {
        return sprintf('%g %s', $b, $u) if $b < 1024 || $u eq 'GiB';
        $b /= 1024;
    }
}

# ------------------------------------------------ transparent huge pages

# The module asks for huge pages (madvise) on large anonymous and memfd
# filters; whether the kernel gives them for shared memory is this setting.
sub thp_path { '/sys/kernel/mm/transparent_hugepage/shmem_enabled' }

# The bracketed value ("never", "advise", ...), or undef.
sub thp_setting {
    open my $fh, '<', thp_path() or return undef;
    my $line = <$fh> // '';
    return $line =~ /\[(\w+)\]/ ? $1 : undef;
}

# True when the setting now reads $value.
sub thp_set {
    my ($value) = @_;
    open my $fh, '>', thp_path() or return 0;
    print {$fh} "$value\n" or return 0;
    close $fh or return 0;
    return (thp_setting() // '') eq $value;
}

# Shared memory this process maps with huge (PMD) pages, in MiB.
sub shmem_huge_mib {
    open my $fh, '<', '/proc/self/smaps_rollup' or return undef;
    while (<$fh>) {
        return $1 / 1024 if /^ShmemPmdMapped:\s+(\d+) kB/;
    }
    return undef;
}

# --nice N: run at scheduling priority N (negative: ahead of other work,
# root only), so that other work on a shared machine disturbs the figures
# less; forked workers inherit it. With autogroup scheduling (Linux's
# default) CPU time is first shared fairly between sessions and a process's
# nice only counts inside its own, so the session's autogroup gets the same
# priority, given back at exit. Returns the header line either way.
my $autogroup_path = '/proc/self/autogroup';
END { autogroup_set($autogroup_old) if defined $autogroup_old && $$ == $autogroup_owner }

sub autogroup_nice {
    open my $fh, '<', $autogroup_path or return undef;
    my $line = <$fh> // '';
    return $line =~ /\bnice (-?\d+)/ ? $1 : undef;
}

sub autogroup_set {
    my ($n) = @_;
    open my $fh, '>', $autogroup_path or return 0;
    print {$fh} "$n\n" or return 0;
    return close $fh;
}

sub nice_line {
    my ($nice) = @_;
    if (defined $nice) {
        setpriority(0, 0, $nice) or die "cannot set the priority to $nice: $!\n";
        my $old = autogroup_nice();
        if (defined $old && !defined $autogroup_old && autogroup_set($nice)) {
            ($autogroup_old, $autogroup_owner) = ($old, $$);
            # so that END gives the priority back on ^C too
            $SIG{$_} ||= sub { die "interrupted by SIG$_[0]\n" } for qw(INT TERM HUP);
        }
    }
    my $ag = autogroup_nice();
    return sprintf "# scheduling priority: nice %d%s%s\n", getpriority(0, 0),
        defined $ag ? ", session autogroup nice $ag" : '',
        defined $nice ? ' (--nice)' : '';
}

# Progress and notes go to stderr; the tables to stdout.
sub note { print STDERR @_, "\n" }

# The address of a redis-server for the Redis benchmarks: $server as given,
# or a redis-server started on a free loopback port in a temporary
# directory, without persistence, stopped when the benchmark ends.
my $redis_pid;
sub redis_server {
    my ($server) = @_;
    return $server if defined $server;
    require File::Temp;
    require IO::Socket::INET;
    require Redis::Fast;
    my $s = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0) or die "port: $!";
    my $port = $s->sockport;
    close $s;
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    $redis_pid = fork // die "fork: $!";
    if (!$redis_pid) {
        open STDOUT, '>', '/dev/null';
        { exec 'redis-server', '--port', $port, '--bind', '127.0.0.1', '--dir', $dir,
            '--save', '', '--appendonly', 'no', '--logfile', "$dir/log" }
        POSIX::_exit(127);
    }
    $server = "127.0.0.1:$port";
    my $until = Time::HiRes::time() + 10;
    until (eval { Redis::Fast->new(server => $server, reconnect => 0)->ping }) {
        die "redis-server did not start\n" if Time::HiRes::time() > $until;
        Time::HiRes::sleep(0.05);
    }
    return $server;
}
END { if ($redis_pid) { kill 'TERM', $redis_pid; waitpid $redis_pid, 0 } }

1;
