# The table under "TIME WINDOWS" in README states what windowed filters map
# and their false positive rates at capacity: every row is rebuilt here the
# way bench/window_fp.pl builds it. Sizes must match exactly; rates, measured
# over fewer absent items, within 4 standard errors of the table's.
use strict;
use warnings;
use Test::More;
use FindBin ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $readme = "$FindBin::Bin/../README.pod";
open(my $fh, '<', $readme) or die "$readme: $!";
my $pod = do { local $/; <$fh> };
my ($section) = $pod =~ /^=head1 TIME WINDOWS\n(.*?)^=head1 /ms
    or BAIL_OUT('no TIME WINDOWS section in README.pod');
my ($cap, $rate) = $section =~ /for 10\*\*(\d+) items per window at ([0-9.]+)/
    or BAIL_OUT('the table does not say its capacity and rate');
$cap = 10**$cap;

my @rows = $section =~ /^ +(standard|blocked) +(plain|g=\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+) \([0-9.]+x\) +([0-9.]+) \([0-9.]+x\)$/mg;
is(scalar @rows / 6, 8, 'eight rows: two layouts, plain and g = 2, 4, 8') or diag($section);

my $ABSENT = 200_000;
my @queries = map { "absent-$_" } 1 .. $ABSENT;

# A filter of $layout with $g generations (undef: plain), each of the first
# $g generations holding $per items.
sub built {
    my ($layout, $g, $per) = @_;
    my %o = (layout => $layout);
    @o{qw(window generations)} = (undef, $g) if $g;
    my $f = $C->new(undef, $cap, $rate, \%o);
    for my $gen (1 .. $g // 1) {
        $f->rotate if $gen > 1;
        for (my $i = 0; $i < $per; $i += 10_000) {
            my $end = $i + 10_000 > $per ? $per : $i + 10_000;
            $f->add_many([ map { "g$gen-$_" } $i .. $end - 1 ]);
        }
    }
    return $f;
}

sub near {
    my ($measured, $shown, $what) = @_;
    my $se = sqrt(($shown || 1 / $ABSENT) * (1 - $shown) / $ABSENT);
    cmp_ok(abs($measured - $shown), '<=', 4 * $se + 1e-5, "$what: $measured, the table says $shown");
}

while (my ($layout, $kind, $mib, $per_item, $steady, $bursts) = splice @rows, 0, 6) {
    my ($g) = $kind =~ /g=(\d+)/;
    my $f = built($layout, $g, $g ? int($cap / ($g - 1)) : $cap);
    my $bytes = $f->stats->{mmap_size};
    is(sprintf('%.2f', $bytes / 2**20), $mib, "$layout $kind: $mib MiB mapped");
    is(sprintf('%.2f', $bytes / $cap), $per_item, "$layout $kind: $per_item bytes per item");
    near(scalar($f->contains_many(\@queries)) / $ABSENT, $steady, "$layout $kind steady");
    undef $f;
    if ($g) {
        my $b = built($layout, $g, $cap);
        near(scalar($b->contains_many(\@queries)) / $ABSENT, $bursts, "$layout $kind bursts");
    }
    else {
        is($bursts, $steady, "$layout plain: one load");
    }
}

done_testing;
