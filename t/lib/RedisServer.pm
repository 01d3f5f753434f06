package RedisServer;

# Real redis-server processes for the Redis tests: each on a free loopback
# port in its own temporary directory, started and stopped by the test.

use strict;
use warnings;
use Exporter 'import';
use File::Temp qw(tempdir);
use IO::Socket::INET ();
use POSIX ();
use Time::HiRes qw(sleep time);

our @EXPORT_OK = qw(redis_or_skip);

my $SERVER = 'redis-server';    # the path redis_or_skip found

# skip_all unless redis-server and Redis::Fast are here; returns the server's path.
sub redis_or_skip {
    require Test::More;
    my $bin;
    for my $d ((split /:/, $ENV{PATH} // '', -1), '/usr/sbin', '/usr/bin') {
        next if !length $d;
        if (-x "$d/redis-server") { $bin = "$d/redis-server"; last }
    }
    Test::More::plan(skip_all => 'redis-server is not installed (Debian: redis-server)') if !$bin;
    Test::More::plan(skip_all => 'Redis::Fast is not installed (Debian: libredis-fast-perl)')
        if !eval { require Redis::Fast; 1 };
    $SERVER = $bin;
    return $bin;
}

# For fake servers: the next whole command in $$buf (a RESP array of bulk
# strings), taken out of it, as a list reference of its arguments; undef
# while it is not all there.
sub next_command {
    my ($buf) = @_;
    return undef if $$buf !~ /\A\*(\d+)\r\n/;
    my ($argc, $at, @args) = ($1, length "*$1\r\n");
    for (1 .. $argc) {
        return undef if substr($$buf, $at) !~ /\A\$(\d+)\r\n/;
        my $len = $1;
        $at += length("\$$len\r\n");
        return undef if length($$buf) < $at + $len + 2;
        push @args, substr $$buf, $at, $len;
        $at += $len + 2;
    }
    substr($$buf, 0, $at, '');
    return \@args;
}

# A loopback port nobody listens on now; with $bus, one whose port + 10000
# (a cluster node's bus port) is free too. Another process may still take
# it before the server binds it: new() then tries another.
sub free_port {
    my ($bus) = @_;
    for (1 .. 100) {
        my $s = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0, ReuseAddr => 1)
            or die "no free port: $!";
        my $p = $s->sockport;
        close $s;
        return $p if !$bus;
        next if $p + 10000 > 65535;
        my $b = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => $p + 10000, ReuseAddr => 1)
            or next;
        close $b;
        return $p;
    }
    die "no free port with a free bus port";
}

# RedisServer->new(%config): config directives as redis.conf names. A
# server that exits at once (its port taken in the meantime) is started
# again on another port, up to three times.
sub new {
    my ($class, %conf) = @_;
    my $bus = ($conf{'cluster-enabled'} // '') eq 'yes';
    my $self = bless {
        dir => tempdir('redis-XXXXXX', TMPDIR => 1, CLEANUP => 1),
        owner => $$,
        conf => { save => '', appendonly => 'no', %conf },
    }, $class;
    for my $try (1 .. 3) {
        $self->{port} = free_port($bus);
        return $self if eval { $self->start; 1 };
        die $@ if $try == 3 || $@ !~ /^redis-server exited/;
    }
}

# Run process $pid (a server, real or fake) at nice -10 (as root; a no-op
# otherwise), for tests whose calls must be answered within a timeout of
# a fraction of a second: on a host loaded past its cores, a server at the
# load's priority can wait longer than that for a CPU. The timeouts under
# test are the client's; this keeps the server's share of the wait small.
sub run_first {
    my ($pid) = @_;
    setpriority(0, $pid, -10) if $> == 0;
}

sub port    { $_[0]{port} }
sub dir     { $_[0]{dir} }
sub address { "127.0.0.1:$_[0]{port}" }
sub pid     { $_[0]{pid} }

sub start {
    my ($self) = @_;
    my @args = (
        '--port', $self->{port}, '--bind', '127.0.0.1', '--dir', $self->{dir},
        '--daemonize', 'no', '--logfile', "$self->{dir}/log",
        map { ("--$_", $self->{conf}{$_}) } sort keys %{ $self->{conf} },
    );
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', '/dev/null';
        exec $SERVER, @args or POSIX::_exit(127);
    }
    $self->{pid} = $pid;
    my $until = time + 10;
    while (time < $until) {
        if (waitpid($pid, POSIX::WNOHANG()) == $pid) {
            delete $self->{pid};
            die "redis-server exited: " . $self->log_tail;
        }
        my $r = eval { $self->client };
        # The server answering is ours, not another on the port.
        if ($r && eval { $r->ping } && (eval { $r->info('server')->{process_id} } // 0) == $pid) {
            # Loading the AOF answers LOADING: wait until it is done.
            return $self if eval { $r->dbsize; 1 };
        }
        sleep 0.02;
    }
    die "redis-server on port $self->{port} did not start: " . $self->log_tail;
}

sub log_tail {
    my ($self) = @_;
    open my $fh, '<', "$self->{dir}/log" or return '(no log)';
    my @l = <$fh>;
    return join '', @l > 10 ? @l[-10 .. -1] : @l;
}

sub client {
    my ($self) = @_;
    my $pass = $self->{conf}{requirepass};
    return Redis::Fast->new(server => $self->address, reconnect => 0,
        defined $pass ? (password => $pass) : ());
}

# Stop with $signal (TERM: a clean shutdown; KILL: a crash) and wait.
sub stop {
    my ($self, $signal) = @_;
    my $pid = delete $self->{pid} or return;
    kill $signal // 'TERM', $pid;
    waitpid $pid, 0;
    return;
}

# A cluster of $n masters on loopback (redis-cli --cluster create),
# waited for until every node says cluster_state:ok (at most 120 s: a few
# seconds on an idle host). Returns redis-cli's exit status and output, the
# servers and a client of each.
sub cluster {
    my ($class, $n) = @_;
    my @nodes = map {
        $class->new('cluster-enabled' => 'yes', 'cluster-config-file' => 'nodes.conf',
            'cluster-node-timeout' => 5000, appendonly => 'no')
    } 1 .. $n;
    my $out = `redis-cli --cluster create @{[ map { $_->address } @nodes ]} --cluster-yes 2>&1`;
    my $status = $?;
    my @c = map { $_->client } @nodes;
    my $until = time + 120;
    sleep 0.1 while grep({ $_->cluster('info') !~ /cluster_state:ok/ } @c) && time < $until;
    return ($status, $out, \@nodes, \@c);
}

# The first of the names "${prefix}1" .. "${prefix}100" whose hash tag's
# slot the first node does not serve: every command of a filter of that
# name to the first node is redirected.
sub name_off_first {
    my ($nodes, $c, $prefix) = @_;
    require Data::BloomFilter::Shared::Redis;
    my ($name) = grep {
        my $slot = Data::BloomFilter::Shared::Redis->key_slot("{$_}");
        !grep { $_->[0] <= $slot && $slot <= $_->[1] && $_->[2][1] == $nodes->[0]->port } @{ $c->[0]->cluster('slots') }
    } map { "$prefix$_" } 1 .. 100;
    return $name;
}

# Kill -9 the server while a forked child adds batches of 200 new ids
# through $open->() (a filter on this server): the child reports each batch
# the server acknowledged (add_many returned) on a pipe, and the server is
# killed once $batches have been; the child stops at its first failed
# batch. Returns the acknowledged ids. The caller restarts the server
# (start: it replays its append-only file) and checks them.
sub acked_until_kill {
    my ($self, $open, $batches) = @_;
    pipe my $rd, my $wr or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $rd;
        $wr->autoflush(1);
        my $f = $open->();
        for my $b (0 .. 100_000) {
            my @ids = map { "d-$b-$_" } 1 .. 200;
            last if !eval { $f->add_many(\@ids, \my @w); 1 };
            print $wr "ACK @ids\n";
        }
        POSIX::_exit(0);
    }
    close $wr;
    my (@acked, $seen);
    while (my $l = <$rd>) {
        push @acked, split ' ', substr $l, 4;
        $self->stop('KILL') if ++$seen == $batches;
    }
    waitpid $pid, 0;
    return @acked;
}

sub DESTROY {
    my ($self) = @_;
    local ($!, $?);
    # forked children inherit the object: only its creator stops the server
    $self->stop('KILL') if $self->{pid} && $$ == $self->{owner};
}

1;
