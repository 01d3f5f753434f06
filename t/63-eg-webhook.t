# eg/webhook_dedup.pl under Mojolicious's prefork server: four workers share
# one windowed filter file. Concurrent redeliveries are processed once, a
# restart on the same file keeps the ids, ids are forgotten after the
# window's retention bound, bad delivery ids are refused, and a failed
# spool write answers 500.
use strict;
use warnings;
use Test::More;
use Cwd ();
use Fcntl qw(O_RDONLY);
use File::Temp qw(tempdir);
use FindBin ();
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);
use lib "$FindBin::Bin/lib";
use BFTest qw(reap child_status_text perl5lib slurp);
use Data::BloomFilter::Shared;

BEGIN {
    eval { require Mojolicious; require Mojo::UserAgent; 1 }
        or plan skip_all => 'needs Mojolicious (Debian: libmojolicious-perl)';
}

# Without a working loopback (a network namespace whose lo is down, a
# sandbox without networking) nothing below can connect: say so at once
# instead of retrying until the global timeout.
if (my $why = loopback_problem()) {
    plan skip_all => "needs connections to 127.0.0.1, which fail here: $why";
}

# Why a connection to a listening socket on 127.0.0.1 fails, or '' when it
# works; every step is bounded by 2 s.
sub loopback_problem {
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or return "bind: $!";
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $l->sockport,
        Timeout => 2) or return "connect: $!";
    IO::Select->new($l)->can_read(2) or return 'connect: not accepted within 2 s';
    $l->accept or return "accept: $!";
    return '';
}

my $example = Cwd::abs_path("$FindBin::Bin/../eg/webhook_dedup.pl");
my $dir = tempdir(CLEANUP => 1);
my $ORIG_PID = $$;
my ($WORKERS, $CLIENTS, $IDS) = (4, 4, 300);
my @ID_HEADERS = qw(X-GitHub-Delivery X-Delivery-ID Idempotency-Key);

my $server;    # pid of the prefork manager, also its process group
my @clients;

# The manager, its workers and anything they started form one process group:
# ask it to stop, give it 5 s, then kill what is left of the group.
sub stop_server {
    return if !$server;
    kill 'TERM', -$server;
    my $deadline = time + 5;
    while (time < $deadline && !manager_gone()) { sleep 0.05 }
    kill 'KILL', -$server;    # before reaping: the group id cannot be reused yet
    waitpid $server, 0;
    $server = undef;
}

# True once the manager has exited (a zombie or reaped).
sub manager_gone {
    open(my $fh, '<', "/proc/$server/stat") or return 1;
    my $stat = <$fh> // '';
    return $stat =~ /\) Z /;
}

# Processes of process group $pgid that still run (zombies do not count).
sub live_members {
    my ($pgid) = @_;
    my @live;
    opendir(my $dh, '/proc') or return;
    for my $pid (grep { /\A[0-9]+\z/ } readdir $dh) {
        open(my $fh, '<', "/proc/$pid/stat") or next;
        my $stat = <$fh> // next;
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        my ($state, $ppid, $pgrp) = $stat =~ /\) (\S) (\d+) (\d+) / or next;
        push @live, $pid if $pgrp == $pgid && $state ne 'Z';
    }
    return @live;
}

END {
    local $?;
    if (defined $ORIG_PID && $$ == $ORIG_PID) {    # not set when skipped early
        kill 'KILL', @clients if @clients;
        stop_server();
    }
}
$SIG{INT} = $SIG{TERM} = sub { die "63-eg-webhook: interrupted\n" };
$SIG{ALRM} = sub { die "63-eg-webhook: global timeout\n" };
alarm 29;

sub full_log { -e "$dir/server.log" ? slurp("$dir/server.log") : '' }

sub server_log {
    my $log = full_log();
    return length $log > 3000 ? '...' . substr($log, -3000) : $log;
}

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "cannot bind a loopback port: $!";
    return $s->sockport;
}

# Start the example with the settings of %$env on a free loopback port;
# returns the port once it accepts connections, or undef (the server
# stopped) when it could not start.
sub start_server {
    my ($env) = @_;
    my $port = free_port();
    local $ENV{PERL5LIB} = perl5lib();
    local $ENV{MOJO_MODE} = 'production';    # info-level log, no per-request lines
    local @ENV{keys %$env} = values %$env;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        POSIX::setpgid(0, 0);
        open(STDIN, '<', '/dev/null') or POSIX::_exit(127);
        open(STDOUT, '>>', "$dir/server.log") or POSIX::_exit(127);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
        # -c 1: a worker holds one connection at a time, so clients that keep
        # their connections open are served by different workers.
        { exec $^X, $example, 'prefork', '-l', "http://127.0.0.1:$port",
            '-w', $WORKERS, '-c', 1, '-P', "$dir/prefork.pid" }
        POSIX::_exit(127);
    }
    POSIX::setpgid($pid, $pid);    # also here: no window where it is not a group
    $server = $pid;
    my $deadline = time + 8;
    while (time < $deadline) {
        if (manager_gone()) { stop_server(); return undef }
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 1);
        if ($s) { close $s; return $port }
        # Refused means not listening yet; no route to 127.0.0.1 will not
        # get better by waiting.
        last if $!{ENETUNREACH} || $!{EHOSTUNREACH} || $!{ENETDOWN} || $!{EADDRNOTAVAIL};
        sleep 0.05;
    }
    stop_server();
    return undef;
}

# Start, or end the test here with the server's log.
sub start_or_bail {
    my ($env, $what) = @_;
    my $port;
    for my $attempt (1 .. 2) {    # another process may take the free port first
        last if defined($port = start_server($env));
    }
    if (!defined $port) {
        fail("$what: the prefork server starts and listens");
        diag(server_log());
        done_testing;
        exit;
    }
    pass("$what: the prefork server listens on 127.0.0.1:$port");
    return $port;
}

# The spool's lines as [id, pid]; a line that is not "id<TAB>pid" (two
# writes interleaved, say) is kept whole as [line] so that it fails below.
sub spool {
    my ($path) = @_;
    return [] if !-e $path;
    my $text = slurp($path);
    my @lines = map { /\A([\x21-\x7e]+)\t([0-9]+)\z/ ? [$1, $2] : [$_] } split /\n/, $text;
    push @lines, ['(no final newline)'] if $text =~ /[^\n]\z/;
    return \@lines;
}

sub ua { Mojo::UserAgent->new(connect_timeout => 5, request_timeout => 10, inactivity_timeout => 10) }

# POST a delivery; returns (code, decoded JSON answer or undef).
sub deliver {
    my ($ua, $port, $id, $header) = @_;
    my %h = defined $id ? (($header // $ID_HEADERS[0]) => $id) : ();
    my $res = $ua->post("http://127.0.0.1:$port/webhook" => \%h => json => { zen => 'hi' })
        ->result;
    return ($res->code, $res->json);
}

my %env = (
    WEBHOOK_FILTER   => "$dir/deliveries.bloom",
    WEBHOOK_SPOOL    => "$dir/spool.txt",
    WEBHOOK_CAPACITY => 10_000,
);
delete local $ENV{WEBHOOK_WINDOW};    # the default window, a day
my @ids = map { sprintf '%08x-cc78-11e3-81ab-%012x', 0x72d3162e + $_, $_ * 7919 } 0 .. $IDS - 1;

# 1. Every client delivers every id, each in its own order and with its own
# header name: each id is delivered $CLIENTS times, often at the same moment
# to several workers.
my $port = start_or_bail(\%env, 'first start');
pipe(my $ready_r, my $ready_w) or die "pipe: $!";
pipe(my $go_r, my $go_w) or die "pipe: $!";
for my $n (0 .. $CLIENTS - 1) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        @clients = ();
        close $ready_r;
        close $go_w;
        alarm 20;
        my $ok = eval {
            my $ua = ua();
            my @order = map { ($_ * 7 + $n * 75) % $IDS } 0 .. $IDS - 1;
            @order = reverse @order if $n % 2;
            open(my $out, '>', "$dir/client-$n.txt") or die "client-$n.txt: $!";
            for my $k (0 .. $#order) {
                my $i = $order[$k];
                my ($code, $j) = deliver($ua, $port, $ids[$i], $ID_HEADERS[$n % @ID_HEADERS]);
                my $dup = $j && $j->{duplicate} ? 1 : 0;
                print {$out} join("\t", $i, $code, $dup), "\n";
                if ($k == 0) {
                    # Every client's first delivery (and connection, kept
                    # alive) is answered before any client goes on.
                    syswrite $ready_w, 'r';
                    sysread($go_r, my $go, 1) == 1 or die "no go from the test\n";
                }
            }
            close $out or die "client-$n.txt: $!";
            1;
        };
        print STDERR "client $n: $@" if !$ok;
        POSIX::_exit($ok ? 0 : 3);
    }
    push @clients, $pid;
}
close $ready_w;
close $go_r;
{
    my $sel = IO::Select->new($ready_r);
    my ($ready, $deadline) = (0, time + 10);
    while ($ready < $CLIENTS && time < $deadline && $sel->can_read(1)) {
        my $n = sysread($ready_r, my $buf, 64);
        last if !$n;    # every client exited
        $ready += $n;
    }
    is($ready, $CLIENTS, 'every client got its first answer');
    syswrite $go_w, 'g' x $CLIENTS;
    close $go_w;
}
my @status = map { [reap($_, 20)] } @clients;
@clients = ();
is_deeply([map { $_->[0] } @status], [(0) x $CLIENTS], 'every client finished without error')
    or diag(join "\n", map { child_status_text({ status => $_->[0], exit => $_->[0] >> 8,
        signal => $_->[0] & 127, timed_out => $_->[1], out => '' }) } @status);

my (%accepted, %answers, $answers);
for my $n (0 .. $CLIENTS - 1) {
    open(my $fh, '<', "$dir/client-$n.txt") or next;
    while (<$fh>) {
        chomp;
        my ($i, $code, $dup) = split /\t/;
        $answers{"$code dup $dup"}++;
        $accepted{$i}++ if $code == 202;
        $answers++;
    }
}
is($answers, $IDS * $CLIENTS, "$IDS ids x $CLIENTS clients answered");
is_deeply(\%answers, { '202 dup 0' => $IDS, '200 dup 1' => $IDS * ($CLIENTS - 1) },
    'one 202 per id, every other delivery a 200 duplicate');
is_deeply([grep { ($accepted{$_} // 0) != 1 } 0 .. $IDS - 1], [], 'each id accepted exactly once');

my $spooled = spool($env{WEBHOOK_SPOOL});
is_deeply([grep { @$_ != 2 } @$spooled], [], 'every spool line is one whole "id<TAB>pid"');
my %times;
$times{$_->[0]}++ for @$spooled;
is_deeply(\%times, { map { $_ => 1 } @ids }, 'the spool has every id exactly once, and nothing else');
my %pids = map { $_->[1] // 'none' => 1 } @$spooled;
cmp_ok(scalar keys %pids, '>', 1, 'deliveries were processed by more than one worker')
    or diag('worker pids: ' . join ' ', keys %pids);
my $spool_before = slurp($env{WEBHOOK_SPOOL});

# 2. A restart on the same file: the old ids are still duplicates.
my $group = $server;
stop_server();
is_deeply([live_members($group)], [], 'the manager and its workers are gone');
$port = start_or_bail(\%env, 'restart on the same file');
{
    my $ua = ua();
    my %codes;
    for my $i (0 .. $IDS - 1) {
        my ($code, $j) = deliver($ua, $port, $ids[$i], $ID_HEADERS[$i % @ID_HEADERS]);
        $codes{$code . ($j && $j->{duplicate} ? ' duplicate' : '')}++;
    }
    is_deeply(\%codes, { '200 duplicate' => $IDS }, 'after the restart, redeliveries are duplicates');

    # Bad delivery ids: refused, nothing processed.
    my ($code, $j) = deliver($ua, $port, undef);
    is($code, 400, 'no delivery id: 400');
    like($j && $j->{error}, qr/\Ano delivery id: send it in an X-GitHub-Delivery, /, 'and says so');
    ($code, $j) = deliver($ua, $port, 'x' x 201, 'X-Delivery-ID');
    is($code, 400, 'a 201-byte id: 400');
    like($j && $j->{error}, qr/\Adelivery id must be 1 to 200 printable ASCII characters\z/,
        'and says what an id must be');
    ($code) = deliver($ua, $port, 'a b', 'Idempotency-Key');
    is($code, 400, 'an id with a space: 400');
    ($code) = deliver($ua, $port, '', 'X-GitHub-Delivery');
    is($code, 400, 'an empty id: 400');
    is(slurp($env{WEBHOOK_SPOOL}), $spool_before, 'nothing new in the spool');

    # The restarted server does process new ids, up to 200 bytes.
    my $long = 'y' x 200;
    ($code) = deliver($ua, $port, $long, 'X-Delivery-ID');
    is($code, 202, 'a new 200-byte id after the restart: 202');
    like(slurp($env{WEBHOOK_SPOOL}), qr/\A\Q$spool_before$long\E\t[0-9]+\n\z/,
        'and spooled: one more line');
}
$group = $server;
stop_server();
is_deeply([live_members($group)], [], 'stopped again');

# 3. A 2-second window on a new file: a delivery is a duplicate for the
# window, and processed again once the retention bound has passed.
my %short = (%env, WEBHOOK_FILTER => "$dir/short.bloom", WEBHOOK_SPOOL => "$dir/short.txt",
    WEBHOOK_WINDOW => 2);
$port = start_or_bail(\%short, 'a 2 s window');
# A query-only handle of the server's filter: it reads the window the file
# stores, and looks without adding (a delivery would extend an id's life).
sysopen(my $ro_fh, $short{WEBHOOK_FILTER}, O_RDONLY) or die "$short{WEBHOOK_FILTER}: $!";
my $ro = Data::BloomFilter::Shared->new_from_fd($ro_fh);
my ($window, $g) = ($short{WEBHOOK_WINDOW}, $ro->generations);
ok(abs($ro->window - $window) < 1e-6, 'WEBHOOK_WINDOW sets the window');
is($g, 4, 'of the default 4 generations');
# The POD's bound: an id delivered at t is forgotten by t + window * g / (g - 1),
# plus one period (window / (g - 1)) of clock granularity, plus a margin.
my $forgotten_by = $window * $g / ($g - 1) + $window / ($g - 1) + 0.1;
{
    my $ua = ua();
    # "once": delivered now and next after the bound. "again": redelivered
    # all through the window.
    my $s = time;
    my ($once) = deliver($ua, $port, 'once');
    my $once_at = time;
    my ($again) = deliver($ua, $port, 'again');
    is("$once $again", '202 202', 'first deliveries: 202');
    my ($checks, @bad, @gone) = (0);
    while (time < $s + $window - 0.15) {
        my $present = $ro->contains('once');
        my $t = time;
        push @gone, sprintf('%.3f', $t - $s) if !$present && $t < $s + $window;
        my ($code, $j) = deliver($ua, $port, 'again', 'Idempotency-Key');
        $t = time;
        if ($t < $s + $window) {    # an answer after the window does not count
            $checks++;
            push @bad, sprintf('%d at %.3f s', $code, $t - $s) if $code != 200 || !$j->{duplicate};
        }
        sleep 0.1;
    }
    my $again_at = time;
    cmp_ok($checks, '>', 0, 'redeliveries were made within the window');
    is_deeply(\@bad, [], sprintf("every redelivery within %g s is a 200 duplicate (%d)", $window, $checks));
    is_deeply(\@gone, [], 'an id delivered once is seen all through the window');
    sleep($once_at + $forgotten_by - time);
    ok(!$ro->contains('once'), sprintf('forgotten %.2f s after its delivery', $forgotten_by));
    my ($code) = deliver($ua, $port, 'once');
    is($code, 202, 'delivered again after the bound: processed again');
    sleep($again_at + $forgotten_by - time) if time < $again_at + $forgotten_by;
    ($code) = deliver($ua, $port, 'again');
    is($code, 202, 'a redelivered id: processed again after the bound from its last delivery');
    my %n;
    $n{$_->[0]}++ for @{ spool($short{WEBHOOK_SPOOL}) };
    is_deeply(\%n, { once => 2, again => 2 }, 'each processed twice in all');
}
$group = $server;
stop_server();
is_deeply([live_members($group)], [], 'stopped after the short window');

# 4. Processing fails after add() said new (a spool on /dev/full, where every
# write fails with ENOSPC): 500 and the id logged; the filter cannot take the
# id back, so the retry is a duplicate, as the example says.
SKIP: {
    skip 'needs a writable /dev/full', 4 if !-c '/dev/full' || !-w _;
    my $log_before = length full_log();
    $port = start_or_bail({ %env, WEBHOOK_FILTER => "$dir/full.bloom", WEBHOOK_SPOOL => '/dev/full' },
        'a spool that cannot be written');
    my $ua = ua();
    my ($code, $j) = deliver($ua, $port, 'unlucky');
    is($code, 500, 'a failed append: 500');
    ($code, $j) = deliver($ua, $port, 'unlucky');
    ok($code == 200 && $j->{duplicate}, 'and the retry is a duplicate');
    $group = $server;
    stop_server();
    like(substr(full_log(), $log_before), qr/\[error\] delivery unlucky not spooled: /,
        'the id is in the log for a replay by hand');
}
is_deeply([live_members($group)], [], 'the manager and its workers are gone at the end');
done_testing;
