# The table of bench/RESULTS.md, "Windowed filters: memory, false positives
# and cost per call", states what windowed filters map and their false
# positive rates at capacity: bench/window_fp.pl, which made it, runs again
# here (over fewer absent items). Sizes must match exactly; rates within 4
# standard errors of the table's.
use strict;
use warnings;
use Test::More;
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib);

my $results = "$FindBin::Bin/../bench/RESULTS.md";
open(my $fh, '<', $results) or die "$results: $!";
my $md = do { local $/; <$fh> };
my ($section) = $md =~ /^## Windowed filters: memory, false positives and cost per call\n(.*?)^## /ms
    or BAIL_OUT('no "Windowed filters: memory, false positives and cost per call" section in bench/RESULTS.md');
my ($exp, $rate) = $section =~ /for 10\*\*(\d+) items per window at ([0-9.]+)/
    or BAIL_OUT('the table does not say its capacity and rate');

my $row = qr/^ *(standard|blocked) +(plain|g=\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+) \([0-9.]+x\) +([0-9.]+) \([0-9.]+x\) *$/m;
my %table = map { ("$_->[0] $_->[1]" => $_) } rows($section);
is(scalar keys %table, 8, 'eight rows: two layouts, plain and g = 2, 4, 8') or diag($section);

my $ABSENT = 200_000;
my $script = "$FindBin::Bin/../bench/window_fp.pl";
local $ENV{PERL5LIB} = perl5lib();
my $out = `$^X $script --capacity ${\ 10**$exp} --rate $rate --absent $ABSENT 2>&1`;
is($?, 0, 'bench/window_fp.pl runs') or diag($out);
my %now = map { ("$_->[0] $_->[1]" => $_) } rows($out);
is(scalar keys %now, 8, 'and prints eight rows') or diag($out);

sub rows {
    my ($text) = @_;
    my @r;
    while ($text =~ /$row/g) { push @r, [$1, $2, $3, $4, $5, $6] }
    return @r;
}

sub near {
    my ($measured, $shown, $what) = @_;
    my $se = sqrt(($shown || 1 / $ABSENT) * (1 - $shown) / $ABSENT);
    cmp_ok(abs($measured - $shown), '<=', 4 * $se + 1e-5, "$what: $measured, the table says $shown");
}

for my $name (sort keys %table) {
    my ($t, $n) = ($table{$name}, $now{$name}) or next;
    $n or fail("$name: not printed"), next;
    is($n->[2], $t->[2], "$name: $t->[2] MiB mapped");
    is($n->[3], $t->[3], "$name: $t->[3] bytes per item");
    near($n->[4], $t->[4], "$name, steady");
    near($n->[5], $t->[5], "$name, bursts");
}

done_testing;
