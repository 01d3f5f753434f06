# A PSGI app under real prefork servers, set up as README says: Starman with
# --preload-app and uWSGI's PSGI plugin in its default mode. The app makes an
# anonymous filter when it loads, before the server forks its workers; client
# processes ask about the same ids at once, and every id must be reported new
# exactly once across all the workers, answered by more than one of them.
# Each server's part skips where it is not installed (Debian: starman;
# uwsgi-core and uwsgi-plugin-psgi).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use HTTP::Tiny ();
use IO::Socket::INET ();
use POSIX ();
use Time::HiRes qw(time sleep);
use lib "$FindBin::Bin/lib";
use BFTest qw(spew slurp reap wait_until);

my $dir = tempdir(CLEANUP => 1);
my ($WORKERS, $CLIENTS, $IDS) = (4, 4, 200);
$SIG{ALRM} = sub { die "64-psgi-servers: global timeout\n" };
alarm 600;    # a hang guard: an idle host takes a few seconds

# The app of README's "Starman" section, with the worker's pid in the answer
# and the built module on its @INC (uWSGI's embedded perl does not read
# PERL5LIB the way perl does).
require Cwd;
my @inc = map { Cwd::abs_path($_) // $_ } grep { !ref && -d } @INC;
my $app = "$dir/app.psgi";
spew($app, join('', map {"use lib '$_';\n"} reverse @inc) . <<'PSGI');
use Data::BloomFilter::Shared;
my $seen = Data::BloomFilter::Shared->new(undef, 10_000_000, 0.001);
my $app = sub {
    my ($id) = $_[0]{PATH_INFO} =~ m{^/seen/(.+)} or return [404, [], []];
    [200, ['Content-Type' => 'text/plain'], [($seen->add($id) ? 'new' : 'seen') . " $$\n"]];
};
PSGI

sub which { my ($p) = @_; my ($f) = grep { -x } map {"$_/$p"} split /:/, $ENV{PATH} // ''; $f }

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "cannot bind a loopback port: $!";
    return $s->sockport;
}

# Start @cmd in a process group of its own, its output in $log; returns the
# pid once the port answers HTTP (or undef, for 60 s without an answer).
sub start_server {
    my ($port, $log, @cmd) = @_;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        POSIX::setsid();
        open(STDOUT, '>', $log) or POSIX::_exit(126);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
        { exec @cmd }
        POSIX::_exit(127);
    }
    my $http = HTTP::Tiny->new(timeout => 5);
    my $up = wait_until(sub {
        return -1 if waitpid($pid, POSIX::WNOHANG()) == $pid;
        $http->get("http://127.0.0.1:$port/")->{status} == 404;
    }, 60, 0.1);
    return $pid if ($up // 0) == 1;
    stop_server($pid);
    return undef;
}

sub stop_server {
    my ($pid) = @_;
    kill 'INT', -$pid;
    my (undef, $timed_out) = reap($pid, 20);
    kill 'KILL', -$pid;    # any worker left behind
    return !$timed_out;
}

# $CLIENTS processes ask about every id once each, in their own orders.
# Returns the answers as [id, new, pid].
sub run_clients {
    my ($port, $tag) = @_;
    my @readers;
    my @pids;
    for my $n (1 .. $CLIENTS) {
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            my $http = HTTP::Tiny->new(timeout => 60);
            my @order = map { ($_ * 7 + $n * 61) % $IDS } 0 .. $IDS - 1;
            @order = reverse @order if $n % 2;
            my $out = '';
            for my $i (@order) {
                my $res = $http->get("http://127.0.0.1:$port/seen/$tag-$i");
                my ($what, $wpid) = ($res->{content} // '') =~ /\A(new|seen) (\d+)\n\z/;
                $out .= $res->{status} == 200 && $what ? "$i " . ($what eq 'new' ? 1 : 0) . " $wpid\n"
                    : "$i error $res->{status}\n";
            }
            syswrite $w, $out;
            POSIX::_exit(0);
        }
        close $w;
        push @pids, $pid;
        push @readers, $r;
    }
    my @answers;
    for my $r (@readers) {
        local $/;
        push @answers, map { [split ' '] } split /\n/, <$r> // '';
    }
    reap($_, 300) for @pids;
    return @answers;
}

sub check_server {
    my ($name, $port, $pid) = @_;
    my @answers = run_clients($port, 'a');
    is(scalar @answers, $IDS * $CLIENTS, "$name: $IDS ids x $CLIENTS clients answered");
    my @errors = grep { $_->[1] eq 'error' } @answers;
    is_deeply(\@errors, [], "$name: every answer a 200 new/seen");
    my (%new, %pids);
    for (@answers) {
        next if $_->[1] eq 'error';
        $new{ $_->[0] } += $_->[1];
        $pids{ $_->[2] }++;
    }
    my @wrong = grep { ($new{$_} // 0) != 1 } 0 .. $IDS - 1;
    is_deeply([map {"id $_: new $new{$_} times"} @wrong], [], "$name: each id reported new exactly once across the workers");
    # That proves a shared filter only if more than one worker answered:
    # on a busy host one may have taken every request, so ask about more
    # ids at once until another answers: up to 50 rounds, counted in
    # rounds and not seconds, so that a slow host gets as many chances.
    my $round = 0;
    while (keys %pids < 2 && $round < 50) {
        $round++;
        $pids{ $_->[2] }++ for grep { $_->[1] ne 'error' } run_clients($port, "more$round");
    }
    cmp_ok(scalar keys %pids, '>', 1, "$name: answers came from more than one worker (" . join(', ', sort keys %pids) . ')');
    ok(stop_server($pid), "$name: stops");
}

subtest 'Starman --preload-app' => sub {
    my $starman = which('starman') or plan skip_all => 'starman is not installed (Debian: starman)';
    my $port = free_port();
    my $pid = start_server($port, "$dir/starman.log", $starman, '--preload-app', '--workers', $WORKERS,
        '--listen', "127.0.0.1:$port", $app);
    ok($pid, 'starman started') or return diag(slurp("$dir/starman.log"));
    check_server('starman', $port, $pid);
};

subtest 'uWSGI, PSGI plugin, default mode' => sub {
    my $uwsgi = which('uwsgi') or plan skip_all => 'uwsgi is not installed (Debian: uwsgi-core, uwsgi-plugin-psgi)';
    my $probe = `$uwsgi --plugin psgi --version 2>&1`;
    plan skip_all => "uwsgi has no PSGI plugin (Debian: uwsgi-plugin-psgi): $probe" if $?;
    my $port = free_port();
    my $pid = start_server($port, "$dir/uwsgi.log", $uwsgi, '--plugin', 'psgi', '--master', '--processes', $WORKERS,
        '--http-socket', "127.0.0.1:$port", '--psgi', $app, '--need-app', '--disable-logging');
    ok($pid, 'uwsgi started') or return diag(slurp("$dir/uwsgi.log"));
    check_server('uwsgi', $port, $pid);
};

done_testing;
