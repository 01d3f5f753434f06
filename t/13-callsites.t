# Call sites of add, contains, add_many and contains_many: on its first call
# from a site, such a method swaps the site's entersub for a faster one (see
# Shared.xs, "call sites"). Every way a site can change under it must give the
# same answers as the generic entersub.
use strict;
use warnings;
use Test::More;
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $f = $C->new(undef, 1000, 0.01);

sub swaps { $C->_entersub_swaps }

{
    package Other;    # an unrelated class with methods of the same names
    sub new { bless {}, shift }
    sub contains { "other:$_[1]" }
    sub add { "other-add:$_[1]" }
}
{
    package Sub;    # a subclass overriding one method in Perl
    our @ISA = ('Data::BloomFilter::Shared');
    sub contains { "sub:$_[1]" }
}
our $destroyed = 0;
{
    package Obj;    # an overloaded item that counts its destruction
    use overload '""' => sub { 'obj' }, fallback => 1;
    sub DESTROY { $main::destroyed++ }
}

subtest 'a site is swapped on its first call and keeps answering right' => sub {
    my $before = swaps();
    my @added = map { $f->add("item$_") } 1 .. 5;
    is_deeply(\@added, [ (1) x 5 ], 'add through one site');
    is(swaps() - $before, 1, 'that site was swapped once');
    my @again = map { $f->add("item$_") } 1 .. 5;
    is_deeply(\@again, [ (0) x 5 ], 'present items through another site');
    my @has = map { $f->contains($_) } qw(item1 item5 absent1 item3 absent2);
    is_deeply(\@has, [ 1, 1, 0, 1, 0 ], 'contains through a swapped site');
    is(swaps() - $before, 3, 'one swap per site, not per call');
};

subtest 'a site that meets another class goes back to the generic entersub' => sub {
    my $other = Other->new;
    my @got = map { $_->contains('item1') } $f, $other, $f, $other, $f;
    is_deeply(\@got, [ 1, 'other:item1', 1, 'other:item1', 1 ], 'contains');
    my @add = map { $_->add('poly') } $f, $other, $f;
    is_deeply(\@add, [ 1, 'other-add:poly', 0 ], 'add');
    my $before = swaps();
    my @later = map { $_->contains('item2') } $other, $f, $f;
    is_deeply(\@later, [ 'other:item2', 1, 1 ], 'another class first');
    is(swaps() - $before, 1, 'swapped when one of ours first came through');
    my @last = map { $_->contains('item3') } $f, $other, $other;
    is_deeply(\@last, [ 1, 'other:item3', 'other:item3' ], 'and given back after');
};

subtest 'a Perl override in a subclass, at a swapped site' => sub {
    my $s = Sub->new(undef, 1000, 0.01);
    $s->add('x');
    my @got = map { $_->contains('x') } $f, $s, $f, $s;
    is_deeply(\@got, [ 0, 'sub:x', 0, 'sub:x' ], 'the override runs');
    ok(Data::BloomFilter::Shared::contains($s, 'x'), 'the XSUB itself sees the item');
};

subtest 'function calls, code refs and goto' => sub {
    is(Data::BloomFilter::Shared::contains($f, 'item1'), 1, 'function call');
    my $cv = \&Data::BloomFilter::Shared::contains;
    is($cv->($f, 'item1'), 1, 'code ref');
    is(&$cv($f, 'absent'), 0, '&-call');
    my $via_goto = sub { goto &Data::BloomFilter::Shared::contains };
    is($via_goto->($f, 'item1'), 1, 'goto &xsub');
    my $method = 'contains';
    is($f->$method('item1'), 1, 'method by name');
    my @got = map { $f->$_('item2') } qw(contains add contains);
    is_deeply(\@got, [ 1, 0, 1 ], 'one site, methods chosen at run time');
};

subtest 'croaks through a swapped site leave it working' => sub {
    my @args = ([ 'item1' ], [], [ 'item1' ], [ 'a', 'b' ], [ undef ], [ 'item1' ]);
    my @got;
    for my $a (@args) {
        my $r = eval { $f->contains(@$a) };
        push @got, defined $r ? $r : ($@ =~ /->contains: (usage|undefined item)/ ? $1 : "other: $@");
    }
    is_deeply(\@got, [ 1, 'usage', 1, 'usage', 'undefined item', 1 ], 'answers and croaks in turn');
    my $g = $C->new(undef, 1000, 0.01);
    my @h = ($f, $g, $f);
    $g->DESTROY;
    my @r = map { my $x = eval { $_->contains('item1') }; defined $x ? $x : ($@ =~ /destroyed handle/ ? 'destroyed' : $@) } @h;
    is_deeply(\@r, [ 1, 'destroyed', 1 ], 'a destroyed handle in between');
};

subtest 'what a call holds is released right after it' => sub {
    # add_many holds a reference to an item that is an object for the length
    # of the call; the swapped site must release it as the generic one does,
    # not at the end of the enclosing scope.
    for my $i (1 .. 3) {
        my $o = bless {}, 'Obj';
        $f->add_many([$o]);
        undef $o;
        is($main::destroyed, $i, "call $i: the item is freed with its last reference");
    }
    my $wide = "caf\x{e9}";
    utf8::upgrade($wide);
    my @got = map { $f->add($wide . $_) } 1 .. 3;
    is_deeply(\@got, [ 1, 1, 1 ], 'UTF-8 items (a downgraded copy per call)');
    ok($f->contains("caf\xe91"), 'found by their bytes');
};

subtest 'batches in every context through a swapped site' => sub {
    for my $i (1 .. 3) {
        my @r = $f->add_many([ "b$i-x", "item1", "b$i-y" ], \my @was_new);
        is_deeply(\@was_new, [ 1, 0, 1 ], "out array, call $i");
        is_deeply(\@r, [ 2 ], "list context: the count, call $i");
        my $n = $f->contains_many([ "b$i-x", "nope$i", "b$i-y" ]);
        is($n, 2, "scalar context, call $i");
        $f->add_many([ "v$i" ]);
        ok($f->contains("v$i"), "void context, call $i");
    }
};

done_testing;
