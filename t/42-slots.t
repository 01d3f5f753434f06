use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(reap run_sh perl5lib);
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

# Handles of one file share one descriptor (kept for a merge's journal): a
# process may hold more handles of a file than it may open descriptors.
{
    local $ENV{PERL5LIB} = perl5lib();
    my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my $C = 'Data::BloomFilter::Shared';
my @h = map { $C->new($ARGV[0], 100_000, 0.01) } 1 .. 1100;
$_->add('under a low descriptor limit') for @h;
my $o = $C->new(undef, 100_000, 0.01);
$o->add('merged under a low descriptor limit');
$h[-1]->merge($o);
print 'handles: ', scalar(@h), ', merged: ', $h[0]->contains('merged under a low descriptor limit'), "\n";
PERL
    my ($out, $status) = run_sh('ulimit -n 64 || exit 98; exec "$@" ' . "'$path'", $script);
    SKIP: {
        skip 'cannot lower the descriptor limit here', 1 if $status >> 8 == 98;
        is($out, "handles: 1100, merged: 1\n", 'under ulimit -n 64, 1100 handles of one file open, add and merge')
            or diag("status $status: $out");
    }
}

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
