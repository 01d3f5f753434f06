# Data::BloomFilter::Shared::Redis on a real 3-master Redis Cluster: slots
# computed as the servers compute them, MOVED and ASK followed, racing adders
# connected to different nodes, and filters sharded over the masters (one
# probe per item with the standard layout; the blocked layout, in 64-bit
# words and in 128-bit blocks).
use strict;
use warnings;
use Test::More;
use FindBin ();
use lib "$FindBin::Bin/lib";
use RedisServer qw(redis_or_skip);
use RacingAdders qw(race_adders);
use Time::HiRes qw(sleep time);
use Data::BloomFilter::Shared;

redis_or_skip();
plan skip_all => 'redis-cli is not installed (Debian: redis-tools)'
    if !grep { -x "$_/redis-cli" } split(/:/, $ENV{PATH} // ''), '/usr/bin';
require Data::BloomFilter::Shared::Redis;
my $R = 'Data::BloomFilter::Shared::Redis';
$SIG{ALRM} = sub { die "81-redis-cluster: global timeout\n" };
alarm 300;    # a hang guard: an idle host takes seconds, a loaded one minutes

# --- slots: the cluster specification's examples ------------------------------------------------
is Data::BloomFilter::Shared::Redis::_crc16('123456789'), 0x31C3, 'CRC16-XMODEM check value';
is $R->key_slot('123456789'), 0x31C3 % 16384, 'slot of a key without a tag';
is $R->key_slot('{user1000}.following'), $R->key_slot('{user1000}.followers'), 'same tag, same slot';
is $R->key_slot('{user1000}.following'), $R->key_slot('user1000'), 'the tag alone decides';
is $R->key_slot('foo{}{bar}'), Data::BloomFilter::Shared::Redis::_crc16('foo{}{bar}') % 16384, 'an empty tag hashes the whole key';
is $R->key_slot('foo{{bar}}zap'), $R->key_slot('{bar'), 'the tag runs from the first { to the next }';
is $R->key_slot('foo{bar}{zap}'), $R->key_slot('bar'), 'only the first tag counts';

# --- three masters, one cluster -----------------------------------------------------------------
my ($status, $out, $nodes, $c) = RedisServer->cluster(3);
is $status, 0, 'redis-cli --cluster create' or diag $out;
my @nodes = @$nodes;
my @c = @$c;
ok !(grep { $_->cluster('info') !~ /cluster_state:ok/ } @c), 'cluster state ok on every node';

# Which node serves a slot (index into @nodes), from the servers' own map.
my %slot_node;
for my $range (@{ $c[0]->cluster('slots') }) {
    my ($lo, $hi, $master) = @$range;
    my ($n) = grep { $nodes[$_]->port == $master->[1] } 0 .. 2;
    $slot_node{$_} = $n for $lo .. $hi;
}

# The servers agree with our slots.
{
    my @keys = ((map { "k$_" } 1 .. 100), (map { "x{t$_}y" } 1 .. 100), 'a{}b', '{', '}{', "\xff\x00bin{\x01}");
    my @bad = grep { $c[0]->cluster('keyslot', $_) != $R->key_slot($_) } @keys;
    is_deeply \@bad, [], 'key_slot agrees with CLUSTER KEYSLOT on 204 keys';
}

# A name whose tag lives on node $n.
sub name_on {
    my ($n, $prefix) = @_;
    for my $i (1 .. 10_000) {
        return "$prefix$i" if $slot_node{ $R->key_slot("$prefix$i") } == $n;
    }
    die "no name on node $n";
}

# --- MOVED: filters on every master, all through node 0's connection ----------------------------
for my $n (0 .. 2) {
    my $name = name_on($n, 'moved');
    my $f = $R->new($nodes[0]->address, $name, 5000, 0.01);
    is $f->add_many([map { "$name-$_" } 1 .. 500]), 500, "filter on node $n: 500 new through node 0";
    is $f->add("$name-1"), 0, "filter on node $n: a repeat is seen";
    is scalar $f->contains_many([map { "$name-$_" } 1 .. 500]), 500, "filter on node $n: all present";
    is $c[$n]->exists("{$name}:meta", "{$name}:bits"), 2, "filter on node $n: its keys are on node $n";
    is $f->bits_set, $c[$n]->bitcount("{$name}:bits"), "filter on node $n: bits_set from the right node";
    my $local = Data::BloomFilter::Shared->new(undef, 5000, 0.01);
    $local->add_many([map { "$name-$_" } 1 .. 500]);
    is $f->to_filter(undef)->serialize, $local->serialize, "filter on node $n: to_filter through redirections";
}

# --- the connect option makes the other nodes' connections ----------------------------------------
{
    my $name = name_on(2, 'cb');
    my @asked;
    my $f = $R->new($c[0], $name, 5000, 0.01, {
        connect => sub { push @asked, "$_[0]:$_[1]"; Redis::Fast->new(server => "$_[0]:$_[1]", reconnect => 0) },
    });
    is $f->add_many([1 .. 300]), 300, 'a filter on node 2 through a client of node 0';
    $f->add(301);
    is_deeply \@asked, [$nodes[2]->address], 'connect was called once, for node 2';
    my $e = eval { $R->new($c[0], name_on(1, 'cbx'), 5000, 0.01, { connect => sub { die "no way\n" } }); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->new: connect callback failed for 127\.0\.0\.1:\d+: no way/, 'a failing connect callback croaks';
    $e = eval { $R->new($c[0], name_on(1, 'cby'), 5000, 0.01, { connect => sub { 42 } }); 1 } ? '' : $@;
    like $e, qr/->new: connect callback returned no client for /, 'so does one that returns no client';
}

# --- racing adders, each connected to a different node -------------------------------------------
{
    my $name = name_on(2, 'race');
    $R->new($nodes[0]->address, $name, 30_000, 0.001);
    my @same = map { "ev-$_" } 1 .. 12_000;
    my %told = race_adders(
        procs => [0 .. 2], items => \@same, batch => 250, singles => 0,
        open => sub { $R->new($nodes[$_[0]]->address, $name, 30_000, 0.001) },
        reverse => sub { $_[0] == 1 },
        name => 'cluster adder',
    );
    is scalar(grep { $told{$_} > 1 } keys %told), 0, 'through the cluster: no item told new twice';
    my $f = $R->new($nodes[1]->address, $name, 30_000, 0.001);
    is scalar $f->contains_many(\@same), scalar @same, 'through the cluster: no item lost';
    cmp_ok scalar keys %told, '>=', @same * 0.99, 'nearly every item told new once';
}

# --- ASK: a filter's slot migrating to another node ----------------------------------------------
{
    my $name = name_on(0, 'ask');
    my $slot = $R->key_slot($name);
    my $f = $R->new($nodes[1]->address, $name, 5000, 0.01);
    is $f->add('before'), 1, 'added before the migration';
    my @id = map { $_->cluster('myid') } @c;
    # Node 0 hands the slot to node 1; the keys move first, the slot after.
    is $c[1]->cluster('setslot', $slot, 'importing', $id[0]), 'OK', 'node 1 imports the slot';
    is $c[0]->cluster('setslot', $slot, 'migrating', $id[1]), 'OK', 'node 0 migrates it';
    is $c[0]->migrate('127.0.0.1', $nodes[1]->port, '', 0, 5000, 'KEYS', "{$name}:meta", "{$name}:bits"), 'OK',
        'the keys moved to node 1';
    # Node 0 still owns the slot: it answers ASK for the keys it no longer has.
    is $f->add('during'), 1, 'an add during the migration follows ASK';
    is $f->add('before'), 0, 'and sees the earlier add';
    is_deeply [$f->contains_many([qw(before during nope)])], [1, 1, 0], 'contains_many follows ASK';
    is $c[1]->cluster('countkeysinslot', $slot), 2, 'the keys are on node 1';
    is $c[0]->cluster('countkeysinslot', $slot), 0, 'and no longer on node 0';
    $_->cluster('setslot', $slot, 'node', $id[1]) for @c;
    is $f->add('after'), 1, 'an add after the migration follows MOVED';
    is_deeply [$f->contains_many([qw(before during after)])], [1, 1, 1], 'everything is there';
    is $f->{slot_node}{$slot}, $nodes[1]->address, 'MOVED updated the slot map (ASK did not)';
}

# --- a filter's own socket redirected: its batches go back to the engine -------------------------
{
    # The key lives on the node the address names, so batches go over the
    # filter's own socket until the slot moves; then they are answered ASK
    # or MOVED (not run) and sent again through the engine, which follows.
    my $name = name_on(2, 'away');
    my $slot = $R->key_slot($name);
    my $f = $R->new($nodes[2]->address, $name, 5000, 0.01);
    my @a = map { "away-a$_" } 1 .. 300;
    is $f->add_many(\@a), 300, 'a batch over the own socket';
    ok $f->{links}{''} && !defined $f->{slot_node}{$slot}, 'which it used' or diag explain [$f->{slot_node}, $slot, !!$f->{links}{''}];
    my @id = map { $_->cluster('myid') } @c;
    is $c[0]->cluster('setslot', $slot, 'importing', $id[2]), 'OK', 'node 0 imports the slot';
    is $c[2]->cluster('setslot', $slot, 'migrating', $id[0]), 'OK', 'node 2 migrates it';
    is $c[2]->migrate('127.0.0.1', $nodes[0]->port, '', 0, 5000, 'KEYS', "{$name}:meta", "{$name}:bits"), 'OK',
        'the keys moved to node 0';
    my @b = map { "away-b$_" } 1 .. 300;
    is $f->add_many(\@b, \my @wb), 300, 'a batch during the migration: ASK, sent again through the engine';
    is_deeply \@wb, [(1) x 300], 'every item new, once';
    $_->cluster('setslot', $slot, 'node', $id[0]) for @c;
    my @c3 = map { "away-c$_" } 1 .. 300;
    is $f->add_many(\@c3, \my @wc), 300, 'a batch after it: MOVED, sent again through the engine';
    is_deeply \@wc, [(1) x 300], 'every item new, once';
    is $f->{slot_node}{$slot}, $nodes[0]->address, 'the engine learned where the slot is';
    is scalar $f->contains_many([@a, @b, @c3]), 900, 'everything is there';
    is $f->add_many([@a[0 .. 9]]), 0, 'and known';
}

# --- shards over the masters --------------------------------------------------------------------
{
    # One probe per item (fp_rate 0.5): the standard layout can be cut.
    my $cap = 100_000;
    my $f = $R->new($nodes[0]->address, 'spread', $cap, 0.5, { shards => 6 });
    my %on = map { $slot_node{ $R->key_slot("{spread:$_}") } => 1 } 0 .. 5;
    cmp_ok scalar keys %on, '>', 1, 'the six pieces are on ' . scalar(keys %on) . ' masters';
    my @same = map { "sp-$_" } 1 .. 12_000;
    my %told = race_adders(
        procs => [0 .. 2], items => \@same, batch => 400, singles => 0,
        open => sub { $R->new($nodes[$_[0]]->address, 'spread', $cap, 0.5) },
        reverse => sub { $_[0] == 2 },
        name => 'sharded adder',
    );
    is scalar(grep { $told{$_} > 1 } keys %told), 0, 'sharded, through the cluster: no item told new twice';
    is scalar $f->contains_many(\@same), scalar @same, 'sharded, through the cluster: no item lost';
    my $local = Data::BloomFilter::Shared->new(undef, $cap, 0.5);
    $local->add_many(\@same);
    my $cat = join '', map { $c[ $slot_node{ $R->key_slot("{spread:$_}") } ]->get("{spread:$_}:bits") } 0 .. 5;
    ok $cat eq substr($local->serialize, 56, $local->bits / 8), 'the pieces, read from their masters, concatenated are the local bit array';
    is $f->to_filter(undef)->serialize, $local->serialize, 'sharded to_filter through the cluster';
    is $f->bits_set, $local->bits_set, 'sharded bits_set through the cluster';
}

# --- shards over the masters (blocked layout) ----------------------------------------------------
# fp_rate 0.01 gives 64-bit words, 0.001 128-bit blocks.
for my $case ([0.01, 64, 8], [0.001, 128, 5]) {
    my ($rate, $width, $shards) = @$case;
    my $name = "sharded$width";
    my $f = $R->new($nodes[0]->address, $name, 200_000, $rate, { layout => 'blocked', shards => $shards });
    is $f->shards, $shards, "blocked $width: $shards shards";
    is((Data::BloomFilter::Shared::Redis::_xs_geometry('blocked', 200_000, $rate))[2], $width, "blocked $width: $width-bit spans");
    my @items = map { "s-$_" } 1 .. 20_000;
    my %on = map { $slot_node{ $R->key_slot("{$name:$_}") } => 1 } 0 .. $shards - 1;
    cmp_ok scalar keys %on, '>', 1, "blocked $width: the pieces are on " . scalar(keys %on) . ' masters';
    # Three adders, each connected to a different node, the same items.
    my %told = race_adders(
        procs => [0 .. 2], items => \@items, batch => 400, singles => 4,
        open => sub { $R->new($nodes[$_[0]]->address, $name, 200_000, $rate) },
        reverse => sub { $_[0] == 1 },
        name => "blocked $width: adder",
    );
    is scalar(grep { $told{$_} > 1 } keys %told), 0, "blocked $width: no item told new twice";
    is scalar $f->contains_many(\@items), scalar @items, "blocked $width: no item lost";
    ok scalar(keys %{ $f->{links} }), "blocked $width: a sharded filter's batches go over sockets of its own too";
    cmp_ok scalar keys %told, '>=', @items * 0.99, "blocked $width: nearly every item told new once";
    my $local = Data::BloomFilter::Shared->new(undef, 200_000, $rate, { layout => 'blocked' });
    $local->add_many(\@items);
    my $cat = join '', map { $c[ $slot_node{ $R->key_slot("{$name:$_}") } ]->get("{$name:$_}:bits") } 0 .. $shards - 1;
    ok $cat eq substr($local->serialize, 56, $local->bits / 8), "blocked $width: the pieces concatenated are the local blocked filter";
    is $f->to_filter(undef)->serialize, $local->serialize, "blocked $width: to_filter";
    is $f->count, $local->count, "blocked $width: count";
    is $f->bits_set, $local->bits_set, "blocked $width: bits_set";
    my @absent = map { "a-$_" } 1 .. 2000;
    is_deeply [$f->contains_many(\@absent)], [$local->contains_many(\@absent)], "blocked $width: the same answers for absent items";
}

done_testing;
