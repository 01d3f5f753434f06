# Sizing: k and m from capacity and fp_rate, the 2^38-bit limit, range checks,
# and stored geometry winning on reopen.
use strict;
use warnings;
use Test::More;
use POSIX ();
use File::Temp qw(tempdir);
use Data::BloomFilter::Shared;
# Reopened with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $LIMIT = 2**38;

sub geom {
    my ($n, $p) = @_;
    my $k = POSIX::lround(-POSIX::log2($p));
    $k = 1 if $k < 1;
    $k = 32 if $k > 32;
    my $raw = POSIX::ceil($n * $k / log(2));
    my $m = 64;
    $m *= 2 while $m < $raw;
    return ($k, $m);
}

# Boundaries of next_pow2 for k = 1: n/ln2 <= 1024 iff n <= 709.
my @table = (
    [1, 0.5], [1, 0.01], [2, 0.9], [5, 0.3], [10, 0.1], [44, 0.5], [45, 0.5],
    [100, 0.01], [709, 0.5], [710, 0.5], [1000, 0.01], [1000, 0.001],
    [1000, 0.05], [1000, 0.2], [12_345, 0.0001], [50_000, 1e-6],
    [3, 1e-12], [3, 1e-300], [1_000_000, 0.01], [100_000, 0.4],
);

for my $row (@table) {
    my ($n, $p) = @$row;
    my ($k, $m) = geom($n, $p);
    my $f = eval { $C->new(undef, $n, $p) };
    ok($f, "new(undef, $n, $p) works") or do { diag($@); next };
    is($f->hashes, $k, "capacity $n, fp $p: k = $k");
    is($f->bits, $m, "capacity $n, fp $p: m = $m");
    is($f->capacity, $n, "capacity $n kept");
}

# Spot values computed by hand.
{
    my ($k, $m) = geom(1000, 0.01);
    is("$k/$m", '7/16384', 'test formula: 1000/0.01 -> 7/16384');
    ($k, $m) = geom(709, 0.5);
    is("$k/$m", '1/1024', 'test formula: 709/0.5 -> 1/1024');
    ($k, $m) = geom(710, 0.5);
    is("$k/$m", '1/2048', 'test formula: 710/0.5 -> 1/2048');
    ($k, $m) = geom(1, 0.5);
    is("$k/$m", '1/64', 'test formula: tiny filter is 64 bits');
    ($k, $m) = geom(2, 0.9);
    is($k, 1, 'k clamped to at least 1');
    ($k, $m) = geom(3, 1e-300);
    is($k, 32, 'k clamped to at most 32');
}

# The 2^38-bit limit is refused, not capped.
{
    # k = 1: m = next_pow2(ceil(n / ln 2)); the largest n with m <= 2^38:
    my $nmax = POSIX::floor($LIMIT * log(2));
    my ($k, $m) = geom($nmax + 2, 0.5);
    cmp_ok($m, '>', $LIMIT, 'test formula: n just past the limit needs more than 2^38 bits');
    for my $n ($nmax + 2, 1e12, 2**50, 2**62, 1e30) {
        my (undef, $need) = geom($n, 0.5);
        cmp_ok($need, '>', $LIMIT, "test formula: capacity $n needs more than 2^38 bits");
        my $f = eval { $C->new(undef, $n, 0.5) };
        ok(!$f, "capacity $n with fp 0.5 (over 2^38 bits) is refused");
        like($@, qr/->new: .*(capacity|too large|too big|2\^38|exceed|bits)/i, '... croaks with ->new and a reason');
    }
    my $f = eval { $C->new(undef, 3e10, 0.01) };
    ok(!$f, 'capacity 3e10 with fp 0.01 (k=7, 2^39 bits) is refused');
    like($@, qr/->new: /, '... croaks with ->new');

    my $dir = tempdir(CLEANUP => 1);
    $f = eval { $C->new("$dir/big", 1e11, 0.01) };
    ok(!$f, 'over-limit file filter refused');
    ok(!-e "$dir/big", '... and no file was left behind');

    $f = eval { $C->new_memfd('big', 1e11, 0.01) };
    ok(!$f, 'over-limit memfd filter refused');
    like($@, qr/->new_memfd: /, '... croaks with ->new_memfd');
}

# Range checks on capacity and fp_rate.
{
    local $SIG{__WARN__} = sub { };
    for my $cap (0, -1, -1000, 'NaN', 'Inf', '-Inf') {
        my $f = eval { $C->new(undef, $cap, 0.01) };
        ok(!$f, "capacity '$cap' refused");
        like($@, qr/->new: .*capacity/, "... croak names ->new and capacity");
    }
    for my $p (0, 1, -0.1, 1.5, 2, 'NaN', 'Inf', '-Inf', -1e-300) {
        my $f = eval { $C->new(undef, 1000, $p) };
        ok(!$f, "fp_rate '$p' refused");
        like($@, qr/->new: .*fp_rate/, "... croak names ->new and fp_rate");
    }
    for my $p (0.999999, 1e-300) {
        ok(eval { $C->new(undef, 10, $p) }, "fp_rate $p accepted") or diag($@);
    }
}

# Reopening a file: the stored geometry wins, arguments are still checked.
{
    my $dir = tempdir(CLEANUP => 1);
    my $path = "$dir/geo.bf";
    {
        my $f = $C->new($path, 1000, 0.01);
        $f->add('stored');
    }
    my $g = $C->new($path, 50, 0.3);
    is($g->capacity, 1000, 'reopen with other capacity: stored capacity wins');
    is($g->bits, 16384, 'reopen: stored bits win');
    is($g->hashes, 7, 'reopen: stored hashes win');
    ok(abs($g->fp_rate - 0.01) < 1e-15, 'reopen: stored fp_rate wins');
    is($g->contains('stored'), 1, 'reopen: earlier add present');

    my $h = $C->new($path, 1_000_000, 1e-9);
    is($h->bits, 16384, 'reopen with larger args: stored bits win');
    undef $h;

    local $SIG{__WARN__} = sub { };
    my $bad = eval { $C->new($path, 0, 0.01) };
    ok(!$bad, 'reopen with capacity 0 still croaks');
    like($@, qr/->new: .*capacity/, '... names capacity');
    $bad = eval { $C->new($path, -5, 0.01) };
    ok(!$bad, 'reopen with capacity -5 still croaks');
    like($@, qr/->new: .*capacity/, '... names capacity');
    $bad = eval { $C->new($path, 1000, 1.5) };
    ok(!$bad, 'reopen with fp_rate 1.5 still croaks');
    like($@, qr/->new: .*fp_rate/, '... names fp_rate');
    $bad = eval { $C->new($path, 1000, 'NaN') };
    ok(!$bad, 'reopen with fp_rate NaN still croaks');
    like($@, qr/->new: .*fp_rate/, '... names fp_rate');
    is($g->contains('stored'), 1, 'file intact after refused reopens');
}

done_testing;
