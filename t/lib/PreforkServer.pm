package PreforkServer;
# Running an example under Mojolicious's prefork server for a test: skip
# without Mojolicious or loopback, start on a free port, stop it with its
# whole process group, and fork client processes that all hold their first
# answer before any goes on. Whatever way the test ends (done, died, an
# alarm, SIGINT or SIGTERM), the END below kills the clients and every
# server's process group.
use strict;
use warnings;
use IO::Select ();
use IO::Socket::INET ();
use POSIX ();
use Test::More ();
use Time::HiRes qw(time sleep);
use BFTest qw(reap child_status_text perl5lib slurp);

# Set when the test loads this file, so END knows it even when the test
# skips before any of its own statements ran.
my $ORIG_PID = $$;
my %running;    # manager pid (also its process group) => seconds it is given to stop
my @clients;

END {
    local $?;
    if ($$ == $ORIG_PID) {
        kill 'KILL', @clients if @clients;
        stop_group($_) for keys %running;
    }
}

# Skip the whole test without Mojolicious or without a working loopback (a
# network namespace whose lo is down, a sandbox without networking): nothing
# could connect, so say so at once instead of retrying until the time limit.
# Call it in a BEGIN block, before anything that uses Mojo.
sub skip_unless_usable {
    eval { require Mojolicious; require Mojo::UserAgent; 1 }
        or Test::More::plan(skip_all => 'needs Mojolicious (Debian: libmojolicious-perl)');
    if (my $why = loopback_problem()) {
        Test::More::plan(skip_all => "needs connections to 127.0.0.1, which fail here: $why");
    }
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

# SIGINT, SIGTERM and an alarm after $seconds end the test with a message
# (die, so END runs and cleans up).
sub time_limit {
    my ($name, $seconds) = @_;
    $SIG{INT} = $SIG{TERM} = sub { die "$name: interrupted\n" };
    $SIG{ALRM} = sub { die "$name: global timeout\n" };
    alarm $seconds;
}

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "cannot bind a loopback port: $!";
    return $s->sockport;
}

# Start $opt{example} (a Mojolicious app) under prefork on a free loopback
# port, with the settings of %{ $opt{env} } in its environment, and pass once
# it accepts connections; when it cannot start, fail with its log and end
# the test here. Options: dir (for its log and pid file; required), workers
# (4), start_within (s, per attempt), attempts (another process may take the
# free port first), stop_within (s, see stop). The server's output is
# appended to dir/server.log.
sub start_ok {
    my ($class, $what, %opt) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;    # failures name the test's line
    my $self = bless {
        workers      => 4,
        start_within => 8,
        attempts     => 2,
        stop_within  => 5,
        env          => {},
        %opt,
    }, $class;
    $self->{log} = "$self->{dir}/server.log";
    $self->{log_from} = -e $self->{log} ? -s _ : 0;
    my $prefix = defined $what ? "$what: " : '';
    for my $attempt (1 .. $self->{attempts}) {
        if ($self->_start) {
            Test::More::pass("${prefix}the prefork server listens on 127.0.0.1:$self->{port}");
            return $self;
        }
    }
    Test::More::fail("${prefix}the prefork server starts and listens");
    Test::More::diag($self->log_tail);
    Test::More::done_testing();
    exit;
}

# One attempt: true once the server accepts connections, false (and the
# server stopped) when it could not start.
sub _start {
    my ($self) = @_;
    my $port = free_port();
    local $ENV{PERL5LIB} = perl5lib();
    local $ENV{MOJO_MODE} = 'production';    # info-level log, no per-request lines
    local @ENV{ keys %{ $self->{env} } } = values %{ $self->{env} };
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        POSIX::setpgid(0, 0);
        open(STDIN, '<', '/dev/null') or POSIX::_exit(127);
        open(STDOUT, '>>', $self->{log}) or POSIX::_exit(127);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(127);
        # -c 1: a worker holds one connection at a time, so clients that keep
        # their connections open are served by different workers.
        { exec $^X, $self->{example}, 'prefork', '-l', "http://127.0.0.1:$port",
            '-w', $self->{workers}, '-c', 1, '-P', "$self->{dir}/prefork.pid" }
        POSIX::_exit(127);
    }
    POSIX::setpgid($pid, $pid);    # also here: no window where it is not a group
    $running{$pid} = $self->{stop_within};
    @$self{qw(pid port)} = ($pid, $port);
    my $deadline = time + $self->{start_within};
    while (time < $deadline) {
        last if manager_gone($pid);
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 1);
        if ($s) { close $s; return 1 }
        # Refused means not listening yet; no route to 127.0.0.1 will not
        # get better by waiting.
        last if $!{ENETUNREACH} || $!{EHOSTUNREACH} || $!{ENETDOWN} || $!{EADDRNOTAVAIL};
        sleep 0.05;
    }
    $self->stop;
    return 0;
}

sub port { $_[0]{port} }

# What this server wrote to its log; the last 3000 characters of it.
sub log {
    my ($self) = @_;
    return -e $self->{log} ? substr(slurp($self->{log}), $self->{log_from}) : '';
}

sub log_tail {
    my $log = $_[0]->log;
    return length $log > 3000 ? '...' . substr($log, -3000) : $log;
}

# Stop the server (again: nothing more to do) and return the processes of
# its group that still run, which should be none.
sub stop {
    my ($self) = @_;
    return if !$self->{pid};
    stop_group($self->{pid}) if $running{ $self->{pid} };
    return live_members($self->{pid});
}

# The manager, its workers and anything they started form one process group:
# ask it to stop, give it its seconds, then kill what is left of the group.
sub stop_group {
    my ($pgid) = @_;
    my $within = delete $running{$pgid} // 5;
    kill 'TERM', -$pgid;
    my $deadline = time + $within;
    while (time < $deadline && !manager_gone($pgid)) { sleep 0.05 }
    kill 'KILL', -$pgid;    # before reaping: the group id cannot be reused yet
    waitpid $pgid, 0;
}

# True once the manager has exited (a zombie or reaped).
sub manager_gone {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/stat") or return 1;
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

# Fork $count clients that each run $code->($n, $first_answered, $record)
# under alarm($opt{alarm}). A client calls $first_answered->() once its
# first request (and connection, kept alive) is answered, and waits there
# until every client has, or until ready_within seconds have passed; it
# calls $record->(@fields) for each answer it wants checked (a line of
# dir/client-$n.txt, so what a client recorded before it failed is kept).
# A client that dies prints why and exits 3. Reaps them all (each killed
# after reap_within seconds), checks that every client got its first answer
# and finished without error, and returns the recorded answers of all
# clients, each as [@fields].
sub run_clients {
    my ($count, $code, %opt) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my ($dir, $alarm, $ready_within, $reap_within) = @opt{qw(dir alarm ready_within reap_within)};
    pipe(my $ready_r, my $ready_w) or die "pipe: $!";
    pipe(my $go_r, my $go_w) or die "pipe: $!";
    for my $n (0 .. $count - 1) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            @clients = ();
            close $ready_r;
            close $go_w;
            alarm $alarm;
            my $ok = eval {
                open(my $out, '>', "$dir/client-$n.txt") or die "client-$n.txt: $!";
                $code->($n, sub {
                    syswrite $ready_w, 'r';
                    sysread($go_r, my $go, 1) == 1 or die "no go from the test\n";
                }, sub { print {$out} join("\t", @_), "\n" });
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
    my $sel = IO::Select->new($ready_r);
    my ($ready, $deadline) = (0, time + $ready_within);
    while ($ready < $count && time < $deadline && $sel->can_read(1)) {
        my $n = sysread($ready_r, my $buf, 64);
        last if !$n;    # every client exited
        $ready += $n;
    }
    Test::More::is($ready, $count, 'every client got its first answer');
    syswrite $go_w, 'g' x $count;
    close $go_w;
    my @status = map { [reap($_, $reap_within)] } @clients;
    @clients = ();
    Test::More::is_deeply([map { $_->[0] } @status], [(0) x $count],
        'every client finished without error')
        or Test::More::diag(join "\n", map { child_status_text({ status => $_->[0],
            exit => $_->[0] >> 8, signal => $_->[0] & 127, timed_out => $_->[1], out => '' }) }
            @status);
    my @records;
    for my $n (0 .. $count - 1) {
        open(my $fh, '<', "$dir/client-$n.txt") or next;
        chomp(my @lines = <$fh>);
        push @records, map { [split /\t/] } @lines;
    }
    return @records;
}

1;
