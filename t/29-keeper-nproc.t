use strict;
use warnings;
use Test::More;
use File::Spec;

# A process that cannot start the filter's keeper thread (doc/DESIGN.md,
# C8 a) is told so, with the system's words and the limit that binds it:
# a process of a uid of its own (5003, not root: root is not held to
# RLIMIT_NPROC) under RLIMIT_NPROC 1, which it reaches alone, so that the
# kernel refuses the thread (EAGAIN). Queries need no keeper and still
# work; every write croaks the same way, and changes nothing.

plan skip_all => 'needs root (to run as another uid)' if $> != 0;
plan skip_all => 'needs setpriv(1) and prlimit(1)'
    unless system('setpriv --reuid=5003 --regid=5003 --clear-groups prlimit --nproc=1 true >/dev/null 2>&1') == 0;

my @inc = map { ('-I', File::Spec->rel2abs($_)) } qw(blib/lib blib/arch);
my $code = <<'PERL';
use strict;
use warnings;
use Data::BloomFilter::Shared;
my $C = 'Data::BloomFilter::Shared';
my $f = $C->new(undef, 1000, 0.01);
print 'contains: ', ($f->contains('a') ? 'yes' : 'no'), "\n";
for my $op ([add => sub { $f->add('a') }], [add_many => sub { $f->add_many(['a', 'b']) }]) {
    my $msg = eval { $op->[1]->(); 1 } ? 'ok' : $@;
    $msg =~ s/ at -e line \d+\.\n//;
    print "$op->[0]: $msg\n";
}
print 'after: ', ($f->contains('a') || $f->contains('b') ? 'changed' : 'unchanged'), "\n";
PERL
my $pid = open(my $ph, '-|') // die "fork: $!";
if (!$pid) {
    open(STDERR, '>&', \*STDOUT) or die "dup: $!";
    exec('setpriv', '--reuid=5003', '--regid=5003', '--clear-groups', 'prlimit', '--nproc=1', $^X, @inc, '-e', $code)
        or die "exec: $!";
}
my $out = do { local $/; <$ph> };
close $ph;
is($?, 0, 'the process ends normally') or diag($out);
like($out, qr/^contains: no$/m, 'a query needs no keeper');
for my $op (qw(add add_many)) {
    like($out, qr/^$op: Data::BloomFilter::Shared->$op: cannot start the filter's keeper thread: Resource temporarily unavailable \(RLIMIT_NPROC, 1 process\)$/m,
        "$op croaks naming the keeper thread, the errno and RLIMIT_NPROC");
}
like($out, qr/^after: unchanged$/m, 'and nothing was added');

done_testing;
