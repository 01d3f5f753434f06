package Data::BloomFilter::Shared::Redis;

use 5.022;
use strict;
use warnings;

use Carp ();
use Scalar::Util ();
use POSIX ();
use overload ();
use Digest::SHA ();

use Data::BloomFilter::Shared ();    # the XS: hashing and local filters
use Data::BloomFilter::Shared::Args ();
use Data::BloomFilter::Shared::Redis::Link ();

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

# The metadata's `format` of a windowed filter: a plain filter's opener of
# an older version refuses it rather than read a missing bit string.
my $WFORMAT = 'Data::BloomFilter::Shared::Redis window 1';
# What is said of a metadata key that is not such a filter, after its name.
my $WGONE = 'is gone or no longer a windowed filter';

# The metadata's `format` of a filter that grows: an opener of an older
# version refuses it rather than read a missing bit string.
my $GFORMAT = 'Data::BloomFilter::Shared::Redis grow 1';
# What is said of a metadata key that is not such a filter, after its name.
my $GGONE = 'is gone or no longer a filter that grows';

my @META_FIELDS = qw(format capacity fp_rate bits hashes seed layout shards shard);

# The kinds of reply _xs_reply gives: the C API's BFS_REPLY_*.
my %CONSTANT = %Data::BloomFilter::Shared::Args::CONSTANT;
my ($REPLY_INTS, $REPLY_ERROR) = @CONSTANT{qw(REPLY_INTS REPLY_ERROR)};

# The timeouts of the connections the module makes, in seconds, and their
# defaults: a server that stops answering (stopped, overloaded, cut off by
# the network) fails a call within them rather than holding it. Generous
# against the slowest command the filter sends: creating or merging a
# 512 MiB piece takes the server about a second.
my %TIMEOUTS = (cnx_timeout => 5, read_timeout => 10, write_timeout => 10);
my $MAX_TIMEOUT = 86400;

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

# An address for messages: never the password.
sub _shown {
    my ($address) = @_;
    return $address =~ s{\A(redis://[^:@/]*):[^@/]+@}{$1:***@}r;
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
    my $copy = Data::BloomFilter::Shared::Args::string(__PACKAGE__, $method, 'name', $name);
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
    $opts = _options('new', $opts, qw(seed layout shards connect cnx_timeout read_timeout write_timeout
        window generations grow max_capacity));
    my $ask = _window_asked($opts);    # undef: a plain filter asked for
    # (0, 0): no growth asked for; checked as a local filter's options.
    my ($grow, $max_capacity) = Data::BloomFilter::Shared::Args::grow(__PACKAGE__, 'new', $opts);
    _croak('new', 'grow and window do not go together: a windowed filter forgets old items instead of growing')
        if $grow && $ask;
    $name = _name('new', $name);
    my $capacity_given = $capacity;
    my $fp_rate_given = defined $fp_rate;
    $capacity = _capacity('new', $capacity);
    $fp_rate = _fp_rate('new', $fp_rate, $capacity_given);
    my $seed = exists $opts->{seed} ? _seed('new', $opts->{seed}, 1) : undef;
    my $layout = Data::BloomFilter::Shared::Args::layout_name(__PACKAGE__, 'new', $opts->{layout});
    my $shards = $opts->{shards};
    if (defined $shards) {
        _croak('new', 'shards must be an integer from 1 to 65536, got ' . _given($shards))
            if ref $shards || $shards !~ /\A[0-9]+\z/ || $shards < 1 || $shards > 65536;
        $shards = 0 + $shards;
    }
    _croak('new', 'shards are not supported with window (a windowed filter in Redis is one key per generation)')
        if $ask && defined $shards && $shards > 1;
    _croak('new', 'shards are not supported with grow (a filter that grows in Redis keeps its stages in one hash slot)')
        if $grow && defined $shards && $shards > 1;
    my $connect = $opts->{connect};
    _croak('new', 'connect must be a code reference, got ' . _given($connect))
        if defined $connect && ref $connect ne 'CODE';
    my %timeouts;
    for my $t (sort keys %TIMEOUTS) {
        my $v = $opts->{$t} // $TIMEOUTS{$t};
        _croak('new', "$t must be a positive number of seconds, at most $MAX_TIMEOUT, got " . _given($v))
            if ref $v || !Scalar::Util::looks_like_number($v) || !($v > 0 && $v <= $MAX_TIMEOUT);
        $timeouts{$t} = 0 + $v;
    }
    _croak('new', 'undefined redis client or address') if !defined $redis;
    _croak('new', 'first argument must be a Redis client object or an address string, got '
            . _given($redis) . ' (a client has the methods of Redis or Redis::Fast)')
        if ref $redis && !_is_client($redis);

    my $self = bless {
        name => $name,
        client => (ref($redis) ? $redis : undef),       # the client given, or
        address => (ref($redis) ? undef : "$redis"),    # the address to connect to
        links => {},                  # node ('' the first) => our socket there
        clients => {},                # node => the connect option's client there
        slot_node => {},              # slot => "host:port", learned from MOVED
        connect => $connect,
        timeouts => \%timeouts,
    }, $class;
    # An address is connected to now: an unreachable one croaks here.
    $self->{links}{''} = $self->_link('new', '') if defined $self->{address};

    # Validate the arguments as a creator would, even when the filter exists.
    my $want = {
        # No seed: 0, or DataSketches' default for its layout (as locally).
        capacity => $capacity, fp_rate => $fp_rate,
        seed => $seed // '' . Data::BloomFilter::Shared::Args::default_seed_named($layout),
        layout => $layout // (Data::BloomFilter::Shared::Args::layout_names())[0], shards => $shards // 1,
    };
    my $explicit = { seed => $seed, layout => $layout, shards => $shards };
    if ($grow) {
        # A filter that grows is one metadata key and its stages; a plain
        # filter's pieces of the same name (name:0, ...) are another filter.
        _croak('new', 'growth mismatch (the filter does not grow, not ' . _growth_text($grow, $max_capacity) . ')')
            if defined(($self->_stored_shards("$name:0"))[0]);
        my $first = $self->_attach_grown($want, $explicit, { grow => $grow, max => $max_capacity || undef });
        _warn_geometry($first, $capacity, $fp_rate_given ? $fp_rate : undef) if $first;
        return $self;
    }
    $self->_set_geometry('new', $want);

    # The same name under the other key scheme: an unsharded filter's tag is
    # the name, a sharded one's pieces are name:0, name:1, ... Attaching
    # without shards to a sharded filter adopts its shards; anything else
    # that disagrees croaks, rather than create a second filter beside it.
    my ($other, $other_layout) = $self->_stored_shards($want->{shards} == 1 ? "$name:0" : $name);
    # (A windowed filter answers shards 1: found under "$name:0", it is
    # another filter, not a piece of this one.)
    if (defined $other && !($want->{shards} == 1 && $other == 1)) {
        _croak('new', 'window mismatch (the filter has no window, not ' . _window_text($ask) . ')') if $ask;
        _croak('new', "shards mismatch: the filter in Redis has shards $other, asked for $want->{shards}")
            if defined $shards || $want->{shards} > 1;
        _croak('new', "layout mismatch: the filter in Redis has layout $other_layout, asked for $layout")
            if defined $layout && $layout ne $other_layout;
        @$want{qw(shards layout)} = ($other, $other_layout);
        $self->_set_geometry('new', $want);
    }

    # Piece 0 decides: whoever creates it first fixes the geometry, and every
    # later piece is created (or checked) from what it holds. A windowed
    # filter (asked for, or found where a plain one was asked for) is one
    # metadata key and its generations.
    my $first = $ask ? undef : $self->_attach_piece(0, $want, $explicit);
    if ($first && $first->{grown}) {
        $first = $self->_attach_grown($want, $explicit, undef);
        _warn_geometry($first, $capacity, $fp_rate_given ? $fp_rate : undef);
        return $self;
    }
    if ($ask || ($first && $first->{windowed})) {
        $first = $self->_attach_window($want, $explicit, $ask);
        _warn_geometry($first, $capacity, $fp_rate_given ? $fp_rate : undef) if $first;
        return $self;
    }
    if ($first) {
        $self->_set_geometry('new', $first);
        _warn_geometry($first, $capacity, $fp_rate_given ? $fp_rate : undef);
    }
    for my $i (1 .. $self->{shards} - 1) {
        $self->_attach_piece($i, $self->_meta_of_self, {});
    }
    return $self;
}

# An existing filter keeps its capacity and fp_rate: when those asked for
# differ, say so once, naming both, as a local filter's reopening does
# (Data::BloomFilter::Shared's _warn_geometry): the same category, so that
# "no warnings 'Data::BloomFilter::Shared'" silences it and FATAL makes it
# fatal.
sub _warn_geometry {
    my ($stored, $capacity, $fp_rate) = @_;
    my (@kept, @asked);
    if ($stored->{capacity} != $capacity) {
        push @kept, "capacity $stored->{capacity}";
        push @asked, "capacity $capacity";
    }
    if (defined $fp_rate && $stored->{fp_rate} != $fp_rate) {
        push @kept, sprintf('fp_rate %.15g', $stored->{fp_rate});
        push @asked, sprintf('fp_rate %.15g', $fp_rate);
    }
    return if !@kept;
    warnings::warnif('Data::BloomFilter::Shared', __PACKAGE__ . "->new: the filter's " . join(' and ', @kept)
        . (@kept > 1 ? ' are' : ' is') . ' kept, not the ' . join(' and ', @asked)
        . ' asked for (an existing filter keeps its geometry)');
}

# The geometry arguments of the XS's remote calls, in their order.
sub _geo { @{ $_[0] }{qw(layout seed bits hashes span piece)} }

# The fields per item a BITFIELD of an add (one per probe) or a query has.
sub _fields { $_[1] ? $_[0]{hashes} : $_[0]{fields} }

# The bits a BITFIELD of verb $verb is for: the filter's, or a stage's
# ($shape, from _stage_shape): the geometry as _xs_command takes it, the
# stage argument, and the fields per item.
sub _shape {
    my ($self, $verb, $shape) = @_;
    return ([$self->_geo], 0, $self->_fields($verb)) if !$shape;
    return ($shape->{geo}, $shape->{stage}, $verb ? $shape->{geo}[3] : $shape->{fields});
}

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
    return if ref $r ne 'ARRAY' || !grep({ ($r->[0] // '') eq $_ } $FORMAT, $WFORMAT, $GFORMAT)
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
    my ($what, @rest) = _attach_reply($r, $mk, $bk, 'the filter needs', $bytes);
    return undef if $what eq 'created';
    my ($btype, $blen, $pairs) = @rest;
    my %m = @{ $pairs // [] };
    return { windowed => 1 } if $i == 0 && ($m{format} // '') eq $WFORMAT;
    return { grown => 1 } if $i == 0 && ($m{format} // '') eq $GFORMAT;
    _croak('new', "key $mk is not a filter of this module (format '"
            . ($m{format} // '') . "', expected '$FORMAT')")
        if ($m{format} // '') ne $FORMAT;
    my ($bits, $span) = _check_meta($mk, \%m, $explicit);
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

# The reply of an attach script (a plain piece's, a windowed or a grown
# filter's), its refusals croaked in new's words; otherwise the reply
# ($what: 'created' or what it found, then the rest). $orphan: the bits key
# found without $mk (undef: the one the reply names); $needs: what needs
# $bytes, as the message says it.
sub _attach_reply {
    my ($r, $mk, $orphan, $needs, $bytes) = @_;
    _croak('new', 'unexpected reply to the attach script') if ref $r ne 'ARRAY';
    my ($what, @rest) = @$r;
    _croak('new', "key $mk disappeared while it was opened (nothing was changed)") if $what eq 'gone';
    _croak('new', 'key ' . ($orphan // $rest[1]) . " exists without $mk (not a filter of this module; nothing was changed)")
        if $what eq 'orphan';
    _croak('new', "OOM: $needs $bytes bytes but the server uses $rest[0] of its maxmemory $rest[1] (nothing was changed)")
        if $what eq 'full';
    _croak('new', "key $mk holds a $rest[0], not a filter's metadata (nothing was changed)")
        if $what eq 'type';
    return ($what, @rest);
}

# The checks of a filter's metadata (plain or windowed) $m, at key $mk:
# every field there and well formed, the geometry recomputed from capacity
# and fp_rate, the options given explicitly the same. Returns the bits and
# the span.
sub _check_meta {
    my ($mk, $m, $explicit) = @_;
    for my $f (@META_FIELDS) {
        _croak('new', "key $mk: field '$f' is missing") if !defined $m->{$f};
    }
    _croak('new', "key $mk: field '$_' is not a non-negative integer ('$m->{$_}')")
        for grep { $m->{$_} !~ /\A[0-9]{1,20}\z/ } qw(capacity bits hashes seed shards shard);
    _croak('new', "key $mk: field 'fp_rate' is not a number ('$m->{fp_rate}')")
        if !Scalar::Util::looks_like_number($m->{fp_rate});
    _croak('new', "key $mk: field 'layout' is not a layout name ('$m->{layout}')")
        if $m->{layout} !~ /\A\w+\z/;
    my ($bits, $hashes, $span) = eval { _geometry('new', $m->{layout}, $m->{capacity}, $m->{fp_rate}) };
    _croak('new', "key $mk: " . _strip($@)) if !defined $bits;
    _croak('new', "key $mk: bits $m->{bits} and hashes $m->{hashes} do not match capacity $m->{capacity} and fp_rate $m->{fp_rate} (expected $bits and $hashes)")
        if $bits != $m->{bits} || $hashes != $m->{hashes};
    for my $f (qw(seed layout shards)) {
        my $asked = $explicit->{$f};
        _croak('new', "$f mismatch: the filter in Redis has $f $m->{$f}, asked for $asked")
            if defined $asked && $asked ne $m->{$f};
    }
    return ($bits, $span);
}

sub _strip {
    my ($e) = @_;
    $e =~ s/\A\S+->\w+: //;
    $e =~ s/ at \S+ line \d+\.?\n\z//;
    return $e;
}

# ------------------------------------------------------------------ transport

# Every command goes one way (_exchange): written in the Redis protocol on a
# connection's socket, its reply taken off what has been read, with every
# wait bounded by the filter's timeouts and every reply by the sizes the
# filter can ask for (Data::BloomFilter::Shared::Redis::Link). A filter made
# from an address connects its own sockets; a Redis::Fast client given to it
# (or returned by the connect option) lends its socket (a duplicate of its
# descriptor, kept while the client's names the same socket); a client of
# another kind is driven through its methods, pipelined with
# callbacks. The BITFIELD commands of add and contains are encoded by the
# core straight from the items' offsets and their replies folded there, so
# that no argument or reply element becomes a Perl value.

# The connection for commands to node $node ('' the first: the address
# given, or the client), or a croak. A socket of our own is kept between
# calls (a forked child opens its own); one the server closed meanwhile, or
# that holds bytes nobody asked for, is replaced before anything is sent on
# it.
sub _link {
    my ($self, $method, $node) = @_;
    my $client;
    if ($node eq '' && !defined $self->{address}) {
        $client = $self->{client};
    }
    elsif ($node ne '' && $self->{connect}) {
        $client = $self->{clients}{$node} //= do {
            my ($host, $port) = $node =~ /\A(.*):(\d+)\z/;
            my $c = eval { $self->{connect}->($host, $port) };
            _croak($method, "connect callback failed for $node: " . _strip($@ // '')) if !$c;
            _croak($method, "connect callback returned no client for $node") if !_is_client($c);
            $c;
        };
    }
    if ($client) {
        my $l = delete $self->{lent}{$node};
        return $l if $l && $l->fit($client);
        $l = undef if $l && !$l->still($client);
        $l //= Data::BloomFilter::Shared::Redis::Link->borrow($client, $self->{timeouts})
            // return { client => $client, q => [] };
        return $l if $l->quiet;
        # Closed (by the server, or by us after a failure), or holding bytes
        # nobody asked for: shut, and the client asked to answer a PING,
        # which makes a Redis::Fast client that may reconnect do so. If it
        # cannot, the call fails on the closed socket, with nothing sent.
        $l->fail;
        eval { $client->ping };
        return Data::BloomFilter::Shared::Redis::Link->borrow($client, $self->{timeouts})
            // { client => $client, q => [] };
    }
    # Taken out while in use: _end_round puts it back once every reply
    # to it has been taken.
    my $l = delete $self->{links}{$node};
    return $l if $l && $l->{pid} == $$ && $l->quiet;
    my $address = $node eq '' ? $self->{address} : $node;
    my $a = _parse_address($method, $address);
    my ($link, $e) = Data::BloomFilter::Shared::Redis::Link->dial($a, _shown($address), $self->{timeouts});
    _croak($method, 'cannot connect to ' . _shown($address) . ": $e") if !$link;
    # Log in and select the database as the address says, one command at a
    # time; a refusal croaks with nothing of the call sent.
    my @hello;
    push @hello, ['AUTH', (defined $a->{user} ? $a->{user} : ()), $a->{pass}] if defined $a->{pass};
    push @hello, ['SELECT', $a->{db}] if defined $a->{db};
    for my $cmd (@hello) {
        my @r = ('broken', $link->put(Data::BloomFilter::Shared::Redis::Link->command(@$cmd)));
        @r = $link->reply(\&Data::BloomFilter::Shared::Redis::Link::take_value, 1) if !defined $r[1];
        next if $r[0] eq 'ok';
        $link->fail;
        _croak($method, $cmd->[0] eq 'AUTH'
            ? 'cannot AUTH at ' . _shown($address) . ": $r[1]"
            : "cannot select database $a->{db} at " . _shown($address) . ": $r[1]");
    }
    return $link;
}

# Where a command goes: piece $i's slot, or "slot:N"; undef for the first
# connection.
sub _piece_node {
    my ($self, $i) = @_;
    return $self->{slot_node}{ $i =~ /\Aslot:(\d+)\z/ ? $1 : $self->{slots}[$i] };
}

# The one reply classifier: what an error reply (or a client's error) means.
# ('moved' or 'ask', slot, node): redirected, not run; ('refused'): an error
# reply (an upper-case code: OOM, WRONGTYPE, ERR, ...), the server did not
# run the command; ('broken'): the client's own error (a closed
# connection), the command may have run.
sub _classify {
    my ($e) = @_;
    return (lc $1, $2, $3) if $e =~ /\A(MOVED|ASK) (\d+) (\S+)\z/;
    return ('refused') if $e =~ /\A[A-Z][A-Z_-]* /;
    return ('broken');
}

# A command's bytes for a socket, and how its reply is taken.
sub _wire {
    my ($self, $c) = @_;
    return ($self->_script_wire($c), \&Data::BloomFilter::Shared::Redis::Link::take_value) if $c->{fields};
    if (my $pr = $c->{probe}) {
        my ($key, $packed, $k, $from, $to, $sel, $count) = @$pr;
        return (_xs_probe_command($key, $packed, $k, $from, $to, $sel), _bf_take($count, $to - $from, undef, 1));
    }
    my $bf = $c->{bf} or return (Data::BloomFilter::Shared::Redis::Link->command(@{ $c->{v} }),
        \&Data::BloomFilter::Shared::Redis::Link::take_value);
    my ($verb, $list, $from, $count, $key, $out, $shape) = @$bf;
    my ($geo, $stage, $fields) = $self->_shape($verb, $shape);
    my $masks;
    my $bytes = _xs_command($verb, @$geo, $key, $list, $from, $count, \$masks, $stage);
    return ($bytes, _bf_take($count, $fields, $masks, $out));
}

# How a BITFIELD's reply is taken off a socket's buffer: folded (_xs_reply),
# $fields per item for $count items, each field holding its mask's bits
# ($masks: as _xs_args gives them, or undef for one-bit fields that must
# be 1); each item's 0/1 kept when $out.
sub _bf_take {
    my ($count, $fields, $masks, $out) = @_;
    return sub {
        my @full;
        my @o = _bf_outcome($count, \@full, _xs_reply($_[0], $fields, $masks, $out ? \@full : undef));
        die "a reply of the wrong shape\n" if @o && $o[0] eq 'shape';
        return @o;
    };
}

# ... and a client's reply to one (an array), folded (_xs_fold).
sub _bf_fold {
    my ($count, $fields, $masks) = @_;
    return sub {
        my @full;
        my $full = _xs_fold($_[0], $fields, $masks, \@full);
        die "a reply of the wrong shape\n" if @{ $_[0] } != $count * $fields;
        return ('ok', $full, $count, \@full);
    };
}

# What _xs_reply (or _xs_roundtrip) gave for a BITFIELD command of $count
# items means: () not all come, ('ok', full, count, $full), ('error',
# text), or ('shape') for a reply of any other shape.
sub _bf_outcome {
    my ($count, $full, @r) = @_;
    return if !@r;
    return ('ok', $r[1], $r[2], $full) if $r[0] == $REPLY_INTS && $r[2] == $count;
    return ('error', $r[1]) if $r[0] == $REPLY_ERROR;
    return ('shape');
}

# The single command $c on $link of our own, written and its reply read in
# one call to C (Link.pm's roundtrip) when the core folds it (a BITFIELD
# of add or contains); else as the pipeline sends one. The outcome, as
# _next_reply gives it.
sub _one {
    my ($self, $link, $c) = @_;
    if ((my $bf = $c->{bf}) && !$c->{bf}[6]) {
        my ($verb, $list, $from, $count, $key, $out) = @$bf;
        my @full;
        return _one_outcome($link, $count, \@full, $link->roundtrip($verb, @$self{qw(layout seed bits hashes span piece)},
            $key, $list, $from, $count, $out ? \@full : undef));
    }
    my ($bytes, $take) = $self->_wire($c);
    my $broke = $link->put($bytes);
    return defined $broke ? ('broken', $broke) : $link->reply($take, 1);
}

# What Link.pm's roundtrip gave (@r) for a BITFIELD of $count items means,
# as _next_reply says it.
sub _one_outcome {
    my ($link, $count, $full, @r) = @_;
    return @r if $r[0] eq 'broken';
    return ('ok', $r[1], $r[2], $full) if $r[0] == $REPLY_INTS && $r[2] == $count;    # (the usual)
    @r = _bf_outcome($count, $full, @r);
    return $r[0] eq 'shape' ? ('broken', "unreadable reply from $link->{name}: a reply of the wrong shape") : @r;
}

# The same through a client's methods: the call is made now, with a
# callback that leaves the outcome in $p->{done}.
sub _call_client {
    my ($self, $link, $p) = @_;
    my $c = $p->{cmd};
    my $client = $link->{client};
    my ($m, @args, $fold);
    if (my $bf = $c->{bf}) {
        my ($verb, $list, $from, $count, $key, $out, $shape) = @$bf;
        my ($geo, $stage, $fields) = $self->_shape($verb, $shape);
        my $masks;
        # Queries send BITFIELD with GETs only: the method APIs turn a
        # method name's underscores into separate words.
        ($m, @args) = ('bitfield', $key,
            _xs_args($verb, @$geo, [@$list[$from .. $from + $count - 1]], undef, \$masks, $stage));
        $fold = _bf_fold($count, $fields, $masks);
    }
    elsif (my $pr = $c->{probe}) {
        my ($key, $packed, $k, $from, $to, $sel, $count) = @$pr;
        my @o = unpack 'V*', $packed;
        ($m, @args) = ('bitfield', $key, map {
            my $i = $_;
            map { ('GET', 'u1', $o[ $i * $k + $_ ]) } $from .. $to - 1
        } unpack 'L*', $sel);
        $fold = _bf_fold($count, $to - $from, undef);
    }
    else {
        ($m, @args) = @{ $c->{v} // $self->_script_v($c) };
        $m = lc $m;
    }
    my $sent = eval {
        $client->$m(@args, sub {
            my ($reply, $err) = @_;
            if (defined $err) {
                $err = _strip_client_error($err);
                $p->{done} = [_classify($err) eq 'broken' ? 'broken' : 'error', $err];
            }
            else {
                my @r = eval { $fold ? $fold->($reply) : ('ok', $reply) };
                $p->{done} = @r ? \@r : ['broken', 'unreadable reply: ' . _strip($@)];
            }
        });
        1;
    };
    return $sent ? undef : _strip_client_error($@);
}

# The next reply of a connection's oldest command: () while it has not
# come (waiting for it when $wait), else the outcome: ('ok', ...),
# ('error', text) or ('broken', text).
sub _next_reply {
    my ($self, $link, $wait) = @_;
    my $p = $link->{q}[0];
    if ($link->{client}) {
        if (!$p->{done} && $wait) {
            eval { $link->{client}->wait_all_responses; 1 }
                or return ('broken', _strip_client_error($@));
        }
        return $p->{done} ? @{ $p->{done} } : $wait ? ('broken', 'no reply') : ();
    }
    return $link->reply($p->{take}, $wait);
}

# Run commands, each a hash: { piece => i or "slot:N", v => [command, args]
# or bf => [verb, items, from, count, key, out, shape] (a BITFIELD of items
# from .. from + count - 1, one piece's or, with a shape, one stage's), or
# probe => [key, packed offsets, k, from, to, selection, count] (a query of
# some of the items' probes: _xs_probe_command), or fields (a script that
# takes items' BITFIELD fields: _script_wire), ok =>
# the reply's handler, lost => called
# when the command did not run (refused, or never sent) }. Pipelined per
# connection, at most $FLUSH unanswered on each; MOVED (the slot's node
# remembered) and ASK (ASKING, then the command, once) are followed and what
# was redirected is sent again. The first failure stops the sending; every
# reply that came is handled, $on_fail (if any) is called with the error,
# then the call croaks. A connection that failed is not used again.
sub _exchange {
    my ($self, $method, $cmds, $on_fail, $taken) = @_;
    $self->{failed} = 0;    # whether a connection failed (merge asks)
    # The state of a round: its connections, the commands to send again
    # (redirected), the first error, whether sending has stopped.
    my $st = { links => {}, again => [], error => undef, stop => 0 };
    my @todo;
    # The usual single add or contains: one command on a socket kept from
    # the last call, without the pipeline's bookkeeping (or, $taken, [the
    # connection, what its roundtrip gave], already sent that way by
    # _single). Its outcome is settled as any other's.
    if (@$cmds == 1 && ($taken || !%{ $self->{slot_node} } && ($self->{links}{''} || $self->{lent}{''}))) {
        my $c = $cmds->[0];
        my $link = $st->{links}{''} = $taken ? $taken->[0] : eval { $self->_link($method, '') };
        if (!$link) {
            $st->{error} = _strip($@);
            $c->{lost}->($c) if $c->{lost};
        }
        elsif (!$link->{client}) {
            my @r = $taken ? _one_outcome($link, 1, [], @$taken[1 .. $#$taken]) : $self->_one($link, $c);
            if ($r[0] eq 'ok') {
                # What _settle and _end_round do with a reply that came,
                # without their rounds' bookkeeping: handled, and the
                # connection kept.
                $c->{ok}->($c, @r[1 .. $#r]) if $c->{ok};
                ($link->{own} ? $self->{links} : $self->{lent})->{''} = $link;
                return;
            }
            $self->_settle($st, $link, { cmd => $c }, @r);
        }
        if (!$link || !$link->{client}) {
            return if !$self->_end_round($method, $st, $on_fail);
            @todo = @{ $st->{again} };
            $st = undef;
        }
        # (A client driven through its methods goes the usual way.)
    }
    @todo = map { [$_, undef] } @$cmds if $st;
    for my $round (0 .. $MAX_REDIRECTS) {
        $st = { links => {}, again => [], error => undef, stop => 0 } if $round || !$st;
        for my $j (0 .. $#todo) {
            my ($c, $ask) = @{ $todo[$j] };
            if ($st->{stop}) {    # never sent: not run
                $c->{lost}->($c) if $c->{lost};
                next;
            }
            my $node = $ask // $self->_piece_node($c->{piece}) // '';
            my $link = $st->{links}{$node} //= eval { $self->_link($method, $node) };
            if (!$link) {
                $st->{error} //= _strip($@);
                $c->{lost}->($c) if $c->{lost};
                $st->{stop} = 1;
                next;
            }
            for my $p (($ask ? { asking => 1, cmd => { v => ['ASKING'] } } : ()), { cmd => $c }) {
                push @{ $link->{q} }, $p;
                my $broke;
                if ($link->{client}) {
                    $broke = $self->_call_client($link, $p);
                }
                else {
                    (my $bytes, $p->{take}) = $self->_wire($p->{cmd});
                    $broke = $link->put($bytes);
                }
                next if !defined $broke;
                # This command may have gone out whole: replies that came
                # before the break are still counted, it and the rest are
                # in doubt.
                $self->_take($st, $link, undef);
                $self->_settle($st, $link, undef, 'broken', $broke);
                last;
            }
            # At most $FLUSH commands unanswered per connection: that bounds
            # what a broken connection leaves in doubt, and a client's queue.
            # (After the last command, the wait below takes them all.)
            $self->_take($st, $link, $FLUSH - 1) if !$link->{failed} && $j < $#todo;
        }
        $self->_take($st, $_, 0) for grep { $_ && !$_->{failed} } values %{ $st->{links} };
        return if !$self->_end_round($method, $st, $on_fail);
        @todo = @{ $st->{again} };
    }
    _croak($method, "still redirected after $MAX_REDIRECTS redirections (the cluster is resharding?)");
}

# Take the replies that have come on $link; wait for more while over $most
# are unanswered (undef: do not wait).
sub _take {
    my ($self, $st, $link, $most) = @_;
    while (@{ $link->{q} } && !$link->{failed}) {
        my @r = $self->_next_reply($link, defined $most && @{ $link->{q} } > $most);
        return if !@r;
        $self->_settle($st, $link, shift @{ $link->{q} }, @r);
    }
    return;
}

# What the outcome of a command ($p: { cmd }, or undef for the connection's
# failure) means for the round.
sub _settle {
    my ($self, $st, $link, $p, $kind, @r) = @_;
    if ($kind eq 'broken') {
        # Sent and unanswered: unknown, neither run nor refused.
        $link->{failed} = $st->{stop} = 1;
        $st->{error} //= $r[0];
        @{ $link->{q} } = ();
        return;
    }
    return if $p->{asking};    # its error, if any, is the command's too
    my $c = $p->{cmd};
    if ($kind eq 'ok') {
        $c->{ok}->($c, @r) if $c->{ok};
        return;
    }
    # A script the server does not hold (restarted, failed over, flushed):
    # not run; sent again whole, which loads it.
    if ($c->{script} && $r[0] =~ /\ANOSCRIPT /) {
        $c->{eval} = 1;
        @{ $c->{v} }[0, 1] = ('EVAL', $c->{script}) if $c->{v};
        push @{ $st->{again} }, [$c, undef];
        return;
    }
    my ($what, $slot, $node) = _classify($r[0]);
    if ($what eq 'moved' || $what eq 'ask') {
        $self->{slot_node}{$slot} = $node if $what eq 'moved';
        push @{ $st->{again} }, [$c, $what eq 'ask' ? $node : undef];
        return;
    }
    # Refused, not run (or an error of the client's that came as one):
    # nothing more is sent.
    $c->{lost}->($c) if $c->{lost} && $what eq 'refused';
    $link->{failed} = 1 if $what eq 'broken';
    $st->{error} //= $r[0];
    $st->{stop} = 1;
    return;
}

# The end of a round: the connections that failed are not used again (ours
# closed and made afresh by the next call; a client's socket shut, so that
# the client sees it closed; a client driven through its methods is the
# caller's), the others kept; then a croak for the round's error, or
# whether there are redirected commands to send again.
sub _end_round {
    my ($self, $method, $st, $on_fail) = @_;
    for my $node (keys %{ $st->{links} }) {
        my $link = $st->{links}{$node} or next;
        if (!$link->{failed}) {
            # Ours is kept only now: a call cut short (a die from a signal
            # handler) leaves commands unanswered on it, and it is dropped.
            ($link->{own} ? $self->{links} : $self->{lent})->{$node} = $link if !$link->{client};
            next;
        }
        $link->fail if !$link->{client};
        $self->{failed} = 1;
        delete $self->{clients}{$node} if $node ne '';    # the connect option makes another
    }
    if (defined $st->{error}) {
        # Redirected and not sent again: not run.
        $_->[0]{lost} && $_->[0]{lost}->($_->[0]) for @{ $st->{again} };
        $on_fail->($st->{error}) if $on_fail;
        _croak($method, $st->{error});
    }
    return scalar @{ $st->{again} };
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
    my ($self, $method, $i, @args) = @_;
    my $reply;
    $self->_exchange($method, [{ piece => $i, v => \@args, ok => sub { $reply = $_[1] } }]);
    return $reply;
}

# ------------------------------------------------------------------ items

# The batches of add/add_many/contains/contains_many, a single item's too:
# BITFIELD per chunk of $CHUNK items of one piece, through _exchange.
# Returns the count; fills @$out (when given) with one 0/1 per item.
sub _batch {
    my ($self, $method, $verb, $items, $out, $taken) = @_;
    _croak($method, 'argument is not an array reference, got ' . _given($items) . ' (give \@items)')
        if ref $items ne 'ARRAY' && !(Scalar::Util::blessed($items) && overload::Method($items, '@{}'));
    # Every element is checked before anything is sent. Plain strings are
    # used as they are; anything else is copied once, as a string, so that
    # each element's magic or overloading runs once (an undefined one stays
    # undefined, for the check to refuse).
    my $plain = _xs_plain($items) ? $items : _strings($method, $items);
    my $n = @$plain;
    # The batch's tallies: the count, the items known run (their replies
    # came) and those known not run (refused, or never sent), and each
    # item's 0/1 when an out array is given.
    my $b = { method => $method, verb => $verb, n => $n, out => $out, count => 0, known => 0, refused => 0,
        each => [] };
    # The items of each piece: [piece, the items, their indexes in the
    # batch (undef: the same)].
    my @groups;
    if ($self->{shards} > 1) {
        my (@pieces, $masks);
        eval { _xs_args($verb, $self->_geo, $plain, \@pieces, \$masks); 1 } or _croak($method, _strip($@));
        my @by;
        push @{ $by[ $pieces[$_] ] }, $_ for 0 .. $n - 1;
        @groups = map { $by[$_] ? [$_, [@$plain[@{ $by[$_] }]], $by[$_]] : () } 0 .. $#by;
    }
    else {
        eval { _xs_items($plain) } // _croak($method, $method =~ /_many\z/ ? _strip($@) : _strip($@) =~ s/ at index 0\z//r);
        @groups = ([0, $plain, undef]) if $n;
    }
    if ($self->{grow}) {
        $self->_grown_batch($b, $plain) if $n;
        @$out = @{ $b->{each} } if $out;
        return $b->{count};
    }
    my @cmds;
    if ($self->{gens} && !$verb && $n > 1) {
        $self->_window_read($b, $plain);
        @$out = @{ $b->{each} } if $out;
        return $b->{count};
    }
    @cmds = $self->_window_cmds($verb, $plain, $b) if $self->{gens} && $n;
    @groups = () if $self->{gens};
    for my $g (@groups) {
        my ($p, $list, $ix) = @$g;
        my $key = "{$self->{tags}[$p]}:bits";
        for (my $s = 0; $s < @$list; $s += $CHUNK) {
            my $e = ($s + $CHUNK < @$list ? $s + $CHUNK : @$list) - 1;
            push @cmds, { piece => $p, bf => [$verb, $list, $s, $e - $s + 1, $key, $out], s => $s, e => $e,
                ix => $ix, batch => $b, ok => \&_batch_ok, lost => \&_batch_lost };
        }
    }
    $self->_exchange($method, \@cmds, sub { _batch_failed($b, @_) }, $taken) if @cmds;
    @$out = @{ $b->{each} } if $out;
    return $b->{count};
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
        # A single item's warning names no index (add, contains).
        $first //= [$method =~ /_many\z/ ? $i : undef, _given($v)] if _address_item($v) && !$refs++;
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

# A command's reply, folded: $full of its $got items (@$flags, one per
# item) held every bit.
sub _batch_ok {
    my ($c, $full, $got, $flags) = @_;
    my $b = $c->{batch};
    $b->{count} += $b->{verb} ? $got - $full : $full;
    $b->{known} += $got;
    return if !$b->{out};
    my @r = $b->{verb} ? map { 1 - $_ } @$flags : @$flags;    # an add reports the items not there before
    my ($s, $e, $ix) = @$c{qw(s e ix)};
    if ($ix) { @{ $b->{each} }[@$ix[$s .. $e]] = @r } else { @{ $b->{each} }[$s .. $e] = @r }
}

# A command that did not run: its items are known not added.
sub _batch_lost { $_[0]{batch}{refused} += $_[0]{e} - $_[0]{s} + 1 }

# The croak of a batch that failed part-way ($e the first error): what is
# known of its items; the out array gets undef for the items not known.
sub _batch_failed {
    my ($b, $e) = @_;
    my ($n, $known, $refused) = @$b{qw(n known refused)};
    my $what = $b->{verb}
        ? "$known of $n items known added; $refused refused by the server or not sent (not added); the other "
            . ($n - $known - $refused) . ' may or may not have been added'
        : "$known of $n items known checked";
    if (my $out = $b->{out}) {
        $#{ $b->{each} } = $n - 1;
        @$out = @{ $b->{each} };
        $what .= ' (the results are undef for items not known added)' if $b->{verb};
    }
    Carp::croak(__PACKAGE__ . "->$b->{method}: $e: $what");
}

sub _out_array {
    my ($method, $out) = @_;
    return undef if !defined $out;
    _croak($method, 'results must be an array reference') if ref $out ne 'ARRAY';
    return $out;
}

# A single add or contains. The usual case (a plain unsharded filter, no
# redirection known, a socket of our own or a client's kept from the last
# call and still fit for use, an item that is a string of bytes) is one
# call to C (Link.pm's roundtrip) without a batch's records: the command
# written, its reply read and folded, and the connection kept. Any other
# case goes as a batch of one item; so does any outcome but the reply (it
# is settled and said as a batch's, by _exchange), with $item read once.
sub _single {
    my ($self, $method, $verb, $item) = @_;
    my $own = defined $self->{address};
    my $l;
    if (defined $item && !ref $item && !$self->{gens} && !$self->{grow} && $self->{shards} == 1 && !%{ $self->{slot_node} }
        && ($l = delete(($own ? $self->{links} : $self->{lent})->{''})))
    {
        my $s = "$item";
        # (A UTF-8 string goes the batch's way, which croaks on a wide
        # character as add_many does.)
        if (!utf8::is_utf8($s) && ($own ? $l->{pid} == $$ && $l->quiet : $l->fit($self->{client}))) {
            my @r = $l->roundtrip($verb, @$self{qw(layout seed bits hashes span piece)}, $self->{bitskey}, [$s], 0,
                1, undef);
            if ($r[0] eq $REPLY_INTS && $r[2] == 1) {
                $self->{failed} = 0;
                ($own ? $self->{links} : $self->{lent})->{''} = $l;
                return $verb ? 1 - $r[1] : 0 + $r[1];
            }
            return $self->_batch($method, $verb, [$s], undef, [$l, @r]);
        }
        # Not fit: _link replaces it.
        ($own ? $self->{links} : $self->{lent})->{''} = $l;
    }
    return $self->_batch($method, $verb, [$item]);
}

sub add {
    my $self = shift;
    _croak('add', 'usage: $filter->add($item)') if @_ != 1;
    return $self->_single('add', 1, $_[0]);
}

sub contains {
    my $self = shift;
    _croak('contains', 'usage: $filter->contains($item)') if @_ != 1;
    return $self->_single('contains', 0, $_[0]);
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

# Of a filter that grows, the capacities and bits of its stages so far
# together (as locally), asked of the server.
sub capacity { $_[0]{grow} ? $_[0]->_grown_state('capacity')->{capacity} : $_[0]{capacity} }
sub fp_rate  { $_[0]{fp_rate} }
sub bits     { $_[0]{grow} ? $_[0]->_grown_state('bits')->{bits} : $_[0]{bits} }
sub hashes   { $_[0]{hashes} }
sub seed     { $_[0]{seed} }
sub layout   { $_[0]{layout} }
sub shards   { $_[0]{shards} }
sub name     { $_[0]{name} }

sub bits_set {
    my ($self) = @_;
    return $self->_window_state('bits_set')->{bits_set} if $self->{gens};
    return $self->_grown_state('bits_set')->{bits_set} if $self->{grow};
    my $total = 0;
    $self->_exchange('bits_set', [map {
        { piece => $_, v => ['BITCOUNT', "{$self->{tags}[$_]}:bits"], ok => sub { $total += $_[1] } }
    } 0 .. $self->{shards} - 1]);
    return $total;
}

# The count and estimated false-positive rate for $x bits set, as the core
# computes them for a local filter of this layout.
sub _estimates {
    my ($self, $x) = @_;
    return _xs_estimates(@$self{qw(layout capacity fp_rate)}, $x);
}

sub count         { $_[0]{grow} ? $_[0]->_grown_state('count')->{count} : ($_[0]->_estimates($_[0]->bits_set))[0] }
sub estimated_fpp {
    $_[0]{grow} ? $_[0]->_grown_state('estimated_fpp')->{estimated_fpp} : ($_[0]->_estimates($_[0]->bits_set))[1];
}

sub fill_ratio {
    my ($self) = @_;
    return $self->bits_set / $self->{bits} if !$self->{grow};
    my $st = $self->_grown_state('fill_ratio');
    return $st->{bits_set} / $st->{bits};
}
sub is_empty      { ($_[0]{gens} ? $_[0]->_window_state('is_empty')->{live_bits} : $_[0]->bits_set) == 0 ? 1 : 0 }

sub stats {
    my ($self) = @_;
    if ($self->{grow}) {
        my $st = $self->_grown_state('stats');
        return {
            (map { $_ => $self->{$_} } qw(name fp_rate hashes seed layout shards grow max_capacity)),
            (map { $_ => $st->{$_} } qw(capacity bits stages bits_set count estimated_fpp stage_info)),
            fill_ratio => $st->{bits_set} / $st->{bits},
        };
    }
    my $w = $self->{gens} ? $self->_window_state('stats') : undef;
    my $x = $w ? $w->{bits_set} : $self->bits_set;
    my ($count, $fpp) = $self->_estimates($x);
    return {
        (map { $_ => $self->{$_} } qw(name capacity fp_rate bits hashes seed layout shards)),
        ($w ? (window => $self->window, generations => $self->{gens},
            generation => $w->{generation}, generation_start => $w->{generation_start}) : ()),
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
    return $self->_window_clear if $self->{gens};
    return $self->_grown_clear if $self->{grow};
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
            push @cmds, { piece => $i, v => ['GETRANGE', $key, $o, $e], ok => sub { $parts[$slot] = $_[1] } };
        }
        $self->_exchange($method, \@cmds);
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
    _croak('to_filter', 'not supported for a windowed filter (see WINDOWS)')
        if $self->{gens};
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
    if ($self->{grow}) {
        # The local filter with the same stages: its portable bytes, read
        # back as a new filter (a file at $path, or anonymous).
        my $img = $self->_grown_image;
        my $f = eval {
            Data::BloomFilter::Shared->deserialize($img, defined $path ? { path => $path, mode => 0 + $mode } : ());
        };
        _croak('to_filter', _strip($@)) if !$f;
        return $f;
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
    _croak('merge', 'not supported for a windowed filter (see WINDOWS)')
        if $self->{gens} || (Scalar::Util::blessed($other) && $other->isa(__PACKAGE__) && $other->{gens});
    _croak('merge', 'not supported for a filter that grows in Redis (see GROWTH)')
        if $self->{grow} || (Scalar::Util::blessed($other) && $other->isa(__PACKAGE__) && $other->{grow});
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
            push @cmds, { piece => $i, v => [$o == 0 ? 'SET' : 'APPEND', $tmp, $slice, $o == 0 ? ('PX', 600_000) : ()] };
        }
        my $ok = eval { $self->_exchange('merge', \@cmds); 1 };
        if (!$ok) {
            # A refused upload is dropped at once; one cut by a failed
            # connection is not waited for again: it expires by itself.
            my $e = $@;
            eval { $self->_call('merge', $i, 'del', $tmp) } if !$self->{failed};
            die $e;
        }
        $self->_piece_script('merge', $i, $MERGE_LUA, $tmp);
    }
    return;
}

# ------------------------------------------------------------------ windows

# A windowed filter (doc/DESIGN.md §9, Windows): the metadata key {N}:meta
# with the window's fields beside the geometry's, and one bit string per
# generation, {N}:gen:Q, Q the generation's number: the period since the
# epoch it holds the adds of (or the number of rotations of a filter
# without a window). Generation Q is visible while the current number is
# below Q + g, so an item added at t in period Q is seen until the end of
# period Q + g - 1: at least t + window and at most t + window * g / (g - 1),
# the local filter's bounds. Each generation key expires (PEXPIREAT) at the
# end of its visibility, so the server frees it with no client running.
# Every step and every add is one script, timed by the server's clock
# (TIME): hosts whose clocks disagree step alike, and an add is new for
# exactly one caller.

# The window's bounds, in seconds: the server's clock counts microseconds,
# and a Redis expiry milliseconds; ten years as locally.
my ($MIN_WINDOW, $MAX_WINDOW) = (0.001, 3653 * 86400);

# Creates a windowed filter's metadata, its epoch the server's clock now
# (microseconds, as a decimal string), or reports what is there. KEYS: the
# metadata, a plain filter's bit string of the same name; ARGV[1]: the
# bytes its generations need (0: do not create), then the fields.
my $WATTACH_LUA = <<'LUA';
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  if tonumber(ARGV[1]) == 0 then return {'gone'} end
  local b = redis.call('TYPE', KEYS[2])['ok']
  if b ~= 'none' then return {'orphan', b} end
  local info = redis.call('INFO', 'memory')
  local max = tonumber(string.match(info, 'maxmemory:(%d+)') or '0')
  local used = tonumber(string.match(info, 'used_memory:(%d+)') or '0')
  if max > 0 and used + tonumber(ARGV[1]) > max then return {'full', used, max} end
  local now = redis.call('TIME')
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
  redis.call('HSET', KEYS[1], 'epoch', now[1] .. string.format('%06d', tonumber(now[2])), 'grid', '-1')
  return {'created', redis.call('HGETALL', KEYS[1])}
end
if t ~= 'hash' then return {'type', t} end
return {'exists', redis.call('HGETALL', KEYS[1])}
LUA

# What every windowed script does first: check the metadata, and take the
# current generation's number q, the greater of the server's clock's
# period and the last one stepped to (`grid`), so that a clock set back
# brings nothing forgotten back. KEYS[1]: the metadata.
my $WHEAD = <<"LUA";
local m = redis.call('HMGET', KEYS[1], 'format', 'window_us', 'generations', 'epoch', 'grid')
if m[1] ~= '$WFORMAT' then
  return redis.error_reply('GONE key ' .. KEYS[1] .. ' $WGONE')
end
local w, g, epoch, grid = tonumber(m[2]), tonumber(m[3]), tonumber(m[4]), tonumber(m[5])
local p = w / (g - 1)
local q, now = grid, nil
if w > 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local at = math.floor((now - epoch) / p)
  if at > q then q = at end
end
if q < 0 then q = 0 end
local pre = string.sub(KEYS[1], 1, -5) .. 'gen:'
local function drop(from, to)
  for j = math.max(0, from), to do redis.call('DEL', pre .. j) end
end
LUA

# Add (ARGV[2] = 1) or look up items: ARGV[1] = k, then for an add each
# item's BITFIELD arguments (SET u1 OFFSET 1 per probe, from the core), for
# a query each item's k probe offsets alone. An add steps first when the
# current number is past `grid`: the generations no longer visible are
# dropped (they expire by themselves too) and the new current one gets its
# expiry once it exists. It sets the items' bits in the current generation
# (one BITFIELD, whose reply is the bits before) and answers 1 for an item
# unless one visible generation held all its bits before; a query answers
# 1 when one does. Older generations are never written, and the current
# one only by the SETs, in item order, as a plain filter's BITFIELD does;
# so each generation is read for all the items at once, newest first, in
# two BITFIELD GETs: every item's first probe, then every other probe of
# the items whose first was set. An item not in a generation nearly always
# misses at its first probe, so a new item costs about one field per
# generation, not k. A generation without a key reads as zeros. What a
# script costs the server goes with its arguments (each taken into Lua, and
# each of a redis.call made a command's argument again, at several times
# what the same command sent by a client costs: bench/RESULTS.md): an
# add's are the SETs the script hands on as they are (building them in
# Lua from offsets costs what the fewer arguments save), a query's the
# offsets alone, and the reads are few.
my $WITEMS_LUA = $WHEAD . <<'LUA';
local k, add = tonumber(ARGV[1]), ARGV[2] == '1'
-- Probe r of item i (from 0) is ARGV[at + step * (i * k + r)].
local step = add and 4 or 1
local at = add and 5 or 3
local n = (#ARGV - 2) / (step * k)
local cur = pre .. q
local stepped = add and q > grid
if stepped then
  redis.call('HSET', KEYS[1], 'grid', q)
  drop(grid - g + 1, math.min(grid, q - g))
end
local found, left = {}, n
local function look(key)
  local alive, na, get = {}, 0, {}
  for i = 0, n - 1 do
    if not found[i + 1] then
      na = na + 1
      alive[na] = i
      get[3 * na - 2], get[3 * na - 1], get[3 * na] = 'GET', 'u1', ARGV[at + step * i * k]
    end
  end
  if na == 0 then return end
  local bits = redis.call('BITFIELD', key, unpack(get))
  local still, ns = {}, 0
  get = {}
  for x = 1, na do
    if bits[x] == 1 then
      local i = alive[x]
      ns = ns + 1
      still[ns] = i
      for r = 1, k - 1 do
        local j = 3 * ((ns - 1) * (k - 1) + r)
        get[j - 2], get[j - 1], get[j] = 'GET', 'u1', ARGV[at + step * (i * k + r)]
      end
    end
  end
  if ns == 0 then return end
  if k > 1 then bits = redis.call('BITFIELD', key, unpack(get)) end
  for x = 1, ns do
    local all = true
    for j = (x - 1) * (k - 1) + 1, x * (k - 1) do
      if bits[j] == 0 then all = false break end
    end
    if all then found[still[x] + 1], left = true, left - 1 end
  end
end
if add then
  local old = redis.call('BITFIELD', cur, unpack(ARGV, 3))
  for i = 0, n - 1 do
    local all = true
    for j = i * k + 1, i * k + k do
      if old[j] == 0 then all = false break end
    end
    if all then found[i + 1], left = true, left - 1 end
  end
else
  look(cur)
end
for j = q - 1, math.max(0, q - g + 1), -1 do
  if left == 0 then break end
  look(pre .. j)
end
if stepped and w > 0 then
  redis.call('PEXPIREAT', cur, string.format('%.0f', math.ceil((epoch + (q + g) * p) / 1000)))
end
local out = {}
for i = 1, n do
  if found[i] then out[i] = add and 0 or 1 else out[i] = add and 1 or 0 end
end
return out
LUA

# A step now, due or not: the current number one past what it is, the
# oldest generation dropped. With a window, the epoch moves so that the
# new period starts now (the expiries already set stay later than the
# visibility they end, never earlier).
my $WROTATE_LUA = $WHEAD . <<'LUA';
local nq = q + 1
if w > 0 then
  redis.call('HSET', KEYS[1], 'epoch', string.format('%.0f', now - nq * p))
end
redis.call('HSET', KEYS[1], 'grid', nq)
drop(grid - g + 1, nq - g)
return nq
LUA

# The current number, its period's start (microseconds; -1 without a
# window), the current generation's bits set and those of every visible one.
my $WSTATE_LUA = $WHEAD . <<'LUA';
local cur, live = redis.call('BITCOUNT', pre .. q), 0
for j = math.max(0, q - g + 1), q do live = live + redis.call('BITCOUNT', pre .. j) end
local start = -1
if w > 0 then start = string.format('%.0f', epoch + q * p) end
return {q, start, cur, live}
LUA

# Drop every generation that may exist; the window and its epoch stay.
my $WCLEAR_LUA = $WHEAD . <<'LUA';
drop(math.max(grid, q) - g + 1, math.max(grid, q))
return 'ok'
LUA

my %WSHA = map { $_ => Digest::SHA::sha1_hex($_) } $WITEMS_LUA, $WROTATE_LUA, $WSTATE_LUA, $WCLEAR_LUA;

# The window options asked for: undef for none, else { g, g_given,
# window (seconds, undef: rotate only) }.
sub _window_asked {
    my ($opts) = @_;
    return undef if !exists $opts->{window} && !exists $opts->{generations};
    my ($g, $w) = Data::BloomFilter::Shared::Args::window(__PACKAGE__, 'new', $opts);
    $w = undef if !$w;
    _croak('new', "window must be from $MIN_WINDOW to $MAX_WINDOW seconds here (the server counts"
            . ' microseconds and expires keys in milliseconds), got ' . _given($opts->{window}))
        if defined $w && ($w < $MIN_WINDOW || $w > $MAX_WINDOW);
    # Not given: 4 for a new filter, an existing one's own (as locally).
    my $given = defined $opts->{generations};
    return { g => ($given ? $g : 4), g_given => $given, window => $w };
}

# The window in microseconds: rounded up to divide by g - 1, as the
# period is a whole number of them.
sub _window_us {
    my ($w, $g) = @_;
    return 0 if !defined $w;
    return POSIX::ceil(sprintf('%.3f', $w * 1e6) / ($g - 1)) * ($g - 1);
}

# A window as a mismatch says it (as locally).
sub _window_text {
    my ($a) = @_;
    return defined $a->{window}
        ? sprintf('window %.15gs, %d generations', $a->{window}, $a->{g})
        : "manual steps, $a->{g} generations";
}

# Attach to a windowed filter, creating it when absent and $ask says
# what (undef: a plain filter was asked for and a windowed one found: it
# is taken as it is). Returns the stored fields when it existed, undef
# when we created it.
sub _attach_window {
    my ($self, $want, $explicit, $ask) = @_;
    my $mk = "{$self->{name}}:meta";
    my $wus = $ask ? _window_us($ask->{window}, $ask->{g}) : 0;
    my $bytes = $ask ? $ask->{g} * $self->{bits} / 8 : 0;
    my @meta = (
        format => $WFORMAT, capacity => $want->{capacity}, fp_rate => sprintf('%.17g', $want->{fp_rate}),
        bits => $self->{bits}, hashes => $self->{hashes}, seed => $want->{seed}, layout => $want->{layout},
        shards => 1, shard => 0, generations => ($ask ? $ask->{g} : 0), window_us => $wus,
        window => ($ask && defined $ask->{window} ? sprintf('%.17g', $ask->{window}) : ''),
    );
    my $r = $self->_call('new', 0, 'eval', $WATTACH_LUA, 2, $mk, "{$self->{name}}:bits", $bytes, @meta);
    my ($what, @rest) = _attach_reply($r, $mk, "{$self->{name}}:bits", "the filter's generations need", $bytes);
    my %m = @{ $rest[0] // [] };
    _croak('new', 'window mismatch (the filter has no window, not ' . _window_text($ask) . ')')
        if ($m{format} // '') eq $FORMAT;
    _croak('new', "key $mk is not a filter of this module (format '"
            . ($m{format} // '') . "', expected '$WFORMAT')")
        if ($m{format} // '') ne $WFORMAT;
    _check_meta($mk, \%m, $explicit);
    for my $f (qw(generations window_us epoch grid)) {
        _croak('new', "key $mk: field '$f' is missing") if !defined $m{$f};
        _croak('new', "key $mk: field '$f' is not an integer ('$m{$f}')") if $m{$f} !~ /\A-?[0-9]{1,20}\z/;
    }
    my $g = 0 + $m{generations};
    _croak('new', "key $mk: field 'generations' is not from 2 to 16 ('$m{generations}')") if $g < 2 || $g > 16;
    _croak('new', "key $mk: field 'window_us' is $m{window_us}, not a multiple of generations - 1")
        if $m{window_us} % ($g - 1);
    my $has = { g => $g, window => ($m{window_us} ? 0 + ($m{window} || $m{window_us} / 1e6) : undef) };
    if ($ask && $what eq 'exists') {
        my $same = ($ask->{g_given} ? $ask->{g} == $g : 1)
            && _window_us($ask->{window}, $g) == $m{window_us};
        _croak('new', 'window mismatch (the filter has ' . _window_text($has) . ', not '
                . _window_text({ %$ask, g => $ask->{g_given} ? $ask->{g} : $g }) . ')')
            if !$same;
    }
    $self->_set_geometry('new', { %m, fp_rate => 0 + $m{fp_rate}, shards => 1 });
    @$self{qw(gens window_us window_given metakey)} = ($g, 0 + $m{window_us}, $has->{window}, $mk);
    return $what eq 'created' ? undef : { %m, fp_rate => 0 + $m{fp_rate} };
}

# The items a script of items carries at most, at $k probes an item:
# $CHUNK, fewer at large k, so that a BITFIELD of their arguments (4 per
# probe) stays well within what Lua's unpack takes, 8000.
sub _script_chunk {
    my ($k) = @_;
    my $chunk = int(1000 / $k) || 1;
    return $chunk > $CHUNK ? $CHUNK : $chunk;
}

# The scripts' commands of a batch: one per _script_chunk items. Each
# carries the items' SET arguments (an add) or probe offsets (a query)
# (_script_wire).
sub _window_cmds {
    my ($self, $verb, $plain, $b) = @_;
    my $chunk = _script_chunk($self->{hashes});
    my @cmds;
    for (my $s = 0; $s < @$plain; $s += $chunk) {
        my $e = ($s + $chunk < @$plain ? $s + $chunk : @$plain) - 1;
        push @cmds, { piece => 0, script => $WITEMS_LUA, sha => $WSHA{$WITEMS_LUA}, keys => [$self->{metakey}],
            argv => [$self->{hashes}, $verb], fields => [$verb, undef, $plain, $s, $e - $s + 1],
            s => $s, e => $e, batch => $b, ok => \&_window_ok, lost => \&_batch_lost };
    }
    return @cmds;
}

# A script whose arguments end with items' BITFIELD fields: $c->{script}
# (its sha), keys, argv, then fields => [verb, shape (as _shape takes it),
# items, from, count]: an add's SET arguments, or a query's probe offsets
# (of a filter's own bits only). Its head (EVALSHA, or EVAL after
# NOSCRIPT) before the fields:
sub _script_head {
    my ($self, $c) = @_;
    return ($c->{eval} ? ('EVAL', $c->{script}) : ('EVALSHA', $c->{sha}), scalar @{ $c->{keys} }, @{ $c->{keys} },
        @{ $c->{argv} });
}

# ... its bytes: the head, then the fields of the core's BITFIELD command
# for the items (past that command's first five lines: its length, the
# verb's and the key's) or the probe offsets (_xs_offsets_bulk), encoded by
# the core;
sub _script_wire {
    my ($self, $c) = @_;
    my ($verb, $shape, $items, $s, $count) = @{ $c->{fields} };
    my ($geo, $stage) = $self->_shape(1, $shape);
    my @head = $self->_script_head($c);
    my $cmd = Data::BloomFilter::Shared::Redis::Link->command(@head);
    $cmd = substr $cmd, index($cmd, "\r\n");
    return '*' . (@head + $count * $geo->[3]) . $cmd . _xs_offsets_bulk(@$geo, $items, $s, $count)
        if !$verb && !$stage;
    my $masks;
    my $bf = _xs_command(1, @$geo, 'k', $items, $s, $count, \$masks, $stage);
    $bf =~ /\A\*(\d+)\r\n\$8\r\nBITFIELD\r\n\$1\r\nk\r\n/ or die "the core's BITFIELD is not as expected\n";
    return '*' . (@head + $1 - 2) . $cmd . substr($bf, $+[0]);
}

# ... and the same as a list, for a client's methods (a query's offsets
# are every fourth of the SET arguments: SET u1 OFFSET 1).
sub _script_v {
    my ($self, $c) = @_;
    my ($verb, $shape, $items, $s, $count) = @{ $c->{fields} };
    my ($geo, $stage) = $self->_shape(1, $shape);
    my $masks;
    my @a = _xs_args(1, @$geo, [@$items[$s .. $s + $count - 1]], undef, \$masks, $stage);
    return [$self->_script_head($c), $verb ? @a : @a[map { 4 * $_ + 2 } 0 .. $#a / 4]];
}

# A script's reply: one 0/1 per item (new, or found).
sub _window_ok {
    my ($c, $r) = @_;
    my $b = $c->{batch};
    my ($s, $e) = @$c{qw(s e)};
    die "a reply of the wrong shape\n" if ref $r ne 'ARRAY' || @$r != $e - $s + 1;
    $b->{count} += $_ for @$r;
    $b->{known} += @$r;
    @{ $b->{each} }[$s .. $e] = @$r if $b->{out};
}

# A windowed batch's query (of more than one item), read by the server's
# BITFIELD (_read_rounds) in the generations a windowed script would read
# now (_window_visible). A step between the two finds the generations it
# drops gone (a missing key reads as zeros): items whose window had ended.
sub _window_read {
    my ($self, $bt, $plain) = @_;
    my $found = $self->_read_rounds($bt, $plain, $self->_window_visible($bt));
    my $count = 0;
    $count += $_ for @$found;
    @$bt{qw(count known each)} = ($count, scalar @$plain, $found);
}

# The visible generations now, newest first, as read targets: named by
# the server's clock (TIME) and the metadata, as a windowed script names
# them ($WHEAD). Failures are said as batch $bt's.
sub _window_visible {
    my ($self, $bt) = @_;
    my $mk = $self->{metakey};
    my ($meta, $time);
    $self->_exchange($bt->{method}, [
            { piece => 0, v => ['HMGET', $mk, qw(format window_us generations epoch grid)], ok => sub { $meta = $_[1] } },
            { piece => 0, v => ['TIME'], ok => sub { $time = $_[1] } },
        ], sub { _batch_failed($bt, @_) });
    my ($format, $w, $g, $epoch, $grid) = ref $meta eq 'ARRAY' ? @$meta : ();
    _batch_failed($bt, "GONE key $mk $WGONE") if ($format // '') ne $WFORMAT;
    for ([window_us => $w], [generations => $g], [epoch => $epoch], [grid => $grid]) {
        my ($f, $v) = @$_;
        _batch_failed($bt, "key $mk: field '$f' is not an integer ('" . ($v // 'missing') . "')")
            if ($v // '') !~ /\A-?[0-9]{1,18}\z/;
    }
    # (What names the generations read is what this handle attached to: a
    # metadata key replaced meanwhile is refused, not believed.)
    for ([window_us => $w, $self->{window_us}], [generations => $g, $self->{gens}]) {
        my ($f, $v, $want) = @$_;
        _batch_failed($bt, "key $mk: field '$f' is $v, not the $want this filter was opened with (replaced?)")
            if $v != $want;
    }
    _batch_failed($bt, 'unexpected reply to TIME')
        if ref $time ne 'ARRAY' || @$time != 2 || grep { !/\A[0-9]{1,12}\z/ } @$time;
    my $q = $grid;
    if ($w > 0) {
        # (As the script's doubles: the difference is exact, the period whole.)
        my $at = POSIX::floor(($time->[0] * 1_000_000 + $time->[1] - $epoch) / ($w / ($g - 1)));
        $q = $at if $at > $q;
    }
    $q = 0 if $q < 0;
    my $shape = { geo => [$self->_geo], stage => 0, fields => $self->{fields} };
    return [map { { key => "{$self->{name}}:gen:$_", shape => $shape } } reverse(($q - $g + 1 > 0 ? $q - $g + 1 : 0) .. $q)];
}

# One windowed script, its reply.
sub _window_call {
    my ($self, $method, $lua) = @_;
    my $reply;
    $self->_exchange($method, [{ piece => 0, script => $lua, v => ['EVALSHA', $WSHA{$lua}, 1, $self->{metakey}],
        ok => sub { $reply = $_[1] } }]);
    return $reply;
}

sub _window_state {
    my ($self, $method) = @_;
    my $r = $self->_window_call($method, $WSTATE_LUA);
    _croak($method, 'unexpected reply to the state script') if ref $r ne 'ARRAY' || @$r != 4;
    my ($q, $start, $cur, $live) = @$r;
    return { generation => 0 + $q, generation_start => ($start < 0 ? undef : $start / 1e6),
        bits_set => 0 + $cur, live_bits => 0 + $live };
}

sub _window_clear {
    my ($self) = @_;
    $self->_window_call('clear', $WCLEAR_LUA);
    return;
}

sub rotate {
    my ($self) = @_;
    _croak('rotate', 'takes no arguments') if @_ != 1;
    _croak('rotate', 'not a windowed filter') if !$self->{gens};
    $self->_window_call('rotate', $WROTATE_LUA);
    return;
}

sub window      { $_[0]{gens} ? $_[0]{window_given} : undef }
sub generations { $_[0]{gens} }

# ------------------------------------------------------------------ growth

# A filter that grows (doc/DESIGN.md, §9, Growth): the metadata key
# {N}:meta with the growth's fields (grow, max_capacity, stages, and
# fill:I, the new items counted into stage I) beside the first stage's
# geometry, and one bit string per stage, {N}:stage:I, each with the
# geometry, probes and bits a local filter of the same arguments gives its
# stage I (the core's _xs_stage), so that to_filter makes that local
# filter. Every add is one script: it looks for the item in every stage,
# and sets it in the newest, adding the next stage first when the newest
# has taken its capacity of new items, as a local filter does; so an item
# is new for exactly one caller, and a stage is added once. The client
# sends each item's offsets in the stages it knows of and the next one;
# a script that needs a stage beyond those stops and says so ('more'),
# and the rest of its items are sent again.

# Creates a filter that grows (its metadata and its first stage, zeroed) or
# reports what is there. KEYS: the metadata, a plain filter's bit string of
# the same name, the first stage; ARGV[1]: the first stage's bytes (0: do
# not create), then the fields.
my $GATTACH_LUA = <<'LUA';
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  if tonumber(ARGV[1]) == 0 then return {'gone'} end
  for _, k in ipairs({KEYS[2], KEYS[3]}) do
    local b = redis.call('TYPE', k)['ok']
    if b ~= 'none' then return {'orphan', b, k} end
  end
  local info = redis.call('INFO', 'memory')
  local max = tonumber(string.match(info, 'maxmemory:(%d+)') or '0')
  local used = tonumber(string.match(info, 'used_memory:(%d+)') or '0')
  if max > 0 and used + tonumber(ARGV[1]) > max then return {'full', used, max} end
  redis.call('SETRANGE', KEYS[3], tonumber(ARGV[1]) - 1, '\0')
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
  return {'created'}
end
if t ~= 'hash' then return {'type', t} end
return {'exists', redis.call('HGETALL', KEYS[1])}
LUA

# What every script of a filter that grows does first: check the
# metadata and take the number of stages S and of clears C (each clear
# counts one: a filter cleared and grown again has the same stages, but
# not the same bits). KEYS[1]: the metadata.
my $GHEAD = <<"LUA";
local m = redis.call('HMGET', KEYS[1], 'format', 'stages', 'clears')
if m[1] ~= '$GFORMAT' then
  return redis.error_reply('GONE key ' .. KEYS[1] .. ' $GGONE')
end
local S, C = tonumber(m[2]), m[3] or '0'
local pre = string.sub(KEYS[1], 1, -5) .. 'stage:'
LUA

# Add (ARGV[1] = 1) or look up items. ARGV[2]: the stages T the offsets
# are for (0 .. T - 1), ARGV[3]: the most stages the filter may have;
# then k, capacity and bytes of each of the T stages; then the number of
# items n; then, one string per stage, the items' probe offsets there (k
# per item, in item order, each a 32-bit little-endian number: one
# argument per stage, not four per probe, as the server makes an object
# of every argument). An item is found when one
# stage holds all its bits; an add of an item found in none sets its bits
# in the newest stage, and counts it there when one was 0 (fill:I); when
# the newest has taken its capacity, the next stage is made (zeroed)
# first. As a windowed script does, the stages no add of this script
# writes are read for all the items at once, probe by probe (an absent
# item usually misses at its first probe or two), and when the newest
# stage has room for every item left they are set there in one BITFIELD,
# whose old bits say which were new: what adding them one by one gives.
# Near the end of a stage the items left go one by one. Replies {status,
# stages, answers, ...}: 'ok'; 'more' when a stage past the T sent is
# needed (the answers are those of the items before); 'full' at the most
# stages; 'oom' when the next stage does not fit under maxmemory (then
# used and maxmemory).
my $GITEMS_LUA = $GHEAD . <<'LUA';
local add, T, limit = ARGV[1] == '1', tonumber(ARGV[2]), tonumber(ARGV[3])
if S > T then return {'more', S, {}} end
local k, cap, bytes, a = {}, {}, {}, 4
for s = 0, T - 1 do
  k[s], cap[s], bytes[s] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
end
local n = tonumber(ARGV[a])
for s = 0, T - 1 do
  if #ARGV[a + 1 + s] ~= 4 * n * k[s] then return redis.error_reply('ERR stage ' .. s .. ': offsets of the wrong length') end
end
local function off(s, i, r) return (struct.unpack('<I4', ARGV[a + 1 + s], 4 * (i * k[s] + r) + 1)) end
local found = {}
-- Stage s read for the items of list (0-based), probe by probe.
local function look(s, list)
  local alive = list
  for r = 0, k[s] - 1 do
    local na = #alive
    if na == 0 then return end
    local get = {}
    for x = 1, na do get[3 * x - 2], get[3 * x - 1], get[3 * x] = 'GET', 'u1', off(s, alive[x], r) end
    local bits = redis.call('BITFIELD', pre .. s, unpack(get))
    local still = {}
    for x = 1, na do
      if bits[x] == 1 then still[#still + 1] = alive[x] end
    end
    alive = still
  end
  for _, i in ipairs(alive) do found[i + 1] = true end
end
local function left()
  local l = {}
  for i = 0, n - 1 do
    if not found[i + 1] then l[#l + 1] = i end
  end
  return l
end
-- An add writes only the newest stage: the others are read for all at once.
for s = (add and S - 2 or S - 1), 0, -1 do
  local l = left()
  if #l == 0 then break end
  look(s, l)
end
local out, why, used, max = {}, 'ok', 0, 0
for i = 1, n do out[i] = (found[i] and not add) and 1 or 0 end
if not add then return {why, S, out, 0, 0} end
local S0, l = S, left()
local fill = tonumber(redis.call('HGET', KEYS[1], 'fill:' .. (S - 1)) or '0')
if fill + #l <= cap[S - 1] then
  local set, kn = {}, k[S - 1]
  for x, i in ipairs(l) do
    for r = 0, kn - 1 do
      local at = 4 * (kn * (x - 1) + r)
      set[at + 1], set[at + 2], set[at + 3], set[at + 4] = 'SET', 'u1', off(S - 1, i, r), 1
    end
  end
  if #l > 0 then
    local old = redis.call('BITFIELD', pre .. (S - 1), unpack(set))
    for x, i in ipairs(l) do
      for j = (x - 1) * kn + 1, x * kn do
        if old[j] == 0 then out[i + 1], fill = 1, fill + 1 break end
      end
    end
  end
else
  local function holds(s, i, op)
    local f = {}
    for r = 0, k[s] - 1 do
      if op then f[4 * r + 1], f[4 * r + 2], f[4 * r + 3], f[4 * r + 4] = 'SET', 'u1', off(s, i, r), 1
      else f[3 * r + 1], f[3 * r + 2], f[3 * r + 3] = 'GET', 'u1', off(s, i, r) end
    end
    for _, b in ipairs(redis.call('BITFIELD', pre .. s, unpack(f))) do
      if b == 0 then return false end
    end
    return true
  end
  local done = 0
  for i = 0, n - 1 do
    if not found[i + 1] then
      -- The stages this script may have written: the newest when it began, and any added since.
      local f = false
      for s = S - 1, S0 - 1, -1 do
        if holds(s, i) then f = true break end
      end
      if not f then
        if fill >= cap[S - 1] then
          if S >= limit then why = 'full' break end
          if S >= T then why = 'more' break end
          local info = redis.call('INFO', 'memory')
          max = tonumber(string.match(info, 'maxmemory:(%d+)') or '0')
          used = tonumber(string.match(info, 'used_memory:(%d+)') or '0')
          if max > 0 and used + bytes[S] > max then why = 'oom' break end
          redis.call('HSET', KEYS[1], 'fill:' .. (S - 1), fill)
          redis.call('DEL', pre .. S)
          redis.call('SETRANGE', pre .. S, bytes[S] - 1, '\0')
          S, fill = S + 1, 0
          redis.call('HSET', KEYS[1], 'stages', S)
        end
        if not holds(S - 1, i, true) then out[i + 1], fill = 1, fill + 1 end
      end
    end
    done = i + 1
  end
  for i = #out, done + 1, -1 do out[i] = nil end
end
redis.call('HSET', KEYS[1], 'fill:' .. (S - 1), fill)
return {why, S, out, used, max}
LUA

# Add items no stage held when the client read them all (a batch's
# second step: see _grown_batch). ARGV[1], ARGV[2]: the stages and clears
# the client read; ARGV[3], ARGV[4]: the newest stage's k and capacity;
# then the items' BITFIELD SET arguments in that stage (4 per probe, k
# probes per item). The stages older than the newest are as the client
# read them while the filter has the same stages and clears (an add
# writes only the newest), and the newest is read by the SET itself,
# whose old bits say which items were new: so the items are added as the
# items script adds them. When the newest has room for them all, in one
# BITFIELD; else one by one until it has taken its capacity of new items,
# where this script stops (the next item may need a new stage, which the
# items script adds). Replies {status, answers}: 'ok' with every item's,
# 'stop' with those of the items before where it stopped, 'changed' (no
# answers) when the stages or clears are not those read. A script that
# stops leaves the newest stage full, and one that follows it in the
# same batch stops at its first item: no item is added after one that
# was not.
my $GADD_LUA = $GHEAD . <<'LUA';
if S ~= tonumber(ARGV[1]) or C ~= ARGV[2] then return {'changed', {}} end
local k, cap = tonumber(ARGV[3]), tonumber(ARGV[4])
local w = 4 * k
local n = (#ARGV - 4) / w
local key, fk = pre .. (S - 1), 'fill:' .. (S - 1)
local fill = tonumber(redis.call('HGET', KEYS[1], fk) or '0')
local out, why = {}, 'ok'
local function new(old, at)
  for j = at + 1, at + k do
    if old[j] == 0 then return 1 end
  end
  return 0
end
if fill + n <= cap then
  local old = redis.call('BITFIELD', key, unpack(ARGV, 5))
  for i = 1, n do
    out[i] = new(old, (i - 1) * k)
    fill = fill + out[i]
  end
else
  for i = 1, n do
    if fill >= cap then why = 'stop' break end
    local a = 5 + (i - 1) * w
    out[i] = new(redis.call('BITFIELD', key, unpack(ARGV, a, a + w - 1)), 0)
    fill = fill + out[i]
  end
end
redis.call('HSET', KEYS[1], fk, fill)
return {why, out}
LUA

# The stages, each one's fill and bits set.
my $GSTATE_LUA = $GHEAD . <<'LUA';
local fills, set = {}, {}
for s = 0, S - 1 do
  fills[s + 1] = tonumber(redis.call('HGET', KEYS[1], 'fill:' .. s) or '0')
  set[s + 1] = redis.call('BITCOUNT', pre .. s)
end
return {S, fills, set}
LUA

# Back to the first stage, zeroed, as a local clear does; ARGV[1]: its bytes.
my $GCLEAR_LUA = $GHEAD . <<'LUA';
for s = 1, S - 1 do
  redis.call('DEL', pre .. s)
  redis.call('HDEL', KEYS[1], 'fill:' .. s)
end
redis.call('DEL', pre .. 0)
redis.call('SETRANGE', pre .. 0, tonumber(ARGV[1]) - 1, '\0')
redis.call('HSET', KEYS[1], 'stages', 1, 'fill:0', 0)
redis.call('HINCRBY', KEYS[1], 'clears', 1)
return 'ok'
LUA

my %GSHA = map { $_ => Digest::SHA::sha1_hex($_) } $GITEMS_LUA, $GADD_LUA, $GSTATE_LUA, $GCLEAR_LUA;

# How a filter grows, in words (as a local growth mismatch says it).
sub _growth_text {
    my ($grow, $max) = @_;
    return 'does not grow' if !$grow;
    return "grows by $grow" . ($max ? " up to $max items" : '');
}

# Stage $i's shape: { bits, hashes, span, capacity }, or undef past the
# limit; kept once computed (a blocked stage's costs a search).
sub _stage {
    my ($self, $i) = @_;
    return $self->{st}[$i] if $self->{st}[$i];
    return undef if $i >= $self->{limit};
    my ($limit, $bits, $hashes, $span, $cap) = _xs_stage(@$self{qw(layout capacity fp_rate grow)},
        $self->{max_capacity} // 0, $i, 0);
    _croak('new', $bits) if !defined $limit;
    my $shape = { geo => [@$self{qw(layout seed)}, $bits, $hashes, $span, $bits], stage => $i + 1,
        fields => _xs_query_fields($self->{layout}, $bits, $hashes, $span) };
    return $self->{st}[$i] = { bits => $bits, hashes => $hashes, span => $span, capacity => $cap, shape => $shape };
}

# Attach to a filter that grows, creating it when absent and $asked says
# how ({ grow, max }; undef: a plain filter was asked for and one that
# grows found: it is taken as it is). Returns the stored fields when it
# existed, undef when we created it.
sub _attach_grown {
    my ($self, $want, $explicit, $asked) = @_;
    my $n = $self->{name};
    my $mk = "{$n}:meta";
    @$self{qw(tags slots metakey shards)} = ([$n], [__PACKAGE__->key_slot("{$n}")], $mk, 1);
    my ($bytes, @meta) = (0);
    if ($asked) {
        my ($limit, $bits, $hashes) = _xs_stage(@$want{qw(layout capacity fp_rate)}, $asked->{grow},
            $asked->{max} // 0, 0, 0);
        _croak('new', $bits) if !defined $limit;
        _croak('new', "the first stage needs $bits bits but a Redis string holds at most 2^32 (a stage is one string: give a smaller capacity)")
            if $bits > $MAX_KEY_BITS;
        $bytes = $bits / 8;
        @meta = (format => $GFORMAT, capacity => $want->{capacity}, fp_rate => sprintf('%.17g', $want->{fp_rate}),
            bits => $bits, hashes => $hashes, seed => $want->{seed}, layout => $want->{layout}, shards => 1,
            shard => 0, grow => $asked->{grow}, max_capacity => $asked->{max} // 0, stages => 1, 'fill:0' => 0);
    }
    my $r = $self->_call('new', 0, 'eval', $GATTACH_LUA, 3, $mk, "{$n}:bits", "{$n}:stage:0", $bytes, @meta);
    my ($what, @rest) = _attach_reply($r, $mk, undef, 'the filter needs', $bytes);
    my %m = $what eq 'created' ? @meta : @{ $rest[0] // [] };
    my $format = $m{format} // '';
    _croak('new', 'growth mismatch (the filter does not grow, not ' . _growth_text(@$asked{qw(grow max)}) . ')')
        if $asked && ($format eq $FORMAT || $format eq $WFORMAT);
    _croak('new', "key $mk is not a filter of this module (format '$format', expected '$GFORMAT')")
        if $format ne $GFORMAT;
    for my $f (qw(capacity fp_rate bits hashes seed layout grow max_capacity stages)) {
        _croak('new', "key $mk: field '$f' is missing") if !defined $m{$f};
    }
    _croak('new', "key $mk: field '$_' is not a non-negative integer ('$m{$_}')")
        for grep { $m{$_} !~ /\A[0-9]{1,20}\z/ } qw(capacity bits hashes seed grow max_capacity stages);
    _croak('new', "key $mk: field 'fp_rate' is not a number ('$m{fp_rate}')")
        if !Scalar::Util::looks_like_number($m{fp_rate});
    _croak('new', "key $mk: field 'layout' is not a layout name ('$m{layout}')") if $m{layout} !~ /\A\w+\z/;
    my ($limit, $bits, $hashes, $span) = _xs_stage(@m{qw(layout capacity fp_rate grow max_capacity)}, 0, 0);
    _croak('new', "key $mk: $bits") if !defined $limit;
    _croak('new', "key $mk: bits $m{bits} and hashes $m{hashes} do not match capacity $m{capacity} and fp_rate $m{fp_rate} (expected $bits and $hashes)")
        if $bits != $m{bits} || $hashes != $m{hashes};
    _croak('new', "key $mk: field 'stages' is $m{stages}, not from 1 to $limit") if $m{stages} < 1 || $m{stages} > $limit;
    for my $f (qw(seed layout)) {
        my $a = $explicit->{$f};
        _croak('new', "$f mismatch: the filter in Redis has $f $m{$f}, asked for $a") if defined $a && $a ne $m{$f};
    }
    my $max = $m{max_capacity} ? $m{max_capacity} : undef;
    _croak('new', 'growth mismatch (the filter ' . _growth_text($m{grow}, $max) . ', not '
            . _growth_text(@$asked{qw(grow max)}) . ')')
        if $asked && ($asked->{grow} != $m{grow} || (defined $asked->{max} && "$asked->{max}" ne "$m{max_capacity}"));
    @$self{qw(capacity fp_rate seed layout grow max_capacity limit bits hashes span piece gstages st)}
        = ((map { $m{$_} } qw(capacity)), 0 + $m{fp_rate}, @m{qw(seed layout grow)}, $max, $limit,
        $bits, $hashes, $span, $bits, 0 + $m{stages}, []);
    $self->{fields} = $hashes;
    # A Redis string holds 2^32 bits: the stages stop before the first
    # larger one (a local filter would go on).
    for my $i (1 .. $limit - 1) {
        next if $self->_stage($i)->{bits} <= $MAX_KEY_BITS;
        @$self{qw(limit cut)} = ($i, 1);
        last;
    }
    _croak('new', "key $mk: field 'stages' is $m{stages}, not from 1 to $self->{limit}") if $m{stages} > $self->{limit};
    return $what eq 'created' ? undef : { %m, fp_rate => 0 + $m{fp_rate} };
}

# The commands of a batch's items in the ranges @todo ([from, to]): one
# script per $CHUNK (fewer when the stages' probes are many, so that a
# script's BITFIELD of them stays within what Lua's unpack takes), with
# each item's offsets in the $self->{gstages} stages known and the next
# one, a string per stage (_xs_offsets_packed).
sub _grown_cmds {
    my ($self, $verb, $plain, $ix, $b, @todo) = @_;
    my $t = $self->{gstages} + 1;
    $t = $self->{limit} if $t > $self->{limit};
    my @st = map { $self->_stage($_) } 0 .. $t - 1;
    my $kmax = 0;
    $_->{hashes} > $kmax and $kmax = $_->{hashes} for @st;
    my $chunk = _script_chunk($kmax);
    my @head = ('EVALSHA', $GSHA{$GITEMS_LUA}, 1, $self->{metakey}, $verb, $t, $self->{limit},
        map { ($_->{hashes}, $_->{capacity}, $_->{bits} / 8) } @st);
    my @cmds;
    for my $range (@todo) {
        my ($from, $to) = @$range;
        for (my $s = $from; $s < $to; $s += $chunk) {
            my $e = ($s + $chunk < $to ? $s + $chunk : $to) - 1;
            my @off = map {
                _xs_offsets_packed(@$self{qw(layout seed)}, @{ $st[$_] }{qw(bits hashes span bits)}, $_ + 1, $plain, $s,
                    $e - $s + 1);
            } 0 .. $#st;
            push @cmds, { piece => 0, script => $GITEMS_LUA, v => [@head, $e - $s + 1, @off], s => $s, e => $e,
                ix => $ix, batch => $b, ok => \&_grown_ok, lost => \&_batch_lost };
        }
    }
    return @cmds;
}

# A script's reply: the answers of its items (all, or those before where
# it stopped), and why it stopped.
sub _grown_ok {
    my ($c, $r) = @_;
    my $b = $c->{batch};
    die "a reply of the wrong shape\n" if ref $r ne 'ARRAY' || ref $r->[2] ne 'ARRAY';
    my ($why, $stages, $got, $used, $max) = @$r;
    my ($s, $e) = @$c{qw(s e)};
    die "a reply of the wrong shape\n" if @$got > $e - $s + 1 || ($why eq 'ok' && @$got != $e - $s + 1);
    _grown_answers($c, $got);
    $b->{stages} = $stages if $stages > ($b->{stages} // 0);
    return if $why eq 'ok';
    my $at = $s + @$got;
    push @{ $b->{again} }, [$at, $e + 1] if $why eq 'more';
    $b->{stop} = [$at, $why, $used, $max] if $why ne 'more' && (!$b->{stop} || $b->{stop}[0] > $at);
}

# Answers that came for a command's items (from its first, $c->{s}, on;
# $c->{ix}: their indexes in the batch, when not the same).
sub _grown_answers {
    my ($c, $got) = @_;
    my $b = $c->{batch};
    $b->{count} += $_ for @$got;
    $b->{known} += @$got;
    return if !$b->{out};
    my ($s, $ix) = @$c{qw(s ix)};
    @{ $b->{each} }[$ix ? @$ix[$s .. $s + $#$got] : $s .. $s + $#$got] = @$got;
}

# The items of a batch on a filter that grows. A batch of more than one
# item is first read in every stage (_grown_read): a query is answered
# so; an add sends the add script ($GADD_LUA) only the items no stage
# held. What that script did not add (the filter changed since it was
# read, or the newest stage is full), and a single item, go to the items
# script ($GITEMS_LUA), in rounds, each pipelined; a round's scripts that
# needed a stage they had no offsets for are sent again, from where they
# stopped, with the stages their replies named.
sub _grown_batch {
    my ($self, $bt, $plain) = @_;
    my $method = $bt->{method};
    my ($list, $ix, $from) = ($plain, undef, 0);
    if (@$plain > 1) {
        my ($found, $clears) = $self->_grown_read($bt, $plain);
        my @ix = grep { !$found->[$_] } 0 .. $#$plain;
        if (!$bt->{verb}) {
            @$bt{qw(count known each)} = (@$plain - @ix, scalar @$plain, $found);
            return;
        }
        # (An item a stage held was not new; the others are not known yet.)
        $bt->{each} = [map { $_ ? 0 : undef } @$found] if $bt->{out};
        $bt->{known} = @$plain - @ix;
        return if !@ix;
        ($list, $ix) = ([@$plain[@ix]], \@ix);
        $from = $self->_grown_add($bt, $list, $ix, $clears);
    }
    my @todo = $from < @$list ? ([$from, scalar @$list]) : ();
    while (@todo) {
        $bt->{again} = [];
        my @cmds = $self->_grown_cmds($bt->{verb}, $list, $ix, $bt, @todo);
        $self->_exchange($method, \@cmds, sub { _batch_failed($bt, @_) });
        $self->{gstages} = $bt->{stages} if ($bt->{stages} // 0) > $self->{gstages};
        last if $bt->{stop};
        @todo = sort { $a->[0] <=> $b->[0] } @{ $bt->{again} };
    }
    my $stop = $bt->{stop} or return;
    my ($at, $why, $used, $max) = @$stop;
    $at = $at < @$ix ? $ix->[$at] : @$plain if $ix;
    $#{ $bt->{each} } = $bt->{n} - 1 if $bt->{out};
    my $msg = $why eq 'oom'
        ? 'the filter is full and its next stage needs ' . $self->_stage($self->{gstages})->{bits} / 8
            . " bytes, but the server uses $used of its maxmemory $max"
        : defined $self->{max_capacity} && !$self->{cut}
        ? "the filter is full: it holds its max_capacity of $self->{max_capacity} items"
        : "the filter is full: its $self->{limit} stages hold " . $self->_total('capacity', $self->{limit})
            . ' items, the most it can grow to' . ($self->{cut} ? ' in Redis (a string holds at most 2^32 bits)' : '');
    @{ $bt->{out} } = @{ $bt->{each} } if $bt->{out};
    Carp::croak(__PACKAGE__ . "->$method: $msg; "
        . ($method =~ /_many\z/ ? "the first $at items of this batch were added, none after" : 'nothing was added'));
}

# ------------------------------------------------------------------ reads

# The probes a query reads of a bit string in each round, when it reads an
# item's probe bits (a standard layout's): the first, then the next two,
# then the rest. An item drops out of a string at its first clear bit, as
# in a local filter: in a string half full an absent item's first probe is
# clear half the time, its first three all set one time in eight.
my @ROUNDS = ([0, 1], [1, 3], [3, 32]);

# The most fields one of those reads asks for (the items of a batch in
# as few commands as that allows: a read has nothing to account for when
# it breaks).
my $READ = 1024;

# The croak of a batch that failed while it was being read, before
# anything was written: an add's items all known not added.
sub _read_failed {
    my ($bt, $e) = @_;
    $bt->{refused} = $bt->{n} if $bt->{verb};
    _batch_failed($bt, $e);
}

# A batch's items looked up in bit strings (@$targets: { key, shape }, the
# shape as _stage_shape gives it: the stages of a filter that grows, the
# visible generations of a windowed one), by the server's BITFIELD, in
# rounds, each pipelined: the first round @first (commands sent before
# the reads) and per string the items' first probes (or, where a query
# reads an item's word or block, that, which ends that string's reads);
# each later round the next probes of the items every probe so far held
# there and no string has been found to hold. Returns each item's 1 (a
# string held all its bits) or 0.
sub _read_rounds {
    my ($self, $bt, $plain, $targets, @first) = @_;
    my $n = @$plain;
    my $failed = sub { _read_failed($bt, @_) };
    # (%packed: the probe offsets of each shape, computed once: a windowed
    # filter's generations share theirs.)
    my (@found, %packed, @alive);
    # What a reply says: the items it held (every probe so far, or all).
    my $held = sub {
        my ($c, undef, undef, $flags) = @_;
        my @h = @{ $c->{sel} }[grep { $flags->[$_] } 0 .. $#$flags];
        $c->{last} ? (@found[@h] = (1) x @h) : push @{ $alive[ $c->{target} ] }, @h;
    };
    for my $r (0 .. $#ROUNDS) {
        my ($from, $to) = @{ $ROUNDS[$r] };
        my @cmds = $r ? () : @first;
        my @now = @alive;
        @alive = ();
        for my $i (0 .. $#$targets) {
            # (Nothing is found before the first round's replies.)
            my @list = $r ? grep { !$found[$_] } @{ $now[$i] // [] } : 0 .. $n - 1 or next;
            my ($key, $shape) = @{ $targets->[$i] }{qw(key shape)};
            my $k = $shape->{geo}[3];
            if ($shape->{fields} != $k) {    # its word or block, in the first round (all the items)
                my $per = int($READ / $shape->{fields});
                for (my $s = 0; $s < $n; $s += $per) {
                    my $e = ($s + $per < $n ? $s + $per : $n) - 1;
                    push @cmds, { piece => 0, bf => [0, $plain, $s, $e - $s + 1, $key, 1, $shape], sel => [$s .. $e],
                        last => 1, target => $i, ok => $held };
                }
                next;
            }
            next if $from >= $k;
            my $end = $to < $k ? $to : $k;
            my $packed = $packed{$shape} //= _xs_offsets_packed(@{ $shape->{geo} }, $shape->{stage}, $plain, 0, $n);
            my $per = int($READ / ($end - $from));
            for (my $s = 0; $s < @list; $s += $per) {
                my @sel = @list[$s .. ($s + $per < @list ? $s + $per : @list) - 1];
                push @cmds, { piece => 0, probe => [$key, $packed, $k, $from, $end, pack('L*', @sel), scalar @sel],
                    sel => \@sel, last => $end == $k, target => $i, ok => $held };
            }
        }
        last if !@cmds;
        $self->_exchange($bt->{method}, \@cmds, $failed);
    }
    return [map { $found[$_] // 0 } 0 .. $n - 1];
}

# A batch's items looked up in every stage of a filter that grows
# (_read_rounds), after an HMGET of the metadata's format, stages and
# clears in the first round. Returns each item's 1 (a stage held it) or 0,
# and the clears read. The stages read are those the HMGET names (read
# again with more when it names more than were known): a stage added
# after it holds only items added after it (for an add, its script sees
# the change and adds nothing). When the batch cannot be read, nothing
# was added.
sub _grown_read {
    my ($self, $bt, $plain) = @_;
    my $mk = $self->{metakey};
    my $t = $self->{gstages};
    my $meta;
    my $found = $self->_read_rounds($bt, $plain,
        [map { { key => "{$self->{name}}:stage:$_", shape => $self->_stage($_)->{shape} } } 0 .. $t - 1],
        { piece => 0, v => ['HMGET', $mk, qw(format stages clears)], ok => sub { $meta = $_[1] } });
    my ($format, $stages, $clears) = ref $meta eq 'ARRAY' ? @$meta : ();
    _read_failed($bt, "GONE key $mk $GGONE") if ($format // '') ne $GFORMAT;
    _read_failed($bt, "key $mk: field 'stages' is " . ($stages // 'missing') . ", not from 1 to $self->{limit}")
        if ($stages // '') !~ /\A[0-9]{1,2}\z/ || $stages < 1 || $stages > $self->{limit};
    $self->{gstages} = 0 + $stages;
    return $self->_grown_read($bt, $plain) if $stages > $t;
    return ($found, $clears // 0);
}

# The add script's commands for the items of $list (those of a batch no
# stage held, read when the filter had $clears clears and
# $self->{gstages} stages), one per $CHUNK items (fewer when the newest
# stage's probes are many: the script's BITFIELD takes 4 arguments per
# probe), carrying their SET arguments in the newest stage. Returns
# where the first script that did not add all its items stopped (the
# items from there on are not added), or the number of items.
sub _grown_add {
    my ($self, $bt, $list, $ix, $clears) = @_;
    my $t = $self->{gstages};
    my $st = $self->_stage($t - 1);
    my $chunk = _script_chunk($st->{hashes});
    my $rest = { from => scalar @$list };
    my @cmds;
    for (my $s = 0; $s < @$list; $s += $chunk) {
        my $count = $s + $chunk < @$list ? $chunk : @$list - $s;
        push @cmds, { piece => 0, script => $GADD_LUA, sha => $GSHA{$GADD_LUA}, keys => [$self->{metakey}],
            argv => [$t, $clears, @$st{qw(hashes capacity)}], fields => [1, $st->{shape}, $list, $s, $count],
            s => $s, e => $s + $count - 1, ix => $ix, batch => $bt, rest => $rest, ok => \&_grown_add_ok,
            lost => \&_batch_lost };
    }
    $self->_exchange($bt->{method}, \@cmds, sub { _batch_failed($bt, @_) });
    return $rest->{from};
}

# An add script's reply: the answers of its items (all, or those before
# where it stopped). None comes after a script that stopped (it left the
# newest stage full, or the filter changed).
sub _grown_add_ok {
    my ($c, $r) = @_;
    die "a reply of the wrong shape\n" if ref $r ne 'ARRAY' || ref $r->[1] ne 'ARRAY';
    my ($why, $got) = @$r;
    my ($s, $e, $rest) = @$c{qw(s e rest)};
    die "a reply of the wrong shape\n"
        if @$got > $e - $s + 1 || ($why eq 'ok') != (@$got == $e - $s + 1) || (@$got && $rest->{from} < $s);
    _grown_answers($c, $got);
    $rest->{from} = $s + @$got if $why ne 'ok' && $rest->{from} > $s + @$got;
}

# The capacities or bits of the first $n stages together.
sub _total {
    my ($self, $what, $n) = @_;
    my $t = 0;
    $t += $self->_stage($_)->{$what} for 0 .. $n - 1;
    return $t;
}

# One script of a filter that grows, its reply.
sub _grown_call {
    my ($self, $method, $lua, @args) = @_;
    my $reply;
    $self->_exchange($method, [{ piece => 0, script => $lua, v => ['EVALSHA', $GSHA{$lua}, 1, $self->{metakey}, @args],
        ok => sub { $reply = $_[1] } }]);
    return $reply;
}

# The stages now, each one's fill and bits set, and the estimates.
sub _grown_state {
    my ($self, $method) = @_;
    my $r = $self->_grown_call($method, $GSTATE_LUA);
    _croak($method, 'unexpected reply to the state script')
        if ref $r ne 'ARRAY' || @$r != 3 || ref $r->[1] ne 'ARRAY' || ref $r->[2] ne 'ARRAY' || @{ $r->[1] } != $r->[0];
    my ($n, $fills, $set) = @$r;
    _croak($method, "the filter has $n stages, more than the $self->{limit} it can have") if $n > $self->{limit};
    $self->{gstages} = $n;
    my ($count, $miss, @info) = (0, 1);
    for my $i (0 .. $n - 1) {
        my $g = $self->_stage($i);
        my (undef, undef, undef, undef, undef, $c, $fpp) = _xs_stage(@$self{qw(layout capacity fp_rate grow)},
            $self->{max_capacity} // 0, $i, $set->[$i]);
        _croak($method, "stage $i: $c") if !defined $fpp;
        $count += $c;
        $miss *= 1 - $fpp;
        push @info, { capacity => $g->{capacity}, bits => $g->{bits}, hashes => $g->{hashes}, fill => 0 + $fills->[$i] };
    }
    my $bits_set = 0;
    $bits_set += $_ for @$set;
    return { stages => $n, bits_set => $bits_set, count => $count, estimated_fpp => 1 - $miss,
        capacity => $self->_total('capacity', $n), bits => $self->_total('bits', $n), stage_info => \@info };
}

# A filter that grows as local bytes (to_filter): its stages' bits, fetched
# after their count and fills.
sub _grown_image {
    my ($self) = @_;
    my $st = $self->_grown_state('to_filter');
    my $all = '';
    for my $i (0 .. $st->{stages} - 1) {
        my $bytes = $self->_stage($i)->{bits} / 8;
        my $key = "{$self->{name}}:stage:$i";
        my @parts;
        my @cmds;
        for (my $o = 0, my $j = 0; $o < $bytes; $o += $XFER, $j++) {
            my $e = ($o + $XFER < $bytes ? $o + $XFER : $bytes) - 1;
            my $slot = $j;
            push @cmds, { piece => 0, v => ['GETRANGE', $key, $o, $e], ok => sub { $parts[$slot] = $_[1] } };
        }
        $self->_exchange('to_filter', \@cmds);
        my $piece = join '', map { $_ // '' } @parts;
        _croak('to_filter', "key $key holds " . length($piece) . " bytes, expected $bytes (deleted or replaced?)")
            if length $piece != $bytes;
        $all .= $piece;
    }
    my ($img, $e) = _xs_grown_image(@$self{qw(layout capacity fp_rate grow)}, $self->{max_capacity} // 0,
        $self->{seed}, [map { $_->{fill} } @{ $st->{stage_info} }], $all);
    _croak('to_filter', $e) if !defined $img;
    return $img;
}

sub _grown_clear {
    my ($self) = @_;
    $self->_grown_call('clear', $GCLEAR_LUA, $self->_stage(0)->{bits} / 8);
    $self->{gstages} = 1;
    return;
}

sub grow         { $_[0]{grow} }
sub max_capacity { $_[0]{max_capacity} }
sub stages       { $_[0]{grow} ? $_[0]->_grown_state('stages')->{stages} : 1 }



1;

__END__

=encoding utf8

=head1 NAME

Data::BloomFilter::Shared::Redis - the same Bloom filter in plain Redis, for a fleet of hosts

=head1 SYNOPSIS

    use Data::BloomFilter::Shared::Redis;

    my $seen = Data::BloomFilter::Shared::Redis->new(
        'redis.internal:6379', 'events', 100_000_000, 0.001);
    # or with your own connected client (see Connections, Timeouts):
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
C<redis-server> 7.0 does. From an address the module connects by itself
(L</Connections>); a client object passed in may be L<Redis::Fast> (Debian:
C<libredis-fast-perl>) or anything with the L<Redis>/L<Redis::Fast> method
API.

=head2 Connections

A filter made from an address connects a socket of its own (in C<new>),
logs in and selects the database as the address says, and sends every
command over it; the other nodes of a cluster get one each the same way (or
a client from the C<connect> option). A forked child opens its own. A
socket the server closed while idle (its C<timeout>, a restart) is noticed
before anything is sent on it and opened afresh.

A L<Redis::Fast> client passed in (or returned by C<connect>) lends its
socket: the module writes its commands and reads their replies there
itself (over a duplicate of the descriptor, kept while the client's still
names the same socket), between the client's own calls, so leave no reply
of yours pending on the client when you call the filter. A client of another kind (anything
with the L<Redis> method API) is driven through its methods, pipelined with
callbacks.

Either way the core encodes each C<BITFIELD> command straight from the
items' offsets and folds each reply, so no argument or reply element
becomes a Perl value, and each command is written as soon as it is made, so
the server works on one while the next is made (F<bench/RESULTS.md>,
"Redis", has the figures).

=head2 Timeouts

    my $f = Data::BloomFilter::Shared::Redis->new('redis.internal:6379', 'events',
        100_000_000, 0.001, { read_timeout => 2 });

C<cnx_timeout> (default 5), C<read_timeout> (default 10) and
C<write_timeout> (default 10), in seconds (fractions allowed, at most 86400),
as L<Redis::Fast> and L<Redis> name them: connecting may take at most
C<cnx_timeout>, the wait for each reply (from when the module starts waiting
for it until it has all come) at most C<read_timeout>, and each command's
writing at most C<write_timeout> of stalls. The defaults leave room for the
slowest command the filter sends (creating or merging a 512 MiB piece takes
the server about a second). They apply to the sockets the module opens
(from an address, and to the nodes of a cluster) and to the commands it
sends over the socket of a L<Redis::Fast> client passed in. What such a
client does itself (connecting, reconnecting, your own commands) is bound
by the client's own timeouts: give it some. A client of another kind is
driven through its methods, under its own timeouts only.

A call past a timeout croaks naming the server and the timeout (C<no reply
from HOST:PORT within read_timeout 2 s>), and the connection is not used
again: the module's own is closed and the next call opens another; a
L<Redis::Fast> client's socket is shut (so that no late reply is ever read
as the answer to another command), and the next call asks the client to
answer a C<PING> (a wait bound by the client's own timeouts), which
reconnects a client made with C<reconnect>. A batch
cut by a timeout croaks as one cut by a broken connection (L</FAILURES>):
the items whose replies came are known added (or checked), those whose
commands were sent and not answered may or may not be added (the server,
once it answers again, may still run them), and the rest were not sent.

A signal's handler runs while a call waits, even one whose signal came
just as the wait began: a handler that returns lets the wait go on to the
same deadline, one that dies ends the call with its error (and the
connection is not used again, as after a timeout).

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
to which the module connects (see L</Connections>): C<host:port>,
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
socket of the module's own to C<host:port>), C<cnx_timeout>, C<read_timeout>
and C<write_timeout> (see L</Timeouts>), C<window> and C<generations> (a
windowed filter: see L</WINDOWS>), C<grow> and C<max_capacity> (a filter
that grows: see L</GROWTH>). An explicit C<seed>, C<layout> or
C<shards> that differs from the stored one croaks. A C<capacity> or an
C<fp_rate> that differs from the stored one warns, as a local filter's
reopening does (L<Data::BloomFilter::Shared/new>): "the filter's capacity
1000 is kept, not the capacity 2000 asked for (an existing filter keeps its
geometry)", in the category C<Data::BloomFilter::Shared> (C<no warnings
'Data::BloomFilter::Shared'> silences it; C<FATAL> makes it croak).

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
bits_set count fill_ratio estimated_fpp>. For a windowed filter, as
locally: C<bits_set>, C<count>, C<fill_ratio> and C<estimated_fpp>
describe the current generation, C<is_empty> is 1 when no visible
generation holds a bit, and C<stats> adds C<window>, C<generations>,
C<generation> (the current generation's number: the periods since
creation, or the rotations of a filter without a window) and
C<generation_start> (when its period started, in seconds since the epoch
by the server's clock; undef without a window). For a filter that grows,
as locally: see L</GROWTH>.

=head2 capacity, fp_rate, bits, hashes, seed, layout, shards, name, window, generations, grow, max_capacity, stages

The stored geometry and options. C<window> (seconds, as given) and
C<generations> are undef for a plain filter; C<window> is undef for a
windowed filter stepped only by L</rotate>. C<grow> and C<max_capacity>
are undef for a filter that does not grow, C<stages> 1; for one that
grows (L</GROWTH>) C<stages> is the number of stages now, and
C<capacity> and C<bits> those of its stages so far together, as locally
(each asks the server).

=head2 rotate

    $f->rotate;

A generation step of a windowed filter now, due or not: the oldest
generation is forgotten (one script). With a window, the new period starts
now and the next step is due a period later. Croaks on a plain filter.

=head2 clear

Zero the bits (per piece, one atomic script that first checks the piece is
still this filter). A windowed filter drops every generation; its window
stays.

=head2 merge

Not for a windowed filter (either side): it croaks.

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
while the local filter is built. A windowed filter croaks: its copy would
need every generation and the server's clock.

=head2 key_slot

    my $slot = Data::BloomFilter::Shared::Redis->key_slot($key);

The Redis Cluster slot of a key: CRC16-XMODEM of its hash tag (or the whole
key) mod 16384.

=head1 WINDOWS

    # Seen in the last 24 hours, fleet-wide?
    my $seen = Data::BloomFilter::Shared::Redis->new('redis.internal:6379', 'webhooks',
        1_000_000, 0.001, { window => 24 * 3600 });
    process($id) if $seen->add($id);

The options C<window> (seconds, from 0.001 to 10 years) and C<generations>
(2 to 16, default 4) make a I<windowed> filter, with the local filter's
meaning (L<Data::BloomFilter::Shared/WINDOWED FILTERS>): I<g> generations,
a step every C<window / (g - 1)> seconds (the I<period>); L</add, contains>: C<add> puts the
item in the current generation and returns 1 unless a visible generation
holds it; C<contains> looks in every visible one. C<< window => undef >>
makes one that steps only when told (L</rotate>). An item added (or added
again) at time I<t> is seen until at least I<t> + window and forgotten by
I<t> + window * g / (g - 1); an item is never missed inside its window
(but for false positives, never a false negative).

I<Time is the server's.> Each add, single query and step is one Lua
script (C<EVALSHA>) that reads the server's clock (C<TIME>), so hosts
whose clocks disagree step alike, and the step, the item's check in every
visible generation and the setting of its bits in the current one are one
atomic operation: among all clients and hosts, an item is told new exactly
once per window, across steps. A batch of adds is one script per 100
items (fewer with many probes), pipelined as a plain filter's
C<BITFIELD>s are; a script the server does not hold (restarted, failed
over, C<SCRIPT FLUSH>) is sent again whole (C<EVAL>). A batch of queries
(C<contains_many>) writes nothing, so it is read without a script: the
server's clock and the filter's metadata, which name the visible
generations as a script would, then those generations by the server's
own C<BITFIELD>, a few probes at a time (an item leaves a generation at
its first clear bit, and every generation once one holds it). A step
that comes between finds the generations it drops gone: their items'
windows had ended.

I<Keys.> A windowed filter named C<webhooks> is C<{webhooks}:meta> (the
geometry and the window: C<window>, C<generations>, the C<epoch> the
periods are counted from, by the server's clock at creation, and the
current generation's number) and one string per generation,
C<{webhooks}:gen:Q>, Q its number: the period since the epoch (or the
rotation) whose adds it holds. Each generation key expires
(C<PEXPIREAT>) when its last item is forgotten, so the server frees the
memory of an idle filter by itself, with no client running; a generation
with no add has no key. Only a visible generation is ever read. A filter
without a window has no expiry: L</rotate> drops the oldest generation.

I<Reopening.> As locally: an existing filter keeps its window; an explicit
C<window> or C<generations> that differs croaks (C<window mismatch (the
filter has window 2s, 4 generations, not window 3s, 4 generations)>), and
so do window options for a plain filter of that name; C<new> without them
opens a windowed filter as it is; a C<window> without C<generations> opens
one of any number of generations.

I<Not here.> C<shards> (a windowed filter is one hash slot), C<merge> and
C<to_filter> croak. The memory is up to I<g> times a plain filter's (each
generation key grows to C<bits / 8> bytes as it fills), checked against
C<maxmemory> at creation.

=head1 GROWTH

    # Deduplicate a stream of unknown size, fleet-wide.
    my $seen = Data::BloomFilter::Shared::Redis->new('redis.internal:6379', 'ids',
        1_000_000, 0.001, { grow => 2, max_capacity => 1e9 });

The options C<grow> (2 to 16) and C<max_capacity> make a filter that
I<grows>, with the local filter's meaning and arguments
(L<Data::BloomFilter::Shared/FILTERS THAT GROW>): past C<$capacity> new
items it adds a stage C<grow> times larger instead of passing its
C<fp_rate>. Stage I<i> has exactly the geometry, probes and bits a local
filter of the same arguments gives its stage I<i>, and a stage is added
at the same point, when the newest has taken its capacity of new items
(counted exactly: the server holds one count per stage). So the same
items added in the same order give the same stages and bits as locally,
and L</to_filter> gives that local filter that grows (the same bytes as
its C<serialize>).

I<Reads, then scripts.> A batch is first read: the server's own
C<BITFIELD> reads every stage, pipelined, a few probes at a time (an
item leaves a stage at its first clear bit, and every stage once one
holds it; a C<blocked> stage's word or block is read at once), which
answers C<contains_many>. C<add_many> then sends only the items no stage
held to a Lua script (C<EVALSHA>; C<EVAL> for a server that does not
hold it), which sets them in the newest stage and counts the new ones
there, provided the filter still has the stages and clears it was read
with; when it has changed, or the newest stage takes its capacity, the
rest go to a script that looks for each item in every stage again and
adds the next stage first (zeroed) when the newest is full. A single
C<add> or C<contains> is that script alone. So an item is told new
exactly once among all clients, also while a stage is added, and a
stage is added once. Scripts carry 100 items each (fewer with many
probes), pipelined.

I<Bounds.> With C<max_capacity>, an C<add> of a new item past it croaks
as locally (C<the filter is full: it holds its max_capacity of N items;
nothing was added>; from C<add_many>, C<the first N items of this batch
were added, none after>); the items already in it stay, and adding them
again returns 0. Without it, the filter stops before the first stage a
Redis string cannot hold (more than 2^32 bits; a local filter of the
same arguments has more stages), and the croak names that bound (C<the
filter is full: its N stages hold M items, the most it can grow to in
Redis (a string holds at most 2^32 bits)>).
A stage is checked against C<maxmemory> before it is made: past it, the
add croaks (C<the filter is full and its next stage needs N bytes, but
the server uses U of its maxmemory M; nothing was added>), adds nothing,
and the next add that needs the stage when there is room adds it.

I<Keys.> A filter that grows named C<ids> is C<{ids}:meta> (the first
stage's geometry, C<grow>, C<max_capacity>, C<stages>, each stage's
count of new items, C<fill:I>, and the number of clears) and one string
per stage,
C<{ids}:stage:I>: all in one hash slot (see L</CLUSTER>).

I<Reopening.> As locally: an existing filter keeps its growth; an
explicit C<grow> (or C<max_capacity>) that differs croaks (C<growth
mismatch (the filter grows by 2, not grows by 3)>), and so does C<grow>
for a filter of that name that does not grow (C<growth mismatch (the
filter does not grow, not grows by 2)>); C<new> without them opens a
filter that grows as it is. A C<capacity> or C<fp_rate> that differs from
the stored first stage's warns, as for any filter (L</new>).

I<Whole filter.> C<count>, C<estimated_fpp> and C<stats> (L</count, bits_set, fill_ratio, estimated_fpp, is_empty, stats>) are the local
filter's: the stages' estimates together, and C<stats> adds C<grow>,
C<stages>, C<max_capacity> and C<stage_info> (per stage, oldest first: its
C<capacity>, C<bits>, C<hashes> and C<fill>). L</clear> goes back to the
first stage, zeroed (the later stages are dropped), as locally. The
options and the bad ones are checked as a local filter checks them, in the
same words (C<grow must be an integer from 2 to 16 ...>, C<max_capacity N
is below the capacity M>, C<the datasketches layout does not grow>, C<grow
and window do not go together ...>).

I<Not here.> C<shards> (a filter that grows is one hash slot: C<shards
are not supported with grow>), and L</merge>, of a filter that grows with
any other or of any filter with one that grows: it croaks (C<not supported
for a filter that grows in Redis (see GROWTH)>); merge local copies
instead (L</to_filter>, then L<Data::BloomFilter::Shared/merge>). A first
stage of more than 2^32 bits croaks at creation.

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

A windowed filter's keys, and those of a filter that grows, all carry its
name as their hash tag, so they lie in one slot, on one node, and its
scripts run there whole.

=head1 FAILURES

Every failure croaks with the method's name and what was wrong. When a batch
fails part-way (a dropped connection, a server error), the message says how
many of its items are known to have been added (their replies arrived), how
many the server refused (an error reply) or were not sent (the batch stops
at its first error), and that the others may or may not have been; C<add_many>'s out array then holds 0/1 for the known
items and undef for the others. A server that stops answering fails the
call within the timeouts (L</Timeouts>), as a broken connection does. A
connection this module made (from an address, or with the C<connect>
option) that broke or timed out is dropped and made afresh on the next
call; nothing is sent again by itself. A client you pass in is yours: it is
kept, whatever state it is in (a L<Redis::Fast> client's socket shut, see
L</Timeouts>). A client that reconnects and re-sends by itself may report
an item whose first attempt did set its bits as "seen" (0): the bits are
never lost, but that item may then have been told "new" to nobody.

A reply is never buffered past what the filter can ask for: a protocol
line (a status, an error, an integer) longer than 64 KiB, a bulk string
longer than 4 MiB (the filter's largest, a slice of C<to_filter>), an array
of more than 2^20 elements or nested deeper than 8 croaks (C<unreadable
reply from HOST:PORT: ...>) as soon as that much has come, and the
connection is not used again. So a broken or hostile server costs a call
at most a few MiB of memory, whatever it sends. This holds for the module's
own sockets and for a L<Redis::Fast> client's (whose own reader would
buffer without bound); a client of another kind reads its replies itself.

With C<appendonly yes> and C<appendfsync always>, every add acknowledged to a
client survives a crash or restart of the server; with weaker persistence, an
acknowledged add can be lost with the server's last second of writes, and a
later add of the same item is then told "new" again. A windowed filter's
scripts are replicated and persisted by their effects (the bits set, the
step, the expiry), so the same holds for it: no acknowledged add of the
current window is lost. So are a filter that grows's scripts (the bits
set, the counts, a stage added): no acknowledged add is lost across a
stage change either.

=head1 LIMITS

Not for ithreads: L<Redis::Fast> connections cannot be shared with or
copied into another thread; use processes, each with its own filter object.
A call from an address opens a new socket when the server has closed the
last one meanwhile (its idle C<timeout>, a restart), since nothing of the
call has been sent then. Every wait is bounded by the timeouts
(L</Timeouts>); a signal handler that dies also gets out, and the
interrupted call's socket is not used again (a L<Redis::Fast> client's
then answers its next command with the late replies: do not reuse a client
whose call into the filter died).

A filter that grows (L</GROWTH>) is not sharded (one node serves all of
it), cannot be merged, and stops growing before a stage of more than
2^32 bits. Its batches read every stage, as a local one does, and each
stage's rate is tighter than a plain filter's (more probes an item).
Measured with C<bench/redis.pl --quick> (grown to 10 times its first
capacity, 4 stages, against a plain filter of the same size holding the
same items, on a quiet 2-core machine; F<bench/RESULTS.md>, "Batches
read by the server's own BITFIELD"): batch queries of absent items ran
at 1.5 to 2.1 times the plain filter's time with the C<standard> layout
(the server's time 0.9 to 1.1 times), of held items 2.7 to 3.2 times;
with C<blocked>, whose plain queries read one or two words an item where
these read two a stage, 3.7 to 7.1 times (the server's 4 to 9 times, the
ratio of the words read); adds of held items 1.2 to 2.6 times; adds of
new items, which go through a Lua script, 4 to 5.7 times (the server's
7.5 to 10 times).

A windowed filter (L</WINDOWS>) costs the server more per item than a
plain one. Its adds are Lua scripts, which hand the items' C<BITFIELD>
arguments from Lua back to the server and read every visible generation.
Measured with C<bench/redis.pl --quick> (4 generations, on a 2-core
machine): a script of 100 adds takes 4 to 7 times the server time of the
plain filter's C<BITFIELD> (4 to 7.5 microseconds per item; a C<BITFIELD>
made by a script costs the server about 3 times the same command sent by
a client), and batches of adds run 2.2 to 3.3 times slower than a plain
filter's; batches of queries, read without a script, 1.7 to 2.4 times
(C<standard> layout; the server's time about 2 times) or 4.4 to 5.3
times (C<blocked>, whose plain queries read one set of words where these
read one a generation). A single add or query takes about 2 C<PING>
round trips where a plain one takes about 1. It is not sharded: one node
serves all of it.

A Redis string holds at most 2^32 bits (512 MiB): an unsharded filter is
limited to that; more needs C<shards> (with C<< layout => 'blocked' >>). The
filter is allocated in full on the server at creation. Throughput is bound by
the work on C<BITFIELD>'s arguments, in the client and the server: an add
sends four per probe bit; a query of a C<standard> filter three per probe
bit, of a C<blocked> filter three per 64-bit word of the item (one or two,
whatever the number of probes), so blocked queries are several times
faster. From an address (L</Connections>) batches come close to
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

=item window mismatch (the filter has %s, not %s)

An explicit C<window> or C<generations> that differs from the stored
filter's, or window options for a plain filter (C<no window>). Nothing is
changed. See L</WINDOWS>.

=item window must be from 0.001 to 315619200 seconds here (the server counts microseconds and expires keys in milliseconds), got %s

=item shards are not supported with window (a windowed filter in Redis is one key per generation)

=item not a windowed filter

C<rotate> on a plain filter.

=item not supported for a windowed filter (see WINDOWS)

C<merge> with a windowed filter on either side, C<to_filter> of one.

=item GONE key %s is gone or no longer a windowed filter

An add, query or step found the filter's metadata deleted or replaced
after C<new>: the server refused the script, and nothing was changed.

=item grow must be an integer from 2 to 16 (the factor each new stage is larger by), got %s

=item max_capacity must be a positive integer (the most items the filter may take), got %s

=item the max_capacity option needs the grow option (a filter that does not grow is bounded by its capacity)

=item max_capacity %d is below the capacity %d

=item max_capacity %d is out of reach: %d stages hold at most %d items at this capacity, fp_rate and grow

=item the datasketches layout does not grow

=item grow and window do not go together: a windowed filter forgets old items instead of growing

=item shards are not supported with grow (a filter that grows in Redis keeps its stages in one hash slot)

=item the first stage needs %d bits but a Redis string holds at most 2^32 (a stage is one string: give a smaller capacity)

Options of a filter that grows that cannot be (L</GROWTH>); the first
seven in the local filter's words.

=item growth mismatch (the filter %s, not %s)

An existing filter keeps its growth, or none (L</GROWTH>).

=item the filter is full: it holds its max_capacity of %d items; nothing was added

=item the filter is full: its %d stages hold %d items, the most it can grow to; nothing was added

=item the filter is full: its %d stages hold %d items, the most it can grow to in Redis (a string holds at most 2^32 bits); nothing was added

=item the filter is full and its next stage needs %d bytes, but the server uses %d of its maxmemory %d; nothing was added

=item ...; the first %d items of this batch were added, none after

A filter that grows at its bound, or whose next stage does not fit
(L</GROWTH>); from C<add_many>, the items before the one that met it
were added.

=item not supported for a filter that grows in Redis (see GROWTH)

L</merge> with a filter that grows on either side.

=item GONE key %s is gone or no longer a filter that grows

The filter's metadata was deleted or replaced since it was opened.

=item key %s: field 'stages' is %s, not from 1 to %d

=item the filter has %d stages, more than the %d it can have

A filter that grows whose metadata was damaged.

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

=item cannot connect to %s: no connection within cnx_timeout %s s

=item cannot AUTH at %s: %s

=item cannot select database %d at %s: %s

A filter made from an address logs in and selects the database on every
socket it opens (in C<new>, and afresh after one was closed); a password
changed since, or a database gone, refuses the call (nothing of it was
sent).

=item no reply from %s within read_timeout %s s

=item could not write to %s within write_timeout %s s

The server (C<HOST:PORT>, the address, or C<the client's server>) did not
answer, or take a command, in time; see L</Timeouts>. In a batch, followed
by what is known of it (below).

=item unreadable reply from %s: %s

Bytes that are no reply, or a reply past what the filter can ask for: C<a
protocol line longer than 65536 bytes>, C<a bulk reply of %d bytes, past
the 4194304 the filter asks for at most> (or C<a bulk reply sized past all
bounds> for a reply to C<BITFIELD>), C<a reply nested or sized past all
bounds>. See L</FAILURES>.

=item %s must be a positive number of seconds, at most 86400, got %s

For C<cnx_timeout>, C<read_timeout> and C<write_timeout>.

=item the filter's capacity %d is kept, not the capacity %d asked for (an existing filter keeps its geometry)

A warning (category C<Data::BloomFilter::Shared>), also for C<fp_rate>, or
both; see L</new>.

=item connect callback failed for %s: %s

=item connect callback returned no client for %s

=item connect must be a code reference, got %s

=item options must be a hash reference, got %s

=item unknown option '%s' (the options are cnx_timeout, connect, layout, read_timeout, seed, shards, write_timeout)

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
