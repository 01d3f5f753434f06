# A failed system call reads as Perl's $! does: the system's words, with no
# "(os error N)" after them.
use strict;
use warnings;
use Test::More;
use Errno ();
use File::Temp qw(tempdir);
use POSIX ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);

sub words { local $! = shift; return "$!" }
my $ENOENT = words(Errno::ENOENT);
my $EACCES = words(Errno::EACCES);
my $ENOTDIR = words(Errno::ENOTDIR);

sub says {
    my ($code, $method, $path, $words, $name) = @_;
    my $ok = eval { $code->(); 1 };
    ok(!$ok, "$name: croaks");
    like($@, qr/\A\Q$C\E->$method: \S+ \Q$path\E: \Q$words\E at /, "$name: ends in \$!'s words, '$words'");
    unlike($@, qr/os error/, "$name: no error number");
}

says(sub { $C->new("$dir/missing/f.bloom", 1000) }, 'new', "$dir/missing/f.bloom", $ENOENT,
    'new in a missing directory');
says(sub { $C->new_readonly("$dir/none.bloom") }, 'new_readonly', "$dir/none.bloom", $ENOENT,
    'new_readonly of a missing file');
says(sub { $C->upgrade("$dir/none.bloom") }, 'upgrade', "$dir/none.bloom", $ENOENT,
    'upgrade of a missing file');
open my $fh, '>', "$dir/plain" or die $!;
close $fh;
says(sub { $C->new("$dir/plain/f.bloom", 1000) }, 'new', "$dir/plain/f.bloom", $ENOTDIR,
    'new below a plain file');

# A read-only directory. root writes in any directory: the check then runs
# in a child that has given up root.
my $ro = "$dir/ro";
mkdir $ro or die "mkdir $ro: $!";
chmod 0555, $ro or die "chmod $ro: $!";
if ($> != 0) {
    says(sub { $C->new("$ro/f.bloom", 1000) }, 'new', "$ro/f.bloom", $EACCES,
        'new in a read-only directory');
}
else {
    chmod 0755, $dir or die "chmod $dir: $!";
    pipe my $r, my $w or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        my $msg = eval {
            POSIX::setgid(65534) or die "setgid: $!";
            POSIX::setuid(65534) or die "setuid: $!";
            $C->new("$ro/f.bloom", 1000);
            'no croak';
        } // $@;
        print {$w} $msg;
        close $w;
        POSIX::_exit(0);
    }
    close $w;
    my $msg = do { local $/; <$r> };
    waitpid $pid, 0;
    like($msg, qr/\A\Q$C\E->new: \S+ \Q$ro\E\/f\.bloom: \Q$EACCES\E at /,
        "new in a read-only directory (as nobody): ends in \$!'s words, '$EACCES'");
    unlike($msg, qr/os error/, 'new in a read-only directory: no error number');
}
ok(!-e "$ro/f.bloom", 'nothing was left in the read-only directory');

done_testing;
