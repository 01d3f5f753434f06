package Data::BloomFilter::Shared::Redis;

use 5.022;
use strict;
use warnings;

use Carp ();
use Scalar::Util ();
use POSIX ();
use Socket ();
use overload ();

use Data::BloomFilter::Shared ();    # the XS: hashing and local filters
use Data::BloomFilter::Shared::Args ();

our $VERSION = $Data::BloomFilter::Shared::VERSION;

# Items per BITFIELD command in a batch. Each command is atomic on its own,
# so an item's bits are always set by one command; larger commands carry
# less per-command overhead but hold the server longer. Measured against a
# local redis-server 7.0, 1000-item batches at k = 10: 50, 100 and 250 items
# per command gave the same throughput within 5%; at 100 a command takes
# 0.16 ms of server time (INFO commandstats usec_per_call), so other
# clients wait at most that long behind one.
my $CHUNK = 100;

# Bytes per GETRANGE / APPEND when whole bit strings travel (to_filter,
# merge): large enough to amortise the round trip, small enough not to stall
# the server or need its proto-max-bulk-len raised.
my $XFER = 4 << 20;

# Commands queued in a client before their replies are collected: bounds
# the client's memory in a large batch (100 items of 10 probes queue about
# 120 KiB of protocol) without costing throughput (measured: collecting
# after every 2 commands or after all of them gives the same rates).
my $FLUSH = 64;

# Redirections followed for one command before giving up.
my $MAX_REDIRECTS = 5;

# A Redis string holds at most 512 MiB: 2^32 bits.
my $MAX_KEY_BITS = 4294967296;

# The value of the metadata's `format` field: what owns the keys.
my $FORMAT = 'Data::BloomFilter::Shared::Redis 1';

my @META_FIELDS = qw(format capacity fp_rate bits hashes seed layout shards shard);

# The kinds of reply _xs_reply gives: the C API's BFS_REPLY_*.
my %CONSTANT = %Data::BloomFilter::Shared::Args::CONSTANT;
my ($REPLY_INTS, $REPLY_ERROR, $REPLY_STATUS) = @CONSTANT{qw(REPLY_INTS REPLY_ERROR REPLY_STATUS)};

sub _croak {
    my ($method, $message) = @_;
    Carp::croak(__PACKAGE__ . "->$method: $message");
}

# ------------------------------------------------------------------ slots

# CRC16-XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster hashes
# keys to slots: slot = crc16(tag) mod 16384.
my @CRC16 = map {
    my $c = $_ << 8;
    $c = ($c & 0x8000 ? ($c << 1) ^ 0x1021 : $c << 1) & 0xffff for 1 .. 8;
    $c;
} 0 .. 255;

sub _crc16 {
    my ($bytes) = @_;
    my $crc = 0;
    $crc = (($crc << 8) & 0xff00) ^ $CRC16[(($crc >> 8) ^ $_) & 0xff]
        for unpack 'C*', $bytes;
    return $crc;
}

# The slot of a key: its hash tag (the bytes between the first '{' and the
# next '}', when not empty) or else the whole key.
sub key_slot {
    my (undef, $key) = @_;
    my $s = index $key, '{';
    if ($s >= 0) {
        my $e = index $key, '}', $s + 1;
        $key = substr $key, $s + 1, $e - $s - 1 if $e > $s + 1;
    }
    return _crc16($key) % 16384;
}

# ------------------------------------------------------------------ arguments

# An address's parts: { sock => path } or { host, port, user, pass, db },
# where user and pass are there only when not empty, and db only when not 0.
sub _parse_address {
    my ($method, $address) = @_;
    return { sock => $1 } if $address =~ m{\Aunix:(?://)?(/.+)\z};
    if ($address =~ m{\Aredis://(?:([^:@/]*):([^@/]*)@)?([^:/]+|\[[^\]/]+\])(?::(\d+))?(?:/(\d+))?/?\z}) {
        my %a = (user => $1, pass => $2, host => $3, port => $4 // 6379, db => $5);
        $a{host} =~ s/\A\[(.*)\]\z/$1/;
        delete $a{$_} for grep { !length($a{$_} // '') } qw(user pass);
        delete $a{db} if !$a{db} || $a{db} == 0;
        return \%a;
    }
    return { host => $1, port => $2 } if $address =~ /\A([^\s\/]+):(\d+)\z/;
    _croak($method, "cannot parse address '$address' (expected host:port, redis://host:port/db or unix:/path)");
}

sub _connect_address {
    my ($method, $address) = @_;
    require Redis::Fast;
    my $a = _parse_address($method, $address);
    my %args = (reconnect => 0);
    if (defined $a->{sock}) {
        $args{sock} = $a->{sock};
    }
    else {
        $args{server} = "$a->{host}:$a->{port}";
        $args{password} = $a->{pass} if defined $a->{pass};
        $args{username} = $a->{user} if defined $a->{user};
    }
    my $r = _try_connect($method, $address, \%args);
    if (defined $a->{db} && !eval { $r->select($a->{db}); 1 }) {
        _croak($method, 'cannot select database ' . $a->{db} . ' at ' . _shown($address) . ': '
                . _strip_client_error($@));
    }
    return $r;
}

# An address for messages: never the password.
sub _shown {
    my ($address) = @_;
    return $address =~ s{\A(redis://[^:@/]*):[^@/]+@}{$1:***@}r;
}

sub _try_connect {
    my ($method, $address, $args) = @_;
    my $r = eval { Redis::Fast->new(%$args) };
    if (!$r) {
        (my $e = $@ // 'unknown error') =~ s/ at \S+ line \d+.*//s;
        _croak($method, 'cannot connect to ' . _shown($address) . ": $e");
    }
    return $r;
}

sub _is_client {
    my ($r) = @_;
    return Scalar::Util::blessed($r) && ($r->can('ping') || $r->can('AUTOLOAD'));
}

# How a message shows a value given.
sub _given    { return Data::BloomFilter::Shared::Args::shown(@_) }

# Capacity, fp_rate, seed and options hashes are checked as for a local
# filter (Data::BloomFilter::Shared::Args), with this class's words for a
# capacity that is no number or not positive. The capacity is a number, as
# it always was here (an exact decimal string there).
sub _capacity { return 0 + Data::BloomFilter::Shared::Args::capacity(__PACKAGE__, @_) }
sub _fp_rate  { return Data::BloomFilter::Shared::Args::fp_rate(__PACKAGE__, @_) }
sub _seed     { return Data::BloomFilter::Shared::Args::seed(__PACKAGE__, @_) }
sub _options  { return Data::BloomFilter::Shared::Args::options(__PACKAGE__, @_) }

sub _name {
    my ($method, $name) = @_;
    _croak($method, 'undefined name') if !defined $name;
    _croak($method, 'name must be a string, got ' . _given($name))
        if ref $name && !overload::Method($name, '""');
    my $copy = "$name";
    utf8::downgrade($copy, 1)
        or _croak($method, 'Wide character in name, got ' . _given($name, $copy)
            . ' (encode first, e.g. Encode::encode_utf8)');
    _croak($method, 'name must not be empty') if $copy eq '';
    _croak($method, "name must not contain '{' or '}' (it becomes the keys' hash tag), got "
            . _given($name, $copy))
        if $copy =~ /[{}]/;
    return $copy;
}

sub _geometry {
    my ($method, $layout, $capacity, $fp_rate) = @_;
    my ($bits, $hashes, $span) = _xs_geometry($layout, $capacity, $fp_rate);
    _croak($method, $hashes) if !defined $bits;
    return ($bits, $hashes, $span);
}

# ------------------------------------------------------------------ creation

# Creates a piece's metadata and its zeroed bit string in one script, or
# reports what is there. The bit string comes first: under maxmemory, the
# first write is the one refused, so a refusal leaves nothing behind.
my $ATTACH_LUA = <<'LUA';
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  local b = redis.call('TYPE', KEYS[2])['ok']
  if b ~= 'none' then return {'orphan', b} end
  -- Redis checks maxmemory before a command, not after: one SETRANGE would
  -- take the server far past it. Refuse what does not fit, as a full
  -- filesystem refuses a local filter at creation.
  local info = redis.call('INFO', 'memory')
  local max = tonumber(string.match(info, 'maxmemory:(%d+)') or '0')
  local used = tonumber(string.match(info, 'used_memory:(%d+)') or '0')
  if max > 0 and used + tonumber(ARGV[1]) > max then return {'full', used, max} end
  redis.call('SETRANGE', KEYS[2], tonumber(ARGV[1]) - 1, '\0')
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
  return {'created'}
end
if t ~= 'hash' then return {'type', t} end
local b = redis.call('TYPE', KEYS[2])['ok']
local len = -1
if b == 'string' then len = redis.call('STRLEN', KEYS[2]) end
return {'exists', b, len, redis.call('HGETALL', KEYS[1])}
LUA

# Zero a piece's bits, only while its metadata and bit string are intact.
my $CLEAR_LUA = <<'LUA';
if redis.call('HGET', KEYS[1], 'format') ~= ARGV[2] then return 'meta' end
if redis.call('TYPE', KEYS[2])['ok'] ~= 'string' or redis.call('STRLEN', KEYS[2]) ~= tonumber(ARGV[1]) then return 'bits' end
redis.call('DEL', KEYS[2])
redis.call('SETRANGE', KEYS[2], tonumber(ARGV[1]) - 1, '\0')
return 'ok'
LUA

# OR an uploaded string into a piece's bits and drop it, atomically, only
# while the piece is intact and the upload complete.
my $MERGE_LUA = <<'LUA';
local st = 'ok'
if redis.call('HGET', KEYS[1], 'format') ~= ARGV[2] then st = 'meta'
elseif redis.call('TYPE', KEYS[2])['ok'] ~= 'string' or redis.call('STRLEN', KEYS[2]) ~= tonumber(ARGV[1]) then st = 'bits'
elseif redis.call('TYPE', KEYS[3])['ok'] ~= 'string' or redis.call('STRLEN', KEYS[3]) ~= tonumber(ARGV[1]) then st = 'upload'
end
if st ~= 'ok' then
  redis.call('DEL', KEYS[3])
  return st
end
redis.call('BITOP', 'OR', KEYS[2], KEYS[2], KEYS[3])
redis.call('DEL', KEYS[3])
return 'ok'
LUA

sub new {
    my $class = $_[0];
    $class = ref $class || $class;
    _croak('new', 'usage: ' . __PACKAGE__
            . '->new($redis_or_address, $name, $capacity, $fp_rate, \%options)')
        if @_ < 4 || @_ > 6;
    my (undef, $redis, $name, $capacity, $fp_rate, $opts) = @_;
    # A filter in Redis is one bit array that every host sizes alike: it
    # has no stages to add (see Data::BloomFilter::Shared, FILTERS THAT GROW).
    _croak('new', 'the grow and max_capacity options are not supported here: a filter in Redis'
            . ' does not grow (size it for the most items it will hold)')
        if ref $opts eq 'HASH' && (exists $opts->{grow} || exists $opts->{max_capacity});
    $opts = _options('new', $opts, qw(seed layout shards connect));
    $name = _name('new', $name);
    my $capacity_given = $capacity;
    $capacity = _capacity('new', $capacity);
    $fp_rate = _fp_rate('new', $fp_rate, $capacity_given);
    my $seed = exists $opts->{seed} ? _seed('new', $opts->{seed}, 1) : undef;
    my $layout = $opts->{layout};
    _croak('new', 'layout must be a string, got ' . _given($layout)
            . ' (' . Data::BloomFilter::Shared::Args::layout_choice() . ')')
        if defined $layout && (ref $layout || $layout !~ /\A\w+\z/);
    my $shards = $opts->{shards};
    if (defined $shards) {
        _croak('new', 'shards must be an integer from 1 to 65536, got ' . _given($shards))
            if ref $shards || $shards !~ /\A[0-9]+\z/ || $shards < 1 || $shards > 65536;
        $shards = 0 + $shards;
    }
    my $connect = $opts->{connect};
    _croak('new', 'connect must be a code reference, got ' . _given($connect))
        if defined $connect && ref $connect ne 'CODE';
    _croak('new', 'undefined redis client or address') if !defined $redis;

    my $conn;
    if (ref $redis) {
        _croak('new', 'first argument must be a Redis client object or an address string, got '
                . _given($redis) . ' (a client has the methods of Redis or Redis::Fast)')
            if !_is_client($redis);
        $conn = $redis;
    }
    else {
        $conn = _connect_address('new', "$redis");
    }

    my $self = bless {
        name => $name,
        conns => { '' => $conn },    # '' is the client we were given (or made)
        address => (ref($redis) ? undef : "$redis"),    # set when '' is ours to remake
        slot_node => {},              # slot => "host:port", learned from MOVED
        connect => $connect,
    }, $class;

    # Validate the arguments as a creator would, even when the filter exists.
    my $want = {
        # No seed: 0, or DataSketches' default for its layout (as locally).
        capacity => $capacity, fp_rate => $fp_rate,
        seed => $seed // (defined $layout && $layout eq 'datasketches' ? '9001' : '0'),
        layout => $layout // (Data::BloomFilter::Shared::Args::layout_names())[0], shards => $shards // 1,
    };
    $self->_set_geometry('new', $want);

    # The same name under the other key scheme: an unsharded filter's tag is
    # the name, a sharded one's pieces are name:0, name:1, ... Attaching
    # without shards to a sharded filter adopts its shards; anything else
    # that disagrees croaks, rather than create a second filter beside it.
    my ($other, $other_layout) = $self->_stored_shards($want->{shards} == 1 ? "$name:0" : $name);
    if (defined $other) {
        _croak('new', "shards mismatch: the filter in Redis has shards $other, asked for $want->{shards}")
            if defined $shards || $want->{shards} > 1;
        _croak('new', "layout mismatch: the filter in Redis has layout $other_layout, asked for $layout")
            if defined $layout && $layout ne $other_layout;
        @$want{qw(shards layout)} = ($other, $other_layout);
        $self->_set_geometry('new', $want);
    }

    # Piece 0 decides: whoever creates it first fixes the geometry, and every
    # later piece is created (or checked) from what it holds.
    my $first = $self->_attach_piece(0, $want, { seed => $seed, layout => $layout, shards => $shards });
    if ($first) {
        $self->_set_geometry('new', $first);
    }
    for my $i (1 .. $self->{shards} - 1) {
        $self->_attach_piece($i, $self->_meta_of_self, {});
    }
    return $self;
}

# The geometry arguments of the XS's remote calls, in their order.
sub _geo { @{ $_[0] }{qw(layout seed bits hashes span piece)} }

# The fields per item a BITFIELD of an add (one per probe) or a query has.
sub _fields { $_[1] ? $_[0]{hashes} : $_[0]{fields} }

sub _set_geometry {
    my ($self, $method, $g) = @_;
    my ($bits, $hashes, $span) = _geometry($method, $g->{layout}, $g->{capacity}, $g->{fp_rate});
    my $piece = _cut($method, $g->{layout}, $bits, $g->{shards}, $span);
    @$self{qw(capacity fp_rate seed layout shards bits hashes span piece)}
        = (@$g{qw(capacity fp_rate seed layout shards)}, $bits, $hashes, $span, $piece);
    # The fields a query reads per item: one bit per probe, or a blocked
    # item's word or block as 64-bit fields (see _xs_args).
    $self->{fields} = _xs_query_fields($g->{layout}, $bits, $hashes, $span);
    my ($n, $shards) = ($self->{name}, $g->{shards});
    $self->{tags} = [map { $shards == 1 ? $n : "$n:$_" } 0 .. $shards - 1];
    $self->{bitskey} = "{$self->{tags}[0]}:bits";
    $self->{slots} = [map { __PACKAGE__->key_slot("{$_}") } @{ $self->{tags} }];
    return;
}

# The size of each piece (the last may be shorter) when $bits bits are cut
# into $shards pieces of a whole number of spans (an item's bits never
# straddle two pieces), or a croak saying why they cannot be.
sub _cut {
    my ($method, $layout, $bits, $shards, $span) = @_;
    if ($span == 0) {    # an item's bits may be anywhere: no cut
        _croak($method, "shards need layout 'blocked' (layout '$layout' spreads an item's bits over the whole array)")
            if $shards > 1;
        $span = $bits;
    }
    my $spans = $bits / $span;
    my $per = $shards > 1 ? POSIX::ceil($spans / $shards) : $spans;
    my $piece = $per * $span;
    _croak($method, "shards => $shards leave a piece empty ($bits bits cut into equal pieces of whole $span-bit spans)")
        if $shards > 1 && ($shards - 1) * $per >= $spans;
    if ($piece > $MAX_KEY_BITS) {
        my $need = POSIX::ceil($bits / $MAX_KEY_BITS);
        _croak($method, "the filter needs $bits bits but a Redis string holds at most 2^32: use shards => $need or more"
                . ($span == $bits ? " (with layout 'blocked')" : ''));
    }
    return $piece;
}

# The bits of piece $i.
sub _piece_bits {
    my ($self, $i) = @_;
    my $rest = $self->{bits} - $i * $self->{piece};
    return $rest < $self->{piece} ? $rest : $self->{piece};
}

# The shards and layout of a filter of ours whose metadata is at
# {$tag}:meta, or nothing.
sub _stored_shards {
    my ($self, $tag) = @_;
    my $r = eval {
        $self->_call('new', 'slot:' . __PACKAGE__->key_slot("{$tag}"), 'eval',
            "if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return false end "
                . "return redis.call('HMGET', KEYS[1], 'format', 'shards', 'layout')",
            1, "{$tag}:meta");
    };
    die $@ if !defined $r && $@ && $@ !~ /WRONGTYPE/;
    return if ref $r ne 'ARRAY' || ($r->[0] // '') ne $FORMAT
        || ($r->[1] // '') !~ /\A[0-9]+\z/ || ($r->[2] // '') !~ /\A\w+\z/;
    return @$r[1, 2];
}

sub _meta_of_self {
    my ($self) = @_;
    return { map { $_ => $self->{$_} } qw(capacity fp_rate seed layout shards) };
}

sub _keys {
    my ($self, $i) = @_;
    my $t = $self->{tags}[$i];
    return ("{$t}:meta", "{$t}:bits");
}

# Attach to piece $i, creating it from $g when absent. Returns the stored
# geometry (a hash) when the piece existed, undef when we created it.
sub _attach_piece {
    my ($self, $i, $g, $explicit) = @_;
    my ($mk, $bk) = $self->_keys($i);
    my $bytes = $self->_piece_bits($i) / 8;
    my @meta = (
        format => $FORMAT, capacity => $g->{capacity}, fp_rate => sprintf('%.17g', $g->{fp_rate}),
        bits => $self->{bits}, hashes => $self->{hashes}, seed => $g->{seed}, layout => $g->{layout},
        shards => $g->{shards}, shard => $i,
    );
    my $r = $self->_call('new', $i, 'eval', $ATTACH_LUA, 2, $mk, $bk, $bytes, @meta);
    _croak('new', "unexpected reply to the attach script") if ref $r ne 'ARRAY';
    my ($what, @rest) = @$r;
    return undef if $what eq 'created';
    _croak('new', "key $bk exists without $mk (not a filter of this module; nothing was changed)")
        if $what eq 'orphan';
    _croak('new', "OOM: the filter needs $bytes bytes but the server uses $rest[0] of its maxmemory $rest[1] (nothing was changed)")
        if $what eq 'full';
    _croak('new', "key $mk holds a $rest[0], not a filter's metadata (nothing was changed)")
        if $what eq 'type';
    my ($btype, $blen, $pairs) = @rest;
    my %m = @{ $pairs // [] };
    _croak('new', "key $mk is not a filter of this module (format '"
            . ($m{format} // '') . "', expected '$FORMAT')")
        if ($m{format} // '') ne $FORMAT;
    for my $f (@META_FIELDS) {
        _croak('new', "key $mk: field '$f' is missing") if !defined $m{$f};
    }
    _croak('new', "key $mk: field '$_' is not a non-negative integer ('$m{$_}')")
        for grep { $m{$_} !~ /\A[0-9]{1,20}\z/ } qw(capacity bits hashes seed shards shard);
    _croak('new', "key $mk: field 'fp_rate' is not a number ('$m{fp_rate}')")
        if !Scalar::Util::looks_like_number($m{fp_rate});
    _croak('new', "key $mk: field 'layout' is not a layout name ('$m{layout}')")
        if $m{layout} !~ /\A\w+\z/;
    my ($bits, $hashes, $span) = eval { _geometry('new', $m{layout}, $m{capacity}, $m{fp_rate}) };
    _croak('new', "key $mk: " . _strip($@)) if !defined $bits;
    _croak('new', "key $mk: bits $m{bits} and hashes $m{hashes} do not match capacity $m{capacity} and fp_rate $m{fp_rate} (expected $bits and $hashes)")
        if $bits != $m{bits} || $hashes != $m{hashes};
    for my $f (qw(seed layout shards)) {
        my $asked = $explicit->{$f};
        _croak('new', "$f mismatch: the filter in Redis has $f $m{$f}, asked for $asked")
            if defined $asked && $asked ne $m{$f};
    }
    if ($i > 0) {
        for my $f (qw(capacity seed layout shards bits hashes)) {
            _croak('new', "key $mk: field '$f' is $m{$f}, piece 0 has $self->{$f}")
                if $m{$f} ne $self->{$f};
        }
    }
    _croak('new', "key $mk: it is piece $m{shard}, expected piece $i") if $m{shard} != $i;
    _croak('new', "key $bk holds a $btype, not a filter's bits") if $btype ne 'string';
    my $piece = eval { _cut('new', $m{layout}, $bits, $m{shards}, $span) };
    _croak('new', "key $mk: " . _strip($@)) if !defined $piece;
    my $rest = $bits - $i * $piece;
    my $piece_bytes = ($rest < $piece ? $rest : $piece) / 8;
    _croak('new', "key $bk has $blen bytes, expected $piece_bytes") if $blen != $piece_bytes;
    return { %m, fp_rate => 0 + $m{fp_rate} };
}

sub _strip {
    my ($e) = @_;
    $e =~ s/\A\S+->\w+: //;
    $e =~ s/ at \S+ line \d+\.?\n\z//;
    return $e;
}

# ------------------------------------------------------------------ routing

# The connection for piece $i (or for a node "host:port").
sub _conn_for {
    my ($self, $method, $node) = @_;
    return $self->{conns}{''} //= _connect_address($method, $self->{address}) if !defined $node;
    return $self->{conns}{$node} //= do {
        my ($host, $port) = $node =~ /\A(.*):(\d+)\z/;
        my $c;
        if ($self->{connect}) {
            $c = eval { $self->{connect}->($host, $port) };
            _croak($method, "connect callback failed for $node: " . _strip($@ // '')) if !$c;
            _croak($method, "connect callback returned no client for $node") if !_is_client($c);
        }
        else {
            $c = _connect_address($method, $node);
        }
        $c;
    };
}

# Forget broken connections that are ours to remake (the ones made from an
# address or with the connect option), so that the next call connects
# afresh; nothing is ever sent again on its own. A client passed in is the
# caller's: it is kept.
sub _drop_broken {
    my ($self, @nodes) = @_;
    for my $node (@nodes) {
        next if $node eq '' && !defined $self->{address};
        delete $self->{conns}{$node};
    }
    return;
}

# ------------------------------------------------------------ own socket

# A filter made from an address sends its batches over a socket of its own,
# beside the Redis::Fast connection that carries everything else: the core
# encodes each command from the items' offsets and folds each reply, so no
# argument or reply element becomes a Perl value, and each command is
# written as soon as it is made, so the server works on one while the next
# is encoded. Unsharded filters only, while their key is where the address
# points: a redirection (the engine then learns the slot's node) sends the
# filter's batches back to the engine. A forked child opens its own.
sub _direct {
    my ($self, $method) = @_;
    return undef if !defined $self->{address} || $self->{shards} > 1 || defined $self->_piece_node(0);
    my $d = $self->{direct};
    return $d if $d && $d->{pid} == $$ && _direct_idle($d);
    my $a = _parse_address($method, $self->{address});
    require IO::Socket::IP;
    require IO::Socket::UNIX;
    my $sock = defined $a->{sock}
        ? IO::Socket::UNIX->new(Peer => $a->{sock}, Type => Socket::SOCK_STREAM())
        : IO::Socket::IP->new(PeerHost => $a->{host}, PeerPort => $a->{port}, Proto => 'tcp');
    _croak($method, 'cannot connect to ' . _shown($self->{address}) . ": $!") if !$sock;
    setsockopt($sock, Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1) if !defined $a->{sock};
    $d = { sock => $sock, pid => $$, buf => '' };
    my @hello;
    push @hello, ['AUTH', (defined $a->{user} ? $a->{user} : ()), $a->{pass}] if defined $a->{pass};
    push @hello, ['SELECT', $a->{db}] if defined $a->{db};
    for my $cmd (@hello) {
        my $e = _direct_send($d, join '', '*' . @$cmd . "\r\n", map { '$' . length($_) . "\r\n$_\r\n" } @$cmd);
        my @r = defined $e ? () : _direct_reply($d, 1, undef, undef, \$e, 1);
        $e //= $r[0] == $REPLY_STATUS ? undef : $r[0] == $REPLY_ERROR ? $r[1] : 'an unexpected reply';
        _croak($method, "cannot $cmd->[0] at " . _shown($self->{address}) . ": $e") if defined $e;
    }
    return $self->{direct} = $d;
}

# Whether a socket between batches is still open and quiet: a server that
# closed it (its idle `timeout`, a restart) or sent something unasked makes
# the next batch open another, before anything is sent on this one.
sub _direct_idle {
    my ($d) = @_;
    my $got = recv $d->{sock}, my $peek, 1, Socket::MSG_PEEK() | Socket::MSG_DONTWAIT();
    return !defined $got && ($!{EAGAIN} || $!{EWOULDBLOCK});
}

# Write all of $bytes; the error, or undef. MSG_NOSIGNAL: a closed
# connection is an error, not a SIGPIPE.
sub _direct_send {
    my ($d, $bytes) = @_;
    my $off = 0;
    while ($off < length $bytes) {
        my $w = send($d->{sock}, $off ? substr($bytes, $off) : $bytes, Socket::MSG_NOSIGNAL());
        if (!defined $w) {
            next if $!{EINTR};
            return $!{EPIPE} || $!{ECONNRESET} ? 'Server closed the connection' : "write: $!";
        }
        $off += $w;
    }
    return undef;
}

# The next reply (as _xs_reply gives it): waiting for it when $wait, else
# () when it has not all arrived. A broken connection or bytes that are no
# reply set $$error and give ().
sub _direct_reply {
    my ($d, $fields, $masks, $out, $error, $wait) = @_;
    while (1) {
        my @r = eval { _xs_reply(\$d->{buf}, $fields, $masks, $out) };
        if ($@) {    # bytes that are no reply, or a reply that does not answer the command
            $$error = 'unreadable reply: ' . _strip($@);
            return;
        }
        return @r if @r;
        my $got = recv $d->{sock}, my $chunk, 1 << 20, $wait ? 0 : Socket::MSG_DONTWAIT();
        if (!defined $got) {
            next if $!{EINTR};
            return if !$wait && ($!{EAGAIN} || $!{EWOULDBLOCK});    # nothing yet
            $$error = "$!";
            return;
        }
        if (!length $chunk) {
            $$error = 'Server closed the connection';
            return;
        }
        $d->{buf} .= $chunk;
        $wait = 1;    # the rest of a reply that has begun to arrive
    }
}

# A batch over the filter's own socket: commands of $CHUNK items, each
# written as soon as it is encoded, replies taken as they come. Fills the
# batch's tallies as the engine does; returns the chunks redirected (not
# run), which the engine then sends.
sub _direct_batch {
    my ($self, $method, $d, $verb, $plain, $t) = @_;
    # The socket is the batch's until it ends cleanly: one cut short (by a
    # die from a signal handler, say) leaves commands or replies on it, so
    # it is put back only at the end, and otherwise closed with $d.
    delete $self->{direct};
    my $n = @$plain;
    my $fields = $self->_fields($verb);
    my @geo = $self->_geo;
    my (@sent, @redo, $error, $stop);
    my $done = 0;
    # Take the replies that have come; wait for more while over $most
    # commands are unanswered (undef: do not wait).
    my $take = sub {
        my ($most) = @_;
        while ($done < @sent) {
            my ($s, $e, $masks) = @{ $sent[$done] };
            my @full;
            my $wait = defined $most && @sent - $done > $most;
            my @r = _direct_reply($d, $fields, $masks, $t->{out} ? \@full : undef, \$error, $wait);
            return if !@r;
            $done++;
            if ($r[0] == $REPLY_INTS && $r[2] == $e - $s + 1) {
                $t->{reply}->($r[1], $r[2], \@full, undef, $s, $e);
            }
            elsif ($r[0] == $REPLY_ERROR && $r[1] =~ /\A(?:MOVED|ASK) /) {
                push @redo, [$s, $e];
            }
            elsif ($r[0] == $REPLY_ERROR) {    # refused, not run; nothing more is sent
                ${ $t->{refused} } += $e - $s + 1;
                $t->{error} //= $r[1];
                $stop = 1;
            }
            else {
                $error = 'the server sent a reply of the wrong shape';
                return;
            }
        }
    };
    for (my $from = 0; $from < $n && !$stop && !defined $error; $from += $CHUNK) {
        my $count = $from + $CHUNK < $n ? $CHUNK : $n - $from;
        my $masks;
        my $cmd = eval { _xs_command($verb, @geo, $self->{bitskey}, $plain, $from, $count, \$masks) };
        if (!defined $cmd) {    # the items were checked: a fault of ours, but the batch is told
            $t->{error} //= _strip($@);
            last;
        }
        push @sent, [$from, $from + $count - 1, $masks];
        my $broke = _direct_send($d, $cmd);
        if (defined $broke) {
            # This command may have gone out whole; replies that came
            # before the break are still counted.
            $take->(undef);
            $error = $broke;
            last;
        }
        # At most $FLUSH commands unanswered, as through a client: that
        # bounds what a broken connection leaves in doubt.
        $take->($FLUSH - 1);
    }
    $take->(0) if !defined $error;
    # Never sent: not added.
    my $sent_items = @sent ? $sent[-1][1] + 1 : 0;
    ${ $t->{refused} } += $n - $sent_items;
    if (defined $error) {
        # Sent and unanswered: unknown. The socket is closed; the next batch
        # opens another.
        $t->{error} //= $error;
    }
    else {
        $self->{direct} = $d;
    }
    return @redo;
}

# Where a command goes: piece $i's slot, or "slot:N".
sub _piece_node {
    my ($self, $i) = @_;
    return $self->{slot_node}{ $i =~ /\Aslot:(\d+)\z/ ? $1 : $self->{slots}[$i] };
}

# Run commands, each [piece, method, args, on_reply, on_refused], pipelined per
# connection; follow MOVED (remember the slot's node) and ASK (ASKING, then
# the command, once) and send again what was redirected. A command that
# failed otherwise, or a connection that broke, croaks after every reply
# that did come has been handled; $on_fail (if any) is called first with
# the error.
sub _run {
    my ($self, $method, $cmds, $on_fail) = @_;
    # [piece, method, args, on_reply, on_not_added, ASK target]
    my @todo = map { [@$_[0 .. 4], undef] } @$cmds;
    for my $round (0 .. $MAX_REDIRECTS) {
        my (%used, @again, $error, %broken, $stop);
        my $queued = 0;
        for my $c (@todo) {
            my ($i, $cmd, $args, $cb, $refused, $ask) = @$c;
            if ($stop) {    # never sent: not added
                $refused->() if $refused;
                next;
            }
            my $node = $ask // $self->_piece_node($i);
            my $conn = $self->_conn_for($method, $node);
            $used{$node // ''} = $conn;
            my $sent = eval {
                $conn->asking(sub { }) if defined $ask;
                my @send = $cmd eq 'bitfield_ro' ? _bitfield_ro($conn) : ($cmd);
                my $m = shift @send;
                # The XS's arguments go straight onto the call's stack:
                # returned through a Perl sub, thousands of them would each
                # be copied.
                $conn->$m(@send, (ref $args eq 'HASH' ? ($args->{key}, _xs_args(@{ $args->{xs} })) : @$args), sub {
                    my ($reply, $err) = @_;
                    if (!defined $err) {
                        $cb->($reply) if $cb;
                    }
                    elsif ($err =~ /\A(MOVED|ASK) (\d+) (\S+)\z/) {
                        $self->{slot_node}{$2} = $3 if $1 eq 'MOVED';
                        push @again, [$i, $cmd, $args, $cb, $refused, $1 eq 'ASK' ? $3 : undef];
                    }
                    else {
                        # An error reply (an upper-case code: OOM, WRONGTYPE,
                        # ERR, ...) means the server refused the command
                        # without running it; anything else is the client's
                        # (a closed connection): the command may have run.
                        if ($err =~ /\A[A-Z][A-Z_-]* /) {
                            $refused->() if $refused;
                        }
                        else {
                            $broken{$node // ''} = 1;
                        }
                        $error //= $err;
                    }
                });
                1;
            };
            if (!$sent) {
                $error //= $@;
                $broken{$node // ''} = 1;
                $refused->() if $refused;
                $stop = 1;
                next;
            }
            # The client queues what it has not sent: collect the replies
            # every $FLUSH commands, so that a large batch needs no more
            # memory than that, and stop at the first error.
            if (++$queued % $FLUSH == 0) {
                $self->_wait_all(\%used, \$error, \%broken);
                $stop = 1 if defined $error;
            }
        }
        $self->_wait_all(\%used, \$error, \%broken);
        $self->_drop_broken(keys %broken);
        if (defined $error) {
            # Redirected and not sent again: not added.
            $_->[4] && $_->[4]->() for @again;
            $error = _strip_client_error($error);
            $on_fail->($error) if $on_fail;
            _croak($method, $error);
        }
        return if !@again;
        @todo = @again;
    }
    _croak($method, "still redirected after $MAX_REDIRECTS redirections (the cluster is resharding?)");
}

sub _wait_all {
    my ($self, $used, $error, $broken) = @_;
    for my $node (keys %$used) {
        next if eval { $used->{$node}->wait_all_responses; 1 };
        $$error //= $@;
        $broken->{$node} = 1;
    }
    return;
}

# Queries use BITFIELD_RO: read-only, so a full server (maxmemory) and a
# read-only replica still answer them. The method APIs turn a method name's
# underscores into separate words (bitfield_ro would send "BITFIELD RO"), so
# Redis::Fast is given the command name through its own dispatcher; other
# clients send BITFIELD with GETs only.
sub _bitfield_ro {
    my ($conn) = @_;
    return ('__std_cmd', 'BITFIELD_RO') if $conn->isa('Redis::Fast') && $conn->can('__std_cmd');
    return ('bitfield');
}

sub _strip_client_error {
    my ($e) = @_;
    $e =~ s/\A\[\w+\] //;
    $e =~ s/,? at \S+ line \d+\.?\n.*\z//s;
    $e =~ s/[\s,]+\z//;
    return $e;
}

# One command, its reply.
sub _call {
    my ($self, $method, $i, $cmd, @args) = @_;
    my $reply;
    $self->_run($method, [[$i, $cmd, \@args, sub { $reply = $_[0] }]]);
    return $reply;
}

# ------------------------------------------------------------------ items

# The batch engine of add/add_many/contains/contains_many: BITFIELD per
# chunk of $CHUNK items of one piece, pipelined. Returns the count; fills
# @$out (when given) with one 0/1 per item.
sub _batch {
    my ($self, $method, $verb, $items, $out) = @_;
    _croak($method, 'argument is not an array reference, got ' . _given($items) . ' (give \@items)')
        if ref $items ne 'ARRAY' && !(Scalar::Util::blessed($items) && overload::Method($items, '@{}'));
    # Every element is checked before anything is sent. Plain strings are
    # used as they are; anything else is copied once, as a string, so that
    # each element's magic or overloading runs once (an undefined one stays
    # undefined, for the check to refuse).
    my $plain = _xs_plain($items) ? $items : _strings($method, $items);
    my $n = @$plain;
    my $fields = $self->_fields($verb);
    my ($count, $known, $refused) = (0, 0, 0);
    my @each;
    # A command's reply, folded: $full of its $got items (@$flags, one per
    # item) held every bit; the items are @$ix, or $s .. $e.
    my $tally = sub {
        my ($full, $got, $flags, $ix, $s, $e) = @_;
        $count += $verb ? $got - $full : $full;
        $known += $got;
        return if !$out;
        my @r = $verb ? map { 1 - $_ } @$flags : @$flags;    # an add reports the items not there before
        if ($ix) { @each[@$ix] = @r } else { @each[$s .. $e] = @r }
    };
    my $failed = $self->_batch_failed($method, $verb, $n, $out, \@each, \$known, \$refused);
    # One command of piece $p: the item indexes it covers (undef: $s .. $e),
    # its arguments (an array, or { key, xs => _xs_args's arguments } to
    # make them when sent) and, for a query, its masks (a string, or a
    # reference to where _xs_args puts them).
    my $command = sub {
        my ($p, $ix, $s, $e, $args, $masks) = @_;
        return [$p, $verb ? 'bitfield' : 'bitfield_ro', $args, sub {
            my @r;
            my $full = _xs_fold($_[0], $fields, ref $masks ? $$masks : $masks, $out ? \@r : undef);
            $tally->($full, @{ $_[0] } / $fields, \@r, $ix, $s, $e);
        }, sub { $refused += $ix ? @$ix : $e - $s + 1 }];
    };
    my @cmds;
    if ($self->{shards} > 1) {
        # The items grouped by piece; every item is checked first.
        my (@pieces, $masks);
        my @args = eval { _xs_args($verb, $self->_geo, $plain, \@pieces, \$masks) };
        _croak($method, _strip($@)) if $@;
        my $per = ($verb ? 4 : 3) * $fields;
        my @by;
        push @{ $by[$pieces[$_]] }, $_ for 0 .. $n - 1;
        for my $p (0 .. $#by) {
            my $idx = $by[$p] or next;
            for (my $s = 0; $s < @$idx; $s += $CHUNK) {
                my @ix = @$idx[$s .. ($s + $CHUNK < @$idx ? $s + $CHUNK : @$idx) - 1];
                push @cmds, $command->($p, \@ix, 0, 0, ["{$self->{tags}[$p]}:bits",
                    map { @args[$_ * $per .. ($_ + 1) * $per - 1] } @ix],
                    $verb ? undef : join '', map { substr $masks, $_ * 8 * $fields, 8 * $fields } @ix);
            }
        }
    }
    else {
        eval { _xs_items($plain) } // _croak($method, _strip($@));
        my @geo = $self->_geo;
        my @ranges;
        if (my $d = $self->_direct($method)) {
            my %t = (out => $out, refused => \$refused, reply => $tally);
            @ranges = $self->_direct_batch($method, $d, $verb, $plain, \%t);
            if (defined $t{error}) {
                $refused += $_->[1] - $_->[0] + 1 for @ranges;    # redirected: not run
                $failed->(_strip_client_error($t{error}));
            }
        }
        else {
            for (my $from = 0; $from < $n; $from += $CHUNK) {
                push @ranges, [$from, ($from + $CHUNK < $n ? $from + $CHUNK : $n) - 1];
            }
        }
        for my $r (@ranges) {
            my ($s, $e) = @$r;    # per closure
            # The arguments are made when sent (again if redirected), straight
            # onto the stack: copying thousands of them costs more than sending.
            my $masks;
            push @cmds, $command->(0, undef, $s, $e,
                { key => $self->{bitskey}, xs => [$verb, @geo, [@$plain[$s .. $e]], undef, \$masks] },
                $verb ? undef : \$masks);
        }
    }
    $self->_run($method, \@cmds, $failed) if @cmds;
    @$out = @each if $out;
    return $count;
}

# A batch's elements as strings, each read once (an undefined one stays
# undefined, for the check to refuse); references are said as _address_item
# says.
sub _strings {
    my ($method, $items) = @_;
    my ($i, $refs, $first) = (-1, 0);
    my @s = map {
        my $v = $_;
        $i++;
        $first //= [$i, _given($v)] if _address_item($v) && !$refs++;
        defined $v ? "$v" : $v;
    } @$items;
    _warn_address($method, @$first, $refs) if $refs;
    return \@s;
}

# A reference given as an item is taken as its address string, as a local
# filter takes it (an object whose overloading gives a string, as its
# string), and said as a local filter says it: once per call, in
# Data::BloomFilter::Shared's warnings category.
sub _address_item {
    my ($v) = @_;
    return ref $v && !grep { overload::Method($v, $_) } '""', '0+', 'bool';
}

sub _warn_address {
    my ($method, $index, $shown, $refs) = @_;
    warnings::warnif('Data::BloomFilter::Shared', __PACKAGE__ . "->$method: item"
        . (defined $index ? " at index $index" : '')
        . " is $shown, taken as its address string (give a string, such as one of its fields"
        . ($refs > 1 ? "; $refs items of this batch are references" : '') . ')');
}

sub _batch_failed {
    my ($self, $method, $verb, $n, $out, $each, $known, $refused) = @_;
    return sub {
        my ($e) = @_;
        my $what = $verb
            ? "$$known of $n items known added; $$refused refused by the server or not sent (not added); the other "
                . ($n - $$known - $$refused) . ' may or may not have been added'
            : "$$known of $n items known checked";
        if ($out) {
            $#$each = $n - 1;
            @$out = @$each;
            $what .= ' (the results are undef for items not known added)' if $verb;
        }
        Carp::croak(__PACKAGE__ . "->$method: $e: $what");
    };
}

sub _out_array {
    my ($method, $out) = @_;
    return undef if !defined $out;
    _croak($method, 'results must be an array reference') if ref $out ne 'ARRAY';
    return $out;
}

# One item, one synchronous command: the common unsharded case skips the
# batch engine's pipelining (a single add then costs little more than the
# round trip). A redirection goes through the batch engine, which follows
# it; the command did not run. Any other failure croaks as a batch's would.
sub _single {
    my ($self, $method, $verb, $item) = @_;
    _warn_address($method, undef, _given($item), 1) if _address_item($item);
    $item = "$item" if ref $item;    # once: a plain string from here on
    return $self->_batch($method, $verb, [$item])
        if $self->{shards} > 1 || %{ $self->{slot_node} };
    my $conn = $self->{conns}{''} // $self->_conn_for($method, undef);
    # Redis::Fast's own dispatcher takes the command name as given and
    # returns (reply, error); other clients get the method call.
    my $fast = $self->{fast}{$conn} //= $conn->isa('Redis::Fast') && $conn->can('__std_cmd') ? 1 : 0;
    my ($reply, $err, $masks);
    my @args = _xs_args($verb, $self->_geo, [$item], undef, \$masks);
    if ($fast) {
        ($reply, $err) = $conn->__std_cmd($verb ? 'BITFIELD' : 'BITFIELD_RO', $self->{bitskey}, @args);
        $err //= 'no reply' if ref $reply ne 'ARRAY';
    }
    else {
        $reply = eval { scalar $conn->bitfield($self->{bitskey}, @args) };
        $err = $@ || 'no reply' if ref $reply ne 'ARRAY';
    }
    if (!defined $err) {
        my $full = _xs_fold($reply, $self->_fields($verb), $masks, undef);
        return $verb ? 1 - $full : $full;
    }
    my $e = _strip_client_error($err);
    return $self->_batch($method, $verb, [$item]) if $e =~ /\A(?:MOVED|ASK) \d+ \S+\z/;
    my $refused = $e =~ /\A[A-Z][A-Z_-]* / ? 1 : 0;
    $self->_drop_broken('') if !$refused;
    $self->_batch_failed($method, $verb, 1, undef, undef, \0, \$refused)->($e);
}

sub add {
    my $self = shift;
    _croak('add', 'usage: $filter->add($item)') if @_ != 1;
    return eval { $self->_single('add', 1, $_[0]) } // _croak_item('add');
}

# A croak from the XS (a bad item) under the method's own name; our own
# croaks pass through.
sub _croak_item {
    my ($method) = @_;
    die $@ if $@ =~ /\A\Q${\ __PACKAGE__}\E->/;
    _croak($method, _strip($@));
}

sub contains {
    my $self = shift;
    _croak('contains', 'usage: $filter->contains($item)') if @_ != 1;
    return eval { $self->_single('contains', 0, $_[0]) } // _croak_item('contains');
}

sub add_many {
    my $self = shift;
    _croak('add_many', 'usage: $filter->add_many(\@items, \@was_new)') if @_ < 1 || @_ > 2;
    my ($items, $out) = @_;
    $out = _out_array('add_many', $out);
    @$out = () if $out;
    return $self->_batch('add_many', 1, $items, $out);
}

sub contains_many {
    my $self = shift;
    _croak('contains_many', 'usage: $filter->contains_many(\@items, \@results)') if @_ < 1 || @_ > 2;
    my ($items, $out) = @_;
    $out = _out_array('contains_many', $out);
    @$out = () if $out;
    return $self->_batch('contains_many', 0, $items, $out) if !wantarray;
    my @each;
    $self->_batch('contains_many', 0, $items, \@each);
    @$out = @each if $out;
    return @each;
}

# ------------------------------------------------------------------ facts

sub capacity { $_[0]{capacity} }
sub fp_rate  { $_[0]{fp_rate} }
sub bits     { $_[0]{bits} }
sub hashes   { $_[0]{hashes} }
sub seed     { $_[0]{seed} }
sub layout   { $_[0]{layout} }
sub shards   { $_[0]{shards} }
sub name     { $_[0]{name} }

sub bits_set {
    my ($self) = @_;
    my $total = 0;
    $self->_run('bits_set', [map {
        my $i = $_;
        [$i, 'bitcount', ["{$self->{tags}[$i]}:bits"], sub { $total += $_[0] }]
    } 0 .. $self->{shards} - 1]);
    return $total;
}

# The count and estimated false-positive rate for $x bits set, as the core
# computes them for a local filter of this layout.
sub _estimates {
    my ($self, $x) = @_;
    return _xs_estimates(@$self{qw(layout capacity fp_rate)}, $x);
}

sub count         { ($_[0]->_estimates($_[0]->bits_set))[0] }
sub fill_ratio    { $_[0]->bits_set / $_[0]{bits} }
sub estimated_fpp { ($_[0]->_estimates($_[0]->bits_set))[1] }
sub is_empty      { $_[0]->bits_set == 0 ? 1 : 0 }

sub stats {
    my ($self) = @_;
    my $x = $self->bits_set;
    my ($count, $fpp) = $self->_estimates($x);
    return {
        (map { $_ => $self->{$_} } qw(name capacity fp_rate bits hashes seed layout shards)),
        bits_set => $x,
        count => $count,
        fill_ratio => $x / $self->{bits},
        estimated_fpp => $fpp,
    };
}

# ------------------------------------------------------------------ whole filter

sub _piece_script {
    my ($self, $method, $i, $lua, @extra) = @_;
    my ($mk, $bk) = $self->_keys($i);
    my $st = $self->_call($method, $i, 'eval', $lua, 2 + @extra, $mk, $bk, @extra,
        $self->_piece_bits($i) / 8, $FORMAT);
    return if $st eq 'ok';
    _croak($method, "key $mk is gone or no longer this filter's metadata (nothing was changed)")
        if $st eq 'meta';
    _croak($method, "key $bk is gone or no longer " . $self->_piece_bits($i) . ' bits (nothing was changed)')
        if $st eq 'bits';
    _croak($method, "the upload of piece $i was incomplete or changed (nothing was changed)");
}

sub clear {
    my ($self) = @_;
    _croak('clear', 'takes no arguments') if @_ != 1;
    $self->_piece_script('clear', $_, $CLEAR_LUA) for 0 .. $self->{shards} - 1;
    return;
}

# The whole bit array, fetched piece by piece in slices of $XFER bytes.
sub _fetch_bits {
    my ($self, $method) = @_;
    my $all = '';
    for my $i (0 .. $self->{shards} - 1) {
        my $bytes = $self->_piece_bits($i) / 8;
        my $key = "{$self->{tags}[$i]}:bits";
        my @cmds;
        my @parts;
        for (my $o = 0, my $j = 0; $o < $bytes; $o += $XFER, $j++) {
            my $e = ($o + $XFER < $bytes ? $o + $XFER : $bytes) - 1;
            my $slot = $j;
            push @cmds, [$i, 'getrange', [$key, $o, $e], sub { $parts[$slot] = $_[0] }];
        }
        $self->_run($method, \@cmds);
        my $piece = join '', map { $_ // '' } @parts;
        _croak($method, "key $key holds " . length($piece) . " bytes, expected $bytes (deleted or replaced?)")
            if length $piece != $bytes;
        $all .= $piece;
    }
    return $all;
}

sub to_filter {
    my $self = shift;
    _croak('to_filter', 'usage: $filter->to_filter($path_or_undef, \%options)') if @_ > 2;
    my ($path, $opts) = @_;
    $opts = _options('to_filter', $opts, 'mode');
    # Not Data::BloomFilter::Shared's check of a mode: this one has always
    # taken a string of digits as a decimal number.
    my $mode = $opts->{mode} // $Data::BloomFilter::Shared::Args::DEFAULT_MODE;
    _croak('to_filter', 'mode must be an integer between 0 and 07777')
        if ref $mode || $mode !~ /\A[0-9]+\z/ || $mode > 07777;
    Data::BloomFilter::Shared::Args::permission_bits(__PACKAGE__, 'to_filter', 0 + $mode);
    if (defined $path) {
        _croak('to_filter', 'path must be a string') if ref $path && !overload::Method($path, '""');
        $path = "$path";
        utf8::downgrade($path, 1) or _croak('to_filter', 'Wide character in path');
        _croak('to_filter', 'path contains a NUL byte') if index($path, "\0") >= 0;
        _croak('to_filter', 'path must not be empty') if $path eq '';
    }
    my $bits = $self->_fetch_bits('to_filter');
    my ($f, $e) = _xs_from_bits('Data::BloomFilter::Shared', $path, $self->{capacity},
        $self->{fp_rate}, 0 + $mode, $self->{seed}, $self->{layout}, $bits);
    _croak('to_filter', $e) if !$f;
    return $f;
}

# The bit bytes of a local filter, from its portable image (whose layout is
# documented under serialize): header 56 bytes, the bits, an 8-byte checksum.
sub _local_bits {
    my ($self, $other) = @_;
    my $img = eval { $other->serialize } // _croak('merge', 'other filter: ' . _strip($@));
    my ($magic, $version, $scheme, $k, undef, $m, undef, undef, $seed) = unpack 'a8 V V V V Q< Q< Q< Q<', $img;
    _croak('merge', "the local filter's portable image is not version 1")
        if $magic ne 'BLOOMSER' || $version != 1;
    # The image's hash scheme: 1 standard, 2 blocked in 64-bit words, 3
    # blocked in 128-bit blocks (a blocked filter's span is its width), 4
    # datasketches.
    my $want = $self->{layout} eq 'standard' ? 1 : $self->{layout} eq 'datasketches' ? 4
        : $self->{span} == 128 ? 3 : 2;
    _croak('merge', "layout mismatch (this filter's layout is '$self->{layout}')") if $scheme != $want;
    _croak('merge', "geometry mismatch (bits $self->{bits} vs $m, hashes $self->{hashes} vs $k)")
        if $m != $self->{bits} || $k != $self->{hashes};
    _croak('merge', 'seed mismatch (the filters hash with different seeds)') if "$seed" ne "$self->{seed}";
    return substr $img, 56, $m / 8;
}

sub merge {
    my $self = shift;
    _croak('merge', 'usage: $filter->merge($other)') if @_ != 1;
    my ($other) = @_;
    my $bits;
    if (Scalar::Util::blessed($other) && $other->isa('Data::BloomFilter::Shared')) {
        $bits = $self->_local_bits($other);
    }
    elsif (Scalar::Util::blessed($other) && $other->isa(__PACKAGE__)) {
        for my $f (qw(layout span bits hashes seed)) {
            _croak('merge', "$f mismatch ($self->{$f} vs $other->{$f})") if "$self->{$f}" ne "$other->{$f}";
        }
        $bits = $other->_fetch_bits('merge');
    }
    else {
        _croak('merge', 'other filter is not a Data::BloomFilter::Shared or ' . __PACKAGE__ . ' object');
    }
    my $tmpname = sprintf 'merge:%d.%d.%08x', $$, time, int rand 0xffffffff;
    for my $i (0 .. $self->{shards} - 1) {
        my $bytes = $self->_piece_bits($i) / 8;
        my $part = substr $bits, $i * $self->{piece} / 8, $bytes;
        next if $part !~ /[^\0]/;
        my $tmp = "{$self->{tags}[$i]}:$tmpname";
        my @cmds;
        for (my $o = 0; $o < $bytes; $o += $XFER) {
            my $slice = substr $part, $o, $XFER;
            # The first slice sets a time limit: an upload cut short by a
            # crash disappears on its own.
            push @cmds, [$i, $o == 0 ? 'set' : 'append', [$tmp, $slice, $o == 0 ? ('PX', 600_000) : ()], undef];
        }
        my $ok = eval { $self->_run('merge', \@cmds); 1 };
        if (!$ok) {
            my $e = $@;
            eval { $self->_call('merge', $i, 'del', $tmp) };
            die $e;
        }
        $self->_piece_script('merge', $i, $MERGE_LUA, $tmp);
    }
    return;
}


1;

__END__

=encoding utf8

=head1 NAME

Data::BloomFilter::Shared::Redis - the same Bloom filter in plain Redis, for a fleet of hosts

=head1 SYNOPSIS

    use Data::BloomFilter::Shared::Redis;

    my $seen = Data::BloomFilter::Shared::Redis->new(
        'redis.internal:6379', 'events', 100_000_000, 0.001);
    # or with your own connected client (auth, TLS, timeouts are yours):
    #   Data::BloomFilter::Shared::Redis->new($redis_fast, 'events', ...);

    handle($event) if $seen->add($event->{id});        # exactly once, fleet-wide

    my $new = $seen->add_many(\@ids, \my @was_new);    # pipelined
    my @hit = $seen->contains_many(\@ids);

    # A snapshot to query at memory speed, freeze and ship:
    my $local = $seen->to_filter('/dev/shm/events.bf');

=head1 DESCRIPTION

The filter of L<Data::BloomFilter::Shared>, with the same hashing (the Rust
core computes every probe position), the same geometry and the same bits,
kept in a Redis string instead of a local mapping, so that processes on many
hosts share it. Each item's probe bits are set by one atomic C<BITFIELD>
command that returns the old bits, so among all clients and hosts adding the
same item at the same moment exactly one is told "new" (an add is
linearizable, as under one global lock). A query reads the probe bits with
one read-only C<BITFIELD_RO>: one bit per probe, or, for a C<blocked> filter,
the item's 64-bit word (or the two words of its 128-bit block) whole, tested
against the item's bits in the client. Batches are pipelined, many items per
command.

It needs nothing beyond plain Redis 6.2 or later (no module): Debian 12's
C<redis-server> 7.0 does. Connections are made with L<Redis::Fast> (Debian:
C<libredis-fast-perl>); a client object passed in may be anything with the
L<Redis>/L<Redis::Fast> method API.

=head2 Batches from an address

A filter made from an address (not from a client object) sends its
C<add_many> and C<contains_many> over a socket of its own, opened on the
first batch beside the L<Redis::Fast> connection (which carries everything
else), with the same password and database. The core encodes each command
straight from the items' offsets and folds each reply, so no argument or
reply element becomes a Perl value, and each command is written as soon as
it is made, so the server works on one while the next is made (F<bench/RESULTS.md>,
"Redis", has the figures). It counts one more connection per filter object; a forked child
opens its own. A filter whose key the server redirects (a cluster whose slot
moved) and a sharded filter send their batches through the client instead.
A broken socket croaks as a broken client does and is opened afresh on the
next batch.

=head2 Keys

A filter named C<events> is two keys in one hash slot: C<{events}:meta>, a
hash holding the geometry, seed and layout (validated on every attach, like a
file header), and C<{events}:bits>, a string of C<bits / 8> bytes. Unsharded,
that string's bytes are exactly the bit array of a local filter of the same
geometry, seed and layout (its C<serialize> image between the 56-byte header and the
checksum): local bit I<i> is Redis bit C<i ^ 7>, because Redis counts bits
from the most significant end of each byte and the local filter from the
least. With C<< shards => N >>, piece I<i> is C<{events:i}:meta> and
C<{events:i}:bits>, and the pieces concatenated are that bit array.

Creating a piece is one script: its zeroed bit string (allocated in full, so
a full Redis refuses at creation rather than mid-stream) and its metadata
appear together or not at all. A key of another type, a hash that is not
ours, an orphan bit string, a geometry that does not match its capacity and
fp_rate, or bits of the wrong length croak with what is wrong and change
nothing.

=head1 METHODS

=head2 new

    my $f = Data::BloomFilter::Shared::Redis->new($redis_or_address, $name,
        $capacity, $fp_rate, \%options);

C<$redis_or_address> is a connected client object (L<Redis::Fast> or
anything with its method API and callbacks for pipelining), or an address
from which the module connects with L<Redis::Fast>: C<host:port>,
C<redis://[user:password@]host[:port][/db]> or C<unix:/path/to/socket>.
C<$name> is a non-empty byte string without C<{> or C<}>. C<$capacity> and
C<$fp_rate> (default 0.01) size the filter as locally. When the filter
exists, its stored geometry wins (the arguments are still range-checked), as
when a local file is reopened.

Options: C<seed> (a secret 64-bit hash seed, as locally; default 0, which is
C<bloom.h>-compatible), C<layout> (C<standard>, the default, C<blocked> or
C<datasketches>: the local filter's layouts, with the same geometry, bits and
C<count> and C<estimated_fpp> estimators as a local filter of that layout; a
C<blocked> filter keeps all of an item's bits in one 64-bit word or, at low
fp rates, one 128-bit block; a C<datasketches> filter's default seed is
DataSketches' 9001, as locally), C<shards> (see L</CLUSTER>), C<connect> (a code reference C<< ($host, $port) >> returning a
connected client, used for the other nodes of a cluster; default: a
L<Redis::Fast> connection to C<host:port>). An explicit C<seed>, C<layout> or
C<shards> that differs from the stored one croaks.

=head2 add, contains

C<< $f->add($item) >> returns 1 when the item was new (at least one of its
bits was 0 before this client's atomic command), else 0. C<contains> returns
1 when all of its bits are set.

=head2 add_many, contains_many

C<< $f->add_many(\@items, \@was_new) >> returns how many were new, in every
context; the optional C<@was_new> is emptied first, then gets one 0/1 per
item. C<< $f->contains_many(\@items) >> returns one 0/1 per item in list
context and how many are present in scalar context; it takes the same
optional out array.

An item's bits are set by one command; a batch is many commands (one per
100 items), pipelined: each item is exactly-once on its own, the
batch is not one transaction. Within one batch, a repeated item is new at
most once.

=head2 count, bits_set, fill_ratio, estimated_fpp, is_empty, stats

As locally, computed from C<BITCOUNT> of the bit string(s). C<stats> returns
a hash reference with C<name capacity fp_rate bits hashes seed layout shards
bits_set count fill_ratio estimated_fpp>.

=head2 capacity, fp_rate, bits, hashes, seed, layout, shards, name

The stored geometry and options.

=head2 clear

Zero the bits (per piece, one atomic script that first checks the piece is
still this filter).

=head2 merge

    $f->merge($local_filter);     # a Data::BloomFilter::Shared
    $f->merge($other_redis);      # another Data::BloomFilter::Shared::Redis

OR another filter of the same bits, hashes, seed and layout in (for a local
C<blocked> filter, also the same block width). The other
filter's bits are uploaded into a temporary key beside each piece (it expires
by itself after 10 minutes if the upload is cut short) and ORed in with one
atomic C<BITOP OR> per piece; pieces whose bits are all 0 are skipped. The
other filter's bits are held in memory (twice, for a local one) meanwhile.

=head2 to_filter

    my $local = $f->to_filter($path_or_undef, { mode => 0600 });

A new local L<Data::BloomFilter::Shared> (anonymous when C<$path> is undef,
else a new file, of C<mode>, default C<0600>, which must have no bits
outside C<0777>; an existing path croaks) with the same geometry, seed and
bits: a snapshot to query at memory speed, C<freeze> and ship. The bits are
read in slices of 4 MiB, so a snapshot taken while others add holds every
add that completed before it started and perhaps some later ones; it is
exact when the filter is quiet. The whole bit array is held in memory once
while the local filter is built.

=head2 key_slot

    my $slot = Data::BloomFilter::Shared::Redis->key_slot($key);

The Redis Cluster slot of a key: CRC16-XMODEM of its hash tag (or the whole
key) mod 16384.

=head1 CLUSTER

C<< shards => N >> cuts the bit array into N contiguous pieces, each its own
pair of keys with its own hash tag (C<{name:i}>), so a filter spreads over a
Redis Cluster's masters and can exceed one string's 2^32 bits. Every item's
bits must fall in one piece, so that every add stays one single-key atomic
command: that needs a layout that keeps an item's bits together, the
C<blocked> layout, where all of an item's bits lie in one 64-bit word or
128-bit block (its I<span>). So a C<blocked> filter is the one to shard:

    my $f = Data::BloomFilter::Shared::Redis->new($redis, 'events',
        10_000_000, 0.001, { layout => 'blocked', shards => 6 });

Its pieces are equal whole numbers of spans (the last may be shorter), N
need not be a power of two, and the pieces concatenated are bit-identical to
a local C<blocked> filter of the same arguments (so C<to_filter> and
C<merge> work as unsharded). The C<standard> layout spreads an item's bits
over the whole array, so C<shards> above 1 with it croaks "shards need
layout 'blocked'" -- unless an item has only one bit (C<hashes> 1: an
C<fp_rate> of 0.36 or more), which any cut into 64-bit words keeps whole.

Any filter, sharded or not, works on a cluster: commands go to the node
that serves the key's slot, learned from C<MOVED> redirections (remembered)
and C<ASK> redirections (C<ASKING>, then the command, once, not
remembered), so the first command to a piece may take one extra round trip.
The connection you pass (or the address) is the first node asked; the
others are connected with the C<connect> option or L<Redis::Fast>.

=head1 FAILURES

Every failure croaks with the method's name and what was wrong. When a batch
fails part-way (a dropped connection, a server error), the message says how
many of its items are known to have been added (their replies arrived), how
many the server refused (an error reply) or were not sent (the batch stops
at its first error), and that the others may or may not have been; C<add_many>'s out array then holds 0/1 for the known
items and undef for the others. A connection this module made (from an
address, or with the C<connect> option) that broke is dropped and made
afresh on the next call; nothing is sent again by itself. A client you pass
in is yours: it is kept, whatever state it is in. A client that reconnects
and re-sends by itself may report an item whose first attempt did set its
bits as "seen" (0): the bits are never lost, but that item may then have
been told "new" to nobody.

With C<appendonly yes> and C<appendfsync always>, every add acknowledged to a
client survives a crash or restart of the server; with weaker persistence, an
acknowledged add can be lost with the server's last second of writes, and a
later add of the same item is then told "new" again.

=head1 LIMITS

Not for ithreads: L<Redis::Fast> connections cannot be shared with or
copied into another thread; use processes, each with its own filter object.
A batch from an address opens a new socket when the server has closed the
last one meanwhile (its idle C<timeout>, a restart), since nothing of the
batch has been sent then. Nothing has a timeout of its own: a server that stops answering holds a call
until the connection breaks (a signal handler that dies gets out, and the
interrupted batch's socket is not used again).

A filter in Redis does not grow: C<new> refuses the C<grow> and
C<max_capacity> options of L<Data::BloomFilter::Shared/FILTERS THAT GROW>.
Size it for the most items it will hold.

A Redis string holds at most 2^32 bits (512 MiB): an unsharded filter is
limited to that; more needs C<shards> (with C<< layout => 'blocked' >>). The
filter is allocated in full on the server at creation. Throughput is bound by
the work on C<BITFIELD>'s arguments, in the client and the server: an add
sends four per probe bit; a query of a C<standard> filter three per probe
bit, of a C<blocked> filter three per 64-bit word of the item (one or two,
whatever the number of probes), so blocked queries are several times
faster. From an address (L</Batches from an address>) batches come close to
what the server allows (F<bench/RESULTS.md> has the figures); queries of a C<standard> filter with 10 probes
(fp_rate 0.001) are then bound by the server at about 410 000 a second on a
2-core machine. See C<bench/redis.pl> and F<bench/RESULTS.md> for measured numbers.

=head1 DIAGNOSTICS

All messages begin C<< Data::BloomFilter::Shared::Redis->METHOD: >>.
A croak about an argument shows the value given after its leading words
(C<, got VALUE>) and a hint where there is a usual cause, as in
L<Data::BloomFilter::Shared/DIAGNOSTICS>; match on the leading words.

=over

=item item is %s, taken as its address string (give a string, such as one of its fields)

=item item at index %d is %s, taken as its address string (give a string, such as one of its fields; %d items of this batch are references)

A warning, as a local filter's (see L<Data::BloomFilter::Shared/DIAGNOSTICS>):
a reference without overloading given as an item is taken as its address
string, C<HASH(0x...)>. In the category C<Data::BloomFilter::Shared>; made
fatal, it croaks before anything of the call is sent.

=item the grow and max_capacity options are not supported here: a filter in Redis does not grow (size it for the most items it will hold)

C<new> was given C<grow> or C<max_capacity>; see L</LIMITS>.

=item usage: ...

Wrong number of arguments.

=item takes no arguments

C<clear> with arguments.

=item undefined redis client or address

=item first argument must be a Redis client object or an address string, got %s (a client has the methods of Redis or Redis::Fast)

=item cannot parse address '%s' (expected host:port, redis://host:port/db or unix:/path)

=item cannot connect to %s: %s

The address as given, but for a password (shown as C<***>).

=item cannot select database %d at %s: %s

=item cannot AUTH at %s: %s

=item cannot SELECT at %s: %s

A filter made from an address logs in and selects the database on the
socket it opens for batches as on its first connection; a password changed
since, or a database gone, refuses the batch (nothing of it was sent).

=item connect callback failed for %s: %s

=item connect callback returned no client for %s

=item connect must be a code reference, got %s

=item options must be a hash reference, got %s

=item unknown option '%s' (the options are connect, layout, seed, shards)

=item undefined name

=item name must be a string, got %s

=item Wide character in name, got %s (encode first, e.g. Encode::encode_utf8)

=item name must not be empty

=item name must not contain '{' or '}' (it becomes the keys' hash tag), got %s

=item capacity must be a number, got %s (...)

=item capacity must be a positive integer, got %s (...)

=item capacity is too large, got %s (at most 18446744073709551615 items)

=item fp_rate must be between 0 and 1 (exclusive), got %s (...)

As in L<Data::BloomFilter::Shared/DIAGNOSTICS>: a suffix such as C<10M> is
the command line tool's (the hint names the Perl number, C<10e6>), and an
fp_rate of 1 or more hints that the capacity and the fp_rate are swapped.

=item seed must be a non-negative integer that fits in 64 bits, got %s (not shown: a seed is a secret; ...)

=item the seed option is undef (a secret that was not set?): give a seed, or leave the option out for seed 0

An explicit C<< seed => undef >>, as in L<Data::BloomFilter::Shared/new>.

=item layout must be a string, got %s ('standard', 'blocked' or 'datasketches')

=item unknown layout '%s' (this build has: standard, blocked, datasketches)

=item shards must be an integer from 1 to 65536, got %s

=item shards need layout 'blocked' (layout '%s' spreads an item's bits over the whole array)

=item shards => %d leave a piece empty (%d bits cut into equal pieces of whole %d-bit spans)

A span is the aligned range that holds all of one item's bits.

=item the filter needs %d bits but a Redis string holds at most 2^32: use shards => %d or more

=item capacity is too large: capacity and fp_rate need more than 2^38 bits (32 GiB); use a larger fp_rate or several filters

=item key %s exists without %s (not a filter of this module; nothing was changed)

=item OOM: the filter needs %d bytes but the server uses %d of its maxmemory %d (nothing was changed)

Creation checks the server's C<maxmemory> first (Redis itself checks it
only before a command, so one command could take it far past the limit).

=item key %s holds a %s, not a filter's metadata (nothing was changed)

=item key %s is not a filter of this module (format '%s', expected '%s')

=item key %s: field '%s' is missing

=item key %s: field '%s' is not a non-negative integer ('%s')

=item key %s: field 'fp_rate' is not a number ('%s')

=item key %s: field 'layout' is not a layout name ('%s')

=item key %s: bits %d and hashes %d do not match capacity %d and fp_rate %s (expected %d and %d)

=item key %s: field '%s' is %s, piece 0 has %s

=item key %s: it is piece %d, expected piece %d

=item key %s holds a %s, not a filter's bits

=item key %s has %d bytes, expected %d

=item %s mismatch: the filter in Redis has %s %s, asked for %s

For C<seed>, C<layout> and C<shards>.

=item unexpected reply to the attach script

=item argument is not an array reference, got %s (give \@items)

=item undefined item

=item Wide character

With C<at index N> for a batch.

=item results must be an array reference

=item %s: %d of %d items known added; %d refused by the server or not sent (not added); the other %d may or may not have been added

A batch failed part-way: C<%s> is the server's or the client's first error
(for example C<OOM command not allowed when used memory > 'maxmemory'.> or
C<Server closed the connection>). Items whose command got a reply are known
added; items whose command got an error reply were refused before it ran,
and the commands after the first error are not sent; the others' commands
may or may not have run. A batch collects its replies every 64 commands, so
at most 64 commands (6400 items) are ever in doubt. With an out array, its
entries are undef for every item not known added.

=item %s: %d of %d items known checked

=item still redirected after 5 redirections (the cluster is resharding?)

=item key %s is gone or no longer this filter's metadata (nothing was changed)

=item key %s is gone or no longer %d bits (nothing was changed)

=item the upload of piece %d was incomplete or changed (nothing was changed)

=item key %s holds %d bytes, expected %d (deleted or replaced?)

=item other filter is not a Data::BloomFilter::Shared or Data::BloomFilter::Shared::Redis object

=item geometry mismatch (bits %d vs %d, hashes %d vs %d)

=item seed mismatch (the filters hash with different seeds)

=item layout mismatch (this filter's layout is '%s')

For C<merge> of a local filter of the other layout, or a C<blocked> one of
the other block width.

=item %s mismatch (%s vs %s)

For C<merge> of two Redis filters: C<bits>, C<hashes>, C<seed>, C<layout> or
C<span> (a C<blocked> filter's block width, 64 or 128).

=item the local filter's portable image is not version 1

=item other filter: %s

The local filter could not be read (for example, a destroyed handle).

=item path must be a string

=item Wide character in path

=item path contains a NUL byte

=item path must not be empty

=item mode must be an integer between 0 and 07777

=item mode %d has bits outside 0777 (%s in octal): write a mode in octal, ...

L</to_filter>'s C<mode>: a mode written in decimal (C<660> is C<01224>)
croaks, as in L<Data::BloomFilter::Shared/new>.

=item %s

Any other error of the server or the client, as it reported it.

=back

=head1 SEE ALSO

L<Data::BloomFilter::Shared>, README's "MANY HOSTS: REDIS" section.

=cut
