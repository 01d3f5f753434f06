# Creating and adopting filter files: creation needs no /proc; an existing
# empty file is adopted only when it is ours, by renaming a complete filter
# over it, so a failure leaves it as it was; what is not a regular file is
# refused before anything touches it (no controlling terminal, no hang).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use Time::HiRes ();
use Fcntl qw(O_RDWR O_NOCTTY);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child perl5lib child_status_text readable_build run_sh);
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
chmod 0755, $dir;

sub listing {
    my ($d) = @_;
    opendir(my $dh, $d) or die "$d: $!";
    return join ',', sort grep { !/^\.\.?$/ } readdir $dh;
}

# Children may run as nobody: they get the build from a copy every uid reads.
$ENV{PERL5LIB} = (readable_build($dir))[0];

# --- creating a file with /proc not mounted -------------------------------------------------
SKIP: {
    my $ns = ($> == 0) && system('unshare -m true >/dev/null 2>&1') == 0;
    skip 'needs root and mount namespaces (unshare -m) to hide /proc', 6 unless $ns;
    my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my ($path) = @ARGV;
print -e '/proc/self/stat' ? "proc visible\n" : "no proc\n";
my $f = eval { Data::BloomFilter::Shared->new($path, 1000, 0.01) };
print $f ? "created\n" : "new: $@";
exit 0 unless $f;
print 'add ', $f->add('hello'), "\n";
undef $f;
my $g = Data::BloomFilter::Shared->new($path, 1000, 0.01);
print 'reopened contains ', $g->contains('hello'), ' add ', $g->add('hello'), "\n";
PERL
    my $shared = "$dir/noproc";
    mkdir $shared or die;
    chmod 0777, $shared;
    # As root (linkat with AT_EMPTY_PATH), and as nobody (who may lack the
    # capability that needs: then a temporary name and link(2)).
    for my $as ([root => ''], [nobody => 'setpriv --reuid=65534 --regid=65534 --clear-groups']) {
        my ($who, $pre) = @$as;
        my $path = "$shared/$who.bf";
        my ($out, $status) = run_sh(
            'umount -l /proc 2>/dev/null || mount -t tmpfs none /proc || exit 98; '
                . "exec $pre \"\$@\" '$path'",
            $script, 'unshare', '-m');
        skip "cannot hide /proc here (status $status)", 6 if $status >> 8 == 98;
        like($out, qr/^no proc$/m, "$who: /proc is hidden in the child") or diag($out);
        is(join('|', grep { !/proc/ } split /\n/, $out), 'created|add 1|reopened contains 1 add 0',
            "$who: new creates the file, adds, and a reopen sees the item, all without /proc")
            or diag("status $status: $out");
    }
    is(listing($shared), 'nobody.bf,root.bf', 'both files are there, no temporary names left');
    is((stat "$shared/nobody.bf")[4], 65534, "nobody's file is nobody's");
}

# --- adopting an empty file ----------------------------------------------------------------
$dir = "$dir/adopt";
mkdir $dir or die;
{
    my $p = "$dir/empty-0640.bf";
    { open(my $fh, '>', $p) or die; }
    chmod 0640, $p;
    my $ino = (stat $p)[1];
    my $f = $C->new($p, 1000, 0.01);
    ok($f->add('x') && $f->contains('x'), 'an empty file of our own is adopted and works');
    is(sprintf('%04o', (stat $p)[2] & 07777), '0640', '... keeping its mode');
    cmp_ok(-s $p, '>=', $f->bits / 8, '... at full size');
    isnt((stat $p)[1], $ino, '... by a new file renamed over it (the inode changed)');
    is(listing($dir), 'empty-0640.bf', '... and nothing else is left in the directory');
    is($C->new($p, 1000, 0.01)->contains('x'), 1, 'a reopen sees what was added');
}

SKIP: {
    my ($uid, $gid) = (getpwnam('nobody'))[2, 3];
    skip 'needs root and a "nobody" user', 7 if $> != 0 || !defined $uid;
    my $planted = "$dir/planted.bf";
    { open(my $fh, '>', $planted) or die; }
    chown $uid, $gid, $planted or die;
    chmod 0666, $planted or die;
    my $f = eval { $C->new($planted, 1000, 0.01) };
    ok(!$f, "root does not adopt an empty 0666 file of another user");
    like($@, qr/->new: .*planted\.bf: is an empty file of uid $uid, not of this process's uid 0: not adopted/,
        '... and says whose it is');
    my @st = stat $planted;
    is("$st[7] $st[4]", "0 $uid", '... the file is left empty and its owner\'s');
    is(listing($dir), 'empty-0640.bf,planted.bf', '... and no other file is made');
    unlink $planted;

    # Our own empty file of a group we chose: the group stays.
    my $grp = "$dir/group.bf";
    { open(my $fh, '>', $grp) or die; }
    chown 0, $gid, $grp or die;
    chmod 0660, $grp or die;
    $f = $C->new($grp, 1000, 0.01);
    my @g = stat $grp;
    is($g[5], $gid, 'an adopted file keeps its group');
    is(sprintf('%04o', $g[2] & 07777), '0660', '... and its mode');
    ok($g[7] > 0, '... and is a filter now');
    unlink $grp;
}

# A failure under a small RLIMIT_AS (refused before the space is taken,
# naming the limit; mmap would refuse it after): the empty file stays
# empty, no full-size file of zeros, nothing left over.
{
    my $sub = "$dir/as";
    mkdir $sub or die;
    my $p = "$sub/empty.bf";
    { open(my $fh, '>', $p) or die; }
    # 200e6 items at 0.01: a 256 MiB bit array, which an address space of
    # this process's size plus 64 MiB cannot map.
    my $vm = 0;
    if (open(my $st, '<', '/proc/self/status')) {
        ($vm) = map { /^VmSize:\s*(\d+)/ ? $1 : () } <$st>;
    }
    my $limit = ($vm || 32768) + 65536;
    my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my $f = eval { Data::BloomFilter::Shared->new($ARGV[0], 200_000_000, 0.01) };
print $f ? "made\n" : "new: $@";
PERL
    my ($out, $status) = run_sh("ulimit -v $limit || exit 98; exec \"\$@\" '$p'", $script);
    like($out, qr/^new: .*->new: .*empty\.bf: the filter needs \d+ bytes .*\(RLIMIT_AS less VmSize, \d+ bytes\); nothing was created/m,
        'adopting under a too-small RLIMIT_AS croaks naming it')
        or diag("status $status: $out");
    is(-s $p, 0, '... and the file is still empty (not a full-size file of zeros)');
    is(listing($sub), 'empty.bf', '... and no temporary file is left');
    my $f = $C->new($p, 1000, 0.01);
    ok($f->add('after'), 'the empty file is then adopted normally');
}

# A kill at any moment of an adoption leaves the path empty or a complete
# filter, never a full-size file of zeros that every later open refuses.
{
    my $sub = "$dir/killed";
    mkdir $sub or die;
    my $p = "$sub/k.bf";
    my @bad;
    for my $round (1 .. 12) {
        unlink $p;
        { open(my $fh, '>', $p) or die; }
        my $pid = fork // die;
        if (!$pid) {
            # 5e7 items: a 64 MiB file, some milliseconds of work.
            eval { $C->new($p, 50_000_000, 0.01) };
            POSIX::_exit(0);
        }
        Time::HiRes::sleep(($round - 1) * 0.002);
        kill 'KILL', $pid;
        waitpid($pid, 0);
        next unless -s $p;
        push @bad, "round $round: " . (-s $p) . " bytes: $@" unless eval { $C->new($p, 1000, 0.01) };
    }
    is("@bad", '', 'adopters killed at 12 moments leave an empty file or a filter that opens');
}

# Several processes adopting one empty file at once end up sharing one filter.
{
    my $p = "$dir/race.bf";
    { open(my $fh, '>', $p) or die; }
    my @kids = map {
        my $i = $_;
        my $pid = fork // die;
        if (!$pid) {
            my $ok = eval { $C->new($p, 1000, 0.01)->add("item-$i"); 1 };
            POSIX::_exit($ok ? 0 : 1);
        }
        $pid;
    } 1 .. 6;
    my @bad = grep { waitpid($_, 0); $? != 0 } @kids;
    is(scalar @bad, 0, 'six processes adopting one empty file at once all succeed');
    my $f = $C->new($p, 1000, 0.01);
    is(join('', map { $f->contains("item-$_") } 1 .. 6), '111111', '... into one filter that has all their items');
    is(listing($dir) =~ /tmp/ ? 'left' : 'clean', 'clean', '... and no temporary file is left');
}

# --- what is not a regular file is refused before it is used -------------------------------
{
    my $fifo = "$dir/fifo";
    POSIX::mkfifo($fifo, 0600) or die "mkfifo: $!";
    for my $m (qw(new new_readonly)) {
        my $res = in_child(sub {
            my @a = $m eq 'new' ? ($fifo, 1000, 0.01) : ($fifo);
            my $f = eval { $C->$m(@a) };
            return $f ? 'opened' : $@;
        }, 10);
        like($res->{out}, qr/->$m: .*fifo: is a FIFO, not a regular file/, "$m of a FIFO croaks at once (no hang)")
            or diag(child_status_text($res));
    }
    unlink $fifo;

    my $f = eval { $C->new('/dev/null', 1000, 0.01) };
    like($@, qr/->new: \/dev\/null: is a character device, not a regular file/, 'new of /dev/null croaks');
    ok(-c '/dev/null', '... and /dev/null is still a device');
    $f = eval { $C->new($dir, 1000, 0.01) };
    like($@, qr/->new: .*(?:is a directory, not a regular file|Is a directory)/, 'new of a directory croaks');
}

# A terminal: opening it must not make it the controlling terminal of a
# session leader that has none.
SKIP: {
    skip 'no /dev/ptmx', 4 unless -c '/dev/ptmx';
    sysopen(my $master, '/dev/ptmx', O_RDWR | O_NOCTTY) or skip "open /dev/ptmx: $!", 4;
    # TIOCSPTLCK (unlock) and TIOCGPTN (its number), from <asm-generic/ioctls.h>.
    my $zero = pack('i', 0);
    ioctl($master, 0x40045431, $zero) or skip "unlockpt: $!", 4;
    my $n = pack('i', -1);
    ioctl($master, 0x80045430, $n) or skip "ptsname: $!", 4;
    my $pts = '/dev/pts/' . unpack('i', $n);
    skip "no $pts", 4 unless -c $pts;
    for my $m (qw(new new_readonly)) {
        my $res = in_child(sub {
            POSIX::setsid() or die "setsid: $!";
            my $before = open(my $t0, '+<', '/dev/tty') ? 'tty' : 'no tty';
            my @a = $m eq 'new' ? ($pts, 1000, 0.01) : ($pts);
            my $f = eval { $C->$m(@a) };
            my $err = $f ? 'opened' : $@;
            my $after = open(my $t1, '+<', '/dev/tty') ? 'tty' : 'no tty';
            return "$before|$after|$err";
        }, 10);
        my ($before, $after, $err) = split /\|/, $res->{out}, 3;
        like($err // '', qr/->$m: \Q$pts\E: is a character device, not a regular file/, "$m of a pty croaks")
            or diag(child_status_text($res));
        is("$before -> " . ($after // ''), 'no tty -> no tty',
            '... and the session leader did not get it as its controlling terminal');
    }
}

done_testing;
