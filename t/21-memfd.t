# memfd filters: creation, new_from_fd on numbers, dups and handles, the fd
# reaching another program (inherited across exec, or reopened through
# /proc by a process that did not inherit it), and fd ownership.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC);
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(reap perl5lib);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);

# O_CLOEXEC as shown in /proc/self/fdinfo/N "flags:" (octal).
sub cloexec_of {
    my ($fd) = @_;
    open(my $fh, '<', "/proc/self/fdinfo/$fd") or return undef;
    while (<$fh>) {
        return (oct($1) & 02000000) ? 1 : 0 if /^flags:\s*([0-7]+)/;
    }
    return undef;
}

my $f = $C->new_memfd('bf-test', 1000, 0.01);
isa_ok($f, $C, 'new_memfd');
my $fd = $f->memfd;
cmp_ok($fd, '>', 2, 'memfd accessor gives an fd number');
ok(-e "/proc/self/fd/$fd", '... that is open');
like(readlink("/proc/self/fd/$fd") // '', qr/memfd:/, '... and is a memfd');
is(cloexec_of($fd), 1, 'the memfd is close-on-exec');
is($f->path, undef, 'path undef for a memfd filter');
is($f->bits, 16384, 'geometry');
is($f->add('m1'), 1, 'add');

# new_from_fd on the number.
{
    my $g = $C->new_from_fd($fd);
    isa_ok($g, $C, 'new_from_fd(number)');
    is($g->contains('m1'), 1, 'sees earlier adds');
    is($g->add('g1'), 1, 'add through the second handle');
    is($f->contains('g1'), 1, 'first handle sees it');
    is($g->bits, $f->bits, 'same geometry');
    my $gfd = $g->memfd;
    if (defined $gfd && $gfd >= 0) {
        isnt($gfd, $fd, 'new_from_fd keeps its own duplicate of the fd');
        is(cloexec_of($gfd), 1, '... which is close-on-exec');
    }
    undef $g;
    ok(-e "/proc/self/fd/$fd", 'dropping the second handle leaves the first fd open');
    is($f->add('f-after-g'), 1, 'first handle works after the second is gone');
}

# new_from_fd on a dup the caller then closes.
{
    my $dup = POSIX::dup($fd);
    ok(defined $dup, 'dup');
    my $g = $C->new_from_fd($dup);
    ok($g, 'new_from_fd(dup)');
    ok(POSIX::close($dup), 'caller closes its dup');
    is($g->contains('m1'), 1, 'handle still works after the caller closed its fd');
    is($g->add('after-close'), 1, '... adds too');
    is($f->contains('after-close'), 1, '... shared with the first handle');
    # The closed number is reused by an unrelated file: the handle is unaffected.
    open(my $junk, '<', '/dev/null') or die;
    is($g->add('after-reuse'), 1, 'handle works after its former fd number is reused');
    close $junk;
}

# new_from_fd on a Perl handle.
{
    open(my $fh, '+<&', $fd) or die "dup to handle: $!";
    my $g = eval { $C->new_from_fd($fh) };
    ok($g, 'new_from_fd(filehandle)') or diag($@);
    close $fh;
    is($g ? $g->contains('m1') : undef, 1, 'handle works after the Perl filehandle is closed');
    my $h = eval { $C->new_from_fd(\*STDIN) };
    ok(!$h, 'new_from_fd(\*STDIN) croaks (not a filter)');
    like($@, qr/->new_from_fd: /, '... naming new_from_fd');
}

# new_from_fd on a file filter's fd.
{
    my $p = "$dir/file.bf";
    my $ff = $C->new($p, 1000, 0.01);
    $ff->add('in-file');
    open(my $fh, '+<', $p) or die;
    my $g = eval { $C->new_from_fd(fileno $fh) };
    ok($g, 'new_from_fd on an fd of a filter file') or diag($@);
    close $fh;
    is($g ? $g->contains('in-file') : undef, 1, '... sees the file filter');
}

# Things that are not filters.
{
    pipe(my $r, my $w) or die;
    my $g = eval { $C->new_from_fd(fileno $r) };
    ok(!$g, 'new_from_fd(pipe) croaks');
    like($@, qr/->new_from_fd: /, '... naming new_from_fd');
    open(my $plain, '+>', "$dir/plain") or die;
    print $plain "x" x 100_000;
    $plain->flush;
    $g = eval { $C->new_from_fd(fileno $plain) };
    ok(!$g, 'new_from_fd(regular non-filter file) croaks');
    like($@, qr/->new_from_fd: /, '... naming new_from_fd');
    my $closed = POSIX::dup(0);
    POSIX::close($closed);
    $g = eval { $C->new_from_fd($closed) };
    ok(!$g, 'new_from_fd(closed fd) croaks');
    like($@, qr/->new_from_fd: /, '... naming new_from_fd');
}

# The fd inherited by another program (fork + exec), used there with new_from_fd.
{
    my $dup = POSIX::dup($fd);
    is(cloexec_of($dup), 0, 'a plain dup is inherited across exec');
    $f->add_many([map { "parent$_" } 1 .. 100]);
    my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my $fd = shift;
my $g = Data::BloomFilter::Shared->new_from_fd($fd);
my $seen = $g->contains_many([map { "parent$_" } 1 .. 100]);
my $new = $g->add_many([map { "exec-child$_" } 1 .. 100]);
print "seen=$seen new=$new\n";
PERL
    pipe(my $r, my $w) or die;
    my $pid = do {
        local $ENV{PERL5LIB} = perl5lib();
        my $p = fork;
        die "fork: $!" unless defined $p;
        if (!$p) {
            close $r;
            POSIX::dup2(fileno $w, 1);
            { exec $^X, '-e', $script, $dup }
            POSIX::_exit(127);
        }
        $p;
    };
    close $w;
    POSIX::close($dup);
    my $out = do { local $/; <$r> } // '';
    my ($status) = reap($pid, 30);
    is($status, 0, 'exec\'d perl with the inherited fd exited 0');
    like($out, qr/seen=100 new=100/, 'it saw the parent\'s items and added its own');
    is(scalar $f->contains_many([map { "exec-child$_" } 1 .. 100]), 100, 'parent sees the exec\'d child\'s adds');
}

# A process that did not inherit the fd reopens it through /proc (as a
# process handed the fd over a UNIX socket would hold its own descriptor).
SKIP: {
    skip 'no /proc/PID/fd', 2 unless -e "/proc/$$/fd/$fd";
    my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my ($pid, $fd) = @ARGV;
open(my $fh, '+<', "/proc/$pid/fd/$fd") or do { print "cannot open: $!\n"; exit 0 };
my $g = Data::BloomFilter::Shared->new_from_fd($fh);
close $fh;
print "present=", $g->contains('m1'), " new=", $g->add('stranger'), "\n";
PERL
    local $ENV{PERL5LIB} = perl5lib();
    my $ppid = "$$";    # a copy: $$ itself would read the child's pid after fork
    open(my $ph, '-|', $^X, '-e', $script, $ppid, $fd) or die "spawn: $!";
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    skip "cannot reopen the memfd through /proc: $out", 2 if $out =~ /cannot open/;
    like($out, qr/present=1 new=1/, 'a process without the inherited fd attaches through its own descriptor') or diag($out);
    is($f->contains('stranger'), 1, 'and its adds are shared');
}

# The real thing: the memfd passed over a UNIX socket (SCM_RIGHTS) to a
# process that is not our child's fork image but a fresh perl.
SKIP: {
    skip 'IO::FDPass not installed (Debian: libio-fdpass-perl)', 3
        unless eval { require IO::FDPass; 1 };
    require Socket;
    socketpair(my $ours, my $theirs, Socket::AF_UNIX(), Socket::SOCK_STREAM(), 0)
        or die "socketpair: $!";
    my $script = <<'PERL';
use strict; use warnings; use IO::FDPass; use Data::BloomFilter::Shared;
my $fd = IO::FDPass::recv(0);
$fd >= 0 or do { print "recv failed: $!\n"; exit 1 };
my $g = Data::BloomFilter::Shared->new_from_fd($fd);
POSIX::close($fd) if eval { require POSIX; 1 };
print "present=", $g->contains('m1'), " new=", $g->add('over-socket'), " memfd=", $g->memfd, "\n";
PERL
    local $ENV{PERL5LIB} = perl5lib();
    my $pid = open(my $ph, '-|') // die "fork: $!";
    if (!$pid) {
        close $ours;
        open(STDIN, '<&', $theirs) or die "dup: $!";
        exec $^X, '-e', $script or POSIX::_exit(127);
    }
    close $theirs;
    ok(IO::FDPass::send(fileno $ours, $f->memfd), 'sent the memfd over a UNIX socket');
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    like($out, qr/present=1 new=1 memfd=[0-9]+\n/, 'the receiver attached through the passed fd, added, and has its own descriptor to pass on') or diag($out);
    is($f->contains('over-socket'), 1, 'the sender sees the receiver\'s add');
}

# Closing the memfd's owner handle leaves other handles working.
{
    my $m = $C->new_memfd('owner', 1000, 0.01);
    my $g = $C->new_from_fd($m->memfd);
    $m->add('owner-item');
    undef $m;
    is($g->contains('owner-item'), 1, 'handle from new_from_fd outlives the creating handle');
    is($g->add('late'), 1, '... and still adds');
}

{
    my $s = $C->new_memfd('seeded', 1000, 0.01, { seed => 42 });
    is($s->seed, 42, 'new_memfd with {seed => 42}');
    my $g = $C->new_from_fd($s->memfd);
    is($g->seed, 42, 'new_from_fd reads the seed from the header');
}

done_testing;
