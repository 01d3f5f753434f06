# Portable filters: the seed option on every constructor and through the
# bytes; seed 0 is the original hashing; different seeds never combine;
# serialize is deterministic, works on frozen and read-only handles, and
# writes the layout src/shm/serial.rs documents; deserialize to a path makes a
# normal filter file.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use List::Util qw(shuffle);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(spawn_perl reap);
use Data::BloomFilter::Shared;
# Reopened with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
srand(61);

my @items = map { "host-item-$_" } 1 .. 2000;
my @absent = map { "never-added-$_" } 1 .. 2000;

sub bits_of { substr($_[0], 56, length($_[0]) - 64) }    # the bit array of serialized bytes
sub popcount { unpack '%32b*', $_[0] }

# --- the byte layout --------------------------------------------------------------------------
{
    my $seed = '81985529216486895';    # 0x0123456789ABCDEF
    for my $g ([10, 0.5], [1000, 0.01], [100_000, 0.001], [3, 0.3]) {
        my ($cap, $rate) = @$g;
        my $f = $C->new(undef, $cap, $rate, { seed => $seed });
        $f->add_many([@items[0 .. 99]]);
        my $b = $f->serialize;
        my $name = "capacity $cap, fp_rate $rate";
        is(length $b, $f->bits / 8 + 64, "$name: size is bits/8 + 64 exactly");
        my ($magic, $version, $scheme, $k, $reserved, $m, $capacity, $fp, $s)
            = unpack 'a8 V V V V Q< Q< d< Q<', $b;
        is($magic, 'BLOOMSER', "$name: magic");
        is($version, 1, "$name: version 1");
        is($scheme, 1, "$name: hash scheme 1");
        is($k, $f->hashes, "$name: k at offset 16");
        is($reserved, 0, "$name: reserved word is 0");
        is($m, $f->bits, "$name: m at offset 24");
        is($capacity, $cap, "$name: capacity at offset 32");
        is($fp, $rate, "$name: fp_rate as a little-endian double at offset 40");
        is($s, $seed, "$name: seed at offset 48");
        is(popcount(bits_of($b)), $f->bits_set, "$name: the bit array follows the header, before an 8-byte checksum");
    }

    # Known answers (the probe positions of src/math/hashing.rs): bit i of the
    # filter is bit i%8 of byte i/8 of the array, whatever the host.
    my $tiny = $C->new(undef, 10, 0.5);    # k = 1, m = 64
    $tiny->add('');                        # XXH3-128("") puts its one probe on bit 63
    is(bits_of($tiny->serialize), ("\0" x 7) . "\x80", "'' sets bit 63: the top bit of the array's 8th byte");

    my $f0 = $C->new(undef, 1000, 0.01);    # k = 7, m = 16384
    my $f42 = $C->new(undef, 1000, 0.01, { seed => 42 });
    $_->add('hello') for $f0, $f42;
    my %want = (
        0  => [14360, 13975, 13590, 13205, 12820, 12435, 12050],
        42 => [7702, 15647, 7208, 15153, 6714, 14659, 6220],
    );
    for my $case ([0, $f0], [42, $f42]) {
        my ($seed, $f) = @$case;
        my $bits = bits_of($f->serialize);
        is(popcount($bits), 7, "seed $seed: 'hello' sets 7 bits");
        is_deeply([grep { vec($bits, $_, 1) } 0 .. 16383], [sort { $a <=> $b } @{ $want{$seed} }],
            "seed $seed: 'hello' sets exactly the known bits");
    }
}

# --- seed on every constructor; seed 0 is no seed -------------------------------------------------
my %by_ctor = (
    new        => sub { $C->new(undef, 5000, 0.01, @_ ? { seed => $_[0] } : ()) },
    new_file   => sub {
        my $p = "$dir/ctor-" . rand() . '.bf';
        $C->new($p, 5000, 0.01, @_ ? { seed => $_[0] } : 0600);
    },
    new_memfd  => sub { $C->new_memfd('portable', 5000, 0.01, @_ ? { seed => $_[0] } : ()) },
);
my $plain;
for my $ctor (sort keys %by_ctor) {
    my $make = $by_ctor{$ctor};
    my $none = $make->();
    my $zero = $make->(0);
    my $s1 = $make->(1);
    my $s2 = $make->(2);
    is($none->seed, 0, "$ctor: no seed is seed 0");
    is($zero->seed, 0, "$ctor: seed 0");
    is($s1->seed, 1, "$ctor: seed 1");
    is($s1->stats->{seed}, 1, "$ctor: stats->{seed}");
    $_->add_many(\@items) for $none, $zero, $s1, $s2;
    my $b_none = $none->serialize;
    $plain //= $b_none;
    is($zero->serialize, $b_none, "$ctor: seed 0 gives the same bytes as no seed");
    is($b_none, $plain, "$ctor: unseeded bytes are the same for every constructor");
    isnt(bits_of($s1->serialize), bits_of($b_none), "$ctor: seed 1 sets other bits than seed 0");
    isnt(bits_of($s1->serialize), bits_of($s2->serialize), "$ctor: seed 1 and seed 2 set other bits");
    is(scalar $s1->contains_many(\@items), scalar @items, "$ctor: a seeded filter finds every item");
    ok($zero->is_compatible($none), "$ctor: seed 0 and no seed are compatible");
    ok(!$s1->is_compatible($zero), "$ctor: seed 1 is not compatible with seed 0");
    ok(!$s1->is_compatible($s2), "$ctor: seed 1 is not compatible with seed 2");

    my $d = $C->deserialize($s1->serialize);
    is($d->seed, 1, "$ctor: deserialize keeps the seed");
    is(scalar $d->contains_many(\@items), scalar @items, "$ctor: the deserialized filter hashes with the seed");
    is($d->add($items[0]), 0, "$ctor: ... and adds with it");
}

# A file keeps its seed: reopening without one uses the stored seed.
{
    my $p = "$dir/seeded-file.bf";
    my $f = $C->new($p, 5000, 0.01, { seed => 12345 });
    $f->add_many(\@items);
    my $again = $C->new($p, 5000, 0.01);
    is($again->seed, 12345, 'a file reopened without a seed keeps its stored seed');
    is($again->serialize, $f->serialize, '... and its bits');
}

# --- 64-bit seeds -----------------------------------------------------------------------------
for my $seed ('9223372036854775808', '9223372036854775809', '18364758544493064720', '18446744073709551615') {
    my $f = $C->new(undef, 100, 0.01, { seed => $seed });
    is($f->seed . '', $seed, "seed $seed: accessor gives the exact decimal string");
    is($f->stats->{seed} . '', $seed, "seed $seed: stats->{seed} exact");
    my $b = $f->serialize;
    is((unpack 'x48 Q<', $b) . '', $seed, "seed $seed: stored exactly in the bytes");
    my $d = $C->deserialize($b);
    is($d->seed . '', $seed, "seed $seed: survives deserialize");
    my $p = "$dir/seed-$seed.bf";
    $C->new($p, 100, 0.01, { seed => $seed });
    is($C->new($p, 100, 0.01)->seed . '', $seed, "seed $seed: survives a file reopen");
}
{
    my $a = $C->new(undef, 100, 0.01, { seed => '18446744073709551615' });
    my $b = $C->new(undef, 100, 0.01, { seed => '18446744073709551614' });
    ok(!$a->is_compatible($b), 'seeds differing in the lowest bit above 2**63 are not compatible');
}

# --- different seeds never combine -------------------------------------------------------------
{
    my $a = $C->new(undef, 5000, 0.01, { seed => 7 });
    my $b = $C->new(undef, 5000, 0.01, { seed => 8 });
    $a->add_many([@items[0 .. 999]]);
    $b->add_many([@items[1000 .. 1999]]);
    my ($ba, $bb) = ($a->serialize, $b->serialize);
    for my $m (qw(merge intersect)) {
        for my $pair ([$a, $b, 'a with b'], [$b, $a, 'b with a']) {
            my ($x, $y, $name) = @$pair;
            ok(!eval { $x->$m($y); 1 }, "$m $name (different seeds) croaks");
            like($@, qr/^Data::BloomFilter::Shared->$m: seed mismatch/, "... naming $m: seed mismatch");
        }
    }
    is($a->serialize, $ba, 'refused merges and intersections changed nothing in a');
    is($b->serialize, $bb, '... nor in b');

    my $c = $C->deserialize($ba);
    ok($c->is_compatible($a), 'same seed (through bytes): compatible');
    ok(eval { $c->merge($C->deserialize($ba)); 1 }, 'same seed: merge works') or diag($@);
}

# --- serialize is deterministic ---------------------------------------------------------------
{
    my $seed = '18000000000000000001';
    my $in_order = $C->new(undef, 5000, 0.01, { seed => $seed });
    $in_order->add_many(\@items);
    my $want = $in_order->serialize;

    my $shuffled = $C->new(undef, 5000, 0.01, { seed => $seed });
    $shuffled->add($_) for shuffle @items;
    is($shuffled->serialize, $want, 'same items in another order, one by one: identical bytes');

    # Another process (a fresh perl, not a fork) builds the same set in
    # reverse order and writes its bytes to a file.
    my $out = "$dir/other-process.bin";
    my $pid = spawn_perl('-MData::BloomFilter::Shared', '-e', <<'PERL', $out, $seed);
my ($out, $seed) = @ARGV;
my $f = Data::BloomFilter::Shared->new(undef, 5000, 0.01, { seed => $seed });
$f->add_many([reverse map { "host-item-$_" } 1 .. 2000]);
open(my $fh, '>:raw', $out) or die "$out: $!";
print {$fh} $f->serialize;
close $fh or die "$out: $!";
PERL
    my ($status) = reap($pid, 60);
    is($status, 0, 'the other process exited normally');
    my $theirs = do { open(my $fh, '<:raw', $out) or die "$out: $!"; local $/; <$fh> };
    is($theirs, $want, 'same items built in another process, reverse order: identical bytes');
}

# --- serialize from frozen and read-only handles ---------------------------------------------------
{
    my $p = "$dir/frozen.bf";
    my $f = $C->new($p, 5000, 0.01, { seed => 99 });
    $f->add_many(\@items);
    my $before = $f->serialize;
    $f->freeze;
    is($f->serialize, $before, 'serialize of a frozen handle: the same bytes');
    my $ro = $C->new_readonly($p);
    ok($ro->readonly, 'new_readonly handle');
    is($ro->serialize, $before, 'serialize of a read-only handle: the same bytes');
    my $d = $C->deserialize($ro->serialize);
    ok(!$d->frozen && !$d->readonly, 'the copy of a frozen filter is neither frozen nor read-only');
    is($d->seed, 99, '... keeps the seed');
    is($d->add('after-thaw'), 1, '... and takes new items');
}

# --- deserialize to a path ----------------------------------------------------------------------
{
    my $src = $C->new(undef, 5000, 0.01, { seed => 5 });
    $src->add_many(\@items);
    my $bytes = $src->serialize;

    my $old = umask 077;    # the mode is exactly as asked, whatever the umask
    my $p = "$dir/shipped.bf";
    my $d = $C->deserialize($bytes, { path => $p, mode => 0644 });
    umask $old;
    ok(-f $p, 'deserialize to a path creates a regular file');
    is(sprintf('%04o', (stat $p)[2] & 07777), '0644', '... with the mode given (umask 077)');
    is($d->path, $p, '... path accessor');
    ok(!$d->frozen && !$d->readonly, '... a read-write filter');

    my $q = "$dir/default-mode.bf";
    $C->deserialize($bytes, { path => $q });
    is(sprintf('%04o', (stat $q)[2] & 07777), '0600', 'default mode 0600');

    # It is a normal shared filter file.
    my $other = $C->new($p, 1, 0.5);    # stored geometry and seed win
    is($other->seed, 5, 'reopened with new: the stored seed');
    is($other->bits, $src->bits, 'reopened with new: the stored geometry');
    is(scalar $other->contains_many(\@items), scalar @items, 'reopened: every item present');
    is($d->add('via-deserialized-handle'), 1, 'add through the deserialized handle');
    is($other->contains('via-deserialized-handle'), 1, '... seen through another handle of the file');
    is($other->add('via-new-handle'), 1, 'add through the other handle');
    is($d->contains('via-new-handle'), 1, '... seen through the deserialized handle');
    is($src->contains('via-new-handle'), 0, 'the source filter is not shared with the copy');

    # An existing path is refused and left alone.
    my $size = -s $p;
    my $before = do { open(my $fh, '<:raw', $p) or die; local $/; <$fh> };
    ok(!eval { $C->deserialize($bytes, { path => $p }); 1 }, 'deserialize to an existing filter file croaks');
    like($@, qr/^Data::BloomFilter::Shared->deserialize: .*\Q$p\E: file exists/, '... naming the path: file exists');
    my $after = do { open(my $fh, '<:raw', $p) or die; local $/; <$fh> };
    is($after, $before, '... and leaves it as it was');
    my $txt = "$dir/not-a-filter.txt";
    { open(my $fh, '>', $txt) or die; print {$fh} "precious\n"; close $fh }
    ok(!eval { $C->deserialize($bytes, { path => $txt }); 1 }, 'deserialize onto any existing file croaks');
    like($@, qr/->deserialize: .*file exists/, '... file exists');
    is(do { open(my $fh, '<', $txt) or die; local $/; <$fh> }, "precious\n", '... and does not touch it');
    symlink("$dir/nowhere.bf", "$dir/link.bf") or die "symlink: $!";
    ok(!eval { $C->deserialize($bytes, { path => "$dir/link.bf" }); 1 }, 'deserialize onto a dangling symlink croaks');
    ok(!-e "$dir/nowhere.bf", '... and creates nothing through it');

    $d->freeze;
    my $ro = $C->new_readonly($p);
    is(scalar $ro->contains_many(\@items), scalar @items, 'a deserialized file, frozen, opens with new_readonly');
}

done_testing;
