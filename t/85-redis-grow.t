# Filters that grow in Redis against a real redis-server: every stage the
# bits a local grown filter sets (to_filter gives that local filter, byte
# for byte), four processes adding the same ids across several stages
# (each id told new exactly once), the bound, the keys in one slot of a
# 3-master cluster, no acknowledged add lost across a stage change when
# the server is killed and replays its append-only file, and the options
# checked as a local filter checks them.
use strict;
use warnings;
use Test::More;
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(dies_like);
use RedisServer qw(redis_or_skip);
use RacingAdders qw(race_adders);
use Data::BloomFilter::Shared;
use File::Temp ();
use Time::HiRes qw(time sleep);
use IO::Handle ();
use POSIX ();

redis_or_skip();
require Data::BloomFilter::Shared::Redis;

my $R = 'Data::BloomFilter::Shared::Redis';
my $L = 'Data::BloomFilter::Shared';
$SIG{ALRM} = sub { die "85-redis-grow: global timeout\n" };
alarm 600;    # a hang guard: an idle host takes seconds, a loaded one minutes

my $srv = RedisServer->new;
my $rc = $srv->client;
my $dir = File::Temp::tempdir(CLEANUP => 1);

# The message of a croak, without its class and method or its line.
sub said {
    my ($code) = @_;
    local $@;
    return eval { $code->(); 1 } ? 'no croak' : $@ =~ s/\A\S+->\w+: //r =~ s/ at \S+ line \d+\.\n\z//r;
}

# A local filter's portable bytes with every writer's count in its fill
# words: written through a file whose handle is dropped (a handle adds its
# own count of new items to the shared word when it goes away).
sub local_bytes {
    my ($path, $add, @args) = @_;
    unlink $path;
    my $l = $L->new($path, @args);
    $add->($l);
    undef $l;
    return $L->new($path, $args[0], $args[1])->serialize;
}

# --- the local filter's stages, bit for bit --------------------------------------------------------
# Small first capacities, so that one batch of 100 (one script) crosses
# several stages and the script asks for the offsets of the next ones.
for my $case (['standard', 10, 0.01, 2], ['blocked', 10, 0.01, 2], ['standard', 300, 0.001, 4],
              ['blocked', 50, 1e-5, 3]) {
    my ($layout, $cap, $fp, $grow) = @$case;
    my $name = "same-$layout-$cap";
    my $opts = { grow => $grow, layout => $layout };
    my $r = $R->new($srv->address, $name, $cap, $fp, {%$opts});
    my $l = $L->new(undef, $cap, $fp, {%$opts});
    my @ids = map { "id-$_" } 1 .. 40 * $cap;
    my ($same_batches, $same_singles, $same_queries) = (0, 0, 0);
    for my $part (0 .. 3) {
        my @mine = @ids[$part * 10 * $cap .. ($part + 1) * 10 * $cap - 1];
        # Batches (items seen before among them) and single adds.
        my @batch = (@mine[0 .. $#mine / 2], @ids[0 .. 9]);
        my (@rn, @ln);
        $r->add_many(\@batch, \@rn);
        $l->add_many(\@batch, \@ln);
        $same_batches++ if "@rn" eq "@ln";
        my $singles = grep { $r->add($_) == $l->add($_) } @mine[$#mine / 2 + 1 .. $#mine];
        $same_singles++ if $singles == @mine - (1 + int($#mine / 2));
        my @probe = map { "id-$_" } 1 .. 50 * $cap;
        my @rq = $r->contains_many(\@probe);
        my @lq = $l->contains_many(\@probe);
        $same_queries++ if "@rq" eq "@lq";
    }
    is $same_batches, 4, "$name: add_many tells the same items new as a local filter that grows";
    is $same_singles, 4, "$name: single adds too";
    is $same_queries, 4, "$name: contains_many answers as the local filter";
    cmp_ok $r->stages, '>=', 3, "$name: the filter grew (" . $r->stages . ' stages)';
    is $r->stages, $l->stages, "$name: as many stages as the local filter";
    my $want = local_bytes("$dir/$name.bf", sub { $_[0]->add_many(\@ids) }, $cap, $fp, {%$opts});
    ok $r->to_filter->serialize eq $want, "$name: to_filter is the local filter that grows: the same bytes (stages, bits, fill counts)";
    my $t = $r->to_filter("$dir/$name.to", { mode => 0640 });
    ok -f "$dir/$name.to" && ((stat _)[2] & 07777) == 0640, "$name: to_filter with a path makes that file, with the mode";
    is $t->grow, $grow, "$name: the local filter grows by $grow";
    dies_like { $r->to_filter("$dir/$name.to") } qr/\A\Q$R\E->to_filter: .*exists/, "$name: to_filter to an existing path croaks, naming to_filter";
    # stats: the keys and figures of the local filter's (those both have)
    my $rs = $r->stats;
    my $ls = $L->new("$dir/$name.bf", $cap, $fp)->stats;
    my @keys = qw(capacity fp_rate bits hashes seed layout grow stages max_capacity bits_set count fill_ratio
        estimated_fpp stage_info);
    is_deeply { map { $_ => $rs->{$_} } @keys }, { map { $_ => $ls->{$_} } @keys },
        "$name: stats as the local filter's: @keys";
    is_deeply [map { $r->$_ } qw(capacity bits hashes grow max_capacity bits_set count)],
        [map { $ls->{$_} } qw(capacity bits hashes grow max_capacity bits_set count)],
        "$name: the accessors as the local filter's";
    is $r->fill_ratio, $ls->{fill_ratio}, "$name: fill_ratio";
    is $r->estimated_fpp, $ls->{estimated_fpp}, "$name: estimated_fpp";
    is $r->is_empty, 0, "$name: not empty";
}

# --- a client object given, its methods' way and its socket's ----------------------------------------
{
    my $c = $srv->client;
    my $r = $R->new($c, 'by-client', 20, 0.01, { grow => 2 });
    my @ids = map { "c-$_" } 1 .. 500;
    is $r->add_many(\@ids), 500, 'through a client: 500 new items';
    is $r->add_many(\@ids), 0, 'and then none';
    is scalar $r->contains_many(\@ids), 500, 'all found';
    is $r->stages, 5, 'five stages (20 + 40 + 80 + 160 < 500 <= + 320)';
}

# --- a client of another kind, driven through its methods; SCRIPT FLUSH ------------------------------
{
    package Local::Wrap;
    our $AUTOLOAD;
    sub new { bless { r => $_[1] }, $_[0] }
    sub ping { shift->{r}->ping(@_) }
    sub wait_all_responses { shift->{r}->wait_all_responses }
    sub AUTOLOAD { my $m = $AUTOLOAD =~ s/.*:://r; return if $m eq 'DESTROY'; shift->{r}->$m(@_) }
    package main;
    my $f = $R->new(Local::Wrap->new($srv->client), 'wrapped', 10, 0.01, { grow => 2 });
    my @ids = map { "w-$_" } 1 .. 100;
    is $f->add_many(\@ids, \my @w), 100, 'through a client\'s methods: a batch across stages';
    is scalar(grep { $_ == 1 } @w), 100, '... each new';
    is $f->stages, 4, '... four stages (10 + 20 + 40 < 100 <= + 80)';
    is $f->add($ids[0]), 0, 'a single add of one held';
    $rc->script_flush;
    is $f->contains($ids[-1]), 1, 'a query after SCRIPT FLUSH (sent again whole)';
    is $f->add('w-new'), 1, 'and an add';
}

# --- merge: local copies instead --------------------------------------------------------------------
{
    my ($x, $y) = map { $R->new($srv->address, "m$_", 50, 0.01, { grow => 2 }) } 1, 2;
    $x->add_many([map { "x-$_" } 1 .. 120]);
    $y->add_many([map { "y-$_" } 1 .. 300]);
    my $lx = $x->to_filter;
    $lx->merge($y->to_filter);
    is $lx->stages, $y->stages, 'to_filter copies merge locally: the stages of the larger';
    is scalar $lx->contains_many([map { ("x-$_", "y-$_") } 1 .. 120]), 240, '... holding the items of both';
}

# --- a batch read, then the filter changed by another handle: its add script adds nothing ----------
# (The two steps of a batch's add made by hand, the change between them:
# a race with another client, made, not waited for.)
{
    my $new_batch = sub { { method => 'add_many', verb => 1, n => 2, out => [], count => 0, known => 0, refused => 0,
        each => [] } };
    my ($a, $b) = map { $R->new($srv->address, 'changed', 10, 0.01, { grow => 2 }) } 1, 2;
    $a->add_many([map { "c-$_" } 1 .. 25]);    # two stages: 10 + 20
    for my $case (['cleared and grown again to as many stages', sub { $b->clear; $b->add_many([map { "d-$_" } 1 .. 25]) }],
                  ['grown by a stage', sub { $b->add_many([map { "e-$_" } 1 .. 40]) }]) {
        my ($what, $change) = @$case;
        my @two = map { "$what-$_" } 1, 2;
        my $bt = $new_batch->();
        my ($found, $clears) = $a->_grown_read($bt, \@two);
        is "@$found", '0 0', "$what: the batch read (found in no stage)";
        my $before = $a->stages;
        $change->();
        is $a->stages, $before, "$what: ... as many stages as when it was read" if $what =~ /again/;
        is $a->_grown_add($bt, \@two, undef, $clears), 0, "$what: the add script then adds none of its items";
        is scalar $b->contains_many(\@two), 0, "$what: ... and sets none of their bits";
        my @w;
        is_deeply [$a->add_many(\@two, \@w), "@w"], [2, '1 1'], "$what: the batch again: both new";
    }
    # Unchanged: both added; then with room for one in the newest stage:
    # the first added, the script stops before the second.
    my $u = $R->new($srv->address, 'unchanged', 10, 0.01, { grow => 2 });
    $u->add_many([map { "u-$_" } 1 .. 7]);
    for my $case (['room for both', ['u-8', 'u-9'], 2, [1, 1]], ['room for one', ['u-10', 'u-11'], 1, [1]]) {
        my ($what, $two, $added, $each) = @$case;
        my $bt = $new_batch->();
        my (undef, $clears) = $u->_grown_read($bt, $two);
        is $u->_grown_add($bt, $two, undef, $clears), $added, "$what: the add script adds $added";
        is_deeply $bt->{each}, $each, '... told new';
    }
    is $u->stages, 1, 'the add script adds no stage';
    my @w;
    is_deeply [$u->add_many(['u-10', 'u-11'], \@w), @w], [1, 0, 1], 'the rest goes the items script\'s way: a stage added';
    is $u->stages, 2, '... two stages';
}

# --- four processes, overlapping ids, several stages: each id told new exactly once ------------------
{
    my @ids = map { "race-$_" } 1 .. 6000;
    $R->new($srv->address, 'race', 200, 1e-6, { grow => 2 });
    my %told = race_adders(
        procs => [1 .. 4],
        open => sub { $R->new($srv->address, 'race', 200, 1e-6) },
        items => \@ids,
        reverse => sub { $_[0] % 2 == 0 },
        batch => 150,
        singles => 20,
        name => 'grown adder',
    );
    is scalar(grep { ($told{$_} // 0) > 1 } @ids), 0, 'four processes: no id told new twice';
    is scalar(grep { !$told{$_} } @ids), 0, 'none told new by no one: each id new exactly once';
    my $f = $R->new($srv->address, 'race', 200, 1e-6);
    is scalar $f->contains_many(\@ids), 6000, 'every id is in the filter';
    my $s = $f->stats;
    is $s->{stages}, 5, 'five stages: 200 + 400 + 800 + 1600 < 6000 <= + 3200';
    is_deeply [map { $_->{fill} } @{ $s->{stage_info} }], [200, 400, 800, 1600, 3000],
        'each stage took its capacity of new items, the newest the rest: counted exactly';
    is $f->capacity, 6200, 'capacity: the stages so far together';
}

# --- the bound ------------------------------------------------------------------------------------
{
    my @ids = map { "b-$_" } 1 .. 300;
    my $r = $R->new($srv->address, 'bounded', 100, 1e-6, { grow => 2, max_capacity => 250 });
    my $l = $L->new(undef, 100, 1e-6, { grow => 2, max_capacity => 250 });
    my $rs = said(sub { $r->add_many(\@ids, \my @w) });
    is $rs, said(sub { $l->add_many(\@ids) }), 'add_many past max_capacity: the local filter\'s words';
    like $rs, qr/\Athe filter is full: it holds its max_capacity of 250 items; the first 250 items of this batch were added, none after\z/,
        '... the items before the bound added, none after';
    is scalar $r->contains_many([@ids[0 .. 249]]), 250, 'the items before it are there';
    is scalar $r->contains_many([@ids[250 .. 299]]), 0, 'those after are not';
    is said(sub { $r->add('another') }), said(sub { $l->add('another') }), 'a single add: the local words';
    like said(sub { $r->add('another') }), qr/; nothing was added\z/, '... nothing was added';
    is $r->add($ids[0]), 0, 'an item already there: added as ever (not new)';
    is $r->stages, 2, 'two stages (100, then 150)';
    is $r->max_capacity, 250, 'max_capacity';
    is $r->capacity, 250, 'capacity: the stages together';
    # clear: back to the first stage
    $r->clear;
    is $r->stages, 1, 'clear: one stage again';
    is $r->is_empty, 1, '... empty';
    is $r->capacity, 100, '... the first capacity';
    is $r->add_many([@ids[0 .. 199]]), 200, 'and grows again';
    is_deeply [sort grep { /stage/ } $rc->keys('{bounded}:*')], ['{bounded}:stage:0', '{bounded}:stage:1'],
        'the keys: one bit string per stage';
}

# --- the stages stop before one a Redis string cannot hold ----------------------------------------
# First capacity 30 at 0.5, grow 16: six stages (34 MiB together), the
# seventh past 2^32 bits. Each stage is made to have taken its capacity
# (its count set on the server, as if that many new items had come), so
# that one new item adds the next.
{
    my $r = $R->new($srv->address, 'cut', 30, 0.5, { grow => 16 });
    my ($local_limit) = Data::BloomFilter::Shared::Redis::_xs_stage('standard', 30, 0.5, 16, 0, 0, 0);
    cmp_ok $local_limit, '>', 6, "a local filter of these arguments has more stages ($local_limit)";
    my $total = 0;
    for my $i (0 .. 5) {
        my $cap = $r->stats->{stage_info}[$i]{capacity};
        $total += $cap;
        $rc->hset('{cut}:meta', "fill:$i", $cap);
        is $r->add("next-$i"), 1, "stage $i full: a new item adds stage " . ($i + 1) if $i < 5;
    }
    is $r->stages, 6, 'six stages';
    is said(sub { $r->add('one more') }), "the filter is full: its 6 stages hold $total items, the most it can grow to"
        . ' in Redis (a string holds at most 2^32 bits); nothing was added', 'the sixth full: an add croaks, naming the bound';
    like said(sub { $r->add_many(['more-1', 'more-2']) }),
        qr/\Athe filter is full: its 6 stages .* in Redis \(a string holds at most 2\^32 bits\); the first 0 items of this batch were added, none after\z/,
        '... and a batch';
    is $r->stages, 6, '... no stage was added';
    is $rc->exists('{cut}:stage:6'), 0, '... nor its key';
    is $r->add('next-0'), 0, 'an item already there: added as ever (not new)';
    $r->clear;
}

# --- maxmemory: a stage that does not fit is not added ---------------------------------------------
{
    # The first stage 64 KiB, the second (16 times the items) 1 MiB: room
    # for half of it.
    my $r = $R->new($srv->address, 'oom', 20_000, 0.001, { grow => 16 });
    my $used = $rc->info('memory')->{used_memory};
    $rc->config('set', 'maxmemory', $used + (512 << 10));
    my $n = 0;
    $n += $r->add_many([map { "m-$_" } $_ * 1000 + 1 .. $_ * 1000 + 1000]) for 0 .. 19;
    is $n, 20_000, 'the first stage takes its capacity';
    dies_like { $r->add('one more') }
        qr/->add: the filter is full and its next stage needs 1048576 bytes, but the server uses \d+ of its maxmemory \d+; nothing was added/,
        'the next stage past maxmemory: the add croaks';
    is $r->stages, 1, '... no stage was added';
    is $r->contains('one more'), 0, '... nor the item';
    $rc->config('set', 'maxmemory', 0);
    is $r->add('one more'), 1, 'with room, the next add adds the stage';
    is $r->stages, 2, '... two stages';
}

# --- options, reopening, what is not supported ----------------------------------------------------
{
    my $a = $srv->address;
    my $f = $R->new($a, 'opts', 100, 0.01, { grow => 2 });
    $f->add_many([map { "o-$_" } 1 .. 150]);
    my $p = $R->new($a, 'opts', 100, 0.01);
    is $p->grow, 2, 'opened without growth options: the filter grows as it was made';
    is $p->stages, 2, '... with its stages';
    ok eval { $R->new($a, 'opts', 100, 0.01, { grow => 2 }) }, 'the same growth opens it';
    dies_like { $R->new($a, 'opts', 100, 0.01, { grow => 3 }) }
        qr/->new: growth mismatch \(the filter grows by 2, not grows by 3\)/, 'another growth croaks (the local words)';
    dies_like { $R->new($a, 'opts', 100, 0.01, { grow => 2, max_capacity => 1000 }) }
        qr/->new: growth mismatch \(the filter grows by 2, not grows by 2 up to 1000 items\)/, 'another bound croaks';
    my @w;
    {
        local $SIG{__WARN__} = sub { push @w, $_[0] };
        $R->new($a, 'opts', 200, 0.01, { grow => 2 });
    }
    is scalar @w, 1, 'another capacity warns once';
    like $w[0], qr/->new: the filter's capacity 100 is kept, not the capacity 200 asked for/, '... naming the first capacity';
    {
        no warnings 'Data::BloomFilter::Shared';
        local $SIG{__WARN__} = sub { push @w, $_[0] };
        $R->new($a, 'opts', 200, 0.01, { grow => 2 });
    }
    is scalar @w, 1, "... in the category 'Data::BloomFilter::Shared'";
    $R->new($a, 'plain', 100, 0.01);
    dies_like { $R->new($a, 'plain', 100, 0.01, { grow => 2 }) }
        qr/->new: growth mismatch \(the filter does not grow, not grows by 2\)/, 'a plain filter asked to grow croaks';
    $R->new($a, 'wplain', 100, 0.01, { window => 5 });
    dies_like { $R->new($a, 'wplain', 100, 0.01, { grow => 2 }) }
        qr/->new: growth mismatch \(the filter does not grow, not grows by 2\)/, 'so does a windowed one';
    dies_like { $f->merge($R->new($a, 'other', 100, 0.01, { grow => 2 })) }
        qr/->merge: not supported for a filter that grows in Redis \(see GROWTH\)/, 'merge croaks';
    dies_like { $p->merge($L->new(undef, 100, 0.01, { grow => 2 })) } qr/->merge: not supported for a filter that grows/,
        '... with a local filter too';
    dies_like { $R->new($a, 'plain', 100, 0.01)->merge($f) } qr/->merge: not supported for a filter that grows/,
        '... and into a plain filter';
    $rc->del('{opts}:meta');
    dies_like { $p->add('x') } qr/->add: GONE key \{opts\}:meta is gone or no longer a filter that grows/,
        'an add to a deleted filter croaks';

    # Bad options: the local filter's words, naming new, and no key made.
    for my $o ({ grow => 1 }, { grow => 17 }, { grow => 'x' }, { grow => undef }, { grow => 2, max_capacity => 0 },
               { grow => 2, max_capacity => -5 }, { max_capacity => 1000 }, { grow => 2, max_capacity => 50 },
               { grow => 2, max_capacity => '18446744073709551615' }, { grow => 2, window => 5 },
               { grow => 2, layout => 'datasketches' }) {
        my $shown = join ', ', map { "$_ => " . ($o->{$_} // 'undef') } sort keys %$o;
        my $e = eval { $R->new($a, 'bad', 100, 0.01, {%$o}); 1 } ? 'no croak' : $@;
        like $e, qr/\A\Q$R\E->new: /, "{ $shown }: croaks naming new";
        is said(sub { $R->new($a, 'bad', 100, 0.01, {%$o}) }), said(sub { $L->new(undef, 100, 0.01, {%$o}) }),
            "{ $shown }: the local filter's words";
    }
    dies_like { $R->new($a, 'bad', 100, 0.01, { grow => 2, shards => 2, layout => 'blocked' }) }
        qr/->new: shards are not supported with grow \(a filter that grows in Redis keeps its stages in one hash slot\)/,
        'shards with grow croak';
    dies_like { $R->new($a, 'bad', 1e9, 0.001, { grow => 2 }) }
        qr/->new: the first stage needs \d+ bits but a Redis string holds at most 2\^32/, 'a first stage past 2^32 bits croaks';
    is_deeply [$rc->keys('{bad}*')], [], 'refused creations left no keys';
}

# --- kill -9 with appendfsync always: no acknowledged add lost across stage changes ----------------
{
    my $d = RedisServer->new(appendonly => 'yes', appendfsync => 'always');
    $R->new($d->address, 'durable', 1000, 0.001, { grow => 2 });
    my @acked = $d->acked_until_kill(sub { $R->new($d->address, 'durable', 1000, 0.001) }, 20);
    cmp_ok scalar @acked, '>=', 20 * 200, 'at least 20 batches (4000 items) acknowledged before the kill';
    $d->start;    # the same directory: it replays its append-only file
    my $f = $R->new($d->address, 'durable', 1000, 0.001);
    cmp_ok $f->stages, '>=', 3, 'after the restart: the stages added before the kill (1000 + 2000 < 4000)';
    is scalar $f->contains_many(\@acked), scalar @acked, 'every acknowledged add is there';
    is $f->add($acked[0]), 0, 'and an acknowledged item is not new';
    my $s = $f->stats;
    is_deeply [map { $_->{fill} } @{ $s->{stage_info} }[0 .. $s->{stages} - 2]],
        [map { $_->{capacity} } @{ $s->{stage_info} }[0 .. $s->{stages} - 2]], 'every stage but the newest full';
    $d->stop('TERM');
}

# --- a 3-master cluster: every key in the slot of {name} ------------------------------------------
SKIP: {
    skip 'redis-cli is not installed (Debian: redis-tools)', 6
        if !grep { -x "$_/redis-cli" } split(/:/, $ENV{PATH} // ''), '/usr/bin';
    my ($status, $out, $nodes, $c) = RedisServer->cluster(3);
    is $status, 0, 'redis-cli --cluster create' or diag $out;
    my @c = @$c;
    # A name whose slot is not on the first node: every script is redirected.
    my $name = RedisServer::name_off_first($nodes, $c, 'cg');
    my $f = $R->new($nodes->[0]->address, $name, 100, 0.001, { grow => 2 });
    my @ids = map { "c-$_" } 1 .. 1000;
    is $f->add_many(\@ids), 1000, 'cluster: a batch of new items, across stages';
    is $f->add_many(\@ids), 0, 'told seen';
    is $f->stages, 4, 'four stages (100 + 200 + 400 < 1000 <= + 800)';
    my ($owner) = grep { eval { $_->exists("{$name}:meta") } } @c;    # the others answer MOVED
    my @keys = $owner->keys("{$name}:*");
    is scalar(@keys), 5, "the metadata and four stages, all on the metadata's node";
    is scalar(grep { $owner->cluster('keyslot', $_) != $R->key_slot("{$name}") } @keys), 0,
        'every key in the slot of {name}';
}

done_testing;
