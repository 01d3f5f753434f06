# eg/mojo_prefork.pl under Mojolicious's prefork server: four workers share
# one anonymous filter created before the fork. Several client processes
# ask about the same ids at once; every id must be reported new exactly once
# across all workers, and answers must come from more than one worker.
use strict;
use warnings;
use Test::More;
use Cwd ();
use Errno ();
use File::Temp qw(tempdir);
use FindBin ();
use IO::Select;
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);
use lib "$FindBin::Bin/lib";
use BFTest qw(reap child_status_text perl5lib);

BEGIN {
    eval { require Mojolicious; require Mojo::UserAgent; 1 }
        or plan skip_all => 'needs Mojolicious (Debian: libmojolicious-perl)';
}
use Mojo::Util qw(encode url_escape);

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

my $example = Cwd::abs_path("$FindBin::Bin/../eg/mojo_prefork.pl");
my $dir = tempdir(CLEANUP => 1);
my $ORIG_PID = $$;
my ($WORKERS, $CLIENTS, $IDS) = (4, 4, 300);

my $server;    # pid of the prefork manager, also its process group
my @clients;

# The manager, its workers and anything they started form one process group:
# ask it to stop, give it 10 s, then kill what is left of the group.
sub stop_server {
    return if !$server;
    kill 'TERM', -$server;
    my $deadline = time + 10;
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
    if ($$ == $ORIG_PID) {
        kill 'KILL', @clients if @clients;
        stop_server();
    }
}
$SIG{INT} = $SIG{TERM} = sub { die "60-mojo-prefork: interrupted\n" };
$SIG{ALRM} = sub { die "60-mojo-prefork: global timeout\n" };
alarm 180;

sub server_log {
    open(my $fh, '<', "$dir/server.log") or return '';
    local $/;
    my $log = <$fh>;
    return length $log > 3000 ? '...' . substr($log, -3000) : $log;
}

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "cannot bind a loopback port: $!";
    return $s->sockport;
}

# Start the app on a free loopback port; returns the port once it accepts
# connections, or undef (the server stopped) when it could not start.
sub start_server {
    my $port = free_port();
    local $ENV{PERL5LIB} = perl5lib();
    local $ENV{MOJO_MODE} = 'production';    # info-level log, no per-request lines
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        POSIX::setpgid(0, 0);
        open(STDIN, '<', '/dev/null') or POSIX::_exit(127);
        open(STDOUT, '>', "$dir/server.log") or POSIX::_exit(127);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
        # -c 1: a worker holds one connection at a time, so clients that keep
        # their connections open are served by different workers.
        { exec $^X, $example, 'prefork', '-l', "http://127.0.0.1:$port",
            '-w', $WORKERS, '-c', 1, '-P', "$dir/prefork.pid" }
        POSIX::_exit(127);
    }
    POSIX::setpgid($pid, $pid);    # also here: no window where it is not a group
    $server = $pid;
    my $deadline = time + 45;    # three attempts stay within the global alarm
    while (time < $deadline) {
        if (manager_gone()) { stop_server(); return undef }
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 1);
        if ($s) { close $s; return $port }
        # Refused means not listening yet; no route to 127.0.0.1 will not
        # get better by waiting.
        last if $!{ENETUNREACH} || $!{EHOSTUNREACH} || $!{ENETDOWN} || $!{EADDRNOTAVAIL};
        sleep 0.1;
    }
    stop_server();
    return undef;
}

my $port;
for my $attempt (1 .. 3) {    # another process may take the free port first
    last if defined($port = start_server());
}
if (!defined $port) {
    fail('the prefork server starts and listens');
    diag(server_log());
    done_testing;
    exit;
}
pass("the prefork server listens on 127.0.0.1:$port");

# Ids with dots and non-ASCII characters too: they must reach the filter as
# the same bytes whichever worker decodes them.
my @ids = map {
      $_ % 10 == 0 ? "dot.$_.x"
    : $_ % 10 == 1 ? "\x{e9}t\x{e9}-$_"
    :                "id-$_"
} 0 .. $IDS - 1;

sub url_for { "http://127.0.0.1:$port/seen/" . url_escape(encode('UTF-8', $_[0])) }

# Each client asks about every id once, in its own order; so each id is asked
# about $CLIENTS times, often at the same moment by several clients.
pipe(my $ready_r, my $ready_w) or die "pipe: $!";
pipe(my $go_r, my $go_w) or die "pipe: $!";
for my $n (0 .. $CLIENTS - 1) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        @clients = ();
        close $ready_r;
        close $go_w;
        alarm 90;
        my $ok = eval {
            my $ua = Mojo::UserAgent->new(connect_timeout => 10, request_timeout => 30,
                inactivity_timeout => 30);
            my @order = map { ($_ * 7 + $n * 75) % $IDS } 0 .. $IDS - 1;
            @order = reverse @order if $n % 2;
            open(my $out, '>', "$dir/client-$n.txt") or die "client-$n.txt: $!";
            for my $k (0 .. $#order) {
                my $i = $order[$k];
                my $res = $ua->get(url_for($ids[$i]) => { Accept => 'application/json' })
                    ->result;
                die 'HTTP ' . $res->code . " for $ids[$i]\n" if !$res->is_success;
                my $j = $res->json;
                die "answer for another id\n" if !$j || $j->{id} ne $ids[$i];
                print {$out} join("\t", $i, $j->{new} ? 1 : 0, $j->{pid}), "\n";
                if ($k == 0) {
                    # Every client's first request (and connection, kept
                    # alive) is served before any client goes on.
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
    my ($ready, $deadline) = (0, time + 60);
    while ($ready < $CLIENTS && time < $deadline && $sel->can_read(1)) {
        my $n = sysread($ready_r, my $buf, 64);
        last if !$n;    # every client exited
        $ready += $n;
    }
    is($ready, $CLIENTS, 'every client got its first answer');
    syswrite $go_w, 'g' x $CLIENTS;
    close $go_w;
}
my @status = map { [reap($_, 120)] } @clients;
@clients = ();
is_deeply([map { $_->[0] } @status], [(0) x $CLIENTS], 'every client finished without error')
    or diag(join "\n", map { child_status_text({ status => $_->[0], exit => $_->[0] >> 8,
        signal => $_->[0] & 127, timed_out => $_->[1], out => '' }) } @status);

my (%new, %pids, $answers);
for my $n (0 .. $CLIENTS - 1) {
    open(my $fh, '<', "$dir/client-$n.txt") or next;
    while (<$fh>) {
        chomp;
        my ($i, $new, $pid) = split /\t/;
        $new{$i} += $new;
        $pids{$pid}++;
        $answers++;
    }
}
is($answers, $IDS * $CLIENTS, "$IDS ids x $CLIENTS clients answered");
my @wrong = grep { ($new{$_} // 0) != 1 } 0 .. $IDS - 1;
is_deeply([map { "$ids[$_]: new $new{$_} times" } @wrong], [],
    'each distinct id was reported new exactly once across all workers');
cmp_ok(scalar keys %pids, '>', 1, 'answers came from more than one worker')
    or diag('worker pids: ' . join ' ', keys %pids);
note('answers per worker: ' . join ', ', map { "$_: $pids{$_}" } sort keys %pids);

# The text answer, for people with curl.
{
    my $ua = Mojo::UserAgent->new(connect_timeout => 5, request_timeout => 30);
    my $first = $ua->get(url_for('text-only'))->result;
    like($first->body, qr/\Anew text-only \(worker \d+\)\n\z/, 'text answer: new');
    my $again = $ua->get(url_for('text-only'))->result;
    like($again->body, qr/\Aseen text-only \(worker \d+\)\n\z/, 'text answer: seen');
    my $known = $ua->get(url_for($ids[5]))->result;
    like($known->body, qr/\Aseen \Q$ids[5]\E /, 'an id the clients sent is seen');
}

my $group = $server;
stop_server();
is_deeply([live_members($group)], [], 'the manager and its workers are gone');
done_testing;
