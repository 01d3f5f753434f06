# The creation and attach lock (doc/DESIGN.md, §5): a process that may
# only read a filter file cannot hold a lock that the owner's new($path)
# waits on. A reader of another uid (65534, the file 0644 in a directory it
# can search) holds flock(LOCK_EX) and an OFD read lock on the file (a write
# lock it cannot take: its descriptor is read-only): the owner's new()
# still opens the filter. (It waited for as long as the reader liked while
# opening took a shared flock.) Only an empty file, which new() adopts, is
# opened under a lock, an OFD write lock waited for at most
# BLOOMFILTER_SHARED_LOCK_WAIT seconds: a holder past that bound makes
# new() croak naming the file and the bound, and changes nothing.
#
# Run without root, the reader is a process of this uid with a read-only
# descriptor (the locks it can take are the same).
#
# Each new() runs in a child under alarm 60: it takes milliseconds, so only
# a wait on the lock's holder (which holds it until told to let go) reaches
# 60 s, and the verdict does not depend on the machine's speed.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Fcntl qw(:flock F_RDLCK F_WRLCK);
use POSIX qw(_exit);
use Time::HiRes qw(time);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child reap);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $NOBODY = 65534;
my $READER = $> == 0 ? "of uid $NOBODY" : 'with a read-only descriptor';
my $F_OFD_SETLK = 37;    # Linux, every architecture
my $dir = tempdir(CLEANUP => 1);
chmod 0755, $dir or die "chmod: $!";

# struct flock for the whole file (x86-64 and the other LP64 Linuxes).
sub whole_file { pack 's s x4 q q i x4', $_[0], 0, 0, 0, 0 }

# Start a process holding locks on $path and report which it got. $who:
# 'reader' (uid 65534 when run as root; a read-only descriptor; flock LOCK_EX and, when
# $ofd, an OFD read lock; it also tries an OFD write lock) or 'writer'
# (this uid, read-write, an OFD write lock). It holds them until the
# returned handle is closed. Returns (pid, handle, its report).
sub holder {
    my ($who, $path, $ofd) = @_;
    pipe(my $from, my $to) or die "pipe: $!";
    pipe(my $hold, my $let_go) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $from;
        close $let_go;
        alarm 120;
        my @got;
        my $ok = eval {
            if ($who eq 'reader' && $> == 0) {
                $) = "$NOBODY $NOBODY";
                POSIX::setgid($NOBODY) or die "setgid: $!";
                POSIX::setuid($NOBODY) or die "setuid: $!";
                die "still root\n" if $> == 0 || $< == 0;
            }
            open(my $fh, $who eq 'reader' ? '<' : '+<', $path) or die "open: $!\n";
            if ($who eq 'reader') {
                flock($fh, LOCK_EX) or die "flock: $!\n";
                push @got, 'flock';
                if ($ofd) {
                    fcntl($fh, $F_OFD_SETLK, whole_file(F_RDLCK)) or die "OFD read lock: $!\n";
                    push @got, 'ofd-read';
                }
                my $w = fcntl($fh, $F_OFD_SETLK, whole_file(F_WRLCK));
                push @got, $w ? 'ofd-write' : 'no-ofd-write';
            }
            else {
                fcntl($fh, $F_OFD_SETLK, whole_file(F_WRLCK)) or die "OFD write lock: $!\n";
                push @got, 'ofd-write';
            }
            syswrite $to, "@got\n";
            sysread $hold, my $buf, 1;    # until the parent closes its end
            1;
        };
        syswrite $to, "failed: $@" if !$ok;
        _exit(0);
    }
    close $to;
    close $hold;
    my $report = <$from> // '';
    chomp $report;
    return ($pid, $let_go, $report);
}

# new($path) in a child under alarm 60: (what it said, seconds it took).
sub open_in_child {
    my ($path, $wait) = @_;
    my $t0 = time;
    my $r = in_child(sub {
        local $ENV{BLOOMFILTER_SHARED_LOCK_WAIT} = $wait if defined $wait;
        my $f = $C->new($path, 1000, 0.01, 0644);
        $f->add('owner');
        'opened ' . ($f->contains('owner') ? 'and used' : 'but lost an item');
    }, 60);
    my $said = $r->{timed_out} || $r->{signal} ? 'hung (killed after 60 s)' : $r->{out};
    return ($said, time - $t0);
}

# A live filter: the reader's locks do not delay its owner.
my $live = "$dir/live.bf";
$C->new($live, 1000, 0.01, 0644)->add('x');
for my $ofd (0, 1) {
    my $locks = $ofd ? 'flock(LOCK_EX) and an OFD read lock' : 'flock(LOCK_EX)';
    my ($pid, $let_go, $got) = holder('reader', $live, $ofd);
    is($got, $ofd ? 'flock ofd-read no-ofd-write' : 'flock no-ofd-write',
        "a reader $READER holds $locks, and cannot take an OFD write lock");
    my ($said) = open_in_child($live);
    is($said, 'opened and used', "... while the owner's new() of the filter opens it at once");
    close $let_go;
    reap($pid, 30);
}

# Nor does a writer's OFD write lock: a file that is not empty is opened
# under no lock; neither new_from_fd nor new_readonly takes one.
{
    my ($pid, $let_go, $got) = holder('writer', $live, 1);
    is($got, 'ofd-write', 'a writer holds an OFD write lock on the live filter');
    my ($said) = open_in_child($live);
    is($said, 'opened and used', "... and the owner's new() opens it at once");
    my $r = in_child(sub {
        open(my $fh, '+<', $live) or die "open: $!";
        my $f = $C->new_from_fd($fh);
        $f->contains('x') ? 'found' : 'lost';
    }, 60);
    is($r->{timed_out} ? 'hung' : $r->{out}, 'found', '... and new_from_fd');
    close $let_go;
    reap($pid, 30);
    my $frozen = "$dir/frozen.bf";
    my $f = $C->new($frozen, 1000, 0.01, 0644);
    $f->add('x');
    $f->freeze;
    undef $f;
    ($pid, $let_go, $got) = holder('writer', $frozen, 1);
    $r = in_child(sub { $C->new_readonly($frozen)->contains('x') ? 'found' : 'lost' }, 60);
    is($r->{timed_out} ? 'hung' : $r->{out}, 'found', '... and new_readonly of a frozen file');
    close $let_go;
    reap($pid, 30);
}

# An empty file (0644, the owner's): new() adopts it under the creation
# lock. A reader's flock does not touch that lock; its OFD read lock holds
# new() up for the bound only.
my $empty = "$dir/empty.bf";
{
    open(my $fh, '>', $empty) or die "$empty: $!";
    close $fh;
    chmod 0644, $empty;
    my ($pid, $let_go, $got) = holder('reader', $empty, 0);
    is($got, 'flock no-ofd-write', "a reader holds flock(LOCK_EX) on an empty file");
    my ($said) = open_in_child($empty);
    is($said, 'opened and used', '... and the owner adopts it at once');
    ok(-s $empty, '... a filter now');
    close $let_go;
    reap($pid, 30);
}
for my $who (qw(reader writer)) {
    unlink $empty;
    open(my $fh, '>', $empty) or die "$empty: $!";
    close $fh;
    chmod 0644, $empty;
    my ($pid, $let_go, $got) = holder($who, $empty, 1);
    like($got, qr/ofd-(read|write)$/, "a $who holds an OFD lock on an empty file ($got)");
    my $bound = 0.5;
    my ($said, $took) = open_in_child($empty, $bound);
    like($said, qr/\Q$empty\E: the empty file's creation lock is still held after 0\.5 s/,
        "$who: the owner's new() croaks naming the file and the bound");
    like($said, qr/^Data::BloomFilter::Shared->new: /, '... from new');
    cmp_ok($took, '>=', $bound, "... once the bound has passed (took ${\ sprintf '%.3f', $took} s)");
    is(-s $empty, 0, '... and the file is as it was');
    # Let go while a new() with a wide bound waits: it adopts the file.
    pipe(my $r, my $w) or die "pipe: $!";
    my $opener = fork // die "fork: $!";
    if (!$opener) {
        close $r;
        close $let_go;    # the holder lets go when the parent closes it
        my ($s) = open_in_child($empty, 60);
        syswrite $w, $s;
        _exit(0);
    }
    close $w;
    # The opener is waiting (or about to); the holder lets go.
    Time::HiRes::sleep(0.2);
    close $let_go;
    my $s = do { local $/; <$r> } // '';
    reap($opener, 90);
    reap($pid, 30);
    is($s, 'opened and used', "$who let go: the waiting new() adopts the empty file");
}

done_testing;
