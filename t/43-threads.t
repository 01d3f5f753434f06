# A handle belongs to the thread that opened it. In a new ithread its copy
# holds no filter: every call croaks naming the module and what to do, the
# copy never reaches (nor frees) the first thread's handle, and a filter
# opened in each thread is the same filter.
use strict;
use warnings;
use Config;
use Test::More;
BEGIN {
    plan(skip_all => 'this perl has no ithreads') if !$Config{useithreads};
}
use threads;
use File::Temp qw(tempdir);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $ELSEWHERE = qr/\A\Q$C\E->(\w+): this handle was opened in another thread; open the filter in each thread \(new with the path, new_from_fd, \.\.\.\) at /;
my $dir = tempdir(CLEANUP => 1);
my $path = "$dir/f.bloom";

{
    package My::Bloom;
    our @ISA = ('Data::BloomFilter::Shared');
}

my $f = $C->new($path, 1000);
$f->add('before') for 1 .. 3;    # the call site is swapped for the fast entersub
my $other = $C->new(undef, 1000);
my $sub = My::Bloom->new(undef, 1000);
my $gone = $C->new(undef, 1000);
$gone->DESTROY;

# Each call, in the new thread: (method name the message gives, or '' when
# the call did not croak, or the whole message when it croaked otherwise).
my @calls = (
    [add => sub { $f->add('x') }],
    [contains => sub { $f->contains('before') }],
    [add_many => sub { $f->add_many(['x', 'y']) }],
    [contains_many => sub { $f->contains_many(['x']) }],
    [count => sub { $f->count }],
    [capacity => sub { $f->capacity }],
    [stats => sub { $f->stats }],
    [serialize => sub { $f->serialize }],
    [clear => sub { $f->clear }],
    [sync => sub { $f->sync }],
    [merge => sub { $other->merge($f) }],
    [add => sub { $sub->add('x') }],
);
my @got = threads->create({ context => 'list' }, sub {
    my @r;
    for my $c (@calls) {
        my ($want, $code) = @$c;
        push @r, eval { $code->(); 1 } ? 'no croak'
            : $@ =~ $ELSEWHERE ? $1
            : $@ =~ /\A\Q$C\E->merge: this handle \(other filter\) was opened in another thread; open the filter in each thread / ? 'merge'
            : $@;
    }
    push @r, ref $f, ref $sub;
    push @r, eval { $gone->add('x'); 1 } ? 'no croak' : $@;
    # The copies go when the thread ends: their DESTROY must not free the
    # first thread's handles.
    undef $f;
    undef $sub;
    return @r;
})->join;
for my $i (0 .. $#calls) {
    is($got[$i], $calls[$i][0], "in a new thread, $calls[$i][0] croaks: opened in another thread, open it in each");
}
is($got[@calls], $C, 'the copy stays an object of the class (not an unblessed reference)');
is($got[@calls + 1], 'My::Bloom', '... and of a subclass');
like($got[@calls + 2], qr/\A\Q$C\E->add: destroyed handle at /, 'a handle destroyed before the thread stays a destroyed handle');

is($f->contains('before'), 1, 'the first thread\'s handle still works after the thread ended');
is($f->add('after'), 1, '... and writes');
is($sub->add('s'), 1, "... the subclass object's too");
is($f->contains('x'), 0, 'nothing the thread tried was added');

# Opened in each thread: one filter.
my ($added, $seen) = threads->create({ context => 'list' }, sub {
    my $mine = $C->new($path, 1000);
    return ($mine->add('from the thread'), $mine->contains('after'));
})->join;
is($added, 1, 'a filter opened in the thread by its path takes adds');
is($seen, 1, '... and sees the first thread\'s');
is($f->contains('from the thread'), 1, 'the first thread sees the thread\'s add');

my $m = $C->new_memfd('threads', 1000);
my $fd = $m->memfd;
my $via_fd = threads->create(sub {
    my $mine = $C->new_from_fd($fd);
    return $mine->add('via fd');
})->join;
is($via_fd, 1, 'new_from_fd in the thread, with the memfd number read before');
is($m->contains('via fd'), 1, '... is the same filter');

# A thread of a thread: the copy of a copy is no better.
my $nested = threads->create(sub {
    return threads->create(sub { eval { $f->add('n'); 1 } ? 'no croak' : $@ })->join;
})->join;
like($nested, $ELSEWHERE, 'a thread started by a thread: the same croak');
is($f->contains('n'), 0, '... and nothing added');

done_testing;
