# add/contains semantics, accuracy, accessors and stats of an anonymous filter.
use strict;
use warnings;
use Test::More;
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';

sub expected_count {
    my ($f) = @_;
    my ($m, $k, $x) = ($f->bits, $f->hashes, $f->bits_set);
    return $f->capacity if $x == $m;
    return int(-($m / $k) * log(1 - $x / $m) + 0.5);
}

# --- a fresh filter -------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    isa_ok($f, $C);
    is($f->capacity, 1000, 'capacity');
    ok(abs($f->fp_rate - 0.01) < 1e-15, 'fp_rate') or diag($f->fp_rate);
    is($f->hashes, 7, 'capacity 1000, fp 0.01: k = 7');
    is($f->bits, 16384, 'capacity 1000, fp 0.01: m = 16384');
    is($f->seed, 0, 'seed defaults to 0');
    is($f->bits_set, 0, 'bits_set 0 when fresh');
    is($f->count, 0, 'count 0 when fresh');
    ok($f->is_empty, 'is_empty when fresh');
    is($f->fill_ratio, 0, 'fill_ratio 0 when fresh');
    is($f->estimated_fpp, 0, 'estimated_fpp 0 when fresh');
    ok(!$f->frozen, 'not frozen');
    ok(!$f->readonly, 'not readonly');
    is($f->path, undef, 'anonymous: path undef');
    is($f->memfd, -1, 'anonymous: memfd -1');
    is($f->is_empty, 1, 'is_empty is exactly 1 when empty');
    is($f->frozen, 0, 'frozen is exactly 0');
    is($f->readonly, 0, 'readonly is exactly 0');

    my $d = $C->new(undef, 1000);
    ok(abs($d->fp_rate - 0.01) < 1e-15, 'fp_rate defaults to 0.01');
    is($d->hashes, 7, 'default fp_rate gives k = 7');
}

# --- add / contains ----------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    is($f->contains('apple'), 0, 'contains absent item -> 0');
    is($f->add('apple'), 1, 'add new item -> 1');
    is($f->add('apple'), 0, 'add same item again -> 0');
    is($f->contains('apple'), 1, 'contains added item -> 1');
    is($f->is_empty, 0, 'is_empty is exactly 0 after add');
    my $x = $f->bits_set;
    ok($x >= 1 && $x <= $f->hashes, "one item sets between 1 and k bits ($x)");
    is($f->count, 1, 'count 1 after one add');
    is($f->contains('pear'), 0, 'other item still absent');

    is($f->add(''), 1, 'empty string is an item: new');
    is($f->contains(''), 1, 'empty string present');
    is($f->add("a\0b"), 1, 'item with NUL byte: new');
    is($f->contains("a\0c"), 0, 'item differing after the NUL byte: absent');
    is($f->contains("a"), 0, 'prefix before the NUL byte: absent');
    is($f->add("\xff\xfe\x80"), 1, 'high bytes item: new');
    is($f->contains("\xff\xfe\x80"), 1, 'high bytes item present');

    is($f->add(42), 1, 'number 42 as item: new');
    is($f->contains('42'), 1, 'number 42 is the item "42"');
    is($f->add('3.5'), 1, 'item "3.5": new');
    is($f->add(3.5), 0, 'number 3.5 is the item "3.5"');

    my $u = "caf\xe9";
    utf8::upgrade($u);
    is($f->add("caf\xe9"), 1, 'latin-1 byte item: new');
    is($f->contains($u), 1, 'upgraded string with chars < 256 is the same bytes');
}

# --- add_many / contains_many in both contexts -------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    my @r = (9, 9, 9, 9, 9, 9);
    my ($count) = $f->add_many([qw(a b c a)], \@r);
    is_deeply(\@r, [1, 1, 1, 0], 'add_many out array: one flag per item, repeat in batch is 0');
    is($count, 3, 'add_many list context: the count, as in scalar context');
    my $n = $f->add_many([qw(c d e)]);
    is($n, 2, 'add_many scalar context: number new');
    $n = $f->add_many([qw(a b)]);
    is($n, 0, 'add_many scalar context: 0 when all seen');
    @r = (9);
    is_deeply([$f->add_many([], \@r)], [0], 'add_many([]) list: the count 0');
    is_deeply(\@r, [], 'add_many([]) empties the out array');
    $n = $f->add_many([]);
    is($n, 0, 'add_many([]) scalar: 0');

    @r = $f->contains_many([qw(a zz b yy e)]);
    is_deeply(\@r, [1, 0, 1, 0, 1], 'contains_many list context: one flag per item');
    $n = $f->contains_many([qw(a zz b yy e)]);
    is($n, 3, 'contains_many scalar context: number present');
    @r = $f->contains_many([]);
    is_deeply(\@r, [], 'contains_many([]) list: empty');
    $n = $f->contains_many([]);
    is($n, 0, 'contains_many([]) scalar: 0');

    my $g = $C->new(undef, 1000, 0.01);
    my @one = map { $g->add($_) } qw(p q p r s q);
    my $h = $C->new(undef, 1000, 0.01);
    $h->add_many([qw(p q p r s q)], \my @many);
    is_deeply(\@many, \@one, 'add_many gives the same flags as add one by one');
    is($h->serialize, $g->serialize, 'add_many and add one by one set the same bits');
}

# --- accuracy: 10k items ------------------------------------------------------
{
    my $f = $C->new(undef, 10_000, 0.01);
    my @in = map { "present-$_" } 1 .. 10_000;
    my $new = $f->add_many(\@in);
    cmp_ok($new, '>=', 9_900, "almost all of 10k distinct items reported new ($new)");
    is(scalar $f->contains_many(\@in), 10_000, 'no false negatives over 10k items (contains_many)');
    my $miss = grep { !$f->contains($_) } @in;
    is($miss, 0, 'no false negatives over 10k items (contains)');

    my @out = map { "absent-$_" } 1 .. 10_000;
    my $fp = $f->contains_many(\@out) / 10_000;
    my $est = $f->estimated_fpp;
    cmp_ok($fp, '<', 0.03, "false-positive rate $fp below 3x the target 0.01");
    cmp_ok($fp, '<=', 3 * $est + 0.002, "false-positive rate $fp near estimated_fpp $est");

    # The derived statistics follow from bits_set.
    my ($m, $k) = ($f->bits, $f->hashes);
    my $x = $f->bits_set;
    ok(abs($f->fill_ratio - $x / $m) < 1e-12, 'fill_ratio = bits_set / bits');
    my $efpp = ($x / $m)**$k;
    ok(abs($f->estimated_fpp - $efpp) <= 1e-9 * $efpp + 1e-15, 'estimated_fpp = fill_ratio ** hashes')
        or diag($f->estimated_fpp . " vs $efpp");
    ok(abs($f->count - expected_count($f)) <= 1, 'count = round(-(m/k) ln(1 - X/m))')
        or diag($f->count . ' vs ' . expected_count($f));
}

{
    my $f = $C->new(undef, 10_000, 0.01);
    $f->add_many([map { "c-$_" } 1 .. 5_000]);
    my $c = $f->count;
    cmp_ok(abs($c - 5_000), '<=', 250, "count $c within 5% of 5000");
}

# --- stats ------------------------------------------------------------------
{
    my $f = $C->new(undef, 2000, 0.001);
    my $ops0 = $f->stats->{ops};
    $f->add($_) for 1 .. 100;
    $f->contains($_) for 1 .. 10;
    my $s = $f->stats;
    is(ref $s, 'HASH', 'stats returns a hashref');
    my @keys = qw(capacity fp_rate bits hashes seed bits_set count fill_ratio
                  estimated_fpp ops mmap_size frozen readonly);
    for my $key (@keys) {
        ok(exists $s->{$key}, "stats has key $key");
    }
    for my $key (qw(capacity bits hashes seed bits_set count frozen readonly)) {
        is(0 + ($s->{$key} // -1), 0 + $f->$key, "stats->{$key} equals the accessor");
    }
    for my $key (qw(fp_rate fill_ratio estimated_fpp)) {
        ok(abs(($s->{$key} // -1) - $f->$key) < 1e-12, "stats->{$key} equals the accessor");
    }
    cmp_ok($s->{ops}, '>', $ops0 // 0, 'stats ops grew after operations');
    cmp_ok($s->{mmap_size}, '>=', $f->bits / 8, 'mmap_size covers the bit array');
    is($s->{mmap_size} % 4096, 0, 'mmap_size is whole pages');
    is($s->{bits}, 32768, 'stats bits for 2000/0.001');
    is($s->{hashes}, 10, 'stats hashes for 2000/0.001');
}

# --- clear --------------------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    $f->add_many([map { "k$_" } 1 .. 500]);
    ok(!$f->is_empty, 'filled');
    ok($f->fill_ratio > 0, 'fill_ratio > 0 when filled');
    ok($f->clear, 'clear returns true');
    ok($f->is_empty, 'is_empty after clear');
    is($f->bits_set, 0, 'bits_set 0 after clear');
    is($f->count, 0, 'count 0 after clear');
    is($f->fill_ratio, 0, 'fill_ratio 0 after clear');
    is(scalar $f->contains_many([map { "k$_" } 1 .. 500]), 0, 'nothing present after clear');
    is($f->add('k1'), 1, 'add after clear reports new again');
    is($f->capacity, 1000, 'clear keeps geometry');
}

# --- sync on anonymous is harmless ----------------------------------------------
{
    my $f = $C->new(undef, 100);
    ok(eval { $f->sync; 1 }, 'sync on an anonymous filter does not croak') or diag($@);
}

done_testing;
