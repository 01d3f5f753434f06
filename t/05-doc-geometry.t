# The table under "CHOOSING CAPACITY AND FP_RATE" in the POD states what
# real filters get: every number in it is recomputed here.
use strict;
use warnings;
use Test::More;
use FindBin ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $pm = "$FindBin::Bin/../lib/Data/BloomFilter/Shared.pm";
open(my $fh, '<', $pm) or die "$pm: $!";
my $pod = do { local $/; <$fh> };
my ($section) = $pod =~ /^=head1 CHOOSING CAPACITY AND FP_RATE\n(.*?)^=head1 /ms
    or BAIL_OUT('no CHOOSING CAPACITY AND FP_RATE section');

my @rows = $section =~ /^ +([0-9.e-]+) +(\d+) +([0-9.]+) +(\S+) \|(.*)\|(.*)$/mg;
is(scalar @rows / 6, 6, 'six rows in the table') or diag($section);

sub same_2g {    # a number as the table shows it: two significant digits
    my ($shown, $value) = @_;
    my $s = sprintf('%.2g', $value);
    $s =~ s/e-0?(\d)/e-$1/;
    return $shown eq $s;
}

while (my ($p, $k, $per_item, $fp, @cols) = splice @rows, 0, 6) {
    is($C->new(undef, 1000, $p)->hashes, $k, "fp_rate $p: k = $k");
    is(sprintf('%.2f', $k / log 2), $per_item, "fp_rate $p: $per_item bits per item before rounding");
    ok(same_2g($fp, 2**-$k), "fp_rate $p: $fp false positives before rounding");
    for my $n (1e6, 1e8) {
        my ($bits_item, $mib, $fp_n) = shift(@cols) =~ /^ *([0-9.]+) +(\d+) MiB +(\S+) *$/
            or fail("fp_rate $p, $n items: row not understood"), next;
        my $f = $C->new(undef, $n, $p);
        my $m = $f->bits;
        is(sprintf('%.2f', $m / $n), $bits_item, "fp_rate $p, $n items: $bits_item bits per item");
        is($m / 8 / 1024 / 1024, $mib, "fp_rate $p, $n items: $mib MiB");
        ok(same_2g($fp_n, (1 - exp(-$k * $n / $m))**$k),
            "fp_rate $p, $n items: $fp_n false positives at capacity");
    }
}

# The rest of the section's numbers.
like($section, qr/control area\s+\(process slots and lock\s+stripes\) of 72 to 324 KiB before the bits\s+\(68 KiB,\s+plus 64 bytes per 1 024 bits, at least 4 and at most 256 KiB of them\)/,
    'the control area size is stated');
my $small = $C->new(undef, 1000, 0.01)->stats;    # 2**14 bits: 16 stripes' worth, at least 64
is($small->{mmap_size} - $small->{bits} / 8, 72 * 1024, 'control area of a small filter: 72 KiB');
my $mid = $C->new(undef, 200_000, 0.01)->stats;    # 2**21 bits: 2048 stripes
is($mid->{mmap_size} - $mid->{bits} / 8, (68 + 128) * 1024, 'control area of 2**21 bits: 68 KiB + 2048 stripes');
my $big = $C->new(undef, 400_000, 0.01)->stats;    # 2**22 bits: 4096 stripes, 512 KiB of bits
is($big->{mmap_size} - $big->{bits} / 8, 324 * 1024, 'control area: at most 324 KiB below a 4 MiB bit array');
my $large = $C->new(undef, 1e8, 0.1)->stats;    # 64 MiB of bits
is($large->{mmap_size} - $large->{bits} / 8, 2 * 1024 * 1024,
    'control area: 2 MiB before a bit array of 4 MiB or more');
is($C->new(undef, 1_661_000, 0.01)->bits, 2**24, '1.66e6 items at 0.01 still fit 2**24 bits');
ok(!eval { $C->new(undef, 2.73e10, 0.01); 1 }, 'beyond 2.7e10 items at 0.01: too large');

# The layout accessor's POD names every layout this build makes, and each
# name it gives is one a filter created with it reports.
{
    my ($doc) = $pod =~ /^=head3 layout\n\n(.*?)\n\n/ms or BAIL_OUT('no =head3 layout');
    my @named = $doc =~ /C<'(\w+)'>/g;
    is("@named", join(' ', Data::BloomFilter::Shared::Args::layout_names()),
        "the layout accessor's POD names every layout (@named)");
    for my $layout (@named) {
        my $f = $C->new(undef, 1000, 0.01, { layout => $layout });
        is($f->layout, $layout, "layout '$layout' as documented: the accessor reports it");
        ok($f->add('x') && $f->contains('x'), "... and the filter works");
    }
}

done_testing;
