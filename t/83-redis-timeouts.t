# Data::BloomFilter::Shared::Redis against a server that stops answering or
# answers without end: every call croaks within its timeout, naming the
# server and the timeout, and works again once the server does; a reply
# line or bulk past what the filter can ask for croaks at once, with the
# memory of the process bounded, from an address and through a Redis::Fast
# client alike. And reopening a filter with another geometry warns as a
# local filter's reopening does.
use strict;
use warnings;
use Test::More;
use FindBin ();
use lib "$FindBin::Bin/lib";
use RedisServer qw(redis_or_skip);
use BFTest qw(time_bound);
use File::Temp ();
use IO::Socket::INET ();
use POSIX ();
use Time::HiRes qw(sleep time);
use Data::BloomFilter::Shared;

redis_or_skip();
require Data::BloomFilter::Shared::Redis;
my $R = 'Data::BloomFilter::Shared::Redis';
$SIG{ALRM} = sub { die "83-redis-timeouts: global timeout\n" };
alarm 600;    # a hang guard: an idle host takes seconds, a loaded one minutes

my $T = 0.5;    # every timeout of the filters under test, in seconds
my %SMALL = (cnx_timeout => $T, read_timeout => $T, write_timeout => $T);

# A server whose replies the calls that must work need within $T: ahead
# of the load (RedisServer::run_first).
sub quick_server {
    my $srv = RedisServer->new;
    RedisServer::run_first($srv->pid);
    return $srv;
}

# Let a stopped server go on, and wait until it answers a client of its
# own (the commands it had queued run first).
sub resume {
    my ($srv) = @_;
    kill 'CONT', $srv->pid;
    $srv->client->ping;
}

# Run $code, cut off by an alarm after $hang seconds (a call that hangs is
# then a failure, not a hung test); its time and its error ('' when none).
sub timed {
    my ($code, $hang) = @_;
    my $t0 = time;
    my $ok = eval {
        local $SIG{ALRM} = sub { die "HUNG\n" };
        alarm($hang // 30);
        $code->();
        alarm 0;
        1;
    };
    alarm 0;
    alarm 600;
    return (time - $t0, $ok ? '' : $@);
}

# --- the options ----------------------------------------------------------------------------------
{
    my $srv = quick_server();
    for my $bad (0, -1, 'soon', [1], 86401, 'nan') {
        for my $t (sort keys %SMALL) {
            my (undef, $e) = timed(sub { $R->new($srv->address, 'opts', 1000, 0.01, { $t => $bad }) });
            like $e, qr/\A\Q$R\E->new: $t must be a positive number of seconds, at most 86400, got /,
                "$t => " . (ref $bad ? '[1]' : $bad) . ' croaks';
        }
    }
    is_deeply $R->new($srv->address, 'opts', 1000, 0.01)->{timeouts},
        { cnx_timeout => 5, read_timeout => 10, write_timeout => 10 }, 'the defaults: 5, 10 and 10 s';
    my $f = $R->new($srv->address, 'opts', 1000, 0.01, { %SMALL, read_timeout => 0.25 });
    is $f->add('x'), 1, 'timeouts of a fraction of a second are taken';
}

# --- a stopped server: each call croaks within its timeout, and works again after -------------
{
    my $srv = quick_server();
    my $addr = $srv->address;
    my $port = $srv->port;
    my $ours = $R->new($addr, 'stopped', 100_000, 0.01, \%SMALL);
    my $local = Data::BloomFilter::Shared->new(undef, 100_000, 0.01);
    $local->add('m');
    is $ours->add_many([map { "before-$_" } 1 .. 100]), 100, 'a batch before the stop';
    my @calls = (
        [add => sub { $_[0]->add('a') }],
        [contains => sub { $_[0]->contains('a') }],
        [add_many => sub { $_[0]->add_many([map { "many-$_" } 1 .. 3000]) }],
        [contains_many => sub { $_[0]->contains_many([map { "many-$_" } 1 .. 3000]) }],
        [bits_set => sub { $_[0]->bits_set }],
        [clear => sub { $_[0]->clear }],
        [to_filter => sub { $_[0]->to_filter(undef) }],
        [merge => sub { $_[0]->merge($local) }],
        [new => sub { $R->new($_[1], 'stopped', 100_000, 0.01, \%SMALL) }],
    );
    # Through a client given: the filter's timeouts bound its commands over
    # the client's socket, which is shut after a timeout (so that no late
    # reply is read as another's answer); what comes next is the client's
    # (a client that may reconnect does, within its own timeouts). So each
    # call below has a client of its own.
    my %theirs = map {
        my $client = Redis::Fast->new(server => $addr, reconnect => 1, cnx_timeout => 2, read_timeout => 2);
        ($_->[0] => [$R->new($client, 'stopped', 100_000, 0.01, \%SMALL), $client]);
    } @calls;
    my $stalled = qr/(?:no reply from 127\.0\.0\.1:$port within read_timeout|could not write to 127\.0\.0\.1:$port within write_timeout) 0\.5 s\b/;
    kill 'STOP', $srv->pid;
    for my $how ('an address', 'a Redis::Fast client') {
        for my $c (@calls) {
            my ($method, $code) = @$c;
            my ($f, $from) = $how eq 'an address' ? ($ours, $addr) : @{ $theirs{$method} };
            my ($took, $e) = timed(sub { $code->($f, $from) });
            like $e, qr/\A\Q$R\E->$method: $stalled/,
                "stopped server, through $how: $method croaks naming the server and the timeout";
            cmp_ok $took, '>=', $T * 0.9, "stopped server, through $how: $method waited its timeout";
            time_bound($took, $T + 0.5, "stopped server, through $how: $method croaked within it");
        }
    }
    # A batch cut by the timeout: the items whose replies came are known,
    # those sent and unanswered may or may not be added, the rest were not
    # sent (the message counts them; the out array has undef for all but
    # the known).
    my @batch = map { "cut-$_" } 1 .. 20_000;
    my (undef, $e) = timed(sub { $ours->add_many(\@batch, \my @w) });
    like $e, qr/\A\Q$R\E->add_many: $stalled: 0 of 20000 items known added; (\d+) refused by the server or not sent \(not added\); the other (\d+) may or may not have been added/,
        'a batch cut by the timeout says what is known of it';
    my ($unsent, $doubt) = $e =~ /; (\d+) refused .* the other (\d+) may/;
    cmp_ok $doubt // 1e9, '<=', 64 * 100, 'at most 64 commands of 100 items are in doubt';
    is $unsent + $doubt, 20_000, 'and the rest was not sent';
    # A merge's upload (24 MiB in commands of 4 MiB) outgrows what the
    # sockets hold: its writing stalls.
    my $big = Data::BloomFilter::Shared->new(undef, 20_000_000, 0.01);
    $big->add('m');
    resume($srv);
    my $upload = $R->new($addr, 'upload', 20_000_000, 0.01, \%SMALL);
    kill 'STOP', $srv->pid;
    my ($took, $we) = timed(sub { $upload->merge($big) });
    like $we, qr/\A\Q$R\E->merge: could not write to 127\.0\.0\.1:$port within write_timeout 0\.5 s\b/,
        'a stalled write croaks naming write_timeout';
    time_bound($took, $T + 0.5, 'within it');
    undef $big;
    resume($srv);
    for my $via (['an address', $ours], ['a Redis::Fast client', $theirs{add}[0]]) {
        my ($how, $f) = @$via;
        my ($took, $e) = timed(sub {
            # (The commands sent before the timeouts ran when the server
            # resumed: clear among them.)
            $f->add('after');
            is $f->contains('after'), 1, "server resumed, through $how: the next call works";
            my @after = map { "after-$_-" . length $how } 1 .. 100;
            is $f->add_many(\@after), 100, "through $how: and the next batch";
            is scalar $f->contains_many(\@after), 100, "through $how: which is there";
        });
        is $e, '', "server resumed, through $how: no croak";
    }
}

# --- a stopped server, windowed and growing filters: the same bounds, through their reads and scripts --
{
    my $srv = quick_server();
    my ($addr, $port) = ($srv->address, $srv->port);
    # (The windowed one sized for all its items, the grown one to grow.)
    my %kinds = (windowed => [100_000, { window => 3600, generations => 4 }], grown => [1000, { grow => 2 }]);
    my %f = map { ($_ => $R->new($addr, "stopped-$_", $kinds{$_}[0], 0.01, { %SMALL, %{ $kinds{$_}[1] } })) }
        sort keys %kinds;
    $_->add_many([map { "before-$_" } 1 .. 3000]) for values %f;    # the grown one: past its first stage
    my $stalled = qr/no reply from 127\.0\.0\.1:$port within read_timeout 0\.5 s\b/;
    kill 'STOP', $srv->pid;
    for my $kind (sort keys %f) {
        for my $c ([add => sub { $f{$kind}->add('a') }], [contains => sub { $f{$kind}->contains('a') }],
                   [add_many => sub { $f{$kind}->add_many([map { "many-$_" } 1 .. 500]) }],
                   [contains_many => sub { $f{$kind}->contains_many([map { "many-$_" } 1 .. 500]) }]) {
            my ($method, $code) = @$c;
            my ($took, $e) = timed($code);
            like $e, qr/\A\Q$R\E->$method: $stalled/, "stopped server, $kind: $method croaks naming the server and the timeout";
            time_bound($took, $T + 0.5, "stopped server, $kind: $method croaked within it");
        }
    }
    # A grown filter's batch is read before anything is written: cut in its
    # reads, it added nothing, and says so.
    my (undef, $e) = timed(sub { $f{grown}->add_many([map { "cut-$_" } 1 .. 500]) });
    like $e, qr/: 0 of 500 items known added; 500 refused by the server or not sent \(not added\); the other 0 may or may not have been added/,
        'a grown filter\'s batch cut in its reads: nothing added, and it says so';
    resume($srv);
    for my $kind (sort keys %f) {
        my ($took, $e) = timed(sub {
            my @after = map { "after-$_" } 1 .. 100;
            is $f{$kind}->add_many(\@after), 100, "server resumed, $kind: the next batch adds";
            is scalar $f{$kind}->contains_many(\@after), 100, "server resumed, $kind: and finds it";
            is $f{$kind}->contains('cut-1'), 0, "server resumed, $kind: the cut batch's items are not there"
                if $kind eq 'grown';
        });
        is $e, '', "server resumed, $kind: no croak";
    }
}

# --- connecting: a listener that never accepts ---------------------------------------------------
SKIP: {
    # A backlog of 0 that two connections fill: the kernel then drops new
    # SYNs, so a connect waits until it gives up (minutes, without a timeout).
    my $l = IO::Socket::INET->new(Listen => 0, LocalAddr => '127.0.0.1', LocalPort => 0) or die "listen: $!";
    my $port = $l->sockport;
    my @fill = map { IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Blocking => 0) } 1 .. 3;
    my $probe = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 1);
    skip 'this kernel accepts past a full backlog', 3 if $probe;
    my ($took, $e) = timed(sub { $R->new("127.0.0.1:$port", 'nope', 1000, 0.01, \%SMALL) });
    like $e, qr/\A\Q$R\E->new: cannot connect to 127\.0\.0\.1:$port: no connection within cnx_timeout 0\.5 s/,
        'a connect that is not answered croaks naming cnx_timeout';
    cmp_ok $took, '>=', $T * 0.9, 'after waiting for it';
    time_bound($took, $T + 0.5, 'and within it');
}

# --- a hostile server: endless lines, huge bulks, silence -----------------------------------------

# A fake server on a loopback port: it answers the two scripts new sends as
# a server without the filter would (nil, then "created"), PING with PONG,
# and any other command with $mode: 'line' a status line that never ends,
# 'bulk' a bulk string of 2 GB that never comes, 'silent' nothing. It sends
# at most 192 MiB, then waits for the client to leave.
my @fake;    # the fake servers' process groups, ended with the test
END { local $?; kill 'KILL', -$_ for @fake; waitpid $_, 0 for @fake }

sub fake_server {
    my ($mode) = @_;
    my $l = IO::Socket::INET->new(Listen => 16, LocalAddr => '127.0.0.1', LocalPort => 0, ReuseAddr => 1)
        or die "listen: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        setpgrp 0, 0;    # its connections' processes in its group, ended with it
        RedisServer::run_first($$);
        $SIG{PIPE} = 'IGNORE';
        while (my $c = $l->accept) {
            next if fork;    # one process per connection
            my $buf = '';
            while (1) {
                my $n = sysread $c, $buf, 65536, length $buf;
                POSIX::_exit(0) if !$n;
                while (my $command = RedisServer::next_command(\$buf)) {
                    my @args = @$command;
                    my $cmd = uc $args[0];
                    if ($cmd eq 'EVAL') {
                        print {$c} $args[1] =~ /HMGET/ ? "\$-1\r\n" : "*1\r\n\$7\r\ncreated\r\n";
                        $c->flush;
                        next;
                    }
                    if ($cmd eq 'PING') {
                        print {$c} "+PONG\r\n";
                        $c->flush;
                        next;
                    }
                    if ($mode ne 'silent') {
                        syswrite $c, $mode eq 'line' ? '+' : "\$2000000000\r\n";
                        my $chunk = ($mode eq 'line' ? 'x' : "\0") x 65536;
                        for (1 .. 3072) { defined syswrite $c, $chunk or POSIX::_exit(0) }
                    }
                    sleep 1 while 1;    # silent until the client leaves (then killed)
                }
            }
        }
        POSIX::_exit(0);
    }
    push @fake, $pid;
    my $addr = '127.0.0.1:' . $l->sockport;
    close $l;
    return ($pid, $addr);
}

# The peak resident size of this process so far, in KiB.
sub peak_kib {
    open my $fh, '<', '/proc/self/status' or return undef;
    while (<$fh>) { return $1 if /\AVmHWM:\s+(\d+) kB/ }
    return undef;
}

SKIP: {
    skip 'no /proc/self/status', 1 if !defined peak_kib();
    for my $mode ('line', 'bulk', 'silent') {
        my ($server, $addr) = fake_server($mode);
        for my $via ('an address', 'a Redis::Fast client') {
            for my $call ('add', 'contains_many') {
                # In a child: its peak memory is its own.
                pipe my $rd, my $wr or die "pipe: $!";
                my $pid = fork // die "fork: $!";
                if (!$pid) {
                    close $rd;
                    my ($before, $t0, $f);
                    my $e = eval {
                        my $from = $via eq 'an address' ? $addr : Redis::Fast->new(server => $addr, reconnect => 0);
                        $f = $R->new($from, 'hostile', 10_000, 0.01, \%SMALL);
                        ($before, $t0) = (peak_kib(), time);
                        $call eq 'add' ? $f->add('x') : $f->contains_many([1 .. 500]);
                        1;
                    } ? '' : $@;
                    ($before, $t0) = (peak_kib(), time) if !defined $t0;
                    $e =~ s/\n/ /g;
                    printf {$wr} "%.3f %d %s\n", time - $t0, peak_kib() - $before, $e;
                    close $wr;
                    POSIX::_exit(0);
                }
                close $wr;
                # Today's replies croak in well under a second; a client that
                # buffers the 192 MiB, or waits without end, is cut off.
                my $line = eval {
                    local $SIG{ALRM} = sub { die "HUNG\n" };
                    alarm 60;
                    my $l = <$rd>;
                    alarm 0;
                    $l;
                };
                alarm 600;
                kill 'KILL', $pid;
                waitpid $pid, 0;
                my ($took, $grew, $e) = ($line // '') =~ /\A(\S+) (-?\d+) (.*)/;
                my $name = "$mode, through $via, $call";
                my $want = $mode eq 'line' ? qr/unreadable reply from 127\.0\.0\.1:\d+: a protocol line longer than 65536 bytes/
                    : $mode eq 'bulk' ? qr/unreadable reply from 127\.0\.0\.1:\d+: a bulk reply (?:of 2000000000 bytes|sized past all bounds)/
                    : qr/no reply from 127\.0\.0\.1:\d+ within read_timeout 0\.5 s/;
                like $e // 'HUNG (no answer within 60 s)', qr/\A\Q$R\E->$call: $want/, "$name: croaks";
                cmp_ok $grew // 1e9, '<', 32 * 1024, "$name: the process grew by less than 32 MiB (" . ($grew // '?') . ' KiB)';
            }
        }
        kill 'KILL', -$server;
        waitpid $server, 0;
    }
}

# --- the reader of other commands' replies, on bytes alone -----------------------------------------
{
    my $take = \&Data::BloomFilter::Shared::Redis::Link::take_value;
    my $all = sub { my $b = $_[0]; my @r = eval { $take->(\$b) }; return ($@ ? "DIED $@" : \@r, $b) };
    is_deeply [$all->("*3\r\n:1\r\n\$2\r\nab\r\n*2\r\n\$-1\r\n+OK\r\n+next")],
        [['ok', [1, 'ab', [undef, 'OK']]], '+next'], 'a reply is taken whole, what follows kept';
    is_deeply [$all->("-ERR no\r\n")], [['error', 'ERR no'], ''], 'an error reply';
    for my $cut ("*2\r\n:1\r\n", "\$5\r\nabc", '+O', '') {
        is_deeply [$all->($cut)], [[], $cut], 'a reply cut short waits: ' . ($cut =~ s/\r\n/ /gr);
    }
    my $line = '+' . ('x' x 65536);
    is_deeply [$all->($line)], [[], $line], 'a line of 65536 bytes waits for its end';
    like +($all->("$line" . 'x'))[0], qr/\ADIED a protocol line longer than 65536 bytes/, 'one byte more is refused';
    like +($all->("*1\r\n$line" . 'x'))[0], qr/\ADIED a protocol line longer/, 'also inside an array';
    like +($all->("\$4194305\r\n"))[0], qr/\ADIED a bulk reply of 4194305 bytes, past the 4194304/,
        'a bulk past 4 MiB is refused on its header';
    is_deeply [$all->("\$4194304\r\n")], [[], "\$4194304\r\n"], 'one of 4 MiB is waited for';
    like +($all->("*1048577\r\n"))[0], qr/\ADIED a reply nested or sized past all bounds/, 'an array past 2^20 elements';
    like +($all->("*1\r\n" x 9 . ":1\r\n"))[0], qr/\ADIED a reply nested or sized past all bounds/, 'nested past 8';
    like +($all->("?\r\n"))[0], qr/\ADIED '\?' does not start a protocol reply/, 'garbage';
    like +($all->("*x\r\n"))[0], qr/\ADIED 'x' is not a protocol integer/, 'a bad length';
}

# --- reopening with another geometry warns, as locally ---------------------------------------------
{
    my $srv = RedisServer->new;
    my $f = $R->new($srv->address, 'geo', 1000, 0.01);
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    $R->new($srv->address, 'geo', 1000, 0.01);
    $R->new($srv->address, 'geo', 1000);
    is_deeply \@w, [], 'no warning when the geometry asked for is the stored one (or fp_rate not given)';
    $R->new($srv->address, 'geo', 2000, 0.01);
    like $w[0], qr/\A\Q$R\E->new: the filter's capacity 1000 is kept, not the capacity 2000 asked for \(an existing filter keeps its geometry\) at \Q${\ __FILE__}\E line \d+\.\n\z/,
        'another capacity warns, at the caller';
    @w = ();
    $R->new($srv->address, 'geo', 2000, 0.02);
    like $w[0], qr/\A\Q$R\E->new: the filter's capacity 1000 and fp_rate 0\.01 are kept, not the capacity 2000 and fp_rate 0\.02 asked for \(an existing filter keeps its geometry\)/,
        'another capacity and fp_rate warn, naming both';
    is scalar @w, 1, 'once';
    # The local filter's words for the same reopening.
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    Data::BloomFilter::Shared->new("$dir/geo.bf", 1000, 0.01);
    @w = ();
    Data::BloomFilter::Shared->new("$dir/geo.bf", 2000, 0.02);
    (my $local = $w[0] // '') =~ s/ at .*//s;
    $local =~ s/\AData::BloomFilter::Shared->new: the file's /$R->new: the filter's /;
    @w = ();
    $R->new($srv->address, 'geo', 2000, 0.02);
    (my $remote = $w[0] // '') =~ s/ at .*//s;
    is $remote, $local, "the local filter's words (the filter's, not the file's)";
    @w = ();
    {
        no warnings 'Data::BloomFilter::Shared';
        $R->new($srv->address, 'geo', 2000, 0.02);
    }
    is_deeply \@w, [], "no warnings 'Data::BloomFilter::Shared' silences it";
    my $e = eval {
        use warnings FATAL => 'Data::BloomFilter::Shared';
        $R->new($srv->address, 'geo', 2000, 0.02);
        1;
    } ? '' : $@;
    like $e, qr/\A\Q$R\E->new: the filter's capacity 1000/, 'and FATAL makes it fatal';
}

done_testing;
