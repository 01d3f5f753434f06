use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(_exit);
use Time::HiRes qw(sleep);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest ();
use Data::BloomFilter::Shared;

# A bounded, seeded fuzz of another uid's word writes (doc/DESIGN.md,
# C11, §5): a writer of uid 5002, in the file's group (the file is 0660),
# rewrites random 4-byte words of the shared control area, the slots and
# the stripes with hostile values, while a victim of uid 5001 merges,
# clears, grows and steps the filter. Every call of the victim answers or
# croaks; none ends its process by a signal, and none waits past its
# bound: the victim arms alarm() around each call, so a call that waits
# longer dies of SIGALRM, which the parent reports as such.
#
# Rounds and seed: BFTEST_FUZZ_ROUNDS (default 32), BFTEST_FUZZ_SEED.
# Each round's kind, offsets and values come from the seed alone; what
# the victim meets also depends on scheduling, so a failure prints the
# round and its seed to replay it.

plan skip_all => 'needs root (two uids)' if $> != 0;

my $C = 'Data::BloomFilter::Shared';
my ($GID, $VICTIM, $FORGER) = (5000, 5001, 5002);
my $SEED = $ENV{BFTEST_FUZZ_SEED} // 20261206;
my $ROUNDS = $ENV{BFTEST_FUZZ_ROUNDS} // 32;
my $VICTIM_ROUNDS = $ENV{BFTEST_FUZZ_CALLS} // 60;    # rounds of calls per victim
my $dir = tempdir(CLEANUP => 1);
chmod 0777, $dir or die "chmod: $!";

# The longest a call may take here: a wait on a forged word is bounded by
# BLOOMFILTER_SHARED_WAIT_LIMIT (seconds; set low for this test) for one
# holder, and a run of waits (those of one call, and of calls right after
# it: the 20 single adds of one step below) by six times that. 20 times
# the bound, plus 30 s for a machine 10x slower than an idle one (the
# victim's own work, a few ms idle): only a wait without bound exceeds it.
my $BOUND = 1;
$ENV{BLOOMFILTER_SHARED_WAIT_LIMIT} = $BOUND;
my $CALL_LIMIT = 20 * $BOUND + 30;

my @KINDS = (
    [plain    => {}],
    [blocked  => { layout => 'blocked' }],
    [grown    => { grow => 2, max_capacity => 64_000 }],
    [windowed => { window => undef, generations => 3 }],
);
my $CAPACITY = 2_000;

sub become { BFTest::become_user($_[0], $GID) }

# Hostile values: free, all ones, a TID no thread has, small TIDs that may
# be anyone's, "owner died" marks, what a generation counter looks like,
# and random words.
sub hostile_value {
    my @fixed = (0, 0xffffffff, 0x3ffffff0, 0x7ff, 1, 2, 0x40000000, 0x40000001,
                 0x80000000, 0xc0000000 | 0x3ffffff0, $$, $$ + 1);
    return rand() < 0.6 ? $fixed[ int rand @fixed ] : int rand 2**32;
}

# The forger: rewrite words at offsets of the seeded list, round robin,
# until $stop exists. The offsets are lock and step words, the ones a
# call waits on or follows (doc/DESIGN.md §6): the control line's epoch,
# exclusive, pending and journal words (132..156), a windowed filter's
# view and cleaner (256..268), a slot's owner, generation and mark (the
# first 12 bytes of each 64-byte slot from 4096) and a stripe's word (the
# first 4 bytes of each 64-byte line from 69632). Other bytes of the slot
# table make the next opener croak that the table is corrupt, which
# t/31-hostile.t covers; here the calls must get past the opening.
sub forger {
    my ($path, $seed, $stop, $kind) = @_;
    eval { become($FORGER); 1 } or _exit(9);
    srand($seed);
    # A grown filter's stage count (156) forged makes every opener croak
    # (t/29-open-cost.t); here its victims must get to grow.
    my $control_words = $kind eq 'grown' ? 6 : 7;
    my @offs = (
        (map { 132 + 4 * int(rand($control_words)) } 1 .. 12),
        (map { 256 + 4 * int(rand(4)) } 1 .. 4),
        (map { 4096 + 64 * int(rand(rand() < 0.5 ? 8 : 1023)) + 4 * int(rand(3)) } 1 .. 40),
        (map { 69632 + 64 * int(rand(64)) } 1 .. 24),
    );
    open(my $fh, '+<', $path) or _exit(9);
    my $i = 0;
    my $go = "$stop.go";
    until (-e $stop) {
        sysseek($fh, $offs[ $i++ % @offs ], 0);
        syswrite($fh, pack('V', hostile_value()));
        if ($i == @offs) {
            # Every word of the list written once: the victim may start.
            open(my $g, '>', $go) or _exit(9);
            close $g;
        }
        sleep 0.0002 if $i % 8 == 0;
    }
    _exit(0);
}

# The victim: rounds of open, add, merge, query, clear and (by kind) grow
# or rotate, each call under alarm. Exit 0 when every call answered or
# croaked; the number of croaks goes to "$out".
sub victim {
    my ($path, $opts, $kind, $out, $go) = @_;
    eval { become($VICTIM); 1 } or _exit(9);
    # The forger has written each of its words once before the first call
    # (a pipe would do too; a file keeps the two uids apart).
    if ($go) {
        sleep 0.001 until -e $go;
    }
    $SIG{ALRM} = 'DEFAULT';    # a call past its limit dies of SIGALRM
    my $croaks = 0;
    my $first_croak;
    my $call = sub {
        my ($code) = @_;
        alarm $CALL_LIMIT;
        my $ok = eval { $code->(); 1 };
        alarm 0;
        if (!$ok) { $croaks++; $first_croak //= $@ }
        return $ok;
    };
    for my $round (1 .. $VICTIM_ROUNDS) {
        my $f;
        $call->(sub { $f = $C->new($path, $CAPACITY, 0.01, $opts) }) or next;
        my $other = eval { $C->new(undef, $CAPACITY, 0.01, $opts) };
        $call->(sub { $f->add("r$round-$_") for 1 .. 20 });
        $call->(sub { $f->add_many([map {"m$round-$_"} 1 .. ($kind eq 'grown' ? 3000 : 200)]) });
        $call->(sub { $f->contains("r$round-1"); $f->contains_many([map {"m$round-$_"} 1 .. 50]) });
        if ($other && $kind ne 'windowed') {
            $other->add("o$round-$_") for 1 .. 20;
            $call->(sub { $f->merge($other) });
        }
        $call->(sub { $f->rotate }) if $kind eq 'windowed';
        $call->(sub { $f->stats });
        $call->(sub { $f->clear }) if $round % 2 == 0;
        $call->(sub { undef $f });
    }
    if (open(my $fh, '>', $out)) {
        print {$fh} $croaks, "\n", $first_croak // "";
        close $fh;
    }
    _exit(0);
}

sub one_round {
    my ($round, $forged) = @_;
    my $seed = $SEED + $round;
    srand($seed);
    my ($kind, $opts) = @{ $KINDS[ $round % @KINDS ] };
    my $path = "$dir/r$round-" . ($forged ? 'f' : 'c') . '.bf';
    $C->new($path, $CAPACITY, 0.01, { %$opts, mode => 0660 });
    chown $VICTIM, $GID, $path or die "chown: $!";
    my $stop = "$path.stop";
    my $forger;
    if ($forged) {
        $forger = fork // die "fork: $!";
        forger($path, $seed, $stop, $kind) if !$forger;
    }
    my $out = "$path.croaks";
    my $victim = fork // die "fork: $!";
    victim($path, $opts, $kind, $out, $forged ? "$stop.go" : undef) if !$victim;
    waitpid($victim, 0);
    my $status = $?;
    if ($forger) {
        open(my $s, '>', $stop) or die "stop: $!";
        close $s;
        waitpid($forger, 0);
    }
    my ($croaks, $first) = -e $out ? do { open(my $fh, "<", $out); local $/; split /\n/, <$fh>, 2 } : ("?", "");
    my $what = ($forged ? 'forged' : 'control') . " round $round ($kind, seed $seed)";
    diag("$what: first croak: $first") if $first;
    if ($status & 127) {
        my $sig = $status & 127;
        fail("$what: the victim ended by signal $sig"
            . ($sig == 14 ? " (SIGALRM: a call waited over $CALL_LIMIT s)" : ''));
    } else {
        is($status >> 8, 0, "$what: the victim ended normally ($croaks calls croaked)");
    }
    return $croaks;
}

# Control runs: no forger, no croak.
for my $round (0 .. $#KINDS) {
    my $croaks = one_round($round, 0);
    is($croaks, 0, "control round $round: nothing croaks without a forger");
}
one_round($_, 1) for 0 .. $ROUNDS - 1;

done_testing;
