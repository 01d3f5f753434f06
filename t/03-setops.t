# merge (union), intersect, invert, is_compatible.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
local $SIG{ALRM} = sub { die "timeout (deadlock?)\n" };

my @A = map { "a$_" } 1 .. 400;
my @B = map { "b$_" } 1 .. 400;
my @X = map { "common$_" } 1 .. 100;

sub filter_of {
    my (@items) = @_;
    my $f = $C->new(undef, 2000, 0.01);
    $f->add_many(\@items) if @items;
    return $f;
}

# --- merge = union ------------------------------------------------------------
{
    my $a = filter_of(@A, @X);
    my $b = filter_of(@B, @X);
    my $b_before = $b->serialize;
    my $union = filter_of(@A, @B, @X);
    ok(eval { $a->merge($b) }, 'merge of compatible filters returns true') or diag($@);
    is($a->serialize, $union->serialize, 'merge gives exactly the filter of the union of items');
    is(scalar $a->contains_many([@A, @B, @X]), @A + @B + @X, 'merged filter contains every item of both');
    is($b->serialize, $b_before, 'merge leaves the other filter unchanged');

    my $before = $a->serialize;
    $a->merge($b);
    is($a->serialize, $before, 'merging the same filter twice changes nothing more');

    my $e = filter_of();
    $e->merge($a);
    is($e->serialize, $a->serialize, 'merge into an empty filter copies');
    $before = $a->serialize;
    $a->merge(filter_of());
    is($a->serialize, $before, 'merging an empty filter changes nothing');
}

# --- self-merge -----------------------------------------------------------------
{
    my $a = filter_of(@A);
    my $before = $a->serialize;
    alarm 10;
    my $ok = eval { $a->merge($a); 1 };
    alarm 0;
    ok($ok, 'self-merge returns (no deadlock, no croak)') or diag($@);
    is($a->serialize, $before, 'self-merge is a no-op');
    alarm 10;
    $ok = eval { $a->intersect($a); 1 };
    alarm 0;
    ok($ok, 'self-intersect returns') or diag($@);
    is($a->serialize, $before, 'self-intersect is a no-op');
}

# --- intersect -------------------------------------------------------------------
{
    my $a = filter_of(@A, @X);
    my $b = filter_of(@B, @X);
    my $b_before = $b->serialize;
    my $a_orig = filter_of(@A, @X);
    ok(eval { $a->intersect($b) }, 'intersect of compatible filters returns true') or diag($@);
    is(scalar $a->contains_many(\@X), scalar @X, 'intersection contains every common item');
    is($b->serialize, $b_before, 'intersect leaves the other filter unchanged');
    cmp_ok($a->bits_set, '<', $a_orig->bits_set, 'intersection has fewer bits than the original');
    cmp_ok($a->bits_set, '<=', $b->bits_set, 'intersection has no more bits than the other');

    # bits(common items) <= bits(A and B) <= bits(A): check with OR.
    my $common = filter_of(@X);
    my $t = filter_of();
    $t->merge($a);
    $t->merge($common);
    is($t->serialize, $a->serialize, 'every bit of the common items is in the intersection');
    my $u = filter_of(@A, @X);
    $u->merge($a);
    is($u->serialize, $a_orig->serialize, 'every bit of the intersection is in the original');
    my $v = filter_of(@B, @X);
    $v->merge($a);
    is($v->serialize, $b_before, 'every bit of the intersection is in the other');

    my $z = filter_of(@A);
    $z->intersect(filter_of());
    ok($z->is_empty, 'intersect with an empty filter empties');
}

# --- invert ------------------------------------------------------------------------
{
    my $f = filter_of();
    ok(eval { $f->invert }, 'invert returns true') or diag($@);
    is($f->bits_set, $f->bits, 'inverted empty filter has every bit set');
    is($f->fill_ratio, 1, 'fill_ratio 1 when full');
    is($f->estimated_fpp, 1, 'estimated_fpp 1 when full');
    is($f->count, $f->capacity, 'count = capacity when every bit is set');
    is($f->contains('anything'), 1, 'full filter contains anything');
    is($f->add('anything'), 0, 'add to a full filter reports not new');
    $f->invert;
    ok($f->is_empty, 'inverting twice gives the empty filter back');

    my $g = filter_of(@A);
    my $x = $g->bits_set;
    my $before = $g->serialize;
    $g->invert;
    is($g->bits_set, $g->bits - $x, 'invert: bits_set becomes bits - bits_set');
    is(scalar $g->contains_many(\@A), 0, 'invert: no added item is present any more');
    $g->invert;
    is($g->serialize, $before, 'invert twice is the identity');
}

# --- is_compatible -------------------------------------------------------------------
{
    my $a = $C->new(undef, 1000, 0.01);
    is($a->is_compatible($C->new(undef, 1000, 0.01)), 1, 'same geometry: compatible (1)');
    ok($a->is_compatible($a), 'compatible with itself');
    is($a->is_compatible($C->new(undef, 100_000, 0.01)), 0, 'different bits: not compatible (0)');
    my $k4 = $C->new(undef, 1750, 0.05);    # k = 4, m = next_pow2(10099) = 16384
    is($k4->bits, $a->bits, 'test setup: same bits ...');
    isnt($k4->hashes, $a->hashes, '... different hashes');
    ok(!$a->is_compatible($k4), 'same bits, different hashes: not compatible');
    my $s = $C->new(undef, 1000, 0.01, { seed => 12345 });
    is($s->bits, $a->bits, 'seeded filter: same bits');
    ok(!$a->is_compatible($s), 'different seed: not compatible');
    ok($s->is_compatible($C->new(undef, 1000, 0.01, { seed => 12345 })), 'same seed: compatible');

    my $dir = tempdir(CLEANUP => 1);
    my $file = $C->new("$dir/f.bf", 1000, 0.01);
    my $mem = $C->new_memfd('setops', 1000, 0.01);
    ok($a->is_compatible($file), 'anonymous and file filters of same geometry: compatible');
    ok($file->is_compatible($mem), 'file and memfd filters of same geometry: compatible');
    $file->add('from-file');
    $mem->add('from-memfd');
    $a->merge($file);
    $a->merge($mem);
    is(scalar $a->contains_many(['from-file', 'from-memfd']), 2, 'merge across backing kinds');
}

# --- incompatible merge / intersect croak and change nothing ----------------------------
{
    my $a = filter_of(@A);
    my %other = (
        'bigger' => $C->new(undef, 100_000, 0.01),
        'other k' => $C->new(undef, 3500, 0.05),    # k = 4, m = 32768
        'other seed' => $C->new(undef, 2000, 0.01, { seed => 99 }),
    );
    is($other{'other k'}->bits, $a->bits, 'test setup: other k has the same bits');
    for my $name (sort keys %other) {
        my $o = $other{$name};
        $o->add_many(\@B);
        my ($sa, $so) = ($a->serialize, $o->serialize);
        ok(!eval { $a->merge($o); 1 }, "merge with $name croaks");
        like($@, qr/->merge: .*(geometry|incompatible|mismatch)/i, '... with ->merge and the reason');
        ok(!eval { $a->intersect($o); 1 }, "intersect with $name croaks");
        like($@, qr/->intersect: .*(geometry|incompatible|mismatch)/i, '... with ->intersect and the reason');
        is($a->serialize, $sa, '... the receiving filter is unchanged');
        is($o->serialize, $so, '... the other filter is unchanged');
        ok(!$o->is_compatible($a), "... and is_compatible is false both ways");
    }
    is($a->add('after-mismatch'), 1, 'filter still usable after a refused merge');
}

done_testing;
