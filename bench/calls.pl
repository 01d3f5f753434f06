#!/usr/bin/perl
# Cost of one add / contains call, and of one item in an add_many /
# contains_many batch, as a ratio to a bare XS accessor call ($f->bits on
# the same object, timed in the same run, in the same loop shape).
#
#   perl -Mblib bench/calls.pl [--quick] [--nice N]
#
# Two filters: a cache-resident one (capacity 100_000 at 0.01: 128 KiB of
# bits) and a 256 MiB one (capacity 200_000_000 at 0.01: 2**31 bits), each
# filled to about half its bits first. The big filter is measured with
# transparent huge pages for shared memory off and on when the kernel
# setting can be changed (as root); the old setting is always restored.
#
# Method: tight loops over pre-built arrays of 17-byte keys; every row runs
# over the same number of keys; present-item rows use the same keys as the
# hit rows. Each row is timed $REPS times, the rows interleaved so that a
# burst of load elsewhere hits all of them alike; the median is printed.
# Nothing is subtracted: the baseline includes the loop, as every row does.
# The baseline is a plain XSUB call through Perl's generic entersub; add,
# contains, add_many and contains_many swap their call sites' entersub for a
# direct call (see "call sites" in Shared.xs), which is part of what the
# rows measure.
# Times are the process's CPU time (CLOCK_PROCESS_CPUTIME_ID): on a machine
# shared with other work, waiting for a CPU is not counted; each table shows
# the share of the wall time this process had a CPU.
use 5.022;
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Getopt::Long;
use POSIX ();

use BenchUtil qw(
    keys_for keys_alike batches_of fill now cpu_now median spread load_line load_verdict machine
    nice_line human_bytes thp_setting thp_set shmem_huge_mib note warm_copies
);
use Data::BloomFilter::Shared;

$| = 1;    # progress is visible when the output goes to a file
my $CLASS = 'Data::BloomFilter::Shared';

GetOptions('quick' => \my $quick, 'nice=i' => \my $nice)
    or die "usage: perl -Mblib bench/calls.pl [--quick] [--nice N]\n";

my $N          = $quick ? 20_000 : 100_000;    # keys per timed row
my $REPS       = $quick ? 3      : 5;
my $BATCH      = 1000;
my $FILL_BATCH = 10_000;
my $SMALL_CAP  = 100_000;
my $BIG_CAP    = 200_000_000;
my $BIG_FILL   = $quick ? $BIG_CAP / 10 : $BIG_CAP;
my $SNAPSHOTS  = 5;    # the small filter's add-new rows spread over copies

# Goals, shown beside the measured ratios (x accessor, per item).
my %GOAL = (
    'add, new items'        => '<= 1.3',
    'add, present items'    => '<= 1.3',
    'contains, hit'         => '<= 1.2',
    'contains, miss'        => '<= 1.2',
    'add_many new, scalar'  => '<= 0.35',
    'add_many new, list'    => '<= 0.35',
    'contains_many hit, scalar'  => '<= 0.3',
    'contains_many hit, list'    => '<= 0.3',
    'contains_many miss, scalar' => '<= 0.3',
    'contains_many miss, list'   => '<= 0.3',
);

# ------------------------------------------------ THP: always restore

my $THP_ORIG = thp_setting();
my $THP_RESTORE;    # set while we have changed it
END { restore_thp() }
$SIG{$_} = sub { die "interrupted by SIG$_[0]\n" } for qw(INT TERM HUP PIPE);

sub restore_thp {
    return if !defined $THP_RESTORE;
    my $v = $THP_RESTORE;
    if (thp_set($v)) {
        undef $THP_RESTORE;
        note("shmem_enabled restored to [$v]");
    }
    else {
        warn "could not restore shmem_enabled to [$v]: $!\n";
    }
}

# ------------------------------------------------ header

my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
print "# bench/calls.pl", ($quick ? ' --quick' : ''), "  $started\n";
print "# ", machine(), "\n";
print nice_line($nice);
print load_line('at start');
print "# $N keys per row, median of $REPS runs; batches of $BATCH items\n";
print "# spread = (slowest - fastest) / median over the runs\n";

# present in both filters (filled first); never added anywhere; new for the
# small filter's add-new rows
my ($hit, $miss, $new_small) = keys_alike([qw(f m n)], 0, $N);
my $hitb  = batches_of($hit, $BATCH);
my $warm  = keys_for('w', 0, 500);    # see the add-new rows
my $missb = batches_of($miss, $BATCH);

# ------------------------------------------------ measuring

sub run_rows {
    my ($rows) = @_;
    my %ns;
    my ($cpu, $wall) = (0, 0);
    for my $rep (0 .. $REPS - 1) {
        for my $r (@$rows) {
            my $ctx = $r->{setup} ? $r->{setup}->($rep) : undef;
            my $w0 = now();
            my $t0 = cpu_now();
            $r->{run}->($ctx, $rep);
            my $dt = cpu_now() - $t0;
            $wall += now() - $w0;
            $cpu += $dt;
            push @{ $ns{ $r->{name} } }, $dt * 1e9 / $N;
        }
    }
    printf "# CPU share while timing: %.0f%% of the wall time\n", 100 * $cpu / $wall;
    return \%ns;
}

sub print_table {
    my ($rows, $ns, $with_goal) = @_;
    my $base = median(@{ $ns->{ $rows->[0]{name} } });
    printf "%-30s %9s %11s %7s%s\n", 'row', 'ns/item', 'x accessor', 'spread',
        $with_goal ? sprintf(' %8s', 'goal') : '';
    for my $r (@$rows) {
        my @v = @{ $ns->{ $r->{name} } };
        my $m = median(@v);
        printf "%-30s %9.1f %11.2f %6.0f%%%s\n", $r->{name}, $m, $m / $base,
            100 * spread(@v),
            $with_goal ? sprintf(' %8s', $GOAL{ $r->{name} } // '') : '';
    }
    return { map { $_->{name} => median(@{ $ns->{ $_->{name} } }) / $base } @$rows };
}

# The rows every filter gets. $new_single / $new_batch ($ctx, $rep) give the
# add-new rows (they differ: the small filter adds into fresh copies, the big
# one into itself with fresh keys).
sub rows_for {
    my ($f, %new) = @_;
    return [
        { name => 'accessor $f->bits (baseline)',
          run => sub { for my $k (@$hit) { $f->bits } } },
        { name => 'add, new items', %{ $new{single} } },
        { name => 'add, present items',
          run => sub { for my $k (@$hit) { $f->add($k) } } },
        { name => 'contains, hit',
          run => sub { for my $k (@$hit) { $f->contains($k) } } },
        { name => 'contains, miss',
          run => sub { for my $k (@$miss) { $f->contains($k) } } },
        { name => 'add_many new, scalar', %{ $new{scalar} } },
        { name => 'add_many new, list',   %{ $new{list} } },
        { name => 'add_many present, scalar',
          run => sub { for my $b (@$hitb) { my $n = $f->add_many($b) } } },
        { name => 'add_many present, list',
          run => sub { for my $b (@$hitb) { $f->add_many($b, \my @r) } } },
        { name => 'contains_many hit, scalar',
          run => sub { for my $b (@$hitb) { my $n = $f->contains_many($b) } } },
        { name => 'contains_many hit, list',
          run => sub { for my $b (@$hitb) { my @r = $f->contains_many($b) } } },
        { name => 'contains_many miss, scalar',
          run => sub { for my $b (@$missb) { my $n = $f->contains_many($b) } } },
        { name => 'contains_many miss, list',
          run => sub { for my $b (@$missb) { my @r = $f->contains_many($b) } } },
    ];
}

sub describe {
    my ($f, $cap, $filled) = @_;
    return sprintf '%s bits (%s), %d hashes; filled with %d items: fill ratio %.2f',
        $f->bits, human_bytes($f->bits / 8), $f->hashes, $filled, $f->fill_ratio;
}

# ------------------------------------------------ cache-resident filter

print "\n## cache-resident filter: capacity $SMALL_CAP, fp 0.01\n";
print load_line('before');
my $small = $CLASS->new(undef, $SMALL_CAP, 0.01);
fill($small, $SMALL_CAP, $FILL_BATCH);
print '# ', describe($small, $SMALL_CAP, $SMALL_CAP), "\n";
print "# add-new rows: the $N new keys go $N/$SNAPSHOTS each into $SNAPSHOTS",
    " fresh copies of the filled filter (made untimed), so it stays about half full\n";
{
    my $new = $new_small;
    my $per = int($N / $SNAPSHOTS);
    my @chunks  = map { [ @$new[ $_ * $per .. ($_ + 1) * $per - 1 ] ] } 0 .. $SNAPSHOTS - 1;
    my @bchunks = map { batches_of($_, $BATCH) } @chunks;
    my $copies = sub { warm_copies($small, $SMALL_CAP, $SNAPSHOTS, $warm) };
    my $rows = rows_for($small,
        single => { setup => $copies, run => sub {
            my ($gs) = @_;
            for my $j (0 .. $#$gs) {
                my $g = $gs->[$j];
                for my $k (@{ $chunks[$j] }) { $g->add($k) }
            }
        } },
        scalar => { setup => $copies, run => sub {
            my ($gs) = @_;
            for my $j (0 .. $#$gs) {
                my $g = $gs->[$j];
                for my $b (@{ $bchunks[$j] }) { my $n = $g->add_many($b) }
            }
        } },
        list => { setup => $copies, run => sub {
            my ($gs) = @_;
            for my $j (0 .. $#$gs) {
                my $g = $gs->[$j];
                for my $b (@{ $bchunks[$j] }) { $g->add_many($b, \my @r) }
            }
        } },
    );
    print_table($rows, run_rows($rows), 1);
}
print load_line('after');
undef $small;

# ------------------------------------------------ 256 MiB filter

my @thp_modes;
my $thp_note;
if (defined $THP_ORIG && thp_set($THP_ORIG)) {
    @thp_modes = qw(never advise);
    $thp_note = "shmem_enabled was [$THP_ORIG]; measured with [never] and [advise], then restored";
}
else {
    @thp_modes = (undef);
    $thp_note = 'shmem_enabled is ['
        . ($THP_ORIG // 'unreadable') . '] and cannot be changed here (not root?): one run';
}

my $big;    # the filled filter; a later setting gets a copy of it
for my $i (0 .. $#thp_modes) {
    my $mode = $thp_modes[$i];
    if (defined $mode) {
        $THP_RESTORE = $THP_ORIG;
        thp_set($mode) or die "cannot set shmem_enabled to [$mode]\n";
    }
    my $setting = thp_setting() // 'unknown';
    print "\n## 256 MiB filter: capacity $BIG_CAP, fp 0.01; THP for shared memory [$setting]\n";
    print "# $thp_note\n";
    if (!$big) {
        print load_line('before filling');
        note("filling the 256 MiB filter with $BIG_FILL items in batches of $FILL_BATCH"
            . " (takes minutes: the keys are made in Perl)...");
        $big = $CLASS->new(undef, $BIG_CAP, 0.01);
        my $t0 = now();
        fill($big, $BIG_FILL, $FILL_BATCH);
        print '# ', describe($big, $BIG_CAP, $BIG_FILL), "\n";
        printf "# filled with add_many in batches of %d in %.0f s%s\n", $FILL_BATCH,
            now() - $t0, $quick ? ' (--quick: a tenth of the capacity)' : '';
    }
    else {
        # The memory of a new mapping is allocated (huge or not) when first
        # written, so a copy made now has this setting's pages.
        my $copy = $CLASS->new(undef, $BIG_CAP, 0.01);
        $copy->merge($big);
        $big = $copy;
        print '# ', describe($big, $BIG_CAP, $BIG_FILL), "\n";
        print "# a copy (merge) of the filter above, made under this setting\n";
    }
    my $huge = shmem_huge_mib();
    printf "# shared memory mapped with huge pages: %s\n",
        defined $huge ? sprintf('%.0f MiB', $huge) : 'unknown';
    print "# add-new rows: fresh keys for every run, added to the filter itself\n";
    print load_line('before timing');

    # Fresh new keys for each add-new row, run and setting (the copy for a
    # later setting holds the earlier setting's new keys).
    my @new = map { keys_for('n', ($i * 4 * $REPS + $_) * $N, $N) } 0 .. 4 * $REPS - 1;
    my @newb = map { $_ < $REPS ? undef : batches_of($new[$_], $BATCH) } 0 .. $#new;
    my $rows = rows_for($big,
        single => { run => sub {
            my (undef, $rep) = @_;
            for my $k (@{ $new[$rep] }) { $big->add($k) }
        } },
        scalar => { run => sub {
            my (undef, $rep) = @_;
            for my $b (@{ $newb[ $REPS + $rep ] }) { my $n = $big->add_many($b) }
        } },
        list => { run => sub {
            my (undef, $rep) = @_;
            for my $b (@{ $newb[ 2 * $REPS + $rep ] }) { $big->add_many($b, \my @r) }
        } },
    );
    # The same batches without the software pipeline (hashing ahead and
    # prefetching): the library reads this variable on every batch.
    my $unpiped = sub {
        my ($code) = @_;
        return sub {
            local $ENV{BLOOMFILTER_SHARED_NO_PIPELINE} = 1;
            $code->(@_);
        };
    };
    # The rows of present and absent items run their scalar rows' code; new
    # items need keys of their own.
    my %row = map { $_->{name} => $_ } @$rows;
    push @$rows,
        { name => 'add_many new, unpipelined', run => $unpiped->(sub {
            my (undef, $rep) = @_;
            for my $b (@{ $newb[ 3 * $REPS + $rep ] }) { my $n = $big->add_many($b) }
        }) },
        map { +{ name => "$_, unpipelined", run => $unpiped->($row{"$_, scalar"}{run}) } }
            'add_many present', 'contains_many hit', 'contains_many miss';
    my $ns = run_rows($rows);
    my $ratio = print_table($rows, $ns, 0);
    print load_line('after');

    print "\n# 256 MiB filter [$setting]: loop of single calls / batch, per item (scalar context)\n";
    printf "%-22s %12s %14s %8s\n", 'method', 'pipelined', 'unpipelined', 'goal';
    for my $pair (['contains, hit', 'contains_many hit'],
                  ['contains, miss', 'contains_many miss'],
                  ['add, new items', 'add_many new'],
                  ['add, present items', 'add_many present']) {
        my ($single, $batch) = @$pair;
        printf "%-22s %11.2fx %13.2fx %8s\n", $single,
            $ratio->{$single} / $ratio->{"$batch, scalar"},
            $ratio->{$single} / $ratio->{"$batch, unpipelined"}, '>= 3';
    }
    restore_thp();
}
undef $big;

print "\n", load_line('at end');
print load_verdict(1);
