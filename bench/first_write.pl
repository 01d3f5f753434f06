#!/usr/bin/perl
# The cost of a process's first write (its slot claim), as a ratio against
# its first query, measured in the same run.
#
#   perl -Mblib bench/first_write.pl [--n 200] [--rounds 5]
#
# A filter (capacity 1e6 at 0.01, a file in a temporary directory) is made
# and touched by the parent. Then, N times in turn, the parent forks a child
# that does one call and exits, and waits for it: "contains" children query
# one item, "add" children add a new one (the first write of the process:
# it claims a slot, and gives it back when it exits). Each child times its
# own call with the monotonic clock and reports it through a pipe. The two
# kinds alternate, child by child, so load on the machine falls on both.
# Printed per round: the median call of each kind, and add / contains; then
# the median of the rounds' ratios. (The per-call numbers are times on this
# machine; the ratio is the figure to compare between builds.)
use 5.022;
use strict;
use warnings;

use Getopt::Long;
use File::Temp qw(tempdir);
use POSIX ();
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use Data::BloomFilter::Shared;

my ($N, $ROUNDS) = (200, 5);
GetOptions('n=i' => \$N, 'rounds=i' => \$ROUNDS) or die "usage: $0 [--n N] [--rounds R]\n";

my $dir = tempdir(CLEANUP => 1);
my $f = Data::BloomFilter::Shared->new("$dir/f", 1_000_000, 0.01, { seed => 42 });
$f->add('touch');

sub median { my @s = sort { $a <=> $b } @_; $s[$#s / 2] }

# One child doing one call of `$kind`; its time in ns.
sub one {
    my ($kind, $i) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        my $t0 = clock_gettime(CLOCK_MONOTONIC);
        if ($kind eq 'add') { $f->add("item-$$-$i") } else { $f->contains("item-$i") }
        my $ns = int((clock_gettime(CLOCK_MONOTONIC) - $t0) * 1e9);
        syswrite $w, "$ns\n";
        POSIX::_exit(0);
    }
    close $w;
    my $ns = <$r>;
    waitpid $pid, 0;
    die "child failed\n" unless $? == 0 && defined $ns;
    chomp $ns;
    return $ns;
}

my @ratios;
for my $round (1 .. $ROUNDS) {
    my (@add, @contains);
    for my $i (1 .. $N) {
        push @contains, one('contains', $i);
        push @add, one('add', $i);
    }
    my ($a, $c) = (median(@add), median(@contains));
    push @ratios, $a / $c;
    printf "round %d: first add %8d ns, first contains %8d ns, add/contains %.1f\n", $round, $a, $c, $a / $c;
}
printf "median add/contains over %d rounds: %.1f\n", $ROUNDS, median(@ratios);
