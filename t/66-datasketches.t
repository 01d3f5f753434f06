# The datasketches layout through the Perl API: Apache DataSketches' Bloom
# filter in shared memory. The option, its default seed and sizing, every
# constructor, DataSketches' serialized image out and in (field by field, and
# every field spoiled), set operations, freeze, read-only, windows, bad input.
# That the bits and bytes are DataSketches' own is xt/datasketches/tests/datasketches.rs's
# proof, against the datasketches crate.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my %D = (layout => 'datasketches');

sub croaks {
    my ($code, $re, $name) = @_;
    local $@;
    ok(!eval { $code->(); 1 }, "$name: croaks") or return;
    like($@, $re, "$name: the message");
}

# DataSketches' builder, with_accuracy(n, p): m = ceil(-n ln p / ln(2)^2)
# rounded up to a multiple of 64; k = ceil(m_unrounded / n * ln 2).
sub ds_geometry {
    my ($n, $p) = @_;
    my $bits = POSIX::ceil(-$n * log($p) / (log(2) ** 2));
    $bits = 1 if $bits < 1;
    my $k = POSIX::ceil($bits / $n * log(2));
    return (POSIX::ceil($bits / 64) * 64, $k);
}

# The fields of a DataSketches image.
sub fields {
    my ($img) = @_;
    my %f;
    @f{qw(pre serial family flags k unused1 seed longs unused2)} = unpack 'C C C C v v Q< l< V', $img;
    $f{bits_set} = unpack 'Q<', substr($img, 24, 8) if length $img > 24;
    return \%f;
}

# --- the option, the seed, the sizing ------------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01, {%D});
    is($f->layout, 'datasketches', 'layout => datasketches');
    is($f->stats->{layout}, 'datasketches', 'stats: layout');
    is($f->seed, 9001, "no seed option: DataSketches' default update seed, 9001");
    is($C->new(undef, 1000, 0.01, { %D, seed => 0 })->seed, 0, 'seed => 0 is kept');
    is($C->new(undef, 1000, 0.01, { %D, seed => 42 })->seed, 42, 'seed => 42');
    is($C->new(undef, 1000, 0.01)->seed, 0, 'the standard layout keeps seed 0');
    is($C->new_memfd('ds', 100, 0.1, {%D})->seed, 9001, 'new_memfd: seed 9001 too');
    for my $case ([1000, 0.01], [1, 0.5], [10_000, 0.001], [123_457, 1e-6], [37, 0.3]) {
        my ($n, $p) = @$case;
        my $g = $C->new(undef, $n, $p, {%D});
        my ($m, $k) = ds_geometry($n, $p);
        is($g->bits, $m, "$n at $p: bits as DataSketches' builder");
        is($g->hashes, $k, "$n at $p: hashes as DataSketches' builder");
        is($g->bits % 64, 0, "$n at $p: a whole number of words");
    }
    isnt($C->new(undef, 1000, 0.01, {%D})->bits, $C->new(undef, 1000, 0.01)->bits,
        'not the standard geometry (a power of two)');

    is($f->add('x'), 1, 'add: new');
    is($f->add('x'), 0, 'add: seen');
    ok($f->contains('x') && !$f->contains('y'), 'contains');
    is($f->add_many([qw(x y z y)]), 2, 'add_many counts the new items');
    is_deeply([$f->contains_many([qw(x y q)])], [1, 1, 0], 'contains_many');
    cmp_ok($f->bits_set, '<=', 3 * $f->hashes, 'three items set at most 3k bits');
    $f->add("i$_") for 1 .. 500;
    cmp_ok(abs($f->count - 503), '<', 15, 'count estimates the items');
}

# --- bits and hashes given ---------------------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01, { %D, bits => 95_851, hashes => 7 });
    is($f->bits, 95_872, 'bits => 95851: rounded up to a multiple of 64, as DataSketches');
    is($f->hashes, 7, 'hashes => 7');
    is($f->capacity, 1000, 'the capacity given is kept');
    is($C->new_memfd('sized', 10, 0.1, { %D, bits => 64, hashes => 40 })->hashes, 40, 'new_memfd: hashes => 40');
    my $path = "$dir/sized.bf";
    $C->new($path, 1000, 0.01, { %D, bits => 1000, hashes => 3 });
    is($C->new($path, 1000, 0.01)->bits, 1024, 'reopened: the stored size');
    is($C->new($path, 1000, 0.01, { %D, bits => 1000, hashes => 3 })->hashes, 3, 'reopened with the same size');
    croaks(sub { $C->new($path, 1000, 0.01, { %D, bits => 2000, hashes => 3 }) },
        qr/->new: the file's bits and hashes differ from the bits and hashes options/, 'reopened with other bits');
    for my $case (
        [{ %D, bits => 64 }, qr/the bits and hashes options go together/, 'bits alone'],
        [{ %D, hashes => 3 }, qr/the bits and hashes options go together/, 'hashes alone'],
        [{ %D, bits => 0, hashes => 3 }, qr/bits must be a positive integer, got 0/, 'bits 0'],
        [{ %D, bits => -64, hashes => 3 }, qr/bits must be a positive integer, got -64/, 'bits -64'],
        [{ %D, bits => 'x', hashes => 3 }, qr/bits must be a positive integer, got 'x'/, "bits 'x'"],
        [{ %D, bits => 64, hashes => 0 }, qr/hashes must be a positive integer, got 0/, 'hashes 0'],
        [{ %D, bits => 64, hashes => 32768 }, qr/hashes must be between 1 and 32767, got 32768/, 'hashes 32768'],
        [{ %D, bits => 2**40, hashes => 3 }, qr/bits must be between 1 and \d+, got 1099511627776/, 'bits 2**40'],
        [{ bits => 64, hashes => 3 }, qr/bits and hashes are options of layout 'datasketches' only/, 'standard'],
        [{ layout => 'blocked', bits => 64, hashes => 3 }, qr/bits and hashes are options of layout 'datasketches' only/, 'blocked'],
    ) {
        my ($o, $re, $name) = @$case;
        croaks(sub { $C->new(undef, 1000, 0.01, $o) }, qr/\A\Q$C\E->new: $re/, "new: $name");
        croaks(sub { $C->new_memfd('m', 1000, 0.01, $o) }, qr/\A\Q$C\E->new_memfd: $re/, "new_memfd: $name");
    }
}

# --- every constructor; a file keeps its layout and seed ---------------------------------------
{
    my $path = "$dir/d.bf";
    my $f = $C->new($path, 5000, 0.01, { %D, mode => 0640 });
    $f->add("k$_") for 1 .. 100;
    my $again = $C->new($path, 5000, 0.01);
    is($again->layout, 'datasketches', 'reopened with no layout: the stored one');
    is($again->seed, 9001, 'reopened: the stored seed');
    is($again->add('k1'), 0, 'reopened: the items are there');
    croaks(sub { $C->new($path, 5000, 0.01, { layout => 'standard' }) }, qr/layout/, 'reopened as standard');
    croaks(sub { $C->new($path, 5000, 0.01, { %D, seed => 1 }) }, qr/seed differs/, 'reopened with another seed');
    open(my $fh, '+<', $path) or die $!;
    is($C->new_from_fd($fh)->layout, 'datasketches', 'new_from_fd');
    $f->freeze;
    is($C->new_readonly($path)->layout, 'datasketches', 'new_readonly (frozen)');
    my $own = $C->deserialize($f->serialize);
    is($own->layout, 'datasketches', "the module's own bytes keep the layout");
    is($own->capacity, 5000, "... and the capacity");
    is($own->serialize, $f->serialize, '... byte for byte');
}

# --- DataSketches' image out ---------------------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01, { %D, seed => 12345 });
    my $empty = $f->serialize(format => 'datasketches');
    is(length $empty, 24, 'an empty filter: the 24-byte preamble');
    is_deeply(fields($empty), { pre => 3, serial => 1, family => 21, flags => 4, k => $f->hashes,
            unused1 => 0, seed => 12345, longs => $f->bits / 64, unused2 => 0 }, 'the empty preamble, field by field');
    $f->add("e$_") for 1 .. 300;
    my $img = $f->serialize(format => 'datasketches');
    is(length $img, 32 + $f->bits / 8, 'a filter with bits: preamble, count and words');
    is_deeply(fields($img), { pre => 4, serial => 1, family => 21, flags => 0, k => $f->hashes,
            unused1 => 0, seed => 12345, longs => $f->bits / 64, unused2 => 0, bits_set => $f->bits_set },
        'the preamble, field by field');
    is(substr($img, 32), substr($f->serialize, 56, $f->bits / 8),
        "the words are the module's own bytes' words (little-endian, bit i in word i/64)");

    my $back = $C->deserialize($img);
    is($back->layout, 'datasketches', 'deserialize knows the image without an option');
    is($back->seed, 12345, '... its seed');
    is($back->bits, $f->bits, '... its bits');
    is($back->hashes, $f->hashes, '... its hashes');
    is($back->bits_set, $f->bits_set, '... its bits set');
    is(scalar(grep { $back->contains("e$_") } 1 .. 300), 300, '... every item');
    is($back->serialize(format => 'datasketches'), $img, 'and gives the same image back');
    cmp_ok($back->capacity, '>=', 1, 'an image has no capacity: one is derived from m and k');
    cmp_ok($back->fp_rate, '>', 0, '... and a rate');
    cmp_ok($back->fp_rate, '<', 1, '... below 1');
    my $e = $C->deserialize($empty);
    is($e->bits_set, 0, 'an empty image: an empty filter');
    is($e->bits, $f->bits, '... of its size');
    is($C->deserialize($img, { path => "$dir/from-image.bf" })->layout, 'datasketches', 'deserialize to a file');
    is($C->deserialize($img, { memfd => 'img' })->layout, 'datasketches', 'deserialize to a memfd');
    is($C->deserialize($img, {%D})->seed, 12345, 'layout => datasketches given: the same');
    croaks(sub { $C->deserialize($img, { layout => 'standard' }) },
        qr/->deserialize: layout mismatch \(the bytes are of a datasketches filter, not standard\)/, 'layout standard');
    croaks(sub { $C->deserialize($img, { window => 60 }) }, qr/->deserialize: .*window/, 'a window');

    # Not a counted image (2^64 - 1 in num_bits_set): DataSketches accepts it.
    my $uncounted = $img;
    substr($uncounted, 24, 8) = pack 'Q<', ~0;
    is($C->deserialize($uncounted)->bits_set, $f->bits_set, 'num_bits_set 2^64 - 1 (not counted) is accepted');
}

# --- hostile images: each field spoiled alone croaks naming it ----------------------------------
{
    my $f = $C->new(undef, 200, 0.05, {%D});
    $f->add("h$_") for 1 .. 50;
    my $good = $f->serialize(format => 'datasketches');
    my @cases = (
        [0, 'C', 3, qr/bad preamble_longs 3/],
        [0, 'C', 5, qr/bad preamble_longs 5/],
        [1, 'C', 2, qr/bad serial_version 2/],
        [3, 'C', 1, qr/bad flags 1/],
        [3, 'C', 4, qr/bad preamble_longs 4/],
        [4, 'v', 0, qr/bad num_hashes 0/],
        [4, 'v', 40000, qr/bad num_hashes 40000/],
        [6, 'v', 1, qr/bad unused bytes 6-7 1/],
        [16, 'l<', 0, qr/bad num_longs 0/],
        [16, 'l<', -1, qr/bad num_longs/],
        [16, 'l<', 2**31 - 1, qr/bad num_longs 2147483647/],
        [16, 'l<', 2**31 - 5, qr/truncated DataSketches image/],
        [16, 'l<', 1, qr/extended DataSketches image/],
        [20, 'V', 7, qr/bad unused bytes 20-23 7/],
        [24, 'Q<', 3, qr/bad num_bits_set 3/],
    );
    for my $c (@cases) {
        my ($at, $t, $v, $re) = @$c;
        my $b = $good;
        my $p = pack $t, $v;
        substr($b, $at, length $p) = $p;
        croaks(sub { $C->deserialize($b) }, qr/->deserialize: $re/, "offset $at = $v");
    }
    for my $n (3, 23, 24, 31, 32, length($good) - 1) {
        croaks(sub { $C->deserialize(substr $good, 0, $n) }, qr/->deserialize: truncated DataSketches image/,
            "cut to $n bytes");
    }
    croaks(sub { $C->deserialize("$good\0") }, qr/extended DataSketches image/, 'a byte too many');
    my $flipped = $good;
    substr($flipped, 40, 1) = chr(ord(substr $flipped, 40, 1) ^ 1);
    croaks(sub { $C->deserialize($flipped) }, qr/bad num_bits_set/, 'a word flipped');
    # Random bytes after a DataSketches family byte: never a crash, and
    # every refusal is a croak of deserialize's.
    srand 66;
    my ($refused, @odd) = (0);
    for my $i (1 .. 300) {
        my $b = join '', map { chr int rand 256 } 1 .. int rand 64;
        substr($b, 2, 1) = chr 21 if length $b > 2;
        next if eval { $C->deserialize($b); 1 };
        $refused++;
        push @odd, $@ if $@ !~ /\A\Q$C\E->deserialize: /;
    }
    is($refused, 300, 'junk images: all refused');
    is_deeply(\@odd, [], '... each with a croak of deserialize');
}

# --- set operations, freeze, read-only, windows -------------------------------------------------
{
    my ($a, $b) = map { $C->new(undef, 1000, 0.01, {%D}) } 1 .. 2;
    $a->add("a$_") for 1 .. 100;
    $b->add("b$_") for 1 .. 100;
    $a->add('both');
    $b->add('both');
    ok($a->is_compatible($b), 'same layout, geometry and seed: compatible');
    ok(!$a->is_compatible($C->new(undef, 1000, 0.01)), 'a standard filter is not');
    ok(!$a->is_compatible($C->new(undef, 1000, 0.01, { %D, seed => 1 })), 'another seed is not');
    my $u = $C->deserialize($a->serialize);
    $u->merge($b);
    is(scalar(grep { $u->contains("a$_") && $u->contains("b$_") } 1 .. 100), 100, 'merge: both sets');
    my $i = $C->deserialize($a->serialize);
    $i->intersect($b);
    ok($i->contains('both'), 'intersect keeps the common item');
    cmp_ok($i->bits_set, '<', $a->bits_set, 'intersect drops bits');
    croaks(sub { $u->merge($C->new(undef, 1000, 0.01, { seed => 9001 })) }, qr/->merge: .*mismatch/,
        'merge with a standard filter');
    my $inv = $C->deserialize($a->serialize);
    $inv->invert;
    is($inv->bits_set, $a->bits - $a->bits_set, 'invert flips every bit');
    $a->freeze;
    croaks(sub { $a->add('new') }, qr/frozen/, 'a frozen filter refuses adds');
    is($a->serialize(format => 'datasketches'), $C->deserialize($a->serialize)->serialize(format => 'datasketches'),
        'a frozen filter serializes');

    my $w = $C->new(undef, 1000, 0.01, { %D, window => 60, generations => 3 });
    is($w->layout, 'datasketches', 'a windowed datasketches filter');
    is($w->add('w'), 1, 'windowed: add');
    ok($w->contains('w') && !$w->contains('v'), 'windowed: contains');
    $w->rotate for 1 .. 3;
    ok(!$w->contains('w'), 'windowed: forgotten after the window');
    croaks(sub { $w->serialize(format => 'datasketches') }, qr/->serialize: format 'datasketches' holds one bit array/,
        'a windowed filter has no DataSketches image');
    is($C->deserialize($w->serialize)->layout, 'datasketches', "windowed: the module's own bytes keep the layout");
}

# --- bad input -------------------------------------------------------------------------------------
{
    my $s = $C->new(undef, 1000, 0.01);
    croaks(sub { $s->serialize(format => 'datasketches') },
        qr/->serialize: format 'datasketches' needs a filter of layout 'datasketches' \(this one is standard\): create it with layout => 'datasketches'/,
        'a standard filter asked for the image');
    croaks(sub { $C->new(undef, 1000, 0.01, { layout => 'blocked' })->serialize(format => 'datasketches') },
        qr/\(this one is blocked\)/, 'a blocked filter asked for the image');
    my $d = $C->new(undef, 1000, 0.01, {%D});
    for my $bad (['format', 'DataSketches'], ['format', ''], ['format', 'java'], ['fromat', 'datasketches']) {
        croaks(sub { $d->serialize(@$bad) }, qr/->serialize: (format must be 'datasketches'|unknown option)/,
            "serialize(@$bad)");
    }
    croaks(sub { $d->serialize(format => undef) }, qr/->serialize: format must be 'datasketches', got undef/,
        'format undef');
    croaks(sub { $d->serialize('format') }, qr/->serialize: usage/, 'an odd argument');

    # The format through magic: a tied scalar is fetched once, an object
    # with overloaded stringification stringified.
    {
        package Counted;
        sub TIESCALAR { my ($c, $v) = @_; return bless { v => $v, n => 0 }, $c }
        sub FETCH { $_[0]{n}++; return $_[0]{v} }
        sub STORE { }
    }
    {
        package Named;
        use overload '""' => sub { 'datasketches' }, fallback => 1;
    }
    $d->add('m');
    my $want = $d->serialize(format => 'datasketches');
    tie my $t, 'Counted', 'datasketches';
    is($d->serialize(format => $t), $want, 'a tied format');
    is(tied($t)->{n}, 1, '... fetched once');
    is($d->serialize(format => bless({}, 'Named')), $want, 'an object that stringifies to the format');
    croaks(sub { $C->new(undef, 1e300, 0.01, {%D}) }, qr/->new: capacity/, 'a capacity past the image limit');
    croaks(sub { $C->new(undef, 1000, 0.01, { layout => 'DataSketches' }) },
        qr/layout must be 'standard', 'blocked' or 'datasketches', got 'DataSketches'/, 'the name is lower case');
}

done_testing;
