# Data::BloomFilter::Shared::Redis against a real redis-server: the same bits
# as a local filter, the local methods' meanings, validation on attach, bad
# input, and several processes adding the same items at once.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(dies_like);
use RedisServer qw(redis_or_skip);
use RacingAdders qw(race_adders);
use Data::BloomFilter::Shared;
use Time::HiRes ();
use IO::Select ();

redis_or_skip();
require Data::BloomFilter::Shared::Redis;

my $R = 'Data::BloomFilter::Shared::Redis';
my $L = 'Data::BloomFilter::Shared';
$SIG{ALRM} = sub { die "80-redis: global timeout\n" };
alarm 300;    # a hang guard: an idle host takes seconds, a loaded one minutes

my $srv = RedisServer->new;
my $rc = $srv->client;
my $dir = tempdir(CLEANUP => 1);

# The local filter's bit bytes: its portable image between header and checksum.
sub local_bits {
    my ($f) = @_;
    return substr $f->serialize, 56, $f->bits / 8;
}

my @items = map { "item-$_" } 1 .. 3000;

# --- the Redis string is the local bit array ----------------------------------------------------
for my $seed (0, 12345, '18446744073709551615') {
    my $r = $R->new($srv->address, "same-$seed", 5000, 0.01, { seed => $seed });
    my $l = $L->new(undef, 5000, 0.01, { seed => $seed });
    is $r->add_many(\@items), $l->add_many(\@items), "seed $seed: the same items are new";
    is $r->bits, $l->bits, "seed $seed: same bits";
    is $r->hashes, $l->hashes, "seed $seed: same hashes";
    is $r->seed, $seed, "seed $seed: seed";
    my $got = $rc->get("{same-$seed}:bits");
    ok $got eq local_bits($l), "seed $seed: GET of the bits key is the local filter's bit array"
        or diag sprintf 'redis %d bytes, local %d bytes', length $got, length local_bits($l);
    is $r->bits_set, $l->bits_set, "seed $seed: bits_set";
    is $r->count, $l->count, "seed $seed: count";
    is $r->fill_ratio, $l->fill_ratio, "seed $seed: fill_ratio";
    is $r->estimated_fpp, $l->estimated_fpp, "seed $seed: estimated_fpp";
    my $snap = $r->to_filter(undef);
    isa_ok $snap, $L;
    is $snap->serialize, $l->serialize, "seed $seed: to_filter is byte-identical to the local filter";
}

# --- blocked: the Redis string is the local blocked filter's bit array ------------------------------
# fp_rate 0.01 gives 64-bit words, 0.001 128-bit blocks (checked below).
for my $case ([0.01, 0, 64], [0.001, 777, 128], [0.3, '18446744073709551615', 64]) {
    my ($rate, $seed, $width) = @$case;
    my $name = "blk-$rate";
    my $r = $R->new($srv->address, $name, 5000, $rate, { seed => $seed, layout => 'blocked' });
    my $l = $L->new(undef, 5000, $rate, { seed => $seed, layout => 'blocked' });
    is((Data::BloomFilter::Shared::Redis::_xs_geometry('blocked', 5000, $rate))[2], $width,
        "blocked $rate: $width-bit spans");
    is $r->layout, 'blocked', "blocked $rate: layout";
    is $r->stats->{layout}, 'blocked', "blocked $rate: stats layout";
    is $r->bits, $l->bits, "blocked $rate: same bits";
    is $r->hashes, $l->hashes, "blocked $rate: same hashes";
    isnt $r->bits, $L->new(undef, 5000, $rate, { seed => $seed })->bits, "blocked $rate: not the standard geometry";
    # One item first: exactly the bits the local filter sets for it.
    is $r->add('first'), 1, "blocked $rate: one add";
    $l->add('first');
    my $one = $rc->get("{$name}:bits");
    ok $one eq local_bits($l), "blocked $rate: one item sets the local filter's bits";
    # Its set bits, found with GETBIT (bit 0 = most significant bit of byte
    # 0), are local bits i ^ 7, all in one span.
    my @on = grep { vec($one, $_, 1) } 0 .. $l->bits - 1;                 # local numbering (vec: LSB first)
    is_deeply [map { $rc->getbit("{$name}:bits", $_ ^ 7) } @on], [(1) x @on], "blocked $rate: GETBIT at i ^ 7 finds them";
    is scalar(grep { int($_ / $width) != int($on[0] / $width) } @on), 0, "blocked $rate: in one $width-bit span";
    cmp_ok scalar @on, '<=', $r->hashes, "blocked $rate: at most k bits";
    is $r->add_many(\@items, \my @w), $l->add_many(\@items, \my @lw), "blocked $rate: the same items are new";
    is_deeply \@w, \@lw, "blocked $rate: item by item";
    ok $rc->get("{$name}:bits") eq local_bits($l), "blocked $rate: GET of the bits key is the local blocked filter's bit array";
    my @probe = map { "absent-$_" } 1 .. 2000;
    is_deeply [$r->contains_many(\@probe)], [$l->contains_many(\@probe)], "blocked $rate: the same answers for absent items";
    # A query reads each item's word or block whole: one 64-bit field per
    # word (GET i64), tested against the item's bits, not one per probe.
    my @mixed = (@items[0 .. 99], @probe[0 .. 99]);
    is_deeply [$r->contains_many(\@mixed)], [$l->contains_many(\@mixed)], "blocked $rate: present and absent items";
    is_deeply [map { $r->contains($_) } @mixed], [map { $l->contains($_) } @mixed], "blocked $rate: contains, one by one";
    my @q = Data::BloomFilter::Shared::Redis::_xs_args(0, 'blocked', $seed, $r->bits, $r->hashes, $width, $r->bits,
        ['x', 'y'], undef, \my $masks);
    is_deeply [@q[0, 1, 3, 4]], ['GET', 'i64', 'GET', 'i64'], "blocked $rate: a query reads 64-bit fields" if $width == 64;
    is scalar @q, 3 * 2 * $width / 64, "blocked $rate: $width / 64 fields per item";
    is length $masks, 8 * 2 * $width / 64, "blocked $rate: a mask per field";
    is scalar(grep { $_ % 64 } @q[grep { $_ % 3 == 2 } 0 .. $#q]), 0, "blocked $rate: fields start at word boundaries";
    is $r->bits_set, $l->bits_set, "blocked $rate: bits_set";
    is $r->count, $l->count, "blocked $rate: count (the blocked estimator)";
    is $r->estimated_fpp, $l->estimated_fpp, "blocked $rate: estimated_fpp";
    my $snap = $r->to_filter(undef);
    is $snap->layout, 'blocked', "blocked $rate: to_filter gives a blocked filter";
    is $snap->serialize, $l->serialize, "blocked $rate: to_filter is byte-identical to the local filter";
    is $snap->add('first'), 0, "blocked $rate: the snapshot knows the items";
    my ($absent) = grep { !$l->contains($_) } @probe;
    is $snap->add($absent), 1, "blocked $rate: and adds as a local blocked filter";
    is $snap->contains($absent), 1, "blocked $rate: which then has it";
}

# --- datasketches: the Redis string is the local datasketches filter's bit array ----------------
for my $seed (undef, 7) {
    my $name = 'ds-' . ($seed // 'default');
    my %o = (layout => 'datasketches', defined $seed ? (seed => $seed) : ());
    my $r = $R->new($srv->address, $name, 5000, 0.01, {%o});
    my $l = $L->new(undef, 5000, 0.01, {%o});
    is $r->layout, 'datasketches', "$name: layout";
    is $r->seed, $seed // 9001, "$name: seed (DataSketches' 9001 when none is given)";
    is $r->bits, $l->bits, "$name: same bits";
    is $r->hashes, $l->hashes, "$name: same hashes";
    is $r->add_many(\@items, \my @w), $l->add_many(\@items, \my @lw), "$name: the same items are new";
    is_deeply \@w, \@lw, "$name: item by item";
    ok $rc->get("{$name}:bits") eq local_bits($l), "$name: GET of the bits key is the local filter's bit array";
    my @probe = map { "absent-$_" } 1 .. 2000;
    is_deeply [$r->contains_many(\@probe)], [$l->contains_many(\@probe)], "$name: the same answers for absent items";
    is $r->count, $l->count, "$name: count";
    my $snap = $r->to_filter(undef);
    is $snap->layout, 'datasketches', "$name: to_filter gives a datasketches filter";
    is $snap->serialize(format => 'datasketches'), $l->serialize(format => 'datasketches'),
        "$name: to_filter's DataSketches image is the local filter's";
    my $more = $L->new(undef, 5000, 0.01, {%o});
    $more->add('merged-in');
    ok !$r->contains('merged-in'), "$name: not there before the merge";
    $r->merge($more);
    ok $r->contains('merged-in'), "$name: merge of a local datasketches filter";
    dies_like { $r->merge($L->new(undef, 5000, 0.01, { seed => $seed // 9001 })) } qr/layout mismatch/,
        "$name: merge of a standard filter croaks";
}

# --- blocked: merge, attach, shards on one server -------------------------------------------------
{
    my $r = $R->new($srv->address, 'bm', 3000, 0.001, { layout => 'blocked' });
    my $l = $L->new(undef, 3000, 0.001, { layout => 'blocked' });
    $r->add_many([map { "r-$_" } 1 .. 500]);
    my $m = $L->new(undef, 3000, 0.001, { layout => 'blocked' });
    $m->add_many([map { "m-$_" } 1 .. 500]);
    $l->add_many([map { "r-$_" } 1 .. 500]);
    $l->merge($m);
    $r->merge($m);
    ok $rc->get('{bm}:bits') eq local_bits($l), 'blocked merge of a local blocked filter: the bits of a local merge';
    is scalar $r->contains_many([map { "m-$_" } 1 .. 500]), 500, 'blocked merge: the merged items are there';
    my $before = $rc->get('{bm}:bits');
    dies_like { $r->merge($L->new(undef, 3000, 0.001)) } qr/\A\Q$R\E->merge: layout mismatch \(this filter's layout is 'blocked'\)/,
        'merge of a standard local filter into a blocked one croaks';
    my $s = $R->new($srv->address, 'bm-std', 3000, 0.001);
    dies_like { $s->merge($m) } qr/\A\Q$R\E->merge: layout mismatch \(this filter's layout is 'standard'\)/,
        'merge of a blocked local filter into a standard one croaks';
    dies_like { $r->merge($s) } qr/\A\Q$R\E->merge: layout mismatch \(blocked vs standard\)/, 'merge of a standard Redis filter croaks';
    # The other block width: 0.01 gives 64-bit words, this filter has 128-bit blocks.
    dies_like { $r->merge($L->new(undef, 3000, 0.01, { layout => 'blocked' })) }
        qr/\A\Q$R\E->merge: layout mismatch \(this filter's layout is 'blocked'\)/, 'merge of a local blocked filter of the other width croaks';
    my $w64 = $R->new($rc, 'bm-w64', 3000, 0.01, { layout => 'blocked' });
    dies_like { $r->merge($w64) } qr/\A\Q$R\E->merge: span mismatch \(128 vs 64\)/, 'merge of a Redis blocked filter of the other width croaks';
    ok $rc->get('{bm}:bits') eq $before, 'refused merges changed nothing';
    my $r2 = $R->new($rc, 'bm2', 3000, 0.001, { layout => 'blocked' });
    $r2->add('from-r2');
    $r->merge($r2);
    is $r->contains('from-r2'), 1, 'merge of another blocked Redis filter';

    my $again = do { no warnings 'Data::BloomFilter::Shared'; $R->new($srv->address, 'bm', 10, 0.5) };
    is $again->layout, 'blocked', 'attaching without layout adopts the stored one';
    is $again->bits, $r->bits, 'and its geometry';
    is $again->contains('m-1'), 1, 'and finds the items';
    my %snapshot = map { $_ => $rc->dump($_) } $rc->keys('*');
    dies_like { $R->new($srv->address, 'bm', 3000, 0.001, { layout => 'standard' }) }
        qr/\A\Q$R\E->new: layout mismatch: the filter in Redis has layout blocked, asked for standard/, 'attach: layout mismatch croaks';
    dies_like { $R->new($srv->address, 'bm-std', 3000, 0.001, { layout => 'blocked' }) }
        qr/\A\Q$R\E->new: layout mismatch: the filter in Redis has layout standard, asked for blocked/, 'and the other way';
    my %now = map { $_ => $rc->dump($_) } $rc->keys('*');
    is_deeply \%now, \%snapshot, 'layout mismatches changed nothing';

    # Shards of a blocked filter on one server: whole spans per piece.
    my $sh = $R->new($srv->address, 'bsh', 20_000, 0.001, { layout => 'blocked', shards => 3 });
    my $sl = $L->new(undef, 20_000, 0.001, { layout => 'blocked' });
    is $sh->add_many(\@items, \my @w), $sl->add_many(\@items, \my @lw), 'blocked shards: the same items are new';
    is_deeply \@w, \@lw, 'blocked shards: item by item';
    my @len = map { length $rc->get("{bsh:$_}:bits") } 0 .. 2;
    is $len[0] % 16, 0, 'blocked shards: a piece is whole 128-bit blocks';
    my $cat = join '', map { $rc->get("{bsh:$_}:bits") } 0 .. 2;
    ok $cat eq local_bits($sl), 'blocked shards: the pieces concatenated are the local bit array';
    is $sh->add($items[3]), 0, 'blocked shards: single add of a present item';
    is $sh->add('one-more'), $sl->add('one-more'), 'blocked shards: single add';
    is $sh->to_filter(undef)->serialize, $sl->serialize, 'blocked shards: to_filter';
    is $sh->count, $sl->count, 'blocked shards: count';
    dies_like { $R->new($srv->address, 'n', 100, 0.01, { layout => 'standard', shards => 2 }) }
        qr/\A\Q$R\E->new: shards need layout 'blocked' \(layout 'standard' spreads/, 'the standard layout with shards still croaks';
}

# --- the local methods' meanings -----------------------------------------------------------------
{
    my $r = $R->new($srv->address, 'ops', 2000, 0.001);
    ok $r->is_empty, 'new filter is empty';
    is $r->capacity, 2000, 'capacity';
    is $r->fp_rate, 0.001, 'fp_rate';
    is $r->layout, 'standard', 'layout';
    is $r->add('a'), 1, 'add: new';
    is $r->add('a'), 0, 'add: seen';
    ok !$r->is_empty, 'not empty after an add';
    is $r->contains('a'), 1, 'contains: present';
    is $r->contains('b'), 0, 'contains: absent';

    my @w = (9, 9, 9, 9, 9);
    my ($n) = $r->add_many([qw(a b c b)], \@w);
    is $n, 2, 'add_many in list context returns the count';
    is_deeply \@w, [0, 1, 1, 0], 'the out array is emptied first, then one 0/1 per item; a repeat is new once';
    is sprintf('%d', $r->add_many([qw(d e)])), 2, 'add_many count in scalar context';
    is $r->add_many([]), 0, 'empty add_many';
    is_deeply [$r->contains_many([qw(a b zz e)])], [1, 1, 0, 1], 'contains_many in list context';
    is scalar $r->contains_many([qw(a b zz e)]), 3, 'contains_many in scalar context';
    my @o = (7);
    $r->contains_many([qw(zz a)], \@o);
    is_deeply \@o, [0, 1], 'contains_many fills an out array';

    my $st = $r->stats;
    is $st->{bits_set}, $r->bits_set, 'stats bits_set';
    is $st->{count}, 5, 'stats count';
    is $st->{$_}, $r->$_, "stats $_" for qw(capacity fp_rate bits hashes seed layout shards);

    my $l = $L->new(undef, 2000, 0.001);
    $l->add_many([qw(local-1 local-2)]);
    $r->merge($l);
    is_deeply [$r->contains_many([qw(local-1 local-2 a)])], [1, 1, 1], 'merge of a local filter';
    my $r2 = $R->new($rc, 'ops2', 2000, 0.001);
    $r2->add('other');
    $r->merge($r2);
    is $r->contains('other'), 1, 'merge of another Redis filter';
    is_deeply [sort grep { /merge/ } $rc->keys('*')], [], 'no upload key left behind';
    dies_like { $r->merge($L->new(undef, 100, 0.01)) } qr/\A\Q$R\E->merge: geometry mismatch/, 'merge: geometry mismatch';
    dies_like { $r->merge($L->new(undef, 2000, 0.001, { seed => 1 })) } qr/->merge: seed mismatch/, 'merge: seed mismatch';
    dies_like { $r->merge({}) } qr/->merge: other filter is not/, 'merge: not a filter';
    my $gone = $L->new(undef, 2000, 0.001);
    $gone->DESTROY;
    dies_like { $r->merge($gone) } qr/\A\Q$R\E->merge: other filter: destroyed handle/, 'merge: a destroyed local handle';

    my $path = "$dir/snap.bf";
    my $snap = $r->to_filter($path, { mode => 0640 });
    ok -f $path, 'to_filter with a path makes the file';
    is((stat $path)[2] & 07777, 0640, 'with the mode asked for');
    is $snap->contains('other'), 1, 'the snapshot finds what Redis has';
    is local_bits($snap), $rc->get('{ops}:bits'), 'the snapshot holds the same bits';
    undef $snap;
    dies_like { $r->to_filter($path) } qr/->to_filter: .*exist/i, 'to_filter refuses an existing path';

    $r->clear;
    ok $r->is_empty, 'clear';
    is $r->contains('a'), 0, 'cleared items are gone';
    is length $rc->get('{ops}:bits'), $r->bits / 8, 'clear keeps the full-size bit string';
}

# --- a Redis.pm client (the other method API) -------------------------------------------------
SKIP: {
    skip 'Redis.pm is not installed (Debian: libredis-perl)', 10 if !eval { require Redis; 1 };
    my $c = Redis->new(server => $srv->address, reconnect => 0);
    my $r = $R->new($c, 'pm', 2000, 0.01);
    my $l = $L->new(undef, 2000, 0.01);
    is $r->add('a'), 1, 'Redis.pm: add';
    is $r->add('a'), 0, 'Redis.pm: add again';
    is $r->add_many(\@items, \my @w), $l->add_many([@items, 'a']) - 1, 'Redis.pm: add_many';
    is scalar @w, scalar @items, 'Redis.pm: the out array';
    is_deeply [$r->contains_many(['a', $items[0], 'zz'])], [1, 1, 0], 'Redis.pm: contains_many (BITFIELD with GETs)';
    is $r->contains('zz'), 0, 'Redis.pm: contains';
    is $r->to_filter(undef)->serialize, $l->serialize, 'Redis.pm: the same bits';
    # Blocked queries read 64-bit fields: Redis.pm gives them as decimal
    # strings, negative when a word's first byte has its top bit set.
    my $rb = $R->new($c, 'pmb', 2000, 0.01, { layout => 'blocked' });
    my $lb = $L->new(undef, 2000, 0.01, { layout => 'blocked' });
    is $rb->add_many(\@items), $lb->add_many(\@items), 'Redis.pm: blocked add_many';
    my @probe = (@items[0 .. 199], map { "pm-absent-$_" } 1 .. 2000);
    is_deeply [$rb->contains_many(\@probe)], [$lb->contains_many(\@probe)], 'Redis.pm: blocked contains_many';
    my $words = $c->bitfield('{pmb}:bits', map { ('GET', 'i64', 64 * $_) } 0 .. $rb->bits / 64 - 1);
    cmp_ok scalar(grep { $_ < 0 } @$words), '>', 0, 'Redis.pm: some words read as negative numbers';
}

# --- shards: pieces that concatenate to the local bit array ---------------------------------------
{
    # One probe per item (fp_rate 0.5): the standard layout's items then
    # stay whole in any cut into words. Three pieces: not a power of two,
    # the last one shorter.
    my $r = $R->new($srv->address, 'pieces', 20_000, 0.5, { shards => 3 });
    my $l = $L->new(undef, 20_000, 0.5);
    is $r->hashes, 1, 'one probe per item';
    is $r->shards, 3, 'three shards';
    is $r->add_many(\@items, \my @w), $l->add_many(\@items), 'sharded: the same items are new';
    is scalar(grep { defined } @w), scalar @items, 'sharded: a result for every item';
    my @len = map { length $rc->get("{pieces:$_}:bits") } 0 .. 2;
    is $len[0] + $len[1] + $len[2], $r->bits / 8, 'the pieces hold the whole array';
    cmp_ok $len[2], '<', $len[0], 'the last piece is the shorter';
    my $cat = join '', map { $rc->get("{pieces:$_}:bits") } 0 .. 2;
    ok $cat eq local_bits($l), 'the pieces concatenated are the local bit array';
    is_deeply [$r->contains_many([@items[0, 1], 'zz-not-there'])], [$l->contains_many([@items[0, 1], 'zz-not-there'])], 'sharded contains_many';
    is $r->contains($items[7]), 1, 'sharded contains';
    is $r->add($items[7]), 0, 'sharded add of a present item';
    is $r->bits_set, $l->bits_set, 'sharded bits_set';
    is $r->count, $l->count, 'sharded count';
    is $r->to_filter(undef)->serialize, $l->serialize, 'sharded to_filter';
    my $m = $L->new(undef, 20_000, 0.5);
    $m->add('merged-in');
    $r->merge($m);
    $l->merge($m);
    ok join('', map { $rc->get("{pieces:$_}:bits") } 0 .. 2) eq local_bits($l), 'sharded merge';
    my $again = $R->new($rc, 'pieces', 20_000, 0.5);
    is $again->shards, 3, 'attaching without shards adopts the stored shards';
    is $again->contains('merged-in'), 1, 'and finds the items';
    dies_like { $R->new($rc, 'pieces', 20_000, 0.5, { shards => 2 }) }
        qr/->new: shards mismatch: the filter in Redis has shards 3, asked for 2/, 'another shard count croaks';
    dies_like { $R->new($rc, 'pieces', 20_000, 0.5, { shards => 1 }) }
        qr/->new: shards mismatch: the filter in Redis has shards 3, asked for 1/, 'so does shards => 1';
    $rc->append('{pieces:2}:bits', 'x');
    dies_like { $R->new($rc, 'pieces', 20_000, 0.5) } qr/key \{pieces:2\}:bits has \d+ bytes, expected \d+/, 'a piece of the wrong length';
    $rc->hset('{pieces:1}:meta', shard => 2);
    dies_like { $R->new($rc, 'pieces', 20_000, 0.5) } qr/key \{pieces:1\}:meta: it is piece 2, expected piece 1/, 'a piece in the wrong place';
    $rc->del('{pieces:1}:meta', '{pieces:1}:bits', '{pieces:2}:meta', '{pieces:2}:bits');
    my $healed = $R->new($rc, 'pieces', 20_000, 0.5);
    is $rc->exists('{pieces:1}:meta', '{pieces:2}:bits'), 2, 'missing pieces are created on attach';
    $healed->clear;
    is $healed->is_empty, 1, 'sharded clear';
}

# --- attach: stored geometry wins; foreign keys croak and change nothing -------------------------
{
    my $r = $R->new($srv->address, 'att', 1000, 0.01, { seed => 9 });
    $r->add('x');
    my $again = do { no warnings 'Data::BloomFilter::Shared'; $R->new($srv->address, 'att', 50, 0.3) };
    is $again->bits, $r->bits, 'reattach: the stored geometry wins';
    is $again->seed, 9, 'reattach: the stored seed';
    is $again->contains('x'), 1, 'reattach sees the items';
    dies_like { $R->new($srv->address, 'att', 1000, 0.01, { seed => 8 }) }
        qr/->new: seed mismatch: the filter in Redis has seed 9, asked for 8/, 'explicit seed mismatch';
    dies_like { $R->new($srv->address, 'att', 1000, 0.01, { shards => 1, layout => 'standard', seed => 9 }) && die "ok\n" }
        qr/\Aok/, 'matching explicit options attach';

    my %snapshot = map { $_ => $rc->dump($_) } $rc->keys('*');
    my $same = sub {
        my %now = map { $_ => $rc->dump($_) } $rc->keys('*');
        is_deeply \%now, \%snapshot, "$_[0]: nothing was changed";
    };

    $rc->rpush('{lst}:meta', 'a');
    %snapshot = map { $_ => $rc->dump($_) } $rc->keys('*');
    dies_like { $R->new($rc, 'lst', 1000, 0.01) } qr/key \{lst\}:meta holds a list, not a filter's metadata/, 'meta of another type';
    $same->('meta of another type');

    $rc->hset('{foreign}:meta', format => 'something else', bits => 64);
    %snapshot = map { $_ => $rc->dump($_) } $rc->keys('*');
    dies_like { $R->new($rc, 'foreign', 1000, 0.01) } qr/key \{foreign\}:meta is not a filter of this module \(format 'something else'/, 'a foreign hash';
    $same->('a foreign hash');

    $rc->set('{orphan}:bits', 'x');
    %snapshot = map { $_ => $rc->dump($_) } $rc->keys('*');
    dies_like { $R->new($rc, 'orphan', 1000, 0.01) } qr/key \{orphan\}:bits exists without \{orphan\}:meta/, 'orphan bits';
    $same->('orphan bits');

    # The same name under the other key scheme (a sharded filter's piece 0).
    $rc->hset('{sh:0}:meta', format => 'Data::BloomFilter::Shared::Redis 1', shards => 2, layout => 'standard');
    %snapshot = map { $_ => $rc->dump($_) } $rc->keys('*');
    dies_like { $R->new($rc, 'sh', 1000, 0.01, { shards => 1 }) }
        qr/->new: shards mismatch: the filter in Redis has shards 2, asked for 1/, 'unsharded attach to a sharded filter';
    dies_like { $R->new($rc, 'sh', 1000, 0.01) } qr/->new: shards need layout 'blocked'/,
        'without shards it adopts the stored shards (and layout)';
    $same->('attach under the other key scheme');
    $rc->del('{sh:0}:meta');

    # A filter whose pieces were tampered with.
    my $t = $R->new($rc, 'tamper', 1000, 0.01);
    $rc->hset('{tamper}:meta', bits => 128);
    dies_like { $R->new($rc, 'tamper', 1000, 0.01) } qr/key \{tamper\}:meta: bits 128 and hashes 7 do not match capacity 1000 and fp_rate 0.01/, 'inconsistent geometry';
    $rc->hset('{tamper}:meta', bits => $t->bits);
    $rc->hset('{tamper}:meta', seed => '-1');
    dies_like { $R->new($rc, 'tamper', 1000, 0.01) } qr/field 'seed' is not a non-negative integer/, 'bad seed field';
    $rc->hset('{tamper}:meta', seed => 0);
    $rc->hdel('{tamper}:meta', 'layout');
    dies_like { $R->new($rc, 'tamper', 1000, 0.01) } qr/field 'layout' is missing/, 'missing field';
    $rc->hset('{tamper}:meta', layout => 'standard');
    $rc->append('{tamper}:bits', 'x');
    dies_like { $R->new($rc, 'tamper', 1000, 0.01) } qr/key \{tamper\}:bits has \d+ bytes, expected \d+/, 'bits of the wrong length';
    $rc->del('{tamper}:bits');
    $rc->sadd('{tamper}:bits', 1);
    dies_like { $R->new($rc, 'tamper', 1000, 0.01) } qr/key \{tamper\}:bits holds a set, not a filter's bits/, 'bits of another type';
    dies_like { $t->add('y') } qr/\A\Q$R\E->add: WRONGTYPE/, 'an attached handle reports the broken key';
    dies_like { $t->clear } qr/->clear: key \{tamper\}:bits is gone or no longer/, 'clear checks the piece first';
    is $rc->type('{tamper}:bits'), 'set', 'and changes nothing';
}

# --- bad input ----------------------------------------------------------------------------------
{
    my $a = $srv->address;
    my $r = $R->new($a, 'bad', 1000, 0.01);
    my @bad = (
        [sub { $R->new($a, 'x{y', 1000) }, qr/->new: name must not contain '\{' or '\}'/, 'brace in name'],
        [sub { $R->new($a, '', 1000) }, qr/->new: name must not be empty/, 'empty name'],
        [sub { $R->new($a, undef, 1000) }, qr/->new: undefined name/, 'undef name'],
        [sub { $R->new($a, "caf\x{e9}\x{263a}", 1000) }, qr/->new: Wide character in name/, 'wide name'],
        [sub { $R->new($a, 'n', 0) }, qr/->new: capacity must be a positive integer/, 'capacity 0'],
        [sub { $R->new($a, 'n', 'many') }, qr/->new: capacity must be a number/, 'capacity not a number'],
        [sub { $R->new($a, 'n', 100, 1) }, qr/->new: fp_rate must be between 0 and 1/, 'fp_rate 1'],
        [sub { $R->new($a, 'n', 100, 0.01, { colour => 1 }) }, qr/->new: unknown option 'colour'/, 'unknown option'],
        [sub { $R->new($a, 'n', 100, 0.01, { grow => 1 }) }, qr/->new: grow must be an integer from 2 to 16/, 'grow 1 (t\/85-redis-grow.t has the rest)'],
        [sub { $R->new($a, 'n', 100, 0.01, { max_capacity => 1000 }) }, qr/->new: the max_capacity option needs the grow option/, 'max_capacity without grow'],
        [sub { $R->new($a, 'n', 100, 0.01, { seed => -1 }) }, qr/->new: seed must be a non-negative integer/, 'bad seed'],
        [sub { $R->new($a, 'n', 100, 0.01, { seed => undef }) }, qr/->new: the seed option is undef/, 'an undef seed'],
        [sub { $R->new($a, 'n', 100, 0.01, { layout => 'fancy' }) }, qr/->new: unknown layout 'fancy'/, 'unknown layout'],
        [sub { $R->new($a, 'n', 100, 0.01, { shards => 0 }) }, qr/->new: shards must be an integer from 1 to 65536/, 'shards 0'],
        [sub { $R->new($a, 'n', 100, 0.01, { shards => 70_000 }) }, qr/->new: shards must be an integer from 1 to 65536/, 'shards 70000'],
        [sub { $R->new($a, 'n', 100, 0.5, { shards => 3 }) }, qr/->new: shards => 3 leave a piece empty \(256 bits cut into equal pieces of whole 64-bit spans\)/, 'more pieces than words'],
        [sub { $R->new($a, 'n', 100, 0.01, { shards => 2 }) }, qr/->new: shards need layout 'blocked'/, 'shards with the standard layout'],
        [sub { $R->new($a, 'n', 1e9, 0.001) }, qr/->new: the filter needs 17179869184 bits but a Redis string holds at most 2\^32/, 'over 2^32 bits unsharded'],
        [sub { $R->new($a, 'n', 1e12, 0.001) }, qr/->new: capacity is too large: capacity and fp_rate need more than 2\^38 bits/, 'over 2^38 bits'],
        [sub { $R->new('no address', 'n', 100) }, qr/->new: cannot parse address 'no address'/, 'bad address'],
        [sub { $R->new('127.0.0.1:1', 'n', 100) }, qr/->new: cannot connect to 127.0.0.1:1/, 'nothing listening'],
        [sub { $R->new(bless({}, 'Nope'), 'n', 100) }, qr/->new: first argument must be a Redis client/, 'not a client'],
        [sub { $r->add("\x{263a}") }, qr/\A\Q$R\E->add: Wide character/, 'wide item'],
        [sub { $r->add(undef) }, qr/\A\Q$R\E->add: undefined item/, 'undef item'],
        [sub { $r->add_many(['ok', undef]) }, qr/\A\Q$R\E->add_many: undefined item at index 1/, 'undef item in a batch'],
        [sub { $r->add_many('x') }, qr/->add_many: argument is not an array reference/, 'not an array'],
        [sub { $r->add_many(['x'], {}) }, qr/->add_many: results must be an array reference/, 'bad out array'],
        [sub { $r->add() }, qr/->add: usage/, 'add without an item'],
        [sub { $r->to_filter(undef, { mode => 'rw' }) }, qr/->to_filter: mode must be an integer/, 'bad mode'],
        [sub { $r->to_filter(undef, { mode => 660 }) }, qr/->to_filter: mode 660 has bits outside 0777 \(01224 in octal\): write a mode in octal/, 'a mode in decimal'],
    );
    for my $b (@bad) {
        dies_like { $b->[0]->() } $b->[1], $b->[2];
    }
    is $r->is_empty, 1, 'a batch with a bad element adds nothing';
    is_deeply [sort grep { /\{n\}/ } $rc->keys('*')], [], 'refused creations left no keys';
}

# --- addresses: unix socket, redis:// with a database and a password ----------------------------
{
    my $sock = "$dir/r.sock";
    my $s2 = RedisServer->new(unixsocket => $sock, unixsocketperm => 700, requirepass => 'sesame');
    my $e = eval { $R->new("unix:$sock", 'u', 1000, 0.01); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->new: .*(?:NOAUTH|auth)/i, 'a server wanting a password refuses us without one';
    $e = eval { $R->new('redis://:wrong@' . $s2->address, 'u', 1000, 0.01); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->new: cannot AUTH at redis:\/\/:\*\*\*\@127/, 'a wrong password croaks, without showing it';
    unlike $e, qr/wrong/, 'the password is not in the message';
    $e = eval { $R->new('redis://:sesame@' . $s2->address . '/99999', 'u', 1000, 0.01); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->new: cannot select database 99999 at redis:\/\/:\*\*\*\@127\.0\.0\.1:\d+\/99999: ERR/, 'a database that is not there croaks';
    my $db = $R->new('redis://:sesame@' . $s2->address . '/3', 'u', 1000, 0.01);
    is $db->add('x'), 1, 'redis://:password@host:port/db connects';
    my $c = Redis::Fast->new(server => $s2->address, password => 'sesame');
    $c->select(3);
    is $c->exists('{u}:meta', '{u}:bits'), 2, 'and uses that database';
    # Batches go over the filter's own socket, which logs in and selects
    # the database the same way.
    my @b = map { "db-$_" } 1 .. 250;
    is $db->add_many(\@b), 250, 'a batch through redis://:password@host:port/db';
    ok $db->{links}{''}, 'over its own socket';
    my $seen = $R->new($c, 'u', 1000, 0.01);
    is scalar $seen->contains_many(\@b), 250, 'in that database';
    # A password changed since, and the connection closed: the login of
    # the connection made afresh refuses the batch.
    my $fresh = $R->new('redis://:sesame@' . $s2->address . '/3', 'u', 1000, 0.01);
    is $c->config('set', 'requirepass', 'other'), 'OK', 'the password changed';
    cmp_ok $c->client_kill('TYPE', 'normal', 'SKIPME', 'yes'), '>=', 1, "and the filter's connection closed";
    $e = eval { $fresh->add_many(['after']); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->add_many: cannot AUTH at redis:\/\/:\*\*\*\@127\.0\.0\.1:\d+\/3: /, 'the login croaks';
    unlike $e, qr/sesame/, 'without the password';
    $c->auth('other');
    is $c->config('set', 'requirepass', 'sesame'), 'OK', 'the password back';
    $c->auth('sesame');
    $c->select(3);
    is scalar $seen->contains_many(['after']), 0, 'nothing of the batch was sent';
    $c->select(0);
    is $c->exists('{u}:meta'), 0, 'not database 0';
    my $s3 = RedisServer->new(unixsocket => "$dir/s.sock", unixsocketperm => 700);
    my $u = $R->new("unix:$dir/s.sock", 'u', 1000, 0.01);
    is $u->add('y'), 1, 'unix:/path connects';
    is $s3->client->exists('{u}:bits'), 1, 'to that server';
    is $u->add_many([qw(y z)], \my @w), 1, 'a batch over a unix socket of its own';
    is_deeply \@w, [0, 1], 'item by item';
    ok $u->{links}{''}, 'which it used';
}

# --- batches of any kind of array: tied, overloaded, UTF-8, wide ---------------------------------
# Plain strings are sent as they are; anything else is read once (a tied
# array's FETCH, an object's overloading) and then sent.
{
    package CountTie;
    sub TIEARRAY  { bless { a => $_[1], n => 0 }, $_[0] }
    sub FETCH     { $_[0]{n}++; $_[0]{a}[ $_[1] ] }
    sub FETCHSIZE { scalar @{ $_[0]{a} } }
    package CountScalar;
    sub TIESCALAR { bless { v => $_[1], n => 0 }, $_[0] }
    sub FETCH     { $_[0]{n}++; $_[0]{v} }
    package Str;
    use overload '""' => sub { $Str::n++; ${ $_[0] } }, fallback => 1;
    package main;
    for my $from ($srv->address, Redis::Fast->new(server => $srv->address)) {
        my $name = 'kinds-' . (ref $from ? 'client' : 'address');
        my $f = $R->new($from, $name, 10_000, 0.01);
        my $l = $L->new(undef, 10_000, 0.01);
        my @words = map { "t$_" } 1 .. 300;
        tie my @t, 'CountTie', \@words;
        is $f->add_many(\@t, \my @w), $l->add_many(\@words, \my @lw), "$name: a tied array";
        is_deeply \@w, \@lw, "$name: item by item";
        is tied(@t)->{n}, 300, "$name: each element fetched once";
        $Str::n = 0;
        my @o = map { my $s = "o$_"; bless \$s, 'Str' } 1 .. 200;
        is $f->add_many(\@o), $l->add_many([map {"o$_"} 1 .. 200]), "$name: objects with overloading";
        is $Str::n, 200, "$name: each stringified once";
        my $u = "caf\x{e9}";
        utf8::upgrade($u);
        is $f->add_many([$u, "caf\xe9"], \my @w2), 1, "$name: a UTF-8 string is its bytes";
        is_deeply \@w2, [1, 0], "$name: the same item";
        my $e = eval { $f->add_many(['fine', "\x{263a}"]); 1 } ? '' : $@;
        like $e, qr/\A\Q$R\E->add_many: Wide character at index 1/, "$name: a wide character croaks";
        is $f->contains('fine'), 0, "$name: and nothing of the batch was sent";
        # A single item on the kept socket goes the short way when it is a
        # string of bytes, the batch's way else: the same answers, the item
        # read once a call, the same croaks.
        tie my $ts, 'CountScalar', 't1';
        is $f->add($ts), 0, "$name: a tied single item";
        is $f->contains($ts), 1, "$name: and found";
        is tied($ts)->{n}, 2, "$name: fetched once a call";
        $Str::n = 0;
        is $f->add($o[0]), 0, "$name: a single object with overloading";
        is $Str::n, 1, "$name: stringified once";
        is $f->add(12345), 1, "$name: a single number";
        is $f->contains('12345'), 1, "$name: is its decimal string";
        my $u1 = "na\x{ef}ve";
        utf8::upgrade($u1);
        is $f->add($u1), 1, "$name: a single UTF-8 string";
        is $f->contains("na\xefve"), 1, "$name: is its bytes";
        $e = eval { $f->add("\x{263a}"); 1 } ? '' : $@;
        like $e, qr/\A\Q$R\E->add: Wide character at /, "$name: a single wide character croaks";
        $e = eval { $f->add(undef); 1 } ? '' : $@;
        like $e, qr/\A\Q$R\E->add: undefined item/, "$name: an undefined single item croaks";
        ok $f->{ref $from ? 'lent' : 'links'}{''}, "$name: the socket kept through it all";
    }
}

# --- batches over the filter's own socket answer as the client's ---------------------------------
# A filter made from an address sends batches over a socket of its own,
# encoding commands and folding replies in the core; one made with a client
# object sends them through the client. Both see the same bits.
for my $case (['standard', 0.01], ['blocked', 0.01], ['blocked', 0.001]) {
    my ($layout, $rate) = @$case;
    my $name = "own-$layout-$rate";
    my $own = $R->new($srv->address, $name, 20_000, $rate, { layout => $layout });
    my $via = $R->new(Redis::Fast->new(server => $srv->address), $name, 20_000, $rate);
    my $before = () = $rc->client_list =~ /^id=/mg;
    my @a = map { "own-a$_" } 1 .. 2500;    # several commands, the last one short
    my @b = map { "own-b$_" } 1 .. 2500;
    my $l = $L->new(undef, 20_000, $rate, { layout => $layout });    # the same bits, locally
    is $own->add_many(\@a, \my @wa), $l->add_many(\@a, \my @la), "$layout $rate: add_many over the own socket";
    is_deeply \@wa, \@la, "$layout $rate: item by item";
    ok $own->{links}{''}, "$layout $rate: it has one";
    is +(() = $rc->client_list =~ /^id=/mg), $before, "$layout $rate: no other connection than the one new made";
    my @again = (@a[0 .. 99], @b);
    is $via->add_many(\@again, \my @wb), $l->add_many(\@again, \my @lb), "$layout $rate: the client's batch sees them";
    is_deeply \@wb, \@lb, "$layout $rate: item by item";
    is_deeply [@wb[0 .. 99]], [(0) x 100], "$layout $rate: the items added over the own socket are not new";
    my @mixed = (@a[0 .. 499], @b[2000 .. 2499], map { "own-none$_" } 1 .. 1000);
    is_deeply [$own->contains_many(\@mixed)], [$via->contains_many(\@mixed)], "$layout $rate: contains_many alike";
    is scalar $own->contains_many(\@mixed), scalar $via->contains_many(\@mixed), "$layout $rate: the counts alike";
    is $own->add_many([]), 0, "$layout $rate: an empty batch";
    is_deeply [$own->contains_many([])], [], "$layout $rate: an empty query";
    ok !$via->{links}{''}, "$layout $rate: a filter made from a client opens no socket of its own";
    # A forked child opens its own socket; the parent's goes on working.
    my $parent_fd = fileno $own->{links}{''}{fh};
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $n = eval { $own->add_many(['own-child', @a[0 .. 9]]) } // -1;
        my $d = $own->{links}{''};
        POSIX::_exit($n == 1 && $d && $d->{pid} == $$ && fileno $d->{fh} != $parent_fd ? 0 : 1);
    }
    waitpid $pid, 0;
    is $?, 0, "$layout $rate: a forked child's batch, over a socket of its own";
    is_deeply [$own->contains_many(['own-child', 'own-a1'])], [1, 1], "$layout $rate: and the parent's after it";
    is fileno $own->{links}{''}{fh}, $parent_fd, "$layout $rate: over its socket";
}

# --- a socket the server closed while idle: the next batch opens another -----------------------
{
    my $f = $R->new($srv->address, 'idle', 1000, 0.01);
    is $f->add_many([qw(i1 i2)]), 2, 'a batch over the own socket';
    my $sock = $f->{links}{''}{fh};
    is $rc->config('set', 'timeout', 1), 'OK', 'the server closes idle connections after 1 s';
    # The server checks idle clients about once a second: wait until it
    # closed this one (its end reads as ready: end of file), for up to 30 s
    # on a busy host.
    my $sel = IO::Select->new($sock);
    my $until = Time::HiRes::time() + 30;
    Time::HiRes::sleep(0.1) until $sel->can_read(0) || Time::HiRes::time() > $until;
    ok $sel->can_read(0), 'the server closed the idle socket';
    is $f->add_many([qw(i2 i3)], \my @w), 1, 'a batch after the server closed the socket';
    is_deeply \@w, [0, 1], 'item by item';
    isnt $f->{links}{''}{fh}, $sock, 'over a new socket';
    $rc = $srv->client;    # the server closed the idle admin connection too
    is $rc->config('set', 'timeout', 0), 'OK', 'idle connections kept again';
}

# --- a batch cut short by a signal: its socket is not used again --------------------------------
# The server paused (CLIENT PAUSE), a batch is interrupted by a die from an
# alarm handler with commands sent and replies unread; the next batch must
# not read those replies as its own.
SKIP: {
    skip 'Time::HiRes::ualarm is not available', 5 if !eval { Time::HiRes::ualarm(0); 1 };
    my $name = 'cut-short';
    my $f = $R->new($srv->address, $name, 50_000, 0.01);
    my @a = map { "cut-a$_" } 1 .. 5000;
    my @b = map { "cut-b$_" } 1 .. 5000;
    is $f->add_many(\@a), 5000, 'a batch';
    for my $verb ('contains_many', 'add_many') {
        # Paused for 2 s, ten times the alarm's 200 ms: the batch cannot be
        # answered before the alarm, even if this process waits a long
        # while for a CPU. The next batch below waits for the pause's end.
        is $rc->client('pause', 2000, 'ALL'), 'OK', "$verb: the server paused";
        my $e = eval {
            local $SIG{ALRM} = sub { die "timed out\n" };
            Time::HiRes::ualarm(200_000);
            $f->$verb(\@b);
            Time::HiRes::ualarm(0);
            1;
        } ? '' : $@;
        Time::HiRes::ualarm(0);
        is $e, "timed out\n", "$verb: cut short by the alarm";
        is scalar $f->contains_many(\@a), 5000, "$verb: the next batch answers for itself";
        is $f->add_many([@a[0 .. 99]]), 0, "$verb: and no item added before is told new";
    }
}
alarm 300;    # ualarm(0) above ended the hang guard: set it again

# --- several processes on separate connections add the same items at once ----------------------
for my $case (['standard', 0.001], ['blocked', 0.01], ['blocked', 0.001]) {
    my ($layout, $rate) = @$case;
    my $name = "race-$layout-$rate";
    $R->new($srv->address, $name, 40_000, $rate, { layout => $layout });
    my @same = map { "ev-$_" } 1 .. 20_000;
    my %told = race_adders(
        procs => [1 .. 4], items => \@same, batch => 300, singles => 5,
        open => sub { $R->new($srv->address, $name, 40_000, $rate) },    # its own connection
        reverse => sub { $_[0] % 2 },
        name => "$layout $rate: adder",
    );
    my @twice = grep { $told{$_} > 1 } keys %told;
    is scalar @twice, 0, "$layout $rate: no item was told new twice" or diag "@twice[0..9]";
    my $f = $R->new($srv->address, $name, 40_000, $rate);
    is $f->layout, $layout, "$layout $rate: the layout";
    is scalar $f->contains_many(\@same), scalar @same, "$layout $rate: no item was lost";
    # Items told new to nobody are false positives of items added before them.
    cmp_ok scalar keys %told, '>=', @same * (1 - 10 * $rate), "$layout $rate: nearly every item was told new once";
}

# --- every layout the POD of new names works here ---------------------------------------------
{
    my $pm = "$FindBin::Bin/../lib/Data/BloomFilter/Shared/Redis.pm";
    open(my $fh, '<', $pm) or die "$pm: $!";
    my $pod = do { local $/; <$fh> };
    my ($opts) = $pod =~ /^Options: (.*?)\n\n/ms or BAIL_OUT('no Options paragraph under new');
    my ($layouts) = $opts =~ /C<layout> \((.*?):/s or BAIL_OUT('no layout in the options of new');
    my @named = $layouts =~ /C<(\w+)>/g;
    is("@named", join(' ', Data::BloomFilter::Shared::Args::layout_names()),
        "the POD of new names every layout (@named)");
    for my $layout (@named) {
        my $r = $R->new($srv->address, "doc-$layout", 1000, 0.01, { layout => $layout });
        is $r->layout, $layout, "layout $layout as documented: the filter reports it";
        is $r->add('x') . $r->add('x') . $r->contains('x') . $r->contains('y'), '1010', '... and adds and answers';
    }
}

# --- a reference item: its address string, with the local filter's warning ----------------------
{
    package Local::RStr { use overload '""' => sub { $_[0]{id} }, fallback => 1 }
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    for my $shards (1, 3) {
        my $r = $R->new($srv->address, "refs-$shards", 1000, 0.01, { layout => 'blocked', shards => $shards });
        my $h = { id => 'event-1' };
        @w = ();
        my $line = __LINE__ + 1;
        is $r->add($h), 1, "shards $shards: add of a hash reference adds";
        is scalar @w, 1, '... with one warning';
        like $w[0] // '', qr/\A\Q$R\E->add: item is a HASH reference, taken as its address string \(give a string, such as one of its fields\) at \Q${\ __FILE__}\E line $line\.$/,
            "... as a local filter's, at the caller's line";
        ok $r->contains("$h") && !$r->contains('event-1'), '... as its address string';
        @w = ();
        $r->contains([]);
        $r->add_many(['a', [1], { 2 => 3 }]);
        $r->contains_many([\'x']);
        is scalar @w, 3, 'contains, add_many, contains_many: one warning each';
        like $w[0] // '', qr/->contains: item is an ARRAY reference/, '... contains';
        like $w[1] // '', qr/->add_many: item at index 1 is an ARRAY reference, taken as its address string \(give a string, such as one of its fields; 2 items of this batch are references\)/,
            '... add_many names the first and counts them';
        like $w[2] // '', qr/->contains_many: item at index 0 is a SCALAR reference/, '... contains_many';
        @w = ();
        $r->add(bless { id => 'event-2' }, 'Local::RStr');
        $r->add_many(['b', 5, bless({ id => 'event-3' }, 'Local::RStr')]);
        is scalar @w, 0, 'strings, numbers and objects that overload "": no warning' or diag @w;
        ok $r->contains('event-2') && $r->contains('event-3'), '... and the objects are their strings';
        {
            no warnings 'Data::BloomFilter::Shared';
            $r->add({});
            $r->add_many([[]]);
        }
        is scalar @w, 0, "no warnings 'Data::BloomFilter::Shared' silences it";
        ok !eval { use warnings FATAL => 'Data::BloomFilter::Shared'; $r->add_many(['fatal-1', []]); 1 },
            'FATAL makes it a croak';
        like $@, qr/\A\Q$R\E->add_many: item at index 1 is an ARRAY reference/, '... with the same message';
        ok !$r->contains('fatal-1'), '... before anything is sent';
    }
}

done_testing;
