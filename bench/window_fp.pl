#!/usr/bin/perl
# Memory and false positives of windowed filters against a plain filter of
# the same capacity and rate: the figures of README's table.
#
#   perl -Mblib bench/window_fp.pl [--capacity N] [--rate P] [--absent N]
#
# Two loads. "Steady": a stream at exactly `capacity` distinct items per
# window: each period (window / (g - 1)) brings capacity / (g - 1) new
# items, and the filter has stepped through g periods, so every visible
# generation holds a period's items, the current one included (the moment
# just before a step). "Bursts": every visible generation holds `capacity`
# items (each period had a whole window's worth): the worst a filter used
# within its capacity per window meets. The plain filter holds `capacity`
# items. The false-positive rate is measured over `absent` items never
# added. Steps are taken with `rotate`: the figures do not depend on the
# clock.
use 5.022;
use strict;
use warnings;

use Getopt::Long;
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my ($cap, $rate, $absent) = (1_000_000, 0.01, 1_000_000);
GetOptions('capacity=i' => \$cap, 'rate=f' => \$rate, 'absent=i' => \$absent)
    or die "usage: perl -Mblib bench/window_fp.pl [--capacity N] [--rate P] [--absent N]\n";

my @queries = map { "absent-$_" } 1 .. $absent;
sub fp_of { my ($f) = @_; scalar($f->contains_many(\@queries)) / $absent }

printf "# capacity %d per window, rate %g, %d absent items queried\n", $cap, $rate, $absent;
printf "%-9s %-6s %11s %11s %14s %14s\n", 'layout', 'kind', 'MiB mapped', 'bytes/item', 'FP steady', 'FP bursts';
for my $layout (qw(standard blocked)) {
    for my $g (undef, 2, 4, 8) {
        my @fp;
        my $bytes;
        for my $per ($g ? (int($cap / ($g - 1)), $cap) : ($cap)) {
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
            push @fp, fp_of($f);
            $bytes = $f->stats->{mmap_size};
        }
        push @fp, $fp[0] unless $g;    # a plain filter has one load
        printf "%-9s %-6s %11.2f %11.2f %14s %14s\n", $layout, $g ? "g=$g" : 'plain', $bytes / 2**20,
            $bytes / $cap, map { sprintf '%.5f (%.2fx)', $_, $_ / $rate } @fp;
    }
}
