use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(_exit WNOHANG);
use Time::HiRes qw(time sleep);

# Every wait on another process has a bound (doc/DESIGN.md, C4, S3): a
# writer of another uid (5002, in the file's group; the file is 0660)
# forges lock words and slot words of a victim's filter (uid 5001), and
# the victim's add, clear and merge each return or croak, never wait for
# ever:
#
# - a slot word naming TID 0x3ffffff0 (no thread of any PID namespace has
#   a TID past the kernel's PID_MAX_LIMIT, 2^22), that slot's token in
#   every stripe, the exclusive word and the journal word, or that TID in
#   all 1,024 slot words: recognised, taken over as a dead owner's words,
#   and every call succeeds;
# - the victim's own token copied into every stripe, the exclusive word,
#   the journal word and another slot's mark: a thread never waits for a
#   word it holds, so those are forged, and every call succeeds;
# - a slot word naming a thread that exists (this test's own process) and
#   its token in those words, or that TID (or a reaped process's) in all
#   1,024 slot words: a live holder cannot be told from a forged one, so
#   each call croaks after the bound, naming the word, the slot and the
#   thread, and leaves no lock of its own held.
#
# The bound is set to 1 s here (BLOOMFILTER_SHARED_WAIT_LIMIT). A victim
# that has not finished its three calls after $GUARD seconds is killed and
# counted as waiting: three bounds and three calls take a few seconds on an
# idle host; the rest of the minute is for a loaded one. Before the bound
# existed every one of these victims waited for ever.

plan skip_all => 'needs root (two uids)' if $> != 0;

BEGIN { $ENV{BLOOMFILTER_SHARED_WAIT_LIMIT} = 1 }
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my ($GID, $VICTIM, $FORGER) = (5000, 5001, 5002);
my $dir = tempdir(CLEANUP => 1);
chmod 0777, $dir or die "chmod: $!";

my $SLOTS_OFF = 4096;
my $SLOTS = 1024;
my ($EPOCH, $EXCL, $JOURNAL) = (132, 136, 152);
my $STRIPES_OFF = 69632;
my $GUARD = 60;
my $NOBODY = 0x3ffffff0;    # past PID_MAX_LIMIT: no thread has it
my $S = 500;                # the slot the forger names

sub become { BFTest::become_user($_[0], $GID) }

my $path;
my $case = 0;

sub words_at {
    my ($off, $n) = @_;
    open(my $fh, '<', $path) or die "open: $!";
    sysseek($fh, $off, 0);
    sysread($fh, my $b, 4 * $n) == 4 * $n or die "short read at $off";
    return unpack 'V*', $b;
}

sub token { my ($idx, $gen) = @_; ($idx + 1) | (($gen & 0xfffff) << 11) }
sub stripes { (words_at(76, 1))[0] }

# Write [offset, value] pairs into the file as the forger's uid.
sub forge {
    my (@pairs) = @_;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        eval { become($FORGER); 1 } or _exit(9);
        open(my $fh, '+<', $path) or _exit(8);
        for my $p (@pairs) {
            sysseek($fh, $p->[0], 0);
            syswrite($fh, pack('V', $p->[1])) == 4 or _exit(7);
        }
        _exit(0);
    }
    waitpid($pid, 0);
    die "the forger could not write as uid $FORGER: $?" if $?;
}

# The words a forger writes to name holder token $tok everywhere: every
# stripe, the exclusive word, the journal word, and slot $mark's mark.
sub lock_words {
    my ($tok, $mark) = @_;
    my @w = ([$EXCL, $tok], [$JOURNAL, $tok], map { [$STRIPES_OFF + 64 * $_, $tok] } 0 .. stripes() - 1);
    push @w, [$SLOTS_OFF + 64 * $mark + 8, $tok] if defined $mark;
    return @w;
}

# The slots whose word is held, and the victim's (not in @forged).
sub victim_slot {
    my (%forged) = map { $_ => 1 } @_;
    my @w = map { (words_at($SLOTS_OFF + 64 * $_, 2)) } 0 .. $SLOTS - 1;
    for my $i (0 .. $SLOTS - 1) {
        next if $forged{$i} || !$w[2 * $i];
        return ($i, token($i, $w[2 * $i + 1]));
    }
    return;
}

# Run a victim on a new file: open it, add once when $claim (so that the
# forger can name its token), wait while $forge_sub forges, then add,
# clear and merge, each timed. While it waits before exiting, $check runs. Returns
# [op, 'ok' or the croak, seconds] per call, or what went wrong (a string).
sub run_case {
    my (%a) = @_;
    $path = "$dir/f" . ++$case . '.bf';
    my %opts = %{ $a{opts} // {} };
    $C->new($path, 10_000, 0.01, { %opts, mode => 0660 });
    chown $VICTIM, $GID, $path or die "chown: $!";
    my $out = "$path.out";
    $a{before}->() if $a{before};
    my $vpid = fork // die "fork: $!";
    if (!$vpid) {
        eval { become($VICTIM); 1 } or _exit(9);
        my @r;
        eval {
            my $f = $C->new($path, 10_000, 0.01, \%opts);
            my $other = $C->new(undef, 10_000, 0.01);
            $other->add("o$_") for 1 .. 10;
            if ($a{claim}) {
                $f->add('claimed');
                open(my $t, '>', "$path.ready") or die;
                close $t;
            }
            # No write before the forger's.
            sleep 0.01 until -e "$path.go";
            my %ops = (
                add    => sub { $f->add("new-$_") for 1 .. 20 },
                clear  => sub { $f->clear },
                merge  => sub { $f->merge($other) },
                rotate => sub { $f->rotate },
            );
            for my $op (map { [$_ => $ops{$_}] } @{ $a{ops} // [qw(add clear merge)] }) {
                my $t0 = time;
                my $ok = eval { $op->[1]->(); 1 };
                my $msg = $ok ? 'ok' : $@;
                $msg =~ s/\n.*//s;
                push @r, join("\t", $op->[0], $msg, sprintf('%.2f', time - $t0));
            }
            open(my $o, '>', "$out.tmp") or die;
            print $o "$_\n" for @r;
            close $o;
            rename "$out.tmp", $out or die;
            # Still alive (its slot held) while the parent looks at the words.
            sleep 0.01 until -e "$path.done";
            1;
        } or _exit(3);
        _exit(0);
    }
    if ($a{claim}) {
        my $t0 = time;
        sleep 0.01 until -e "$path.ready" || time - $t0 > $GUARD;
    }
    $a{forge}->() if $a{forge};
    open(my $go, '>', "$path.go") or die;
    close $go;
    my $t0 = time;
    sleep 0.02 until -e $out || time - $t0 > $GUARD;
    my $res;
    if (-e $out) {
        open(my $in, '<', $out) or die;
        $res = [map { chomp; [split /\t/] } <$in>];
        # A check that dies still lets the victim go (and is reaped) first.
        $res = "the check died: $@" if $a{check} && !eval { $a{check}->(); 1 };
    }
    else {
        kill 'KILL', $vpid;
        $res = "the victim had not returned after $GUARD s";
    }
    open(my $done, '>', "$path.done") or die;
    close $done;
    waitpid($vpid, 0);
    return $res;
}

sub all_ok {
    my ($res, $name) = @_;
    if (!ref $res) {
        fail("$name: $res");
        return;
    }
    is_deeply([map { "$_->[0]: $_->[1]" } @$res], ['add: ok', 'clear: ok', 'merge: ok'], "$name: add, clear and merge succeed");
}

# 1. A slot word naming a TID no thread can have, and that slot's token
# (at its generation) in every lock word.
my $res = run_case(forge => sub {
    my ($gen) = (words_at($SLOTS_OFF + 64 * $S + 4, 1));
    forge([$SLOTS_OFF + 64 * $S, $NOBODY], lock_words(token($S, $gen)));
});
all_ok($res, 'a holder past PID_MAX_LIMIT');

# 2. That TID in all 1,024 slot words: a new process still claims one.
$res = run_case(forge => sub { forge(map { [$SLOTS_OFF + 64 * $_, $NOBODY] } 0 .. $SLOTS - 1) });
all_ok($res, 'every slot word naming a TID past PID_MAX_LIMIT');

# 3. The victim's own token, copied into every lock word and another
# slot's mark after its first add.
$res = run_case(claim => 1, forge => sub {
    my ($v, $tok) = victim_slot() or die "no slot held by the victim";
    forge(lock_words($tok, $v == $S ? $S + 1 : $S));
});
all_ok($res, "the victim's own token");

# 4. A slot word naming a thread that exists (this process) and its token
# in every lock word: each call croaks after the bound, naming the word,
# the slot and the thread; the victim holds nothing after.
# The forged slot is not the victim's own (its claim may have taken
# slot $S: the claims start at the PID's place in the table).
my @left;
my ($forged_tok, $F);
$res = run_case(claim => 1, forge => sub {
    my ($v) = victim_slot() or die "no slot held by the victim";
    $F = $v == $S ? $S + 1 : $S;
    my ($gen) = (words_at($SLOTS_OFF + 64 * $F + 4, 1));
    $forged_tok = token($F, $gen);
    forge([$SLOTS_OFF + 64 * $F, $$], lock_words($forged_tok));
}, check => sub {
    my ($v, $tok) = victim_slot($F) or die "no slot held by the victim";
    my @words = (words_at($EXCL, 1), words_at($JOURNAL, 1), words_at($STRIPES_OFF, 16 * stripes()),
        map { (words_at($SLOTS_OFF + 64 * $_ + 8, 1)) } 0 .. $SLOTS - 1);
    push @left, grep { ($_ & 0x7fffffff) == $tok } @words;
    push @left, 'an odd epoch' if (words_at($EPOCH, 1))[0] & 1;
    push @left, sprintf('excl %#x, not the forged word', (words_at($EXCL, 1))[0])
        if ((words_at($EXCL, 1))[0] & 0x7fffffff) != $forged_tok;
});
SKIP: {
    if (!ref $res) {
        fail("a live holder: every call returns: $res");
        skip $res, 4;
    }
    my %r = map { $_->[0] => $_ } @$res;
    my $held = qr/held by slot $F \(word 0x[0-9a-f]+\) of thread $$, which is alive but does not let go; another process may have forged it, or its holder is stopped/;
    like($r{add}[1], qr/^Data::BloomFilter::Shared->add: waited 1 s for stripe \d+, $held/, 'a live holder: add croaks after the bound, naming the stripe, the slot and the thread');
    like($r{clear}[1], qr/^Data::BloomFilter::Shared->clear: waited 1 s for the exclusive word, $held/, '... clear, naming the exclusive word');
    like($r{merge}[1], qr/^Data::BloomFilter::Shared->merge: waited 1 s for the journal word, $held/, '... merge, naming the journal word');
    is_deeply(\@left, [], '... and the victim holds no lock after its croaks, the forged words left as they were');
    diag(join ', ', map { "$_->[0] $_->[2] s" } @$res);
}

# 5. Every slot word naming a reaped process: the first add croaks after
# the bound, naming the shared last slot and its thread, which does not
# answer (a process of another PID namespace might: it is waited for).
my $gone = fork // die "fork: $!";
_exit(0) if !$gone;
waitpid($gone, 0);
$res = run_case(forge => sub { forge(map { [$SLOTS_OFF + 64 * $_, $gone] } 0 .. $SLOTS - 1) });
SKIP: {
    if (!ref $res) {
        fail("every slot held: the first add returns: $res");
        skip $res, 1;
    }
    like($res->[0][1], qr/^Data::BloomFilter::Shared->add: waited 1 s for a slot: every one is held, the last, shared one by slot 1023 \(word 0x[0-9a-f]+\) of thread $gone, which does not answer; another process may have forged it/,
        'every slot word naming a reaped process: add croaks after the bound, naming the last slot and its thread');
}

# 6. A windowed filter's cleaner word naming a live holder's token: a
# rotate steps (its spare was clean) but cannot clear the next spare, and
# the next rotate, which needs it cleared, croaks after the bound, naming
# the cleaner word.
$res = run_case(opts => { window => 60, generations => 4 }, ops => [qw(rotate rotate)], forge => sub {
    my ($gen) = (words_at($SLOTS_OFF + 64 * $S + 4, 1));
    forge([$SLOTS_OFF + 64 * $S, $$], [264, token($S, $gen)]);
});
SKIP: {
    if (!ref $res) {
        fail("a live holder of the cleaner word: rotate returns: $res");
        skip $res, 2;
    }
    is($res->[0][1], 'ok', 'a live holder of the cleaner word: a rotate with a clean spare steps');
    like($res->[1][1], qr/^Data::BloomFilter::Shared->rotate: waited 1 s for the cleaner word, held by slot $S \(word 0x[0-9a-f]+\) of thread $$, which is alive but does not let go/,
        '... and the next, which needs the spare cleared, croaks after the bound, naming the cleaner word');
}

done_testing;
