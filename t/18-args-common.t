# One check of capacity, fp_rate, seed and options hashes for a local filter,
# a filter in Redis and the command line tool (Data::BloomFilter::Shared::Args):
# they accept the same values, read them the same way, and refuse the same
# ones, each class in its own words where those have always differed.
use strict;
use warnings;
use Test::More;
use Data::BloomFilter::Shared;
use Data::BloomFilter::Shared::Redis;

my $L = 'Data::BloomFilter::Shared';
my $R = 'Data::BloomFilter::Shared::Redis';

sub outcome {
    my ($code) = @_;
    my $v = eval { $code->() };
    return defined $v ? ['ok', 0 + $v] : ['croak', $@ =~ /->new: ([a-z_]+) / ? $1 : $@];
}

for my $cap (1000, '1000', '1e6', "1000\n", ' 1000', '+20', 1500.5, 0.3, '1000.0',
             'abc', '', '12abc', 0, '0.0', -1, '-5', 'inf', 'nan', 9**9**9, '1e30', [], undef) {
    my $shown = defined $cap ? "'$cap'" : 'undef';
    $shown =~ s/\n/\\n/;
    my $l = outcome(sub { Data::BloomFilter::Shared::_capacity('new', $cap) });
    my $r = outcome(sub { Data::BloomFilter::Shared::Redis::_capacity('new', $cap) });
    is_deeply($r, $l, "capacity $shown: the same outcome for both classes");
}

for my $fp (0.01, '0.5', '1e-3', 0, 1, -0.1, 'x', 'nan', [], undef) {
    my $shown = defined $fp ? "'$fp'" : 'undef';
    my $l = outcome(sub { Data::BloomFilter::Shared::_fp_rate('new', $fp) });
    my $r = outcome(sub { Data::BloomFilter::Shared::Redis::_fp_rate('new', $fp) });
    is_deeply($r, $l, "fp_rate $shown: the same outcome for both classes");
}
is(Data::BloomFilter::Shared::_fp_rate('new', undef), 0.01, 'one default fp_rate: 0.01');

for my $seed (0, 42, '18446744073709551615', '18446744073709551616', -1, 'x', 1.5) {
    my $l = eval { Data::BloomFilter::Shared::_seed('new', $seed) } // $@;
    my $r = eval { Data::BloomFilter::Shared::Redis::_seed('new', $seed) } // $@;
    s/\A\S+->new: (.*?) at .*/$1/s for $l, $r;
    is($r, $l, "seed '$seed': the same outcome for both classes");
}

# Each class's words, which callers match on, then the value given.
my @says = (
    [0, qr/\A\Q$L\E->new: capacity must be a positive number, got 0 \(/,
        qr/\A\Q$R\E->new: capacity must be a positive integer, got 0 \(/],
    ['many', qr/\A\Q$L\E->new: capacity must be a positive number, got 'many' \(/,
        qr/\A\Q$R\E->new: capacity must be a number, got 'many' \(/],
    ['1e30', qr/\A\Q$L\E->new: capacity is too large, got 1e30 \(/,
        qr/\A\Q$R\E->new: capacity is too large, got 1e30 \(/],
);
for my $s (@says) {
    my ($v, $local, $redis) = @$s;
    eval { Data::BloomFilter::Shared::_capacity('new', $v) };
    like($@, $local, "capacity '$v': the local class's message");
    eval { Data::BloomFilter::Shared::Redis::_capacity('new', $v) };
    like($@, $redis, "capacity '$v': the Redis class's message");
}
# The message names the caller's line, not the module's.
eval { $L->new(undef, 0) };
like($@, qr/ at \Q${\ __FILE__}\E line \d+\.$/, 'a croak names the caller');

for my $opts ([], 'x', { colour => 1 }) {
    my $l = eval { Data::BloomFilter::Shared::_options('new', $opts, qw(seed)) } // $@;
    my $r = eval { Data::BloomFilter::Shared::Redis::_options('new', $opts, qw(seed)) } // $@;
    s/\A\S+->new: (.*?) at .*/$1/s for $l, $r;
    is($r, $l, 'options ' . (ref $opts || "'$opts'") . ': the same outcome for both classes');
}

# The command line tool's forms of a count and of an fp_rate.
my $A = 'Data::BloomFilter::Shared::Args';
for my $case (['1000', 1000], ['1_000_000', 1e6], ['1e6', 1e6], ['10k', 1e4], ['5M', 5e6],
              ['2G', 2e9], ['1.5k', 1500], ['x', undef], ['-1', undef], ['1e-3', undef], ['', undef]) {
    my ($text, $want) = @$case;
    is(Data::BloomFilter::Shared::Args::count_text($text), $want, "count '$text'");
}
for my $case (['0.01', 0.01], ['.5', 0.5], ['1e-3', 0.001], ['1', undef], ['0', undef],
              ['+0.1', undef], [' 0.1', undef], ['inf', undef], ['x', undef]) {
    my ($text, $want) = @$case;
    is(Data::BloomFilter::Shared::Args::fp_rate_text($text), $want, "fp_rate '$text'");
}

done_testing;
