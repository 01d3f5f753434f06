use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(reap);
use Data::BloomFilter::Shared;

# Slots are per process, not per handle: a process with more handles than
# the slot table has slots takes one; and more live processes than slots
# can all write (those past the table through the shared overflow slot).

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $path = "$dir/f.bf";
my $SLOTS = 1024;

# One process, 1 100 handles, each writing.
my @handles = map { $C->new($path, 100_000, 0.01) } 1 .. 1100;
my $failed = 0;
for my $i (0 .. $#handles) {
    eval { $handles[$i]->add("handle $i"); 1 } or $failed++;
}
is($failed, 0, '1100 handles of one process all add');

# While they are all open, other processes still take slots of their own
# and add (with slots per handle, the table would be full).
{
    my @kids;
    for my $k (1 .. 3) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            my $f = $C->new($path, 100_000, 0.01);
            my $ok = eval { $f->add("other process $k"); 1 };
            POSIX::_exit($ok ? 0 : 1);
        }
        push @kids, $pid;
    }
    my @st = map { (reap($_, 30))[0] } @kids;
    is_deeply(\@st, [0, 0, 0], 'other processes add while one process holds 1100 handles');
}
my $f = $C->new($path, 100_000, 0.01);
ok($f->contains("other process $_"), "process ${_}'s item is there") for 1 .. 3;
@handles = ();

# More live processes than slots: each adds its item and stays alive
# (holding its slot) until all have added.
{
    my $n = $SLOTS + 76;
    pipe(my $ready_r, my $ready_w) or die "pipe: $!";
    pipe(my $hold_r, my $hold_w) or die "pipe: $!";
    my @kids;
    for my $k (1 .. $n) {
        my $pid = fork;
        if (!defined $pid) {
            diag("fork $k: $!");
            last;
        }
        if (!$pid) {
            close $ready_r;
            close $hold_w;
            my $ok = eval { $f->add("process $k"); 1 };
            syswrite $ready_w, $ok ? '+' : '-';
            sysread $hold_r, my $x, 1;    # until the parent closes it
            POSIX::_exit(0);
        }
        push @kids, $pid;
    }
    close $ready_w;
    close $hold_r;
    my ($ok, $bad) = (0, 0);
    while (($ok + $bad) < @kids) {
        my $got = sysread $ready_r, my $buf, 4096;
        last unless $got;
        $ok += () = $buf =~ /\+/g;
        $bad += () = $buf =~ /-/g;
    }
    is(scalar @kids, $n, "$n processes started");
    is($ok, $n, "all $n live processes added (none refused)");
    my $missing = grep { !$f->contains("process $_") } 1 .. $n;
    is($missing, 0, 'every process\'s item is there');
    # Still all alive: one more write from here, past the full table.
    ok(eval { $f->add('the parent, past the table'); 1 }, 'one more process writes') or diag($@);
    close $hold_w;
    reap($_, 30) for @kids;
}

done_testing;
