# The blocked layout through the Perl API: the layout option and accessor,
# every constructor, reopening, serialized bytes, set operations between
# layouts, count and estimated_fpp, and the table under LAYOUTS in the POD.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use POSIX ();
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my %B = (layout => 'blocked');

# The serialized hash scheme: 1 standard, 2 blocked words, 3 blocked blocks.
sub scheme { unpack 'V', substr($_[0]->serialize, 12, 4) }

# --- the option and the accessor ------------------------------------------------------------------
{
    my $s = $C->new(undef, 1000, 0.01);
    my $b = $C->new(undef, 1000, 0.01, {%B});
    is($s->layout, 'standard', 'the default layout is standard');
    is($b->layout, 'blocked', 'layout => blocked gives a blocked filter');
    is($C->new(undef, 1000, 0.01, { layout => 'standard' })->layout, 'standard', 'layout => standard');
    is($s->stats->{layout}, 'standard', 'stats: layout standard');
    is($b->stats->{layout}, 'blocked', 'stats: layout blocked');
    is(scheme($s), 1, 'standard bytes: hash scheme 1');
    is(scheme($b), 2, 'blocked bytes at 0.01: hash scheme 2 (64-bit words)');
    is(scheme($C->new(undef, 1000, 0.001, {%B})), 3, 'blocked bytes at 0.001: scheme 3 (128-bit blocks)');
    is($b->add('x'), 1, 'add: new');
    is($b->add('x'), 0, 'add: seen');
    ok($b->contains('x') && !$b->contains('y'), 'contains');
    is($b->add_many([qw(x y z y)]), 2, 'add_many counts the new items');
    cmp_ok($b->bits_set, '<=', 3 * $b->hashes, 'three items set at most 3k bits');

    for my $bad ('Blocked', '', 'both', [], { a => 1 }) {
        my $shown = ref $bad || "'$bad'";
        my $got = ref $bad eq 'ARRAY' ? 'an ARRAY reference' : ref $bad ? 'a HASH reference' : "'$bad'";
        for my $call (
            [new       => sub { $C->new(undef, 10, 0.01, { layout => $bad }) }],
            [new_memfd => sub { $C->new_memfd('x', 10, 0.01, { layout => $bad }) }],
            [deserialize => sub { $C->deserialize($b->serialize, { layout => $bad }) }],
        ) {
            my ($m, $code) = @$call;
            ok(!eval { $code->(); 1 }, "$m: layout $shown croaks");
            like($@, qr/^Data::BloomFilter::Shared->$m: layout must be 'standard', 'blocked' or 'datasketches', got \Q$got\E at /,
                "$m: layout $shown: the message");
        }
    }
}

# --- every constructor ---------------------------------------------------------------------------
{
    my $path = "$dir/b.bf";
    my $f = $C->new($path, 5000, 0.01, { %B, mode => 0640 });
    is($f->layout, 'blocked', 'file: created blocked');
    is((stat $path)[2] & 07777, 0640, 'file: the mode option still applies');
    $f->add_many([map {"f$_"} 1 .. 1000]);

    my $again = $C->new($path, 5000, 0.01);
    is($again->layout, 'blocked', 'file reopened without layout: the stored one');
    is($again->add('f1'), 0, 'file reopened: sees the adds');
    is($C->new($path, 10, 0.5, {%B})->layout, 'blocked', 'reopened with the same layout');
    ok(!eval { $C->new($path, 5000, 0.01, { layout => 'standard' }); 1 }, 'reopened as standard croaks');
    like($@, qr/^Data::BloomFilter::Shared->new: layout mismatch \(the filter is blocked, not standard\) at /,
        'layout mismatch names both');
    my $std = "$dir/s.bf";
    $C->new($std, 100, 0.01);
    ok(!eval { $C->new($std, 100, 0.01, {%B}); 1 }, 'a standard file reopened as blocked croaks');
    like($@, qr/layout mismatch \(the filter is standard, not blocked\)/, '... naming both');

    my $m = $C->new_memfd('blk', 5000, 0.01, { %B, seed => 5 });
    is($m->layout, 'blocked', 'memfd: blocked');
    is($m->seed, 5, 'memfd: the seed option still applies');
    $m->add('m1');
    my $viafd = $C->new_from_fd($m->memfd);
    is($viafd->layout, 'blocked', 'new_from_fd: the stored layout');
    is($viafd->add('m1'), 0, 'new_from_fd: the same filter');
    open(my $ro, '<', $path) or die "$path: $!";
    my $rofd = $C->new_from_fd($ro);
    ok($rofd->readonly && $rofd->layout eq 'blocked', 'read-only descriptor: a read-only blocked handle');
    ok($rofd->contains('f500'), 'read-only descriptor: queries');

    $f->freeze;
    my $frozen = $C->new_readonly($path);
    is($frozen->layout, 'blocked', 'new_readonly: blocked');
    is(scalar $frozen->contains_many([map {"f$_"} 1 .. 1000]), 1000, 'new_readonly: every item');
    ok(!eval { $again->add('late'); 1 }, 'add after freeze croaks');
    ok(!$frozen->contains('late'), 'the frozen filter did not change');

    my $bytes = $m->serialize;
    is(length $bytes, $m->bits / 8 + 64, 'serialize: bits / 8 + 64 bytes');
    my $d = $C->deserialize($bytes);
    is($d->layout, 'blocked', 'deserialize: the bytes\' layout');
    is($d->serialize, $bytes, 'deserialize: the same bytes back');
    is($d->seed, 5, 'deserialize: the seed');
    is($C->deserialize($bytes, {%B})->layout, 'blocked', 'deserialize: the same layout asked for');
    ok(!eval { $C->deserialize($bytes, { layout => 'standard' }); 1 }, 'deserialize: another layout croaks');
    like($@, qr/^Data::BloomFilter::Shared->deserialize: layout mismatch \(the bytes are of a blocked filter, not standard\)/,
        '... naming both');
    my $file = $C->deserialize($bytes, { path => "$dir/d.bf" });
    is($C->new("$dir/d.bf", 10, 0.1)->layout, 'blocked', 'deserialize to a path: a blocked file');
    ok($file->contains('m1'), 'deserialize to a path: the item');
}

# --- seeds: the positions depend on the seed ---------------------------------------------------------
{
    my $a = $C->new(undef, 1000, 0.01, {%B});
    my $b = $C->new(undef, 1000, 0.01, { %B, seed => 42 });
    $a->add('same');
    $b->add('same');
    isnt($a->serialize =~ s/^.{56}//sr, $b->serialize =~ s/^.{56}//sr, 'another seed sets other bits');
    ok(!$a->is_compatible($b), 'different seeds: not compatible');
}

# --- set operations ----------------------------------------------------------------------------------
{
    my @x = map {"x$_"} 1 .. 300;
    my @y = map {"y$_"} 1 .. 300;
    my $a = $C->new(undef, 2000, 0.01, {%B});
    my $b = $C->new(undef, 2000, 0.01, {%B});
    my $union = $C->new(undef, 2000, 0.01, {%B});
    $a->add_many(\@x);
    $b->add_many(\@y);
    $union->add_many([@x, @y]);
    ok($a->is_compatible($b), 'same layout and geometry: compatible');
    $a->merge($b);
    is($a->serialize, $union->serialize, 'merge: the filter of the union');
    my $only_y = $C->new(undef, 2000, 0.01, {%B});
    $only_y->add_many(\@y);
    $a->intersect($only_y);
    is(scalar $a->contains_many(\@y), 300, 'intersect keeps the common items');
    my $before = $a->bits_set;
    $a->invert;
    is($a->bits_set, $a->bits - $before, 'invert flips every bit');
    $a->clear;
    ok($a->is_empty, 'clear empties it');

    my $s = $C->new(undef, 2000, 0.01);
    ok(!$s->is_compatible($b) && !$b->is_compatible($s), 'standard and blocked: not compatible');
    $s->add($_) for qw(s1 s2 s3);
    for my $call ([merge => $b, $s], [intersect => $s, $b]) {
        my ($m, $self, $other) = @$call;
        my @bytes = map { $_->serialize } $self, $other;
        ok(!eval { $self->$m($other); 1 }, "$m across layouts croaks");
        like($@, qr/^Data::BloomFilter::Shared->$m: layout mismatch \((standard vs blocked|blocked vs standard)\) at /,
            "$m: layout mismatch");
        is($self->serialize, $bytes[0], "$m across layouts changed nothing");
        is($other->serialize, $bytes[1], "$m across layouts changed nothing in the other filter");
    }
}

# --- count and estimated_fpp ---------------------------------------------------------------------------
for my $p (0.01, 0.001) {
    my $n = 20_000;
    my $f = $C->new(undef, $n, $p, {%B});
    $f->add_many([map {"c$_"} 1 .. $n]);
    cmp_ok(abs($f->count - $n), '<', 0.02 * $n, "fp_rate $p: count near $n at capacity");
    my $B = scheme($f) == 2 ? 64 : 128;
    my $words = $f->bits / $B;
    my $z = (1 - 1 / $B)**$f->hashes;
    my $formula = -($words / (1 - $z)) * log(1 - $f->bits_set / $f->bits);
    is($f->count, POSIX::floor($formula + 0.5), "fp_rate $p: count is the documented formula");
    my $e = $f->estimated_fpp;
    cmp_ok(abs($e - $p), '<', 0.15 * $p, "fp_rate $p: estimated_fpp ($e) near the rate at capacity");
    cmp_ok($e, '>', $f->fill_ratio**$f->hashes, "fp_rate $p: more than the standard formula would say");
    is($f->stats->{estimated_fpp}, $e, 'stats agree');
}

# --- the table under LAYOUTS ---------------------------------------------------------------------------
{
    my $pm = "$FindBin::Bin/../lib/Data/BloomFilter/Shared.pm";
    open(my $fh, '<', $pm) or die "$pm: $!";
    my $pod = do { local $/; <$fh> };
    my ($section) = $pod =~ /^=head1 LAYOUTS\n(.*?)^=head1 /ms or BAIL_OUT('no LAYOUTS section');
    my @rows = $section =~ /^ +(0\.\d+) +(\d+) +([0-9.]+) +([0-9.]+) +(64|128) +(\d+) +([0-9.]+)$/mg;
    is(scalar @rows, 4 * 7, 'four rows in the table') or diag($section);
    while (my ($p, $k, $bits, $opt, $width, $bk, $bbits) = splice @rows, 0, 7) {
        my $s = $C->new(undef, 1e6, $p);
        my $b = $C->new(undef, 1e6, $p, {%B});
        is($s->hashes, $k, "$p: standard k");
        is(sprintf('%.2f', $s->bits / 1e6), $bits, "$p: standard bits per item");
        is(sprintf('%.2f', $k / log 2), $opt, "$p: standard optimum");
        is(scheme($b), $width == 64 ? 2 : 3, "$p: blocked width $width");
        is($b->hashes, $bk, "$p: blocked k");
        is(sprintf('%.2f', $b->bits / 1e6), $bbits, "$p: blocked bits per item");
    }
}

done_testing;
