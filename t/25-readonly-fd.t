# A process that may only read a live (not frozen) filter file queries it
# through new_from_fd of a read-only descriptor: PROT_READ, no slot, loads
# only. Every mutator croaks "read-only"; new_readonly still wants a frozen
# file.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib readable_build);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
chmod 0755, $dir;
my $path = "$dir/live.bf";
my @items = map { "item-$_" } 1 .. 300;
my @absent = map { "absent-$_" } 1 .. 300;

my $w = $C->new($path, 10_000, 0.01);
$w->add_many(\@items);

open(my $fh, '<', $path) or die "$path: $!";
my $r = eval { $C->new_from_fd($fh) };
ok($r, 'new_from_fd of an O_RDONLY descriptor of a live filter') or diag($@);
close $fh;
is($r->readonly, 1, '... gives a read-only handle');
is($r->frozen, 0, '... of a filter that is not frozen');
is(scalar $r->contains_many(\@items), 300, 'contains_many finds every item');
is(scalar $r->contains_many(\@absent), scalar $w->contains_many(\@absent), '... and agrees on absent ones');
is($r->contains('item-1'), 1, 'contains');
is($r->bits_set, $w->bits_set, 'bits_set');
is($r->count, $w->count, 'count');
my $s = $r->stats;
is_deeply([@$s{qw(bits hashes bits_set readonly frozen)}], [$w->bits, $w->hashes, $w->bits_set, 1, 0], 'stats');
my $ops = $w->stats->{ops};

$w->add('added-later');
is($r->contains('added-later'), 1, 'an item added by a writer afterwards is seen: the filter is live');

for my $m (qw(add add_many merge intersect invert clear freeze)) {
    my @args = $m eq 'add' ? ('x') : $m eq 'add_many' ? (['x']) : $m =~ /^(merge|intersect)$/ ? ($w) : ();
    my $before = $w->bits_set;
    ok(!eval { $r->$m(@args); 1 }, "$m through the read-only handle croaks");
    like($@, qr/->$m: .*read-only/, '... naming read-only');
    is($w->bits_set, $before, '... and changes nothing');
}
is($w->stats->{ops}, $ops + 1, 'the read-only handle counted no operation (the writer\'s one add only)');
ok(!$w->frozen, 'the filter is still live');

# new_readonly keeps its contract: frozen files only.
ok(!eval { $C->new_readonly($path) }, 'new_readonly of the live file still croaks');
like($@, qr/->new_readonly: .*not frozen/, '... not frozen');

# Another user who may only read the file (0644): the library and the CLI.
SKIP: {
    skip 'needs root and setpriv to run as another user', 6
        if $> != 0 || system('setpriv --version >/dev/null 2>&1') != 0;
    chmod 0644, $path or die;
    my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my ($path, @items) = @ARGV;
my $C = 'Data::BloomFilter::Shared';
$| = 1;
print 'rw: ', (eval { $C->new($path, 10_000, 0.01) } ? "opened\n" : $@ =~ /Permission denied/ ? "denied\n" : $@);
open(my $fh, '<', $path) or die "$path: $!";
my $r = eval { $C->new_from_fd($fh) } or do { print "ro: $@"; exit 0 };
print 'ro: ', scalar $r->contains_many(\@items), ' ', $r->stats->{bits_set}, ' ', $r->readonly, "\n";
print 'add: ', (eval { $r->add('nobody'); 1 } ? "added\n" : $@ =~ /->add: .*read-only/ ? "read-only\n" : $@);
PERL
    my @cmd = ('setpriv', '--reuid=65534', '--regid=65534', '--clear-groups');
    # The built module and CLI where nobody can read them.
    my ($readable_lib, $cli) = readable_build($dir);
    local $ENV{PERL5LIB} = $readable_lib;
    open(my $ph, '-|', @cmd, $^X, '-e', $script, $path, @items[0 .. 99]) or die;
    my $out = do { local $/; <$ph> };
    close $ph;
    like($out, qr/^rw: denied$/m, 'as nobody, new (read-write) of the 0644 file is denied') or diag($out);
    like($out, qr/^ro: 100 ${\ $w->bits_set} 1$/m, '... new_from_fd of a read-only descriptor queries it') or diag($out);
    like($out, qr/^add: read-only$/m, '... and its add croaks read-only') or diag($out);
    is($w->contains('nobody'), 0, '... adding nothing');

    open($ph, '-|', @cmd, $^X, $cli, 'info', $path) or die;
    my $info = do { local $/; <$ph> };
    close $ph;
    is($? >> 8, 0, 'as nobody, the CLI\'s info of the live 0644 file works') or diag($info);
    pipe(my $in_r, my $in_w) or die;
    my $pid = fork // die;
    if (!$pid) {
        close $in_w;
        open(STDIN, '<&', $in_r) or die;
        open(STDOUT, '>', '/dev/null') or die;
        { exec @cmd, $^X, $cli, 'check', $path, '--present' }
        POSIX::_exit(127);
    }
    close $in_r;
    print $in_w map { "$_\n" } @items[0 .. 9];
    close $in_w;
    waitpid($pid, 0);
    is($? >> 8, 0, '... and so does check') or diag("status $?");
}

done_testing;
