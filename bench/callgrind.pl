#!/usr/bin/perl
# Instructions per Perl `add` and per `contains` of each layout (standard,
# blocked, datasketches), counted by
# callgrind: a count of instructions, not a time, so it is the same on a
# loaded machine and tells a change in the code from noise.
#
#   perl Makefile.PL && make
#   perl -Mblib bench/callgrind.pl [--n 20000]
#
# For each layout three runs of this script under valgrind, on a new
# anonymous filter of capacity 1e6 at 0.01 with a fixed seed, the same N
# 16-byte keys built first in each: "base" (no call), "add" (N adds of new
# items) and "contains" (the same N adds, then N contains of those items:
# all present). Per add = (add - base) / N; per contains = (contains - add) /
# N: the startup, the keys and the filter's creation cancel out. The
# counts include the Perl loop around each call (`$f->add($_) for @keys`).
#
# Inner use (one run, what valgrind executes):
#   perl -Mblib bench/callgrind.pl --run LAYOUT PHASE N
use 5.022;
use strict;
use warnings;

use Getopt::Long;
use File::Temp qw(tempdir);

my $N = 20_000;
my @run;
GetOptions('n=i' => \$N, 'run=s{3}' => \@run) or die "usage: $0 [--n N]\n";

if (@run) {
    my ($layout, $phase, $n) = @run;
    require Data::BloomFilter::Shared;
    my @keys = map { sprintf 'key-%012d', $_ * 7919 } 1 .. $n;
    my $f = Data::BloomFilter::Shared->new(undef, 1_000_000, 0.01,
        { seed => 42, layout => $layout });
    if ($phase ne 'base') {
        $f->add($_) for @keys;
    }
    if ($phase eq 'contains') {
        my $hits = 0;
        $f->contains($_) && $hits++ for @keys;
        die "a false negative\n" if $hits != $n;
    }
    exit 0;
}

system('valgrind --version >/dev/null 2>&1') == 0 or die "valgrind is not on PATH\n";
my $dir = tempdir(CLEANUP => 1);
# Perl's hash seed fixed, so that the three runs do the same work.
local $ENV{PERL_HASH_SEED} = 0;
local $ENV{PERL_PERTURB_KEYS} = 0;

sub instructions {
    my ($layout, $phase) = @_;
    my $out = "$dir/$layout.$phase.out";
    my @inc = map { "-I$_" } @INC;
    my $cmd = join ' ', 'valgrind --tool=callgrind', "--callgrind-out-file=$out",
        $^X, @inc, $0, '--run', $layout, $phase, $N, '2>&1';
    my $log = `$cmd`;
    die "valgrind failed: $log" if $?;
    my ($ir) = $log =~ /Collected\s*:\s*(\d+)/ or die "no count in: $log";
    return $ir;
}

printf "%-12s %14s %14s\n", 'layout', 'Ir per add', 'Ir per contains';
for my $layout (qw(standard blocked datasketches)) {
    my %ir = map { $_ => instructions($layout, $_) } qw(base add contains);
    printf "%-12s %14.1f %14.1f\n", $layout,
        ($ir{add} - $ir{base}) / $N, ($ir{contains} - $ir{add}) / $N;
}
