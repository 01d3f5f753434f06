# The same items give the same bits whatever the backing (anonymous, file,
# memfd) and the order; serialize/deserialize round-trips; seeds change bits.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use List::Util qw(shuffle);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
umask 022;

my @items = map { "item-$_" } 1 .. 3000;
my @probe = (@items[0 .. 99], map { "other-$_" } 1 .. 2000);

my %f = (
    anon  => $C->new(undef, 5000, 0.01),
    file  => $C->new("$dir/c.bf", 5000, 0.01),
    memfd => $C->new_memfd('consistency', 5000, 0.01),
);
my %added;
$f{$_}->add_many(\@items, $added{$_} = []) for keys %f;
is_deeply($added{file}, $added{anon}, 'add_many flags: file = anonymous');
is_deeply($added{memfd}, $added{anon}, 'add_many flags: memfd = anonymous');
my %present;
$present{$_} = [$f{$_}->contains_many(\@probe)] for keys %f;
is_deeply($present{file}, $present{anon}, 'contains_many flags: file = anonymous');
is_deeply($present{memfd}, $present{anon}, 'contains_many flags: memfd = anonymous');
my %ser = map { $_ => $f{$_}->serialize } keys %f;
ok(length $ser{anon} > 5000 * 7 / 8 / 2, 'serialize gives bytes for the bit array');
is($ser{file}, $ser{anon}, 'serialize: file = anonymous');
is($ser{memfd}, $ser{anon}, 'serialize: memfd = anonymous');
is($f{file}->bits_set, $f{anon}->bits_set, 'bits_set: file = anonymous');

# Order does not matter.
{
    my $g = $C->new(undef, 5000, 0.01);
    $g->add($_) for shuffle @items;
    is($g->serialize, $ser{anon}, 'items added one by one in another order: same bytes');
}

# Round trip.
{
    my $d = $C->deserialize($ser{anon});
    isa_ok($d, $C, 'deserialize');
    is($d->$_, $f{anon}->$_, "deserialize keeps $_") for qw(capacity bits hashes seed bits_set count);
    ok(abs($d->fp_rate - 0.01) < 1e-15, 'deserialize keeps fp_rate');
    is($d->path, undef, 'deserialize without path: anonymous');
    is_deeply([$d->contains_many(\@probe)], $present{anon}, 'deserialized filter answers the same');
    is($d->serialize, $ser{anon}, 'serialize(deserialize(x)) = x');
    is($d->add('item-1'), 0, 'deserialized filter is writable: old item seen');
    is($d->add('fresh-after-deserialize'), 1, 'deserialized filter is writable: new item new');
    is($f{anon}->contains('fresh-after-deserialize'), 0, 'deserialized filter is a copy, not shared');

    my $sub = 'My::Sub::BF';
    {
        no strict 'refs';
        @{"${sub}::ISA"} = ($C);
    }
    my $ds = $sub->deserialize($ser{anon});
    isa_ok($ds, $sub, 'Subclass->deserialize');

    my $path = "$dir/deser.bf";
    my $p = $C->deserialize($ser{anon}, { path => $path, mode => 0640 });
    is($p->path, $path, 'deserialize with path: path accessor');
    ok(-f $path, 'deserialize with path creates the file');
    is((stat $path)[2] & 07777, 0640, 'deserialize with mode 0640');
    undef $p;
    my $r = $C->new($path, 5000, 0.01);
    is_deeply([$r->contains_many(\@probe)], $present{anon}, 'file written by deserialize reopens with the same bits');

    my $p2 = $C->deserialize($ser{anon}, { path => "$dir/deser2.bf" });
    is((stat "$dir/deser2.bf")[2] & 07777, 0600, 'deserialize with path: default mode 0600');
}

# Seeds.
{
    my $s1 = $C->new(undef, 5000, 0.01, { seed => 0xDEADBEEF });
    my $s2 = $C->new(undef, 5000, 0.01, { seed => 0xDEADBEEF });
    my $s3 = $C->new(undef, 5000, 0.01, { seed => 0xDEADBEF0 });
    is($s1->seed, 0xDEADBEEF, 'seed accessor');
    $_->add_many(\@items) for $s1, $s2, $s3;
    is($s1->serialize, $s2->serialize, 'same seed: same bits');
    isnt($s1->serialize, $s3->serialize, 'different seed: different bits');
    isnt($s1->serialize, $ser{anon}, 'seeded and unseeded filters differ');
    is(scalar $s1->contains_many(\@items), scalar @items, 'seeded filter: no false negatives');
    my $d = $C->deserialize($s1->serialize);
    is($d->seed, 0xDEADBEEF, 'deserialize keeps the seed');
    is(scalar $d->contains_many(\@items), scalar @items, 'deserialized seeded filter finds its items');
    my $seed64 = 18364758544493064720;    # 0xFEDCBA9876543210
    my $big = eval { $C->new(undef, 100, 0.01, { seed => $seed64 }) };
    ok($big, 'a seed above 2^63 is accepted') or diag($@);
    is($big ? $big->seed : undef, $seed64, 'a 64-bit seed survives');

    my $fs = $C->new("$dir/seeded.bf", 5000, 0.01, { seed => 77, mode => 0600 });
    $fs->add_many(\@items);
    undef $fs;
    my $ro = $C->new("$dir/seeded.bf", 5000, 0.01);
    is($ro->seed, 77, 'seed stored in the file');
    is(scalar $ro->contains_many(\@items), scalar @items, 'reopened seeded file finds its items');
}

done_testing;
