use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(_exit WNOHANG);
use Time::HiRes qw(time sleep);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest ();
use Data::BloomFilter::Shared;

# A writer of another uid attacks a victim through the words it shares
# with it (doc/DESIGN.md, C8 b): the victim (uid 5001) claims its slot,
# adds, gives the slot back and claims it again, round after round, while
# the attacker (uid 5002, in the file's group; the file is 0660) rewrites
# one 4-byte word of the victim's slot, of the control line, of a stripe
# or of a windowed filter's step words, or every word of the scratch area,
# of the fill words and of the stripe table at once, over and over with
# hostile values (among them the victim's keeper TID, the word marked
# "owner died", all ones, what looks like an address). The victim
# ends normally or with a croak, or waits (a forged lock word may name a
# live owner); it is never killed by a signal of its own. (A file of
# format 2 gave SIGSEGV or SIGABRT for rewritten words after the owner's
# TID: glibc followed them when the victim gave its slot back.)

plan skip_all => 'needs root (two uids)' if $> != 0;

my $C = 'Data::BloomFilter::Shared';
my ($GID, $VICTIM, $ATTACKER) = (5000, 5001, 5002);
my $dir = tempdir(CLEANUP => 1);
chmod 0777, $dir or die "chmod: $!";
my $WINDOW = { window => 60, generations => 4 };
my $path;        # the file under attack, and its options
my $opts = {};
for my $file (["$dir/shared.bf", {}], ["$dir/windowed.bf", $WINDOW]) {
    $C->new($file->[0], 10_000, 0.01, { %{ $file->[1] }, mode => 0660 });
    chown $VICTIM, $GID, $file->[0] or die "chown: $!";
}

my $SLOTS_OFF = 4096;
my $OVERFLOW = 1023;
my $WAIT = 8;    # seconds a victim may run before it is called waiting
our $span = 1;   # words each attacker rewrites (run_case)

sub become { BFTest::become_user($_[0], $GID) }

# The victim: rounds of open, add, query, give back. Exit 0 when every
# round ran, 3 when a call croaked (the message in "$go.croak", which the
# parent checks).
sub victim {
    my ($go) = @_;
    eval { become($VICTIM); 1 } or _exit(9);
    # The attacker is at work before the first round (its first write
    # made, whatever slot this victim then takes).
    my $t0 = time;
    sleep 0.001 until -e $go || time - $t0 > 5;
    for my $round (1 .. 30) {
        my $ok = eval {
            my $f = $C->new($path, 10_000, 0.01, $opts);
            $f->add("v$round-$_") for 1 .. 40;
            $f->contains("v$round-1");
            $f->add_many([map { "m$round-$_" } 1 .. 20]);
            undef $f;    # gives the slot back
            1;
        };
        if (!$ok) {
            if (open(my $out, '>', "$go.croak")) {
                print $out $@;
                close $out;
            }
            _exit(3);
        }
    }
    _exit(0);
}

# The attacker: rewrite the $span 4-byte words from $off with each value
# of @$values in turn (every word the same value), until $stop exists.
sub attacker {
    my ($off, $span, $values, $stop) = @_;
    eval { become($ATTACKER); 1 } or _exit(9);
    open(my $fh, '+<', $path) or _exit(9);
    my $i = 0;
    my $first = 1;
    until (-e $stop) {
        my $v = $values->[$i++ % @$values];
        $v = $v->() if ref $v;
        sysseek($fh, $off, 0);
        syswrite($fh, pack('V*', ($v) x $span));
        if ($first) {
            open(my $go, '>', "$stop.go") or _exit(9);
            $first = 0;
        }
        sleep 0.0005;
    }
    _exit(0);
}

sub bytes_at {
    my ($off, $len) = @_;
    open(my $fh, '<', $path) or die "open: $!";
    sysseek($fh, $off, 0);
    sysread($fh, my $b, $len) == $len or die "short read at $off";
    return $b;
}

sub word_at { unpack 'V', bytes_at($_[0], 4) }

# Every word of the scratch area (2048..2560), of the fill words
# (1024..1280) and of the whole stripe table (from 69632, as many 64-byte
# stripes as the header's word at 76 says) at once.
sub run_areas {
    my (@values) = @_;
    my $stripes = word_at(76);
    die "implausible stripe count $stripes" if $stripes < 64 || $stripes > 4096;
    my @areas = ([2048, 128], [1024, 64], [69632, 16 * $stripes]);
    for my $area (@areas) {
        local $span = $area->[1];
        run_case($area->[0], 0, @values);
    }
}

my (%outcome, @signalled, @croaks, @unclear);
my $attacks_failed = 0;
my $case = 0;

# Fork the victim, then the attacker aimed at $word (a 4-byte index) of
# the victim's slot (its first choice is its pid modulo 1023,
# Shared::claim_slot's hint) or of the control line; from there $span
# words (1 unless set).
sub run_case {
    my ($target, $word, @values) = @_;
    my $stop = "$dir/stop." . ++$case;
    my $vpid = fork // die "fork: $!";
    victim("$stop.go") if !$vpid;
    my $off = $target eq 'slot' ? $SLOTS_OFF + 64 * ($vpid % $OVERFLOW) + 4 * $word : $target + 4 * $word;
    # (A slot's own word goes back to free: the victim may hold it now.)
    my $before = $target eq 'slot' && $word == 0 ? pack('V', 0) : bytes_at($off, 4 * $span);
    my $apid = fork // die "fork: $!";
    attacker($off, $span, [@values, sub { word_at($off) | 0x40000000 }], $stop) if !$apid;
    my $t0 = time;
    my $st;
    while (1) {
        if (waitpid($vpid, WNOHANG) == $vpid) {
            $st = $?;
            last;
        }
        if (time - $t0 > $WAIT) {
            kill 'KILL', $vpid;
            waitpid($vpid, 0);
            $st = 'waited';
            last;
        }
        sleep 0.01;
    }
    open(my $t, '>', $stop) or die "stop: $!";
    close $t;
    waitpid($apid, 0);
    $attacks_failed++ if $?;
    my $what = $st eq 'waited' ? 'waited' : ($st & 127) ? 'signal ' . ($st & 127) : 'exit ' . ($st >> 8);
    $outcome{$what}++;
    push @signalled, "$path, $target word $word (x $span): $what" unless $what =~ /^(waited|exit [03])$/;
    if ($what eq 'exit 3') {
        my $msg = '(no message)';
        if (open(my $in, '<', "$stop.go.croak")) {
            local $/;
            $msg = <$in>;
        }
        push @croaks, $msg;
        # A croak names the method that refused and why (a constructor
        # the file too).
        push @unclear, "$target word $word: $msg"
            unless $msg =~ /^Data::BloomFilter::Shared->(?:new: \Q$path\E|\w+): \w/;
    }
    # The words back as they were for the next case.
    open(my $fh, '+<', $path) or die "open: $!";
    sysseek($fh, $off, 0);
    syswrite($fh, $before);
}

my @hostile = (0, 0xFFFFFFFF, 0x40000000, 0x80000000, 0x7FFFFFFF, 0x3FFFFFFF, 1, 0x55550000, 0x7F00);
# Each word of the victim's slot, of the control line (128..192) and of
# the first two add stripes (69632, 69696)...
($path, $opts) = ("$dir/shared.bf", {});
for my $word (0 .. 15) {
    run_case($_, $word, @hostile) for 'slot', 128;
}
run_case(69632 + 64 * $_, 0, @hostile) for 0, 1;
# ... and every word of its scratch, fill words and stripes at once ...
run_areas(@hostile);
# ... and, in a windowed filter, of its step protocol's words: the view,
# the cleaner, the cursor and its generation (256..288), each generation's
# last step (320..360) and clean mark (512..552).
($path, $opts) = ("$dir/windowed.bf", $WINDOW);
run_case(256, $_, @hostile) for 0 .. 7;
run_case(320, $_, @hostile) for 0 .. 9;
run_case(512, $_, @hostile) for 0 .. 9;
run_case('slot', $_, @hostile) for 0, 1;
run_areas(@hostile);

is_deeply(\@signalled, [], 'no victim was killed by a signal of its own, whatever word was rewritten');
is_deeply(\@unclear, [], 'every victim that croaked was told which method refused and why');
note("croaked: $_") for @croaks;
is($attacks_failed, 0, 'every attacker ran as its own uid and wrote through the group');
cmp_ok($outcome{'exit 0'} // 0, '>', 0, 'some victims ended normally');
diag(join ', ', map { "$_: $outcome{$_}" } sort keys %outcome);

done_testing;
