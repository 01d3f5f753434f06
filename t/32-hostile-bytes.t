# deserialize treats its input as hostile: every kind of bad bytes croaks
# with "->deserialize:" and the reason, allocates nothing for a size it has
# not seen, creates no file, and never crashes the process.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child child_status_text);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);

# Capacity 10 at fp_rate 0.5: k = 1, m = 64 bits, so 56 + 8 + 8 = 72 bytes.
my $small = $C->new(undef, 10, 0.5, { seed => 3 });
$small->add_many([qw(a b c)]);
my $good = $small->serialize;
my $len = length $good;
is($len, 72, 'the small filter serializes to 72 bytes');
ok($C->deserialize($good), 'its bytes deserialize');

# Croaks naming deserialize, with a reason matching $why; returns a failure
# description or nothing.
sub refused {
    my ($bytes, $why, $opts) = @_;
    my $d = eval { $C->deserialize($bytes, $opts ? $opts : ()) };
    return 'accepted' if $d;
    return "wrong message: $@" if $@ !~ /^Data::BloomFilter::Shared->deserialize: $why/;
    return;
}

sub refuses_ok {
    my ($bytes, $why, $name) = @_;
    my $err = refused($bytes, $why);
    ok(!$err, $name) or diag($err);
}

sub with {    # $good with $bytes written at $off
    my ($off, $bytes) = @_;
    my $b = $good;
    substr($b, $off, length $bytes) = $bytes;
    return $b;
}

# --- not byte strings -------------------------------------------------------------------------
refuses_ok(undef, qr/undefined bytes/, 'undef');
refuses_ok('', qr/truncated input \(0 bytes, need 64\)/, 'empty string');
refuses_ok("\x{100}" . substr($good, 1), qr/Wide character in bytes/, 'a wide character');
refuses_ok($good . "\x{263A}", qr/Wide character in bytes/, 'valid bytes followed by a wide character');
refuses_ok($_->[0], qr/bytes must be a string, not a reference/, "a reference: $_->[1]")
    for [[], 'array'], [{}, 'hash'], [\$good, 'scalar'], [sub { $good }, 'code'], [qr/x/, 'regexp'];
{
    my $up = $good;
    utf8::upgrade($up);
    ok(eval { $C->deserialize($up) }, 'valid bytes in an upgraded (UTF-8 flagged) string are accepted')
        or diag($@);
    package My::Bytes { use overload '""' => sub { ${ $_[0] } }, fallback => 1 }
    ok(eval { $C->deserialize(bless \(my $copy = $good), 'My::Bytes') },
        'an object with overloaded stringification is taken as its string') or diag($@);
}

# --- lengths ---------------------------------------------------------------------------------
{
    my @bad;
    for my $n (0 .. $len - 1) {
        my $need = $n < 64 ? 64 : 72;
        my $err = refused(substr($good, 0, $n), qr/truncated input \($n bytes, need $need\)/);
        push @bad, "truncated to $n: $err" if $err;
    }
    is(scalar @bad, 0, "truncated at every length 0..71: 'truncated input'") or diag(join "\n", @bad);
    @bad = ();
    for my $n (1 .. 16) {
        my $got = $len + $n;
        my $err = refused($good . ("\0" x $n), qr/extended input \($got bytes, expected 72\)/);
        push @bad, "extended by $n zeros: $err" if $err;
        $err = refused($good . substr($good, 0, $n), qr/extended input/);
        push @bad, "extended by $n bytes of itself: $err" if $err;
    }
    is(scalar @bad, 0, "extended by 1..16 bytes: 'extended input'") or diag(join "\n", @bad);
}

# --- every single-bit flip ------------------------------------------------------------------------
{
    # What a flipped bit in each field must be refused as (src/shm/serial.rs).
    my @why = (
        [0,  qr/bad magic/],
        # 1 ^ 2 = 3 is a grown filter's version, whose header (80 bytes
        # with its checksum) is longer than these 72 bytes.
        [8,  qr/(unsupported serialization version \d+|truncated input \(72 bytes, need 80\))/],
        # 2 and 3 are the blocked layouts: 1 ^ 2 = 3 (128-bit blocks) makes
        # the 64-bit m impossible.
        [12, qr/(unknown hash scheme \d+|impossible geometry)/],
        [16, qr/(impossible geometry|bad checksum)/],       # k: 0 or > 32, or another valid k
        [20, qr/reserved field is not zero/],
        [24, qr/impossible geometry/],    # m = 64 +- 2**j or 0: never a power of two >= 64
        [32, qr/(impossible geometry|bad checksum)/],       # capacity
        [40, qr/(impossible geometry|bad checksum)/],       # fp_rate
        [48, qr/bad checksum/],                             # seed
        [56, qr/bad checksum/],                             # the bit array
        [64, qr/bad checksum/],                             # the checksum itself
    );
    my (@bad, %reasons);
    for my $bit (0 .. 8 * $len - 1) {
        my $b = $good;
        vec($b, $bit, 1) ^= 1;
        my $off = int($bit / 8);
        my ($why) = map { $_->[1] } grep { $_->[0] <= $off } reverse @why;
        my $err = refused($b, $why);
        push @bad, "bit $bit (byte $off): $err" if $err;
        $reasons{$1}++ if !$err && $@ =~ /->deserialize: ([a-z]+(?: [a-z]+)*)/;
    }
    is(scalar @bad, 0, 'each of the 576 single-bit flips croaks with the reason for its field')
        or diag(join "\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]);
    is(scalar keys %reasons, 7, 'the flips met the seven reasons of a single-field change')
        or diag(explain \%reasons);
}

# --- named fields ------------------------------------------------------------------------------
refuses_ok(with(0, 'BLOOMSEX'), qr/bad magic/, 'bad magic');
refuses_ok(with(0, "\0" x 8), qr/bad magic/, 'zero magic');
refuses_ok(with(0, 'bloomser'), qr/bad magic/, 'lower-case magic');
refuses_ok(with(8, pack 'V', $_), qr/unsupported serialization version $_\b/, "version $_")
    for 0, 4, 0xFFFFFFFF;
# Version 3 is a grown filter's: its header alone is 80 bytes with the checksum.
refuses_ok(with(8, pack 'V', 3), qr/truncated input \(72 bytes, need 80\)/, 'version 3');
# Version 2 is a windowed filter's: the word at 20 (here 0) is its number of
# generations.
refuses_ok(with(8, pack 'V', 2), qr/windowed bytes with 0 generations \(2 to 16\)/, 'version 2');
refuses_ok(with(12, pack 'V', 5), qr/unknown hash scheme 5\b/, 'hash scheme 5 (4 is datasketches)');
refuses_ok(with(20, pack 'V', 1), qr/reserved field is not zero/, 'reserved field 1');
refuses_ok(with(16, pack 'V', 0), qr/impossible geometry/, 'k = 0');
refuses_ok(with(16, pack 'V', 33), qr/impossible geometry/, 'k = 33');
refuses_ok(with(24, pack 'Q<', 100), qr/impossible geometry/, 'm = 100 (not a power of two)');
refuses_ok(with(24, pack 'Q<', 32), qr/impossible geometry/, 'm = 32 (below one word)');
refuses_ok(with(24, pack 'Q<', 0), qr/impossible geometry/, 'm = 0');
refuses_ok(with(24, pack 'Q<', 2**39), qr/impossible geometry/, 'm = 2**39 (above the 2**38 limit)');
refuses_ok(with(24, pack 'Q<', ~0), qr/impossible geometry/, 'm = 2**64 - 1');
refuses_ok(with(32, pack 'Q<', 0), qr/impossible geometry/, 'capacity 0');
refuses_ok(with(40, pack 'd<', $_), qr/impossible geometry/, "fp_rate $_") for 0, 1, -0.5, 9**9**9;
refuses_ok(with(40, pack 'd<', 9**9**9 / 9**9**9), qr/impossible geometry/, 'fp_rate NaN');
refuses_ok(with(48, pack 'Q<', 4), qr/bad checksum/, 'another seed');
refuses_ok(with(56, "\xFF" x 8), qr/bad checksum/, 'other bits');
refuses_ok(with(64, "\0" x 8), qr/bad checksum/, 'a zero checksum');

# A failed deserialize to a path leaves no file behind.
{
    my $p = "$dir/never.bf";
    my $err = refused(substr($good, 0, 71), qr/truncated input/, { path => $p });
    ok(!$err, 'truncated bytes to a path croak') or diag($err);
    ok(!-e $p, '... and create no file');
    $err = refused(with(56, "\xFF" x 8), qr/bad checksum/, { path => $p, mode => 0644 });
    ok(!$err, 'corrupted bytes to a path croak') or diag($err);
    ok(!-e $p, '... and create no file');
}

# --- a huge declared size allocates nothing ------------------------------------------------------
{
    # m = 2**38 is a valid geometry (32 GiB of bits), but these bytes are
    # 72 long: refused as truncated before anything of that size exists.
    my $huge = with(24, pack 'Q<', 2**38);
    my $need = 2**35 + 64;
    my $res = in_child(sub {
        my $mem = sub {
            open(my $fh, '<', "/proc/self/status") or die "status: $!";
            my %kb = map { /^(\w+):\s+(\d+) kB/ ? ($1 => $2) : () } <$fh>;
            return @kb{qw(VmPeak VmHWM)};
        };
        my @before = $mem->();
        my @errs;
        for (1 .. 200) {
            eval { $C->deserialize($huge) };
            push @errs, $@;
        }
        my @after = $mem->();
        my %distinct = map { $_ => 1 } @errs;
        return join "\n", $after[0] - $before[0], $after[1] - $before[1], sort keys %distinct;
    }, 60);
    ok(!$res->{signal} && !$res->{timed_out} && $res->{exit} == 0, 'huge declared m: the process survives')
        or diag(child_status_text($res));
    my ($peak, $hwm, @msgs) = split /\n/, $res->{out};
    is(scalar @msgs, 1, 'huge declared m: the same croak every time');
    like($msgs[0] // '', qr/^Data::BloomFilter::Shared->deserialize: truncated input \(72 bytes, need $need\)/,
        'huge declared m with short input: truncated, naming the size it would need');
    cmp_ok($peak // 1e9, '<', 16 * 1024, 'virtual size peak grew by less than 16 MiB');
    cmp_ok($hwm // 1e9, '<', 16 * 1024, 'resident size peak grew by less than 16 MiB');
}

# --- random mutations --------------------------------------------------------------------------
{
    my $big = $C->new(undef, 1000, 0.01, { seed => 11 });
    $big->add_many([map { "m$_" } 1 .. 400]);
    my @bases = ($good, $big->serialize);

    my $res = in_child(sub {
        # xorshift64 with a fixed seed: the same 10_000 cases on every run.
        no warnings 'portable';
        my $x = 0x2545F4914F6CDD1D;
        my $next = sub {
            $x ^= ($x << 13) & 0xFFFFFFFFFFFFFFFF;
            $x ^= $x >> 7;
            $x ^= ($x << 17) & 0xFFFFFFFFFFFFFFFF;
            return $x;
        };
        my ($cases, @bad) = (0);
        for my $i (1 .. 10_000) {
            my $base = $bases[$next->() % 2];
            my $b = $base;
            my $kind = $next->() % 6;
            if ($kind == 0) {           # 1..8 bytes xor-ed with a non-zero value
                for (1 .. 1 + $next->() % 8) {
                    my $o = $next->() % length $b;
                    substr($b, $o, 1) = chr(ord(substr($b, $o, 1)) ^ (1 + $next->() % 255));
                }
            }
            elsif ($kind == 1) {        # a header field overwritten
                my $o = $next->() % 56;
                substr($b, $o, 1) = chr(ord(substr($b, $o, 1)) ^ (1 + $next->() % 255));
            }
            elsif ($kind == 2) {        # truncated
                $b = substr($b, 0, $next->() % length $b);
            }
            elsif ($kind == 3) {        # extended
                $b .= join '', map { chr($next->() % 256) } 1 .. 1 + $next->() % 16;
            }
            elsif ($kind == 4) {        # garbage behind a good magic
                $b = 'BLOOMSER' . join '', map { chr($next->() % 256) } 1 .. $next->() % 200;
            }
            else {                      # one base's header on the other's body
                my $other = $bases[0] eq $base ? $bases[1] : $bases[0];
                $b = substr($base, 0, 56) . substr($other, 56);
            }
            next if $b eq $base;        # xor with non-zero always changes; be sure anyway
            $cases++;
            my $d = eval { $C->deserialize($b) };
            if ($d) { push @bad, "case $i: accepted" }
            elsif ($@ !~ /^Data::BloomFilter::Shared->deserialize: [a-z][a-z ]+/) { push @bad, "case $i: $@" }
        }
        my $ok = $C->deserialize($bases[1]) ? 'alive' : 'broken';
        return join "\n", $cases, $ok, @bad;
    }, 120);
    ok(!$res->{signal} && !$res->{timed_out} && $res->{exit} == 0,
        '10_000 random mutations: the child exited normally') or diag(child_status_text($res));
    my ($cases, $state, @bad) = split /\n/, $res->{out};
    cmp_ok($cases // 0, '>=', 9_900, 'at least 9_900 mutated inputs were tried');
    is(scalar @bad, 0, 'every mutated input croaked with ->deserialize: and a reason')
        or diag(join "\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]);
    is($state, 'alive', 'valid bytes still deserialize afterwards');
}

# --- windowed bytes (version 2) ----------------------------------------------------------------
{
    # 3 generations of 64 bits: 80 + 3 * 8 (last words) + 3 * 8 (bits) + 8.
    my $wf = $C->new(undef, 10, 0.5, { window => 3600, generations => 3 });
    $wf->add_many([qw(a b)]);
    $wf->rotate;
    $wf->add('c');
    my $wgood = $wf->serialize;
    my $wlen = length $wgood;
    is($wlen, 136, 'a windowed filter of 3 generations of 64 bits serializes to 136 bytes');
    ok($C->deserialize($wgood), 'its bytes deserialize');
    my $wwith = sub {
        my ($off, $bytes) = @_;
        my $b = $wgood;
        substr($b, $off, length $bytes) = $bytes;
        return $b;
    };
    my @bad;
    for my $n (0 .. $wlen - 1) {
        my $need = $n < 64 ? 64 : $n < 88 ? 88 : $wlen;
        my $err = refused(substr($wgood, 0, $n), qr/truncated input \($n bytes, need $need\)/);
        push @bad, "truncated to $n: $err" if $err;
    }
    for my $n (1 .. 16) {
        my $err = refused($wgood . ("\0" x $n), qr/extended input \(\d+ bytes, expected $wlen\)/);
        push @bad, "extended by $n: $err" if $err;
    }
    is(scalar @bad, 0, "windowed: truncated at every length, extended by 1..16") or diag(join "\n", @bad);
    @bad = ();
    for my $bit (0 .. 8 * $wlen - 1) {
        my $b = $wgood;
        vec($b, $bit, 1) ^= 1;
        my $err = refused($b, qr/[a-z][a-z ]+/);
        push @bad, "bit $bit: $err" if $err;
    }
    is(scalar @bad, 0, "windowed: each of the @{[8 * $wlen]} single-bit flips croaks")
        or diag(join "\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]);
    refuses_ok($wwith->(20, pack 'V', $_), qr/windowed bytes with $_ generations \(2 to 16\)/,
        "generations $_") for 0, 1, 17, 0xFFFFFFFF;
    # Another valid number of generations: the generations' lengths no
    # longer add up to the input's.
    refuses_ok($wwith->(20, pack 'V', 2), qr/extended input \($wlen bytes, expected 120\)/,
        'generations 2 on bytes of 3');
    refuses_ok($wwith->(20, pack 'V', 4), qr/truncated input \($wlen bytes, need 152\)/,
        'generations 4 on bytes of 3');
    refuses_ok($wwith->(56, pack 'Q<', $_), qr/impossible window in windowed bytes/, "window $_ ns")
        for 1, 999_999, 3_600_000_000_001, 3653 * 86400 * 1e9 + 2;
    refuses_ok($wwith->(56, pack 'Q<', 7_200_000_000_000), qr/bad checksum/, 'another valid window');
    refuses_ok($wwith->(72, pack 'Q<', $_->[0]), qr/generation number $_->[1] out of range in windowed bytes/,
        "generation number $_->[1]") for [2**59, '576460752303423488'], [2**63, '9223372036854775808'];
    refuses_ok($wwith->(64, pack 'Q<', 1), qr/bad checksum/, 'another epoch');
    refuses_ok($wwith->(80, pack 'Q<', 0), qr/bad checksum/, 'another last word');
    refuses_ok($wwith->(12, pack 'V', 9), qr/unknown hash scheme 9/, 'windowed: hash scheme');
    # The layout option against windowed bytes, as against plain ones.
    my $err = refused($wgood, qr/layout mismatch \(the bytes are of a standard filter, not blocked\)/,
        { layout => 'blocked' });
    ok(!$err, 'windowed: layout mismatch') or diag($err);
    my $p = "$dir/never-windowed.bf";
    $err = refused(substr($wgood, 0, $wlen - 1), qr/truncated input/, { path => $p, window => 3600, generations => 3 });
    ok(!$err && !-e $p, 'truncated windowed bytes to a path croak and create no file') or diag($err);
    $err = refused($wgood, qr/window mismatch/, { path => $p, window => 60, generations => 3 });
    ok(!$err && !-e $p, 'a window mismatch to a path creates no file') or diag($err);
}

done_testing;
