use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(reap);
use Data::BloomFilter::Shared;

# A process SIGKILLed in the middle of a clear or an invert of a large filter:
# the next process that writes finishes the operation, doing only what was
# left, so the filter is as after it (or as before, if the kill came before
# the operation began), never a mix.

my $C = 'Data::BloomFilter::Shared';
my $CAP = 20_000_000;    # 2^28 bits: 32 MiB of bits
my $f = $C->new(undef, $CAP, 0.01);
my $m = $f->bits;
$f->add_many([map { "item $_" } 1 .. 200_000]);
my $empty = $C->new(undef, $CAP, 0.01);

# How long an uninterrupted invert of this filter takes (twice: back as it was).
my $t0 = time;
$f->invert;
my $full = time - $t0;
$f->invert;
diag(sprintf 'filter of %d MiB: one invert takes %.1f ms', $m / 8 / 2**20, $full * 1e3);

for my $op (qw(invert clear)) {
    for my $round (1 .. 6) {
        my $before = $f->bits_set;
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            syswrite $w, 'x';
            $f->$op while 1;    # keep it going until killed
            POSIX::_exit(0);
        }
        close $w;
        sysread $r, my $go, 1;
        # Somewhere inside an operation: each takes $full or so.
        sleep($full * (1.2 + 0.6 * rand() + $round % 3));
        kill 'KILL', $pid;
        reap($pid, 10);
        # A write that changes no bit: merging an empty filter waits for
        # the exclusive lock, so it finishes what the dead process left.
        my $t = time;
        $f->merge($empty);
        my $stall = time - $t;
        my $after = $f->bits_set;
        if ($op eq 'invert') {
            ok($after == $before || $after == $m - $before,
                "$op killed (round $round): $after bits set, from $before: as before or as after some number of inverts");
        }
        else {
            ok($after == 0 || $after == $before,
                "$op killed (round $round): $after bits set, from $before: empty, or untouched");
        }
        # The stall bound: noticing the death (20 ms a check) plus at most
        # one whole operation's work.
        cmp_ok($stall, '<', 1 + 2 * $full, sprintf "$op killed: the next write waited %.1f ms", $stall * 1e3);
        # Refill for the next round.
        $f->add_many([map { "item $_" } 1 .. 200_000]) if $op eq 'clear';
    }
}

done_testing;
