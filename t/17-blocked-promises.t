# What the POD and README promise of the blocked layout and no other test
# checks: an item's bits in one aligned word or block and "new exactly when
# the word lacked one of its bits", refusals that change nothing (reopen,
# deserialize, merge and intersect across layouts), estimated_fpp as the
# rate measured, read-only and frozen handles, ops of lock-free adds, and
# every constructor with 128-bit blocks.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child croaks_like slurp);
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my %B = (layout => 'blocked');
$SIG{ALRM} = sub { die "17-blocked-promises: global timeout\n" };
alarm 120;

# The serialized hash scheme: 1 standard, 2 blocked words, 3 blocked blocks.
sub scheme { unpack 'V', substr($_[0]->serialize, 12, 4) }

# The bit array of a filter's bytes (after the 56 bytes of header, before
# the checksum).
sub bit_array { my $s = $_[0]->serialize; substr($s, 56, length($s) - 64) }

# The set bits of a bit array, as bit numbers.
sub set_bits {
    my ($bits) = @_;
    my @on;
    while ($bits =~ /[^\0]/g) {
        my $byte = pos($bits) - 1;
        my $v = ord substr($bits, $byte, 1);
        push @on, grep { $v >> ($_ - 8 * $byte) & 1 } 8 * $byte .. 8 * $byte + 7;
    }
    return @on;
}

# "All of an item's bits lie in one aligned 64-bit word (or, for low rates,
# one aligned 128-bit block)"; "The item was new exactly when the word
# lacked one of its bits." Each item's bits are found by adding it alone to
# an empty filter of the same geometry; then, adding the items in turn to a
# filter filled past its capacity, add says new exactly when the bit array
# lacked one of those bits.
subtest 'an item in one word; new exactly when the word lacked a bit' => sub {
    for my $case ([0.05, 64], [0.001, 128]) {
        my ($rate, $width) = @$case;
        my $solo = $C->new(undef, 2000, $rate, {%B, seed => 7});
        is(scheme($solo), $width == 64 ? 2 : 3, "$rate: $width-bit words");
        my (%bits_of, @outside);
        my @items = map {"item-$_"} 1 .. 600;
        for my $item (@items) {
            $solo->clear;
            $solo->add($item);
            my @on = set_bits(bit_array($solo));
            $bits_of{$item} = \@on;
            my %words = map { (int($_ / $width) => 1) } @on;
            push @outside, "$item: bits @on" if keys %words != 1 || @on > $solo->hashes || !@on;
        }
        is(scalar @outside, 0, "$rate: every item's 1 to k bits lie in one aligned $width-bit word")
            or diag(join "\n", @outside[0 .. 4]);

        my $f = $C->new(undef, 2000, $rate, {%B, seed => 7});
        $f->add_many([map {"filler-$_"} 1 .. ($rate == 0.05 ? 3000 : 9000)]);
        my $array = bit_array($f);
        my (@wrong, $seen_unadded);
        for my $item (@items) {
            my $lacked = grep { !vec($array, $_, 1) } @{ $bits_of{$item} };
            my $new = $f->add($item);
            push @wrong, "$item: add said $new, the word lacked $lacked of its bits" if $new != ($lacked ? 1 : 0);
            $seen_unadded++ if !$lacked;
            vec($array, $_, 1) = 1 for @{ $bits_of{$item} };
        }
        is(scalar @wrong, 0, "$rate: add is new exactly when the word lacked one of the item's bits")
            or diag(join "\n", @wrong[0 .. 4]);
        cmp_ok($seen_unadded // 0, '>', 10, "$rate: ... among them items never added but not new (false positives)");
        is(bit_array($f), $array, "$rate: and the bits set are exactly the items' own");
    }
    # The same look at the standard layout finds bits in several words: the
    # check above can tell.
    my $std = $C->new(undef, 2000, 0.05);
    my $spread = 0;
    for my $item (map {"item-$_"} 1 .. 50) {
        $std->clear;
        $std->add($item);
        my %words = map { (int($_ / 64) => 1) } set_bits(bit_array($std));
        $spread++ if keys %words > 1;
    }
    cmp_ok($spread, '>', 40, "standard: most items' bits lie in several words ($spread of 50)");
};

# "An existing file keeps the layout it was created with; an explicit layout
# that differs from it croaks" and changes nothing; deserialize likewise,
# leaving no file.
subtest 'layout refusals change nothing' => sub {
    my $b = "$dir/b.bf";
    my $s = "$dir/s.bf";
    $C->new($b, 1000, 0.01, {%B})->add('b');
    $C->new($s, 1000, 0.01)->add('s');
    my %before = map { ($_ => slurp($_)) } $b, $s;
    croaks_like(sub { $C->new($b, 1000, 0.01, { layout => 'standard' }) },
        qr/\AData::BloomFilter::Shared->new: layout mismatch \(the filter is blocked, not standard\) at /, 'blocked file as standard');
    croaks_like(sub { $C->new($s, 1000, 0.01, {%B}) },
        qr/\AData::BloomFilter::Shared->new: layout mismatch \(the filter is standard, not blocked\) at /, 'standard file as blocked');
    is(slurp($_), $before{$_}, "$_: unchanged") for sort keys %before;

    my $sb = $C->new(undef, 1000, 0.01);
    $sb->add('s');
    my $bytes = $sb->serialize;
    croaks_like(sub { $C->deserialize($bytes, {%B}) },
        qr/\AData::BloomFilter::Shared->deserialize: layout mismatch \(the bytes are of a standard filter, not blocked\) at /,
        'standard bytes as blocked');
    croaks_like(sub { $C->deserialize($bytes, { %B, path => "$dir/never.bf" }) },
        qr/layout mismatch \(the bytes are of a standard filter, not blocked\)/, '... to a path');
    ok(!-e "$dir/never.bf", '... leaves no file');
    my $bb = $C->new(undef, 1000, 0.01, {%B})->serialize;
    croaks_like(sub { $C->deserialize($bb, { layout => 'standard', path => "$dir/never2.bf" }) },
        qr/layout mismatch \(the bytes are of a blocked filter, not standard\)/, 'blocked bytes as standard, to a path');
    ok(!-e "$dir/never2.bf", '... leaves no file');
    my $m = $C->deserialize($bb, { %B, memfd => 'blk' });
    ok($m->layout eq 'blocked' && $m->memfd >= 0, 'deserialize to a memfd: blocked');
    is($C->new_from_fd($m->memfd)->layout, 'blocked', '... and passed on by its descriptor');
};

# "merge and intersect combine filters of the same layout only: another
# layout croaks ... and is_compatible is 0": neither filter changes.
subtest 'merge and intersect across layouts change neither filter' => sub {
    my $s = $C->new(undef, 2000, 0.01);
    my $b = $C->new(undef, 2000, 0.01, {%B});
    $s->add_many([map {"s$_"} 1 .. 300]);
    $b->add_many([map {"b$_"} 1 .. 300]);
    is_deeply([$s->is_compatible($b), $b->is_compatible($s)], [0, 0], 'not compatible, either way');
    for my $call ([merge => $s, $b], [merge => $b, $s], [intersect => $s, $b], [intersect => $b, $s]) {
        my ($op, $into, $other) = @$call;
        my @before = map { $_->serialize } $into, $other;
        croaks_like(sub { $into->$op($other) },
            qr/\AData::BloomFilter::Shared->$op: layout mismatch \((standard vs blocked|blocked vs standard)\) at /,
            "$op of " . $other->layout . ' into ' . $into->layout);
        is_deeply([map { $_->serialize } $into, $other], \@before, '... changed neither');
    }
};

# "estimated_fpp: for the blocked [layout], the layout's exact rate at the
# load count estimates": what a measurement over absent items finds.
subtest 'estimated_fpp is the rate measured' => sub {
    my $n = 200_000;
    my @absent = map {"absent-$_"} 1 .. $n;
    for my $case ([0.05, 10_000], [0.05, 5_000], [0.01, 20_000]) {
        my ($rate, $items) = @$case;
        my $f = $C->new(undef, 10_000 * ($rate == 0.01 ? 2 : 1), $rate, {%B});
        $f->add_many([map {"in-$_"} 1 .. $items]);
        my $e = $f->estimated_fpp;
        my $fp = $f->contains_many(\@absent) / $n;
        my $se = sqrt($e * (1 - $e) / $n);
        cmp_ok(abs($fp - $e), '<=', 4 * $se, "$rate with $items items: measured $fp, estimated $e");
    }
};

# Read-only descriptors and freeze on blocked filters: queries see other
# processes' adds as they happen; mutators croak; after freeze every handle
# is read-only and the file opens with new_readonly.
subtest 'read-only and frozen blocked handles' => sub {
    my $path = "$dir/ro.bf";
    my $f = $C->new($path, 1000, 0.01, {%B});
    $f->add('a');
    open(my $fh, '<', $path) or die "$path: $!";
    my $ro = $C->new_from_fd($fh);
    is($ro->readonly, 1, 'a read-only descriptor: readonly');
    my $r = in_child(sub { $C->new($path, 1000, 0.01)->add('late'); 'ok' });
    is($r->{out}, 'ok', 'another process adds');
    ok($ro->contains('late') && $ro->contains('a'), 'the read-only handle sees it');
    is($ro->bits_set, $f->bits_set, 'bits_set agrees');
    is($ro->stats->{layout}, 'blocked', 'stats: layout');
    my $bytes = $f->serialize;
    for my $call ([add => sub { $ro->add('x') }], [add_many => sub { $ro->add_many(['x']) }],
        [clear => sub { $ro->clear }], [invert => sub { $ro->invert }], [freeze => sub { $ro->freeze }],
        [merge => sub { $ro->merge($f) }], [intersect => sub { $ro->intersect($f) }])
    {
        croaks_like($call->[1], qr/\AData::BloomFilter::Shared->$call->[0]: filter handle is read-only at /,
            "read-only: $call->[0]");
    }
    is($f->serialize, $bytes, 'nothing changed');

    my $rw = $C->new_from_fd(do { open(my $h, '+<', $path) or die "$path: $!"; $h });
    is_deeply([$rw->layout, $rw->readonly], ['blocked', 0], 'a read-write descriptor of a blocked file');
    $f->freeze;
    is_deeply([map { $_->readonly } $f, $rw, $ro], [1, 1, 1], 'after freeze every handle is read-only, the freezing one too');
    croaks_like(sub { $rw->add('y') }, qr/\AData::BloomFilter::Shared->add: filter is frozen \(read-only\) at /,
        'an add through another handle');
    my $nr = $C->new_readonly($path);
    ok($nr->contains('late') && !$nr->contains('y'), 'new_readonly: the frozen items, nothing after');
};

# "An add of a blocked filter is that one atomic update plus writes to the
# calling process's own slot: ... its operation count": ops counts lock-free
# adds, summed over every process.
subtest 'ops counts lock-free adds' => sub {
    my $path = "$dir/ops.bf";
    my $f = $C->new($path, 1000, 0.01, {%B});
    my $o = $f->stats->{ops};
    $f->add('a');
    $f->add('a');
    $f->add_many([qw(b c)]);
    $f->add_many([]);
    is($f->stats->{ops} - $o, 4, 'two adds (new and not) and two add_many');
    my $r = in_child(sub {
        my $h = $C->new($path, 1000, 0.01);
        $h->add("k$_") for 1 .. 10;
        'ok';
    });
    is($r->{out}, 'ok', 'another process adds 10 times');
    is($f->stats->{ops} - $o, 14, 'summed in');
};

# Every constructor with 128-bit blocks: file, reopen, descriptor, memfd,
# bytes.
subtest '128-bit blocks through every constructor' => sub {
    my $path = "$dir/b128.bf";
    my $f = $C->new($path, 5000, 0.001, {%B});
    is(scheme($f), 3, 'fp_rate 0.001: 128-bit blocks');
    my @items = map {"i$_"} 1 .. 2000;
    is($f->add_many(\@items), 2000, 'add_many: every item new') or diag('false positives at 0.001 are rare');
    my @handles = (
        [reopened  => $C->new($path, 1, 0.5)],
        [fd        => $C->new_from_fd(do { open(my $h, '+<', $path) or die; $h })],
        [bytes     => $C->deserialize($f->serialize)],
        [memfd     => $C->deserialize($f->serialize, { memfd => 'b128' })],
    );
    for (@handles) {
        my ($how, $h) = @$_;
        is_deeply([$h->layout, $h->bits, $h->hashes], ['blocked', $f->bits, $f->hashes], "$how: the same blocked geometry");
        is(scalar $h->contains_many(\@items), 2000, "$how: every item");
        is($h->serialize, $f->serialize, "$how: the same bytes") if $how ne 'reopened' && $how ne 'fd';
    }
    $handles[0][1]->add('via reopen');
    ok($f->contains('via reopen') && $handles[1][1]->contains('via reopen'), 'one file: an add through one handle is seen by all');
    my $m = $C->new_memfd('m128', 5000, 0.001, {%B});
    is(scheme($m), 3, 'new_memfd: 128-bit blocks');
    $m->add('x');
    ok($C->new_from_fd($m->memfd)->contains('x'), 'its descriptor shares it');
};

# LAYOUTS, Sizing: "the load of an absent item's word is Poisson distributed
# around capacity / words, the k bits each of those items sets are uniform
# in the word, and the rate is the chance that all the absent item's own
# bits are among them. The word width (64-bit words unless they need more
# than 1.15 times the bits of 128-bit blocks), k and the number of words are
# the smallest that meet fp_rate at capacity." That rate, worked out here
# from those words alone: an absent item's k draws cover s distinct bits
# with chance C(B, s) * surj(k, s) / B**k; a given bit is among a word's
# items' bits unless all their j * k draws miss it, so by inclusion and
# exclusion over the s bits, with J ~ Poisson(lambda),
#   rate = sum_s P(s) sum_i (-1)**i C(s, i) exp(-lambda (1 - (1 - i/B)**k)).
my %p_s;
sub choose { my ($n, $r) = @_; my $c = 1; $c = $c * ($n - $_ + 1) / $_ for 1 .. $r; return $c }

sub blocked_rate {
    my ($B, $k, $lambda) = @_;
    my $P = $p_s{"$B $k"} //= [map {
        my $s = $_;
        my $surj = 0;
        $surj += (-1)**$_ * choose($s, $_) * ($s - $_)**$k for 0 .. $s;
        choose($B, $s) * $surj / $B**$k;
    } 0 .. $k];
    my $rate = 0;
    for my $s (1 .. $k) {
        my $t = 0;
        $t += (-1)**$_ * choose($s, $_) * exp(-$lambda * (1 - (1 - $_ / $B)**$k)) for 0 .. $s;
        $rate += $P->[$s] * $t;
    }
    return $rate;
}

# The most items per word that keep the rate at most $rate, for a width and k.
sub max_load {
    my ($B, $k, $rate) = @_;
    my ($lo, $hi) = (0, $B);
    for (1 .. 60) {
        my $mid = ($lo + $hi) / 2;
        if (blocked_rate($B, $k, $mid) <= $rate) { $lo = $mid } else { $hi = $mid }
    }
    return $lo;
}

subtest 'sizing: the smallest width, k and words meeting the rate' => sub {
    for my $rate (0.1, 0.05, 0.01, 0.001, 0.0001, 1e-5) {
        my %best;    # width => [k, load]
        for my $B (64, 128) {
            $best{$B} = [0, 0];
            for my $k (1 .. 16) {
                my $l = max_load($B, $k, $rate);
                $best{$B} = [$k, $l] if $l > $best{$B}[1];
            }
        }
        my $ratio = (64 / $best{64}[1]) / (128 / $best{128}[1]);
        my $B = $ratio <= 1.15 ? 64 : 128;
        for my $cap (1000, 123_457, 1_000_000) {
            my $f = $C->new(undef, $cap, $rate, {%B});
            my $what = "$rate, $cap items";
            is(scheme($f), $B == 64 ? 2 : 3,
                sprintf('%s: %d-bit words (64-bit ones need %.3f times the bits)', $what, $B, $ratio));
            is($f->hashes, $best{$B}[0], "$what: k $best{$B}[0], the one that packs most items per word");
            my $words = $f->bits / $B;
            my $at = blocked_rate($B, $f->hashes, $cap / $words);
            cmp_ok($at, '<=', $rate * (1 + 1e-9), "$what: the rate at capacity, $at, is at most $rate");
            if ($words > 1) {
                my $fewer = blocked_rate($B, $f->hashes, $cap / ($words - 1));
                cmp_ok($fewer, '>', $rate * (1 - 1e-6), "$what: one word fewer would not do ($fewer)");
            }
        }
    }
};

done_testing;
