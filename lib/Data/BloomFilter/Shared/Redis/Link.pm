package Data::BloomFilter::Shared::Redis::Link;

# One connection of Data::BloomFilter::Shared::Redis to one server, as its
# one transport uses it: commands written in the Redis protocol, replies
# taken off the front of what has been read, every wait bounded by the
# filter's timeouts and every reply by the sizes the filter can ask for.
# A link is a socket of the filter's own (made from an address) or the
# socket of a Redis::Fast client given to it, borrowed for one exchange; a
# client of another kind is driven through its methods (see the engine in
# Redis.pm, _exchange). Not part of the API.

use 5.022;
use strict;
use warnings;

use Errno qw(EAGAIN ECONNRESET EINTR EPIPE ETIMEDOUT EWOULDBLOCK);
use Socket ();
use Time::HiRes ();

our $VERSION = '0';

# The longest protocol line taken (CRLF not counted), as the core's
# resp::MAX_LINE: replies to the filter's commands are lines of a few dozen
# bytes (integers, an error's or a status's text). A longer one is refused as
# soon as that much has arrived, rather than buffered as it keeps coming.
our $MAX_LINE = 1 << 16;

# The largest bulk string taken: the filter asks for at most one slice of
# its bits at a time (GETRANGE of 4 MiB, $XFER in Redis.pm). A larger claim
# is refused on its header, before any of it is buffered.
our $MAX_BULK = 4 << 20;

# Elements of one array reply, and arrays nested, taken at most: the
# filter's replies are arrays of integers (one per field of a command of 100
# items) and the attach script's few dozen strings.
my $MAX_ELEMENTS = 1 << 20;
my $MAX_DEPTH = 8;

# Bytes asked of the kernel per read: the buffer holds at most one reply
# and this much more.
my $READ = 1 << 20;

# A socket of our own to $a (_parse_address's parts), shown as $shown,
# connected within $t->{cnx_timeout}; or the error.
sub dial {
    my ($class, $a, $shown, $t) = @_;
    require IO::Socket::IP;
    require IO::Socket::UNIX;
    my $sock = defined $a->{sock}
        ? IO::Socket::UNIX->new(Peer => $a->{sock}, Type => Socket::SOCK_STREAM(), Timeout => $t->{cnx_timeout})
        : IO::Socket::IP->new(PeerHost => $a->{host}, PeerPort => $a->{port}, Proto => 'tcp',
            Timeout => $t->{cnx_timeout});
    if (!$sock) {
        my $e = "$!" || $@ || 'unknown error';
        $e = "no connection within cnx_timeout $t->{cnx_timeout} s" if $! == ETIMEDOUT || $e =~ /timed? ?out/i;
        return (undef, $e);
    }
    setsockopt($sock, Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1) if !defined $a->{sock};
    return bless { fh => $sock, name => $shown, t => $t, pid => $$, own => 1, buf => '', q => [] }, $class;
}

# The socket of a Redis::Fast client, duplicated for one exchange, or undef
# when $client is of another kind (or not connected): the server is named
# from the socket's peer.
sub borrow {
    my ($class, $client, $t) = @_;
    return undef if !($client->isa('Redis::Fast') && $client->can('__sock'));
    my $fd = eval { $client->__sock };
    return undef if !$fd || $fd !~ /\A[0-9]+\z/;
    CORE::open(my $fh, '+<&', $fd) or return undef;
    # A socket shut (by us after a failure, or by the server) has no peer
    # any more: it is then not quiet, and the caller asks the client to
    # reconnect.
    my $peer = getpeername $fh;
    my $name = 'the client\'s server';
    my $family = $peer ? Socket::sockaddr_family($peer) : -1;
    if ($family == Socket::AF_INET() || $family == Socket::AF_INET6()) {
        my ($err, $host, $port) = Socket::getnameinfo($peer, Socket::NI_NUMERICHOST() | Socket::NI_NUMERICSERV());
        $name = $host =~ /:/ ? "[$host]:$port" : "$host:$port" if !$err;
    }
    elsif ($family == Socket::AF_UNIX()) {
        my $path = Socket::unpack_sockaddr_un($peer);
        $name = "unix:$path" if length $path;
    }
    return bless { fh => $fh, name => $name, t => $t, pid => $$, own => 0, buf => '', q => [], fd => $fd,
        id => _socket_id($fd) }, $class;
}

# The device and inode of the socket behind descriptor $fd, or undef.
sub _socket_id { Data::BloomFilter::Shared::Redis::_xs_fd_id($_[0]) }

# Whether a borrowed socket is still $client's: the same descriptor, naming
# the same socket (a client that reconnected may have got the same number
# for another), in the same process.
sub still {
    my ($self, $client) = @_;
    my $fd = eval { $client->__sock };
    return $self->{pid} == $$ && defined $self->{id} && $fd && $fd eq $self->{fd}
        && (_socket_id($fd) // '') eq $self->{id};
}

# Both still($client) and quiet, in one call to C: the usual case, asked
# before every single add through a client. False does not say which.
sub fit {
    my ($self, $client) = @_;
    my $fd = eval { $client->__sock };
    return $self->{pid} == $$ && defined $self->{id} && $fd && $fd eq $self->{fd}
        && Data::BloomFilter::Shared::Redis::_xs_fit($fd, $self->{id}, fileno($self->{fh}) // -1);
}

sub name { $_[0]{name} }

# Whether the socket is open and quiet before anything is sent: a server
# that closed it (its idle timeout, a restart) or bytes nobody asked for (a
# reply of another user of a client's socket) make it unfit.
sub quiet { Data::BloomFilter::Shared::Redis::_xs_quiet(fileno($_[0]{fh}) // -1) }

# Wait until the socket can be read ($write false) or written, until
# $deadline: 1 when it can, 0 when the time ran out. A signal's handler
# that returns does not end the wait early; one that dies ends it. The
# wait is the C round trip's (redis_xs.h, bfs_io_wait): a signal that
# comes just before it is seen, which Perl's select would leave until the
# wait's end.
sub _ready {
    my ($self, $write, $deadline) = @_;
    my $left = $deadline - Time::HiRes::time();
    return 0 if $left <= 0;
    return Data::BloomFilter::Shared::Redis::_xs_wait(fileno $self->{fh}, $write ? 1 : 0, $left) ? 1 : 0;
}

# Write all of $bytes within write_timeout: undef, or the error.
# MSG_DONTWAIT, not the descriptor's flag: a client's socket is shared with
# the client, which reads it blocking. MSG_NOSIGNAL: a closed connection is
# an error, not a SIGPIPE.
sub put {
    my ($self, $bytes) = @_;
    my $flags = Socket::MSG_NOSIGNAL() | Socket::MSG_DONTWAIT();
    $self->{owed}++;    # (see DESTROY)
    # Most commands go whole at once.
    my $off = send($self->{fh}, $bytes, $flags) // 0;
    return undef if $off == length $bytes;
    my $deadline;
    while ($off < length $bytes) {
        my $w = send($self->{fh}, $off ? substr($bytes, $off) : $bytes, $flags);
        if (!defined $w) {
            next if $! == EINTR;
            return $! == EPIPE || $! == ECONNRESET ? 'Server closed the connection' : "write: $!"
                if !($! == EAGAIN || $! == EWOULDBLOCK);
            $deadline //= Time::HiRes::time() + $self->{t}{write_timeout};
            next if $self->_ready(1, $deadline);
            return "could not write to $self->{name} within write_timeout $self->{t}{write_timeout} s";
        }
        $off += $w;
        undef $deadline;    # the wait bounds each stall, and the server took some
    }
    return undef;
}

# The next reply, through $take (a function of a reference to the buffer
# that takes one reply off its front: () until it has all arrived, or the
# reply as a list; it dies on bytes that are no reply). Waits for it, up to
# read_timeout from now, when $wait; else () when it has not all arrived.
# A broken connection, a reply past the bounds or a wait past the timeout
# give ('broken', error).
sub reply {
    my ($self, $take, $wait) = @_;
    my $deadline;
    while (1) {
        my @r;
        if (length $self->{buf} && !eval { @r = $take->(\$self->{buf}); 1 }) {
            (my $e = $@) =~ s/ at \S+ line \d+\.?\n\z//;
            $e =~ s/\A\S+->\w+: //;
            return ('broken', "unreadable reply from $self->{name}: $e");
        }
        if (@r) {
            $self->{owed}--;
            return @r;
        }
        if ($wait) {
            # Waiting first: a reply is seldom there the moment it is asked for.
            $deadline //= Time::HiRes::time() + $self->{t}{read_timeout};
            return ('broken', "no reply from $self->{name} within read_timeout $self->{t}{read_timeout} s")
                if !$self->_ready(0, $deadline);
        }
        my $got = recv $self->{fh}, my $chunk, $READ, Socket::MSG_DONTWAIT();
        if (!defined $got) {
            next if $! == EINTR || ($wait && ($! == EAGAIN || $! == EWOULDBLOCK));
            return ('broken', "$!") if !($! == EAGAIN || $! == EWOULDBLOCK);
            return;
        }
        return ('broken', 'Server closed the connection') if !length $chunk;
        $self->{buf} .= $chunk;
        $wait = 1;    # the rest of a reply that has begun to arrive
    }
}

# One BITFIELD command of the core's and its reply, in one call to C
# (_xs_roundtrip, which takes _xs_command's arguments but its masks): made,
# written within write_timeout, waited for up to read_timeout, read and
# taken off the buffer with the bounds of the core's reader (resp.rs), as
# put and reply would with _xs_reply as the taker, at a fraction of their
# cost in Perl (a single add or contains is one such exchange). Returns
# _xs_reply's list, or ('broken', error) as put and reply say it.
sub roundtrip {
    my $self = shift;
    $self->{owed}++;    # till it returns (see DESTROY)
    my @r = Data::BloomFilter::Shared::Redis::_xs_roundtrip(fileno($self->{fh}) // -1, \$self->{buf},
        $self->{t}{write_timeout}, $self->{t}{read_timeout}, @_);
    $self->{owed}--;
    return @r if $r[0];
    # How it broke: redis_xs.h's BFS_IO_* numbers.
    my ($how, $detail) = @r[1, 2];
    local $! = $how == 4 || $how == 5 ? $detail : 0;
    return ('broken',
          $how == 1 ? "could not write to $self->{name} within write_timeout $self->{t}{write_timeout} s"
        : $how == 2 ? "no reply from $self->{name} within read_timeout $self->{t}{read_timeout} s"
        : $how == 3 ? 'Server closed the connection'
        : $how == 4 ? "write: $!"
        : $how == 5 ? "$!"
        : "unreadable reply from $self->{name}: $detail");
}

# A client's socket dropped with commands unanswered on it (owed: sent,
# their replies not yet taken; the call cut short by a die, from a signal's
# handler, while it waited) is shut as a failed one is: else their late
# replies would be read as the answers to the next commands sent on it.
sub DESTROY {
    my ($self) = @_;
    shutdown $self->{fh}, 2 if $self->{owed} && $self->{fh} && !$self->{own};
}

# A connection that failed is not used again: ours is closed; a client's is
# shut down, so that neither the client nor we read a late reply to a
# command whose wait was given up as the answer to another (the client sees
# a closed connection).
sub fail {
    my ($self) = @_;
    shutdown $self->{fh}, 2 if $self->{fh} && !$self->{own};
    close $self->{fh} if $self->{fh};
    delete $self->{fh};
    return;
}

# ------------------------------------------------------------ the protocol

# A command's bytes in the Redis protocol.
sub command {
    shift;
    return join '', '*' . @_ . "\r\n", map { '$' . length($_) . "\r\n$_\r\n" } @_;
}

# Take one reply of any kind off the front of $$buf: () until it has all
# arrived, else ('ok', value) (undef for a nil, an array reference for an
# array) or ('error', text). Dies on bytes that are no reply and on a line,
# bulk, array or nesting past the bounds.
sub take_value {
    my ($buf) = @_;
    my $pos = 0;
    my @r = _value($buf, \$pos, 0) or return;
    substr($$buf, 0, $pos, '');
    return @r;
}

sub _value {
    my ($buf, $pos, $depth) = @_;
    my $at = $$pos;
    my $end = index $$buf, "\r\n", $at;
    if ($end < 0) {
        die "a protocol line longer than $MAX_LINE bytes\n" if length($$buf) - $at > $MAX_LINE + 1;
        return;
    }
    die "a protocol line longer than $MAX_LINE bytes\n" if $end - $at > $MAX_LINE;
    my $type = substr $$buf, $at, 1;
    my $line = substr $$buf, $at + 1, $end - $at - 1;
    my $next = $end + 2;
    if ($type eq '+' || $type eq '-') {
        $$pos = $next;
        return ($type eq '+' ? 'ok' : 'error', $line);
    }
    die "'" . ($line =~ s/[^ -~]/?/gr) . "' is not a protocol integer\n" if $type =~ /[:\$*]/ && $line !~ /\A-?[0-9]{1,18}\z/;
    if ($type eq ':') {
        $$pos = $next;
        return ('ok', 0 + $line);
    }
    if ($type eq '$') {
        if ($line < 0) {
            $$pos = $next;
            return ('ok', undef);
        }
        die "a bulk reply of $line bytes, past the $MAX_BULK the filter asks for at most\n" if $line > $MAX_BULK;
        return if length($$buf) < $next + $line + 2;
        die "a bulk string without its CRLF\n" if substr($$buf, $next + $line, 2) ne "\r\n";
        $$pos = $next + $line + 2;
        return ('ok', substr $$buf, $next, $line);
    }
    if ($type eq '*') {
        die "a reply nested or sized past all bounds\n" if $depth >= $MAX_DEPTH || $line > $MAX_ELEMENTS;
        $$pos = $next;
        return ('ok', undef) if $line < 0;
        my @a;
        for (1 .. $line) {
            my @e = _value($buf, $pos, $depth + 1) or return;
            push @a, $e[1];    # an error inside an array is kept as its text
        }
        return ('ok', \@a);
    }
    die "'" . ($type =~ s/[^ -~]/?/gr) . "' does not start a protocol reply\n";
}

1;
