# Data::BloomFilter::Shared::Redis: a single add or contains is one call to
# C (Link.pm's roundtrip, redis_xs.h), against a fake server on a real
# socket that answers the way a slow, stalled or hostile one would: a reply
# that comes a byte at a time is taken whole; one cut by the read timeout
# croaks naming the server and the timeout, and the next call connects
# again; a signal's handler runs while the call waits (one that returns
# does not end the wait, one that dies ends the call); replies past the
# bounds or of the wrong shape croak as unreadable.
use strict;
use warnings;
use Test::More;
use FindBin ();
use lib "$FindBin::Bin/lib";
use RedisServer qw(redis_or_skip);
use File::Temp ();
use IO::Socket::INET ();
use POSIX ();
use Socket ();
use Time::HiRes qw(sleep time);
use Data::BloomFilter::Shared;

redis_or_skip();
require Data::BloomFilter::Shared::Redis;
my $R = 'Data::BloomFilter::Shared::Redis';
$SIG{ALRM} = sub { die "84-redis-roundtrip: global timeout\n" };
alarm 300;

# A fake server on a loopback port, forked: it answers new's two scripts as
# a server without the filter would (nil, then "created"), PING with PONG,
# and a BITFIELD (an add: SET u1 OFFSET 1 per probe) or BITFIELD_RO (a
# standard query: GET u1 OFFSET per probe) with one integer per field, all
# 0 for an add (the item new) and 1 for a query (the item there), in the
# way its connection's mode says (the Nth connection takes $modes[N - 1],
# the last mode beyond): 'plain' at once; 'split' a byte at a time,
# 20 ms apart; 'stall' half of it, then nothing; 'gated=PATH' once the
# file PATH exists (the test opens the gate; at most 60 s); 'huge' an
# array of 2^20 + 1 elements claimed; 'short' one field fewer than asked.
sub fake_server {
    my (@modes) = @_;
    my $l = IO::Socket::INET->new(Listen => 16, LocalAddr => '127.0.0.1', LocalPort => 0, ReuseAddr => 1)
        or die "listen: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        setpgrp 0, 0;
        RedisServer::run_first($$);    # answers within read_timeout 0.5 s when it should
        $SIG{PIPE} = 'IGNORE';
        my $n = 0;
        while (my $c = $l->accept) {
            my ($mode, $gate) = split /=/, $modes[ $n < @modes ? $n : -1 ], 2;
            $n++;
            next if fork;
            setsockopt($c, Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1);
            my $buf = '';
            while (1) {
                my $got = sysread $c, $buf, 65536, length $buf;
                POSIX::_exit(0) if !$got;
                while (my $command = RedisServer::next_command(\$buf)) {
                    my @args = @$command;
                    my $cmd = uc $args[0];
                    my $reply = $cmd eq 'EVAL' ? ($args[1] =~ /HMGET/ ? "\$-1\r\n" : "*1\r\n\$7\r\ncreated\r\n")
                        : $cmd eq 'PING' ? "+PONG\r\n" : undef;
                    if (!defined $reply) {
                        my $add = $cmd eq 'BITFIELD';
                        my $fields = (@args - 2) / ($add ? 4 : 3);
                        $fields-- if $mode eq 'short';
                        $reply = "*$fields\r\n" . ($add ? ":0\r\n" : ":1\r\n") x $fields;
                        $reply = "*1048577\r\n:0\r\n" if $mode eq 'huge';
                        if ($mode eq 'split') {
                            for my $byte (split //, $reply) {
                                syswrite $c, $byte;
                                sleep 0.02;
                            }
                            next;
                        }
                        if ($mode eq 'stall') {
                            syswrite $c, substr $reply, 0, length($reply) / 2;
                            sleep 1 while 1;
                        }
                        if ($mode eq 'gated') {
                            for (1 .. 6000) { last if -e $gate; sleep 0.01 }
                        }
                    }
                    syswrite $c, $reply;
                }
            }
        }
        POSIX::_exit(0);
    }
    my $addr = '127.0.0.1:' . $l->sockport;
    close $l;
    return ($pid, $addr);
}

my @servers;
END { local $?; kill "KILL", -$_ for @servers; waitpid $_, 0 for @servers }

# A filter on a fake server of @modes, reached $via an address or a
# Redis::Fast client (whose socket the filter borrows): [$via, the filter,
# the server's address].
sub filter_via {
    my ($via, $opts, @modes) = @_;
    my ($pid, $addr) = fake_server(@modes);
    push @servers, $pid;
    require Redis::Fast if $via ne 'an address';
    my $from = $via eq 'an address' ? $addr : Redis::Fast->new(server => $addr, reconnect => 1);
    return [$via, $R->new($from, 'rt', 10_000, 0.01, { layout => 'standard', %$opts }), $addr];
}

# The filter both ways.
sub filters {
    my ($opts, @modes) = @_;
    return map { filter_via($_, $opts, @modes) } 'an address', 'a Redis::Fast client';
}

my %T = (cnx_timeout => 2, read_timeout => 0.5, write_timeout => 2);

# --- a reply that comes a byte at a time -----------------------------------------------------------
for (filters({ read_timeout => 10 }, 'split')) {
    my ($via, $f) = @$_;
    is $f->add('a'), 1, "split, through $via: add takes a reply that comes a byte at a time";
    is $f->contains('a'), 1, "split, through $via: and contains";
}

# --- a reply cut by the read timeout, half of it come -----------------------------------------------
for (filters(\%T, 'stall', 'plain')) {
    my ($via, $f, $addr) = @$_;
    my $t0 = time;
    my $e = eval { $f->add('a'); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->add: no reply from \Q$addr\E within read_timeout 0\.5 s/,
        "stalled mid-reply, through $via: add croaks naming the server and the timeout";
    cmp_ok time - $t0, '>=', 0.45, "stalled mid-reply, through $via: after waiting for it";
    is eval { $f->add('a') }, 1, "stalled mid-reply, through $via: the next call connects again and works"
        or diag $@;
}

# --- signals while the call waits ------------------------------------------------------------------
# The races are made, not waited for: the server answers only once the test
# opens its gate, and each signal is sent only after the handler of the one
# before has run (a pipe carries the handler's word back), so that no two
# signals are pending at once, whatever the machine's load.
my $gates = File::Temp::tempdir(CLEANUP => 1);
my $gate_n = 0;
for my $via ('an address', 'a Redis::Fast client') {
    my $gate = "$gates/" . ++$gate_n;
    my (undef, $f) = @{ filter_via($via, { %T, read_timeout => 30 }, "gated=$gate") };
    pipe(my $acked, my $ack) or die "pipe: $!";
    my $caught = 0;
    local $SIG{USR1} = sub { $caught++; syswrite $ack, 'x' };
    my $parent = $$;
    my $kid = fork // die "fork: $!";
    if (!$kid) {
        close $ack;
        for (1 .. 3) {
            kill 'USR1', $parent;
            sysread($acked, my $byte, 1) or POSIX::_exit(1);
        }
        open my $open, '>', $gate or POSIX::_exit(1);
        POSIX::_exit(0);
    }
    close $acked;
    is $f->add('a'), 1, "signals, through $via: a handler that returns does not end the wait";
    # The reply came only after the third handler's word: each ran while
    # the call waited.
    is $caught, 3, "signals, through $via: the handler ran each time, while the call waited";
    waitpid $kid, 0;
    is $?, 0, "signals, through $via: the signaller saw each handler run";
}
# A handler that dies ends the call, a single one or a batch (commands
# pipelined, their replies taken in Perl); the replies still owed are not
# read as the next call's.
my @cuts = (
    ['signals, through %s: a handler that dies ends the call', sub { $_[0]->add('a') },
        'signals, through %s: the next call works', sub { $_[0]->contains('a') }, 1],
    ["a batch cut by a signal's handler, through %s: ended", sub { $_[0]->add_many([1 .. 300]) },
        'a batch cut, through %s: the next call works', sub { scalar $_[0]->contains_many([1 .. 300]) }, 300],
);
for my $cut (@cuts) {
    my ($ended, $call, $next, $again, $want) = @$cut;
    for my $via ('an address', 'a Redis::Fast client') {
        my $gate = "$gates/" . ++$gate_n;
        my (undef, $f) = @{ filter_via($via, { %T, read_timeout => 30 }, "gated=$gate", 'plain') };
        my $parent = $$;
        my $kid = fork // die "fork: $!";
        if (!$kid) {
            sleep 0.2;
            kill 'USR1', $parent;
            POSIX::_exit(0);
        }
        my $e = eval {
            local $SIG{USR1} = sub { die "interrupted\n" };
            $call->($f);
            1;
        } ? '' : $@;
        # The server answers only once the gate is open, which is after this.
        ok !-e $gate, sprintf($ended, $via) . ', before any reply could come';
        open my $open, '>', $gate or die "$gate: $!";
        waitpid $kid, 0;
        is $e, "interrupted\n", sprintf($ended, $via);
        is eval { $again->($f) }, $want, sprintf($next, $via) or diag $@;
    }
}

# --- replies past the bounds, or of the wrong shape -------------------------------------------------
for my $mode ('huge', 'short') {
    for (filters(\%T, $mode)) {
        my ($via, $f, $addr) = @$_;
        for my $call ('add', 'contains') {
            my $e = eval { $f->$call('a'); 1 } ? '' : $@;
            like $e, $mode eq 'huge'
                ? qr/\A\Q$R\E->$call: unreadable reply from \Q$addr\E: a reply sized past all bounds/
                : qr/\A\Q$R\E->$call: unreadable reply from \Q$addr\E: (?:\d+ fields are not a whole number of items of \d+|the reply has \d+ fields where \d+ were asked|a reply of the wrong shape)/,
                "$mode, through $via: $call croaks as unreadable";
        }
    }
}

done_testing;
