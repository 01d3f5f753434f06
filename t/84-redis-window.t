# Windowed filters in Redis against a real redis-server: the local filter's
# answers step for step, four processes adding the same ids across steps
# (each id told new exactly once per window), the bounds on when an item is
# seen and forgotten measured against the server's clock, generations freed
# by the server with no client running, and no acknowledged add lost when
# the server is killed and replays its append-only file.
use strict;
use warnings;
use Test::More;
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(dies_like);
use RedisServer qw(redis_or_skip);
use Data::BloomFilter::Shared;
use Time::HiRes qw(time sleep);
use IO::Handle ();
use POSIX ();

redis_or_skip();
require Data::BloomFilter::Shared::Redis;

my $R = 'Data::BloomFilter::Shared::Redis';
my $L = 'Data::BloomFilter::Shared';
$SIG{ALRM} = sub { die "84-redis-window: global timeout\n" };
alarm 600;    # a hang guard: an idle host takes seconds, a loaded one minutes

my $srv = RedisServer->new;
my $rc = $srv->client;

# A filter's generation keys, sorted (in scalar context, how many).
sub gen_keys {
    my ($name, $c) = @_;
    my @k = sort grep { /\A\{\Q$name\E\}:gen:/ } ($c // $rc)->keys("{$name}:*");
    return wantarray ? @k : scalar @k;
}

# --- the local filter's answers, step for step ----------------------------------------------------
# Without a window both step only when rotated: every add and query must
# give what a local filter of the same geometry and generations gives.
for my $layout (qw(standard blocked)) {
    my $r = $R->new($srv->address, "same-$layout", 2000, 0.01, { window => undef, generations => 3, layout => $layout });
    my $l = $L->new(undef, 2000, 0.01, { window => undef, generations => 3, layout => $layout });
    is $r->generations, 3, "$layout: generations";
    is $r->window, undef, "$layout: no window: stepped by rotate";
    my ($adds, $queries, $steps) = (0, 0, 0);
    for my $step (0 .. 7) {
        # Ids of this step and the two before, so some are still held and
        # some were forgotten.
        my @ids = map { "id-" . ($step * 300 + $_) } -700 .. 299;
        my (@rn, @ln);
        $r->add_many(\@ids, \@rn);
        $l->add_many(\@ids, \@ln);
        $adds++ if "@rn" eq "@ln";
        my @probe = map { "id-" . ($step * 300 + $_) } -1200 .. 600;
        my @rq = $r->contains_many(\@probe);
        my @lq = $l->contains_many(\@probe);
        $queries++ if "@rq" eq "@lq";
        $steps++ if $r->add("single-$step") == $l->add("single-$step")
            && $r->contains("single-" . ($step - 3)) == $l->contains("single-" . ($step - 3));
        $r->rotate;
        $l->rotate;
    }
    is $adds, 8, "$layout: add_many tells the same items new as a local windowed filter, at every step";
    is $queries, 8, "$layout: contains_many answers as the local filter, at every step";
    is $steps, 8, "$layout: single adds and queries too";
    is scalar(gen_keys("same-$layout")), 2,
        "$layout: after 8 rotations, only the g - 1 older generations' keys (the new current one is empty)";
}

# --- a batch query: the generations named by the server's clock, then read; a step between ----------
# (The two steps of contains_many made by hand, another handle's
# rotations between them.)
{
    my $r = $R->new($srv->address, 'between', 1000, 0.01, { window => undef, generations => 3 });
    my $o = $R->new($srv->address, 'between', 1000, 0.01);
    my @four = ('old-1', 'old-2', 'new-1', 'new-2');
    $r->add_many([@four[0, 1]]);
    $r->rotate;
    $r->add_many([@four[2, 3]]);
    my $bt = { method => 'contains_many', verb => 0, n => 4, count => 0, known => 0, refused => 0, each => [] };
    my $t = $r->_window_visible($bt);
    is_deeply [map { $_->{key} } @$t], ['{between}:gen:1', '{between}:gen:0'], 'the visible generations named, newest first';
    is_deeply $r->_read_rounds($bt, \@four, $t), [1, 1, 1, 1], '... read: every item found';
    $o->rotate for 1, 2;    # now 3: generation 0 is no longer visible, and dropped
    is_deeply $r->_read_rounds($bt, \@four, $t), [0, 0, 1, 1],
        'rotated twice between: the dropped generation reads as empty, the other as it was';
    is_deeply [$r->contains_many(\@four)], [0, 0, 1, 1], 'and a batch query now says the same';
    # A metadata key replaced meanwhile (as a broken or hostile writer
    # might): its generations are not believed, however many it names.
    $rc->hset('{between}:meta', 'generations', '100000000000000000');
    dies_like { $r->contains_many(\@four) }
        qr/->contains_many: key \{between\}:meta: field 'generations' is 100000000000000000, not the 3 this filter was opened with \(replaced\?\): 0 of 4 items known checked/,
        'a batch query of a filter whose generations changed croaks, reading nothing';
}

# --- a query's arguments: the items' probe offsets, encoded by the core -----------------------------
# A windowed query's script takes each item's k probe offsets alone: the
# same offsets an add's SET u1 OFFSET 1 arguments carry, as bulk strings.
for my $layout (qw(standard blocked)) {
    my $r = $R->new($srv->address, "offsets-$layout", 50_000, 0.001, { window => 60, layout => $layout });
    my $u = "caf\x{e9}";
    utf8::upgrade($u);
    my @items = (map({ "o$_" } 1 .. 20), $u, '', "caf\xe9");
    my @a = Data::BloomFilter::Shared::Redis::_xs_args(1, $r->_geo, [@items[3 .. 22]], undef, \my $masks);
    my @off = @a[grep { $_ % 4 == 2 } 0 .. $#a];
    is Data::BloomFilter::Shared::Redis::_xs_offsets_bulk($r->_geo, \@items, 3, 20),
        join('', map { '$' . length($_) . "\r\n$_\r\n" } @off), "$layout: items 3 .. 22: k offsets each, as bulk strings";
    is scalar(@off), 20 * $r->hashes, "$layout: k of them per item";
    is Data::BloomFilter::Shared::Redis::_xs_offsets_bulk($r->_geo, \@items, 0, 0), '', "$layout: none for no items";
    dies_like { Data::BloomFilter::Shared::Redis::_xs_offsets_bulk($r->_geo, \@items, 20, 4) } qr/not in the batch of 23/,
        "$layout: a range past the batch croaks";
    dies_like { Data::BloomFilter::Shared::Redis::_xs_offsets_bulk($r->_geo, ['a', \1], 0, 2) } qr/not a plain string/,
        "$layout: an element that is not a plain string croaks";
    is_deeply [$r->contains_many(\@items)], [(0) x 23], "$layout: none there";
    $r->add_many([@items[0 .. 9, 20]]);
    is_deeply [$r->contains_many(\@items)], [(1) x 10, (0) x 10, 1, 0, 1], "$layout: the added ones found (the UTF-8 string is its bytes)";
}

# --- four processes, overlapping ids, many steps: each told new exactly once per window --------------
# A coordinator rotates between rounds; in each round every child adds
# every id of the round (batches and singles, each in its own order). With
# 2 generations an id of round r - 1 is still seen in round r: an id is
# new in round r exactly when round r - 1 did not add it, and then for
# exactly one child.
{
    my $name = 'race';
    $R->new($srv->address, $name, 200_000, 1e-9, { window => undef, generations => 2 });
    my $rounds = 12;
    my @round_ids = map { my $r = $_; [map { "r-" . ($r * 250 + $_) } 0 .. 499] } 0 .. $rounds - 1;
    my @kids;
    for my $child (0 .. 3) {
        pipe my $go_r, my $go_w or die "pipe: $!";
        pipe my $res_r, my $res_w or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $go_w;
            close $res_r;
            $res_w->autoflush(1);
            my $f = $R->new($srv->address, $name, 200_000, 1e-9);
            srand($$);
            while (defined(my $l = <$go_r>)) {
                my ($r) = $l =~ /\AGO (\d+)/ or last;
                my @ids = @{ $round_ids[$r] };
                # this child's own order
                for my $i (reverse 1 .. $#ids) { my $j = int rand($i + 1); @ids[$i, $j] = @ids[$j, $i] }
                my @new;
                my $half = int(@ids / 2);
                $f->add_many([@ids[0 .. $half - 1]], \my @w);
                push @new, map { $w[$_] ? $ids[$_] : () } 0 .. $half - 1;
                for my $id (@ids[$half .. $#ids]) { push @new, $id if $f->add($id) }
                print $res_w "NEW $_\n" for @new;
                print $res_w "DONE $r\n";
            }
            POSIX::_exit(0);
        }
        close $go_r;
        close $res_w;
        $go_w->autoflush(1);
        push @kids, { pid => $pid, go => $go_w, res => $res_r };
    }
    my $coord = $R->new($srv->address, $name, 200_000, 1e-9);
    my ($twice, $missing, $wrong, $told) = (0, 0, 0, 0);
    for my $r (0 .. $rounds - 1) {
        print { $_->{go} } "GO $r\n" for @kids;
        my %new;
        for my $k (@kids) {
            my $fh = $k->{res};
            while (defined(my $l = <$fh>)) {
                last if $l =~ /\ADONE/;
                $new{$1}++ if $l =~ /\ANEW (\S+)/;
            }
        }
        my %prev = map { $_ => 1 } $r ? @{ $round_ids[$r - 1] } : ();
        for my $id (@{ $round_ids[$r] }) {
            my $want = $prev{$id} ? 0 : 1;
            my $got = $new{$id} // 0;
            $told += $got;
            $twice++ if $got > 1;
            $missing++ if $want && !$got;
            $wrong++ if !$want && $got;
        }
        $coord->rotate;
    }
    close $_->{go} for @kids;
    waitpid $_->{pid}, 0 for @kids;
    is $told, 500 + ($rounds - 1) * 250, "$rounds rounds of 4 processes: the expected number of ids told new";
    is $twice, 0, 'no id told new twice within its window';
    is $missing, 0, 'no id new in a round missed (none told seen when its window had passed)';
    is $wrong, 0, 'no id of the round before told new (none forgotten inside its window)';
}

# --- four processes, steps taken by the server's clock while they add ----------------------------
# window 1 s, 2 generations: for 3 s every child adds the same 40 ids over
# and over, in its own order, while the server steps every second
# inside their adds. Each add's call is bracketed by the instants read
# before and after it (the server's TIME is this host's clock): two "new"
# answers for one id whose calls both lie within one window of each other
# break exactly-once, however slow the host. An id re-added every few
# milliseconds is never forgotten, so it is told new once in all, unless
# the host stalled the children for a window (then the rule above still
# holds, and the count is only reported).
{
    my $name = 'timed-race';
    $R->new($srv->address, $name, 100_000, 1e-9, { window => 1, generations => 2 });
    my @ids = map { "t-$_" } 1 .. 40;
    my @kids;
    for my $child (0 .. 3) {
        pipe my $rd, my $wr or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $rd;
            my $f = $R->new($srv->address, $name, 100_000, 1e-9);
            srand($$);
            my @log;
            my $end = time + 3;
            while (time < $end) {
                for my $id (sort { rand() <=> 0.5 } @ids) {
                    my $t0 = time;
                    my $new = $f->add($id);
                    push @log, sprintf "%s %.6f %.6f\n", $id, $t0, time if $new;
                }
            }
            print $wr @log;
            close $wr;
            POSIX::_exit(0);
        }
        close $wr;
        push @kids, [$pid, $rd];
    }
    my %new;
    for my $k (@kids) {
        my $fh = $k->[1];
        while (my $l = <$fh>) {
            my ($id, $t0, $t1) = split ' ', $l;
            push @{ $new{$id} }, [$t0, $t1];
        }
        waitpid $k->[0], 0;
    }
    my ($twice, $more) = (0, 0);
    for my $id (@ids) {
        my @e = sort { $a->[0] <=> $b->[0] } @{ $new{$id} // [] };
        $more++ if @e > 1;
        for my $j (1 .. $#e) {
            $twice++ if $e[$j][1] < $e[$j - 1][0] + 1;
        }
    }
    is scalar(grep { $new{$_} } @ids), scalar @ids, 'every id told new to one of the processes';
    is $twice, 0, 'no id told new twice within one window, across the steps the server took';
    diag "$more ids told new again after the host stalled the adders for a window" if $more;
    my $s = $R->new($srv->address, $name, 100_000, 1e-9)->stats;
    cmp_ok $s->{generation}, '>=', 2, "the server stepped while they added (generation $s->{generation})";
}

# --- the bounds, measured against the server's clock ---------------------------------------------
# window 1 s, 2 generations: an item added at t is seen until at least
# t + 1 s and forgotten by t + 2 s. The server's TIME is the clock of this
# host (loopback), and a call runs between the instants read before and
# after it, so each check below holds however slow the host is.
{
    my $f = $R->new($srv->address, 'bounds', 10_000, 1e-9, { window => 1, generations => 2 });
    is $f->window, 1, 'window';
    is $f->generations, 2, 'generations';
    my (@added, $seen_early, $seen_late, $in_window, $past);
    my $end = time + 4;
    my $i = 0;
    while (time < $end) {
        my $t0 = time;
        $f->add("b-$i");
        push @added, [$i++, $t0, time];
        for my $a (@added) {
            my ($id, $a0, $a1) = @$a;
            my $q0 = time;
            my $got = $f->contains("b-$id");
            my $q1 = time;
            if ($q1 < $a0 + 1) { $in_window++; $seen_early++ if !$got }
            if ($q0 > $a1 + 2) { $past++;      $seen_late++ if $got }
        }
        sleep 0.05;
    }
    cmp_ok $in_window, '>', 0, "checks made inside items' windows ($in_window)";
    is $seen_early // 0, 0, 'no item missed inside its window (t + window)';
    cmp_ok $past // 0, '>', 0, "checks made after items' upper bound (" . ($past // 0) . ')';
    is $seen_late // 0, 0, 'no item seen after t + window * g / (g - 1)';
    my $s = $f->stats;
    is $s->{window}, 1, 'stats: window';
    is $s->{generations}, 2, 'stats: generations';
    cmp_ok $s->{generation}, '>=', 3, 'stats: generation counts periods since creation';
    ok $s->{generation_start} <= time && $s->{generation_start} > time - 10, 'stats: generation_start is recent';
}

# --- an idle filter: the server frees its generations with no client running ---------------------
# In a database of its own, so that DBSIZE counts only its keys.
{
    my $addr = 'redis://' . $srv->address . '/3';
    my $db = $srv->client;
    $db->select(3);
    # A window of 3 s: the key lives at most 6 s, which the checks up to
    # DBSIZE take, however slow the host (a 1 s window left them 2 s).
    my $f = $R->new($addr, 'idle', 10_000, 0.01, { window => 3, generations => 2 });
    $f->add_many([map { "i-$_" } 1 .. 100]);
    my @k = gen_keys('idle', $db);
    is scalar @k, 1, 'one generation key after the adds';
    my $ttl = $db->pttl($k[0]);
    ok $ttl > 0 && $ttl <= 6000, "the generation key expires within window * g / (g - 1) ($ttl ms)";
    undef $f;
    # DBSIZE reads no key (EXISTS would expire it itself): the count falls
    # only when the server's own expiry cycle (ten times a second) frees
    # it. 6 s is enough; the deadline is wide for a loaded host.
    is $db->dbsize, 2, 'the metadata and one generation';
    my $until = time + 60;
    sleep 0.1 while $db->dbsize > 1 && time < $until;
    is $db->dbsize, 1, 'the server freed the generation key by itself';
    is $db->exists($k[0]), 0, 'it is gone';
    is $db->exists('{idle}:meta'), 1, 'the metadata stays';
    my $g = $R->new($addr, 'idle', 10_000, 0.01);
    is $g->contains('i-1'), 0, 'reopened: the items are forgotten';
    is $g->add('i-1'), 1, 'and new again';
}

# --- kill -9 with appendfsync always: no acknowledged add lost -------------------------------------
{
    my $d = RedisServer->new(appendonly => 'yes', appendfsync => 'always');
    $R->new($d->address, 'durable', 2_000_000, 0.001, { window => 3600, generations => 4 });
    my @acked = $d->acked_until_kill(sub { $R->new($d->address, 'durable', 2_000_000, 0.001) }, 20);
    cmp_ok scalar @acked, '>=', 20 * 200, 'at least 20 batches acknowledged before the kill';
    $d->start;    # the same directory: it replays its append-only file
    my $f = $R->new($d->address, 'durable', 2_000_000, 0.001);
    is $f->window, 3600, 'after the restart: the window is kept';
    is scalar $f->contains_many(\@acked), scalar @acked, 'every acknowledged add of the current window is there';
    is $f->add($acked[0]), 0, 'and an acknowledged item is not new';
    $d->stop('TERM');
}

# --- options, reopening, what is not supported ----------------------------------------------------
{
    my $a = $srv->address;
    $R->new($a, 'opts', 1000, 0.01, { window => 2 });
    my $p = $R->new($a, 'opts', 1000, 0.01);
    is $p->window, 2, 'opened without window options: the filter keeps its window';
    is $p->generations, 4, 'and its default 4 generations';
    ok eval { $R->new($a, 'opts', 1000, 0.01, { window => 2 }) }, 'the same window without generations opens it';
    dies_like { $R->new($a, 'opts', 1000, 0.01, { window => 3 }) }
        qr/->new: window mismatch \(the filter has window 2s, 4 generations, not window 3s, 4 generations\)/,
        'a different window croaks';
    dies_like { $R->new($a, 'opts', 1000, 0.01, { window => 2, generations => 3 }) }
        qr/->new: window mismatch \(the filter has window 2s, 4 generations, not window 2s, 3 generations\)/,
        'different generations croak';
    dies_like { $R->new($a, 'opts', 1000, 0.01, { window => undef }) }
        qr/window mismatch \(the filter has window 2s, 4 generations, not manual steps, 4 generations\)/,
        'no window for a timed filter croaks';
    $R->new($a, 'g3', 1000, 0.01, { window => 5, generations => 3 });
    is $R->new($a, 'g3', 1000, 0.01, { window => 5 })->generations, 3,
        'a window without generations opens a filter of any number of generations';
    # maxmemory: the generations' bytes are checked at creation
    my $used = $rc->info('memory')->{used_memory};
    $rc->config('set', 'maxmemory', $used + (4 << 20));
    dies_like { $R->new($a, 'big', 10_000_000, 0.01, { window => 60 }) }
        qr/->new: OOM: the filter's generations need \d+ bytes but the server uses/, 'generations past maxmemory croak at creation';
    $rc->config('set', 'maxmemory', 0);
    ok !$rc->exists('{big}:meta'), 'and create nothing';
    $R->new($a, 'plainf', 1000, 0.01);
    dies_like { $R->new($a, 'plainf', 1000, 0.01, { window => 2 }) }
        qr/window mismatch \(the filter has no window, not window 2s, 4 generations\)/, 'a window for a plain filter croaks';
    dies_like { $R->new($a, 'plainf', 1000, 0.01)->rotate } qr/->rotate: not a windowed filter/, 'rotate on a plain filter';
    is $R->new($a, 'plainf', 1000, 0.01)->window, undef, 'a plain filter has no window';
    dies_like { $R->new($a, 'x1', 1000, 0.01, { window => 2, shards => 2, layout => 'blocked' }) }
        qr/->new: shards are not supported with window/, 'shards with a window';
    dies_like { $R->new($a, 'opts', 1000, 0.01, { shards => 2, layout => 'blocked' }) }
        qr/->new: shards mismatch: the filter in Redis has shards 1, asked for 2/, 'shards asked of a windowed filter';
    ok !$rc->exists('{opts:0}:meta'), 'and no sharded filter made beside it';
    dies_like { $R->new($a, 'x2', 1000, 0.01, { window => 0.0001 }) } qr/->new: window must be from 0.001/, 'too short a window';
    dies_like { $R->new($a, 'x3', 1000, 0.01, { window => -1 }) } qr/->new: window must be a positive number/, 'a negative window';
    dies_like { $R->new($a, 'x4', 1000, 0.01, { window => 1, generations => 17 }) } qr/->new: generations must be an integer from 2 to 16/, 'generations 17';
    ok !$rc->exists("{$_}:meta"), "nothing created for a refused $_" for qw(x1 x2 x3 x4);
    dies_like { $p->to_filter(undef) } qr/->to_filter: not supported for a windowed filter/, 'to_filter';
    dies_like { $p->merge($p) } qr/->merge: not supported for a windowed filter/, 'merge';
    dies_like { $p->rotate(1) } qr/->rotate: takes no arguments/, 'rotate with an argument';
    # clear and is_empty
    $p->add_many([qw(a b c)]);
    $p->rotate;
    $p->add('d');
    is $p->is_empty, 0, 'not empty';
    is $p->bits_set, $p->hashes, "bits_set counts the current generation's bits (one item)";
    $p->clear;
    is $p->is_empty, 1, 'empty after clear';
    is scalar(gen_keys('opts')), 0, 'clear dropped every generation key';
    is $p->add('a'), 1, 'an item is new after clear';
    is $p->window, 2, 'clear keeps the window';
    # the script dropped from the server's cache: sent again whole
    $rc->script_flush;
    is $p->add('e'), 1, 'an add after SCRIPT FLUSH';
    is $p->contains('e'), 1, 'and a query';
    # the metadata deleted under an open filter: refused, nothing added
    $rc->del('{opts}:meta');
    dies_like { $p->add('f') } qr/->add: GONE key \{opts\}:meta is gone or no longer a windowed filter/, 'an add to a deleted filter croaks';
    is scalar(gen_keys('opts')), 1, 'and wrote nothing';
}

# --- a client of another kind, driven through its methods -------------------------------------------
{
    package Local::Wrap;
    our $AUTOLOAD;
    sub new { bless { r => $_[1] }, $_[0] }
    sub ping { shift->{r}->ping(@_) }
    sub wait_all_responses { shift->{r}->wait_all_responses }
    sub AUTOLOAD { my $m = $AUTOLOAD =~ s/.*:://r; return if $m eq 'DESTROY'; shift->{r}->$m(@_) }
    package main;
    my $c = Local::Wrap->new($srv->client);
    my $f = $R->new($c, 'wrapped', 1000, 0.01, { window => undef, generations => 2 });
    is $f->add_many([qw(a b c)], \my @w), 3, 'through a client\'s methods: a batch';
    is "@w", '1 1 1', 'each new';
    is $f->add('a'), 0, 'a single add of one held';
    $rc->script_flush;
    is $f->contains('b'), 1, 'a query after SCRIPT FLUSH (sent again whole)';
    $f->rotate;
    $f->rotate;
    is $f->contains('a'), 0, 'forgotten after two rotations';
}

# --- a 3-master cluster: one slot, the scripts run there whole --------------------------------------
SKIP: {
    skip 'redis-cli is not installed (Debian: redis-tools)', 6
        if !grep { -x "$_/redis-cli" } split(/:/, $ENV{PATH} // ''), '/usr/bin';
    my ($status, $out, $nodes, $c) = RedisServer->cluster(3);
    is $status, 0, 'redis-cli --cluster create' or diag $out;
    my @c = @$c;
    # A name whose slot is not on the first node: every script is redirected.
    my $name = RedisServer::name_off_first($nodes, $c, 'cw');
    my $f = $R->new($nodes->[0]->address, $name, 10_000, 1e-9, { window => undef, generations => 2 });
    my @ids = map { "c-$_" } 1 .. 500;
    is $f->add_many(\@ids), 500, 'cluster: a batch of new items';
    is $f->add_many(\@ids), 0, 'told seen';
    $f->rotate;
    is scalar $f->contains_many(\@ids), 500, 'seen after one rotation (2 generations)';
    $f->rotate;
    is $f->add_many(\@ids), 500, 'new again after two';
    my ($owner) = grep { eval { $_->exists("{$name}:meta") } } @c;    # the others answer MOVED
    is scalar(gen_keys($name, $owner)), 1, "the generation keys are on the metadata's node";
}

done_testing;
