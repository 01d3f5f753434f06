#!/usr/bin/perl
# Data::BloomFilter::Shared::Redis from one Perl process against one
# redis-server, in one run, for each kind of filter (@KINDS: plain, and
# windowed with 4 generations, three older ones holding a batch row's items
# each, so that a windowed add checks them all) made two ways (@VIA: from
# the address, whose commands go over a socket of the module's own, and
# with a Redis::Fast client passed in, whose socket it borrows):
#   - a single add / contains as a ratio to a PING round trip through the
#     same Redis::Fast client, timed in the same blocks (goal: add <= 1.5x
#     PING, and a windowed one as near a plain one as it gets);
#   - adds of new items and queries of the items added, in batches of 1000
#     (add_many, contains_many), in items per second, and each row's as a
#     ratio to the plain row made the same way, timed in the same
#     repetition (goal: a windowed batch within 2x a plain one);
#   - the server's own time per command (INFO commandstats usec_per_call,
#     CONFIG RESETSTAT before each row and operation, in a pass of its own
#     after the timed ones), and the server's time per item of the row's
#     own commands (a script's nested commands are counted in its time);
#   - for scale: the same client's pipelined ECHOs (the cheapest command),
#     the plain BITFIELD commands encoded before the clock starts and
#     written to a plain socket (no client library: what the server allows
#     any client), and the floor of a windowed batch: a bare script
#     (EVALSHA of 'return 0') carrying a windowed command's arguments, in
#     server time per item;
#   - a filter that grows, grown to 10 times its first capacity (grow 2),
#     beside a plain filter of the same final size holding the same items:
#     batch queries of held and absent items and adds of the held items
#     again, from the address, in items per second and as a ratio (goal:
#     within 2x).
# Both layouts, at fp rates 0.01 and 0.001.
#
#   perl -Mblib bench/redis.pl [--quick] [--grown] [--server HOST:PORT]
#
# --grown: the rows of a filter that grows only.
#
# Without --server it starts redis-server (Debian: redis-server) on a free
# loopback port in a temporary directory, without persistence, and stops it.
# Batch rows are timed $REPS times, all rows in turn in each repetition,
# the median printed; single calls in blocks (see below).
# Times are wall-clock: the server is another process, whose time counts.
#
# Another kind of filter is one more entry of @KINDS: its name, its options
# for new, and what fills it before the rows are timed.
use 5.022;
use strict;
use warnings;

use Getopt::Long;
use IO::Socket::INET ();
use Socket ();
use POSIX ();
use Time::HiRes qw(time sleep);

use FindBin ();
use lib "$FindBin::Bin/lib";
use BenchUtil qw(redis_server);
use Data::BloomFilter::Shared::Redis;
use Redis::Fast;

$| = 1;
GetOptions('quick' => \my $quick, 'server=s' => \my $server, 'grown' => \my $grown_only)
    or die "usage: perl -Mblib bench/redis.pl [--quick] [--grown] [--server HOST:PORT]\n";

my $REPS   = $quick ? 3 : 5;
my $SINGLE = $quick ? 10_000 : 40_000;    # single calls of each kind per row
my $BLOCK  = 100;                         # ... timed in blocks of this many
my $ITEMS  = $quick ? 50_000 : 200_000;   # items per batch row
my $BATCH  = 1000;
my $STATS  = 2000;                        # single calls per row in the server-time pass

$server = redis_server($server);

my $redis = Redis::Fast->new(server => $server, reconnect => 0);
my $raw = IO::Socket::INET->new(PeerAddr => $server, Proto => 'tcp') or die "connect: $!";
$raw->setsockopt(Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1);
my $version = $redis->info('server')->{redis_version};
say "redis-server $version at $server; Perl $^V; ", `nproc` =~ s/\s+//r, ' CPUs; load ',
    (split ' ', `cat /proc/loadavg`)[0];

sub median { my @s = sort { $a <=> $b } @_; $s[@s / 2] }

my $run = 0;
sub items { my ($n) = @_; $run++; [map { "bench-$run-$_" } 1 .. $n] }

# The kinds of filter: a name, the options of new beside the layout, what
# fills a filter before timing (given one made from the address), and
# the commands of the row's own (the others run inside them), and those
# of a batch query where they differ (a windowed one reads without a
# script: its one HMGET per batch, also a script's first command, is left
# out).
my @KINDS = (
    { name => 'plain', opts => {}, own => [qw(bitfield bitfield_ro)] },
    {   name => 'windowed g=4', opts => { window => 3600, generations => 4 }, own => [qw(evalsha eval)],
        own_query => [qw(bitfield_ro time)],
        # Three older generations of a batch row's items each: a windowed
        # add checks them all.
        fill => sub {
            my ($f) = @_;
            for (1 .. 3) {
                my $it = items($ITEMS);
                $f->add_many([splice @$it, 0, $BATCH]) while @$it;
                $f->rotate;
            }
        },
    },
);
# How a filter is made: from the address, or with the client passed in.
my @VIA = (['address', sub { $server }], ['client', sub { $redis }]);

# The server's commands since the last CONFIG RESETSTAT: name => [calls,
# usec_per_call], the bench's own left out.
sub server_stats {
    my $info = $redis->info('commandstats');
    my %s;
    for my $k (keys %$info) {
        my ($cmd) = $k =~ /\Acmdstat_(\S+)\z/ or next;
        next if $cmd =~ /\A(?:config|info|ping|echo)\b/;
        my ($calls) = $info->{$k} =~ /calls=(\d+)/;
        my ($us) = $info->{$k} =~ /usec_per_call=([0-9.]+)/;
        $s{$cmd} = [$calls, $us] if $calls;
    }
    return \%s;
}

# The RESP encoding of one command.
sub resp { join '', '*' . @_ . "\r\n", map { '$' . length($_) . "\r\n$_\r\n" } @_ }

# Items per second of pre-encoded batches (each a string of commands whose
# replies hold $fields integers in all) through the plain socket.
sub server_alone {
    my ($batches, $fields, $items) = @_;
    my $t0 = time;
    for my $b (@$batches) {
        my $off = 0;
        while ($off < length $b) {
            my $w = syswrite $raw, $b, length($b) - $off, $off;
            die "write: $!" if !defined $w;
            $off += $w;
        }
        # Replies: one array header per command, one integer line per field.
        my ($buf, $lines) = ('', 0);
        my $want = $fields->{$b};
        while ($lines < $want) {
            my $r = sysread $raw, $buf, 1 << 20;
            die "read: $!" if !$r;
            $lines += ($buf =~ tr/\n//);
        }
    }
    return $items / (time - $t0);
}

for my $layout ('standard', 'blocked') {
for my $fp (0.01, 0.001) {
    $redis->flushall;
    say "\n$layout, fp_rate $fp" if $grown_only;
    if (!$grown_only) {
        # The rows: every kind made every way; filters of one kind share their
        # keys.
        my @rows;
        for my $kind (@KINDS) {
            my $key = 'bench-' . ($kind->{name} =~ s/\W+/-/gr);
            for my $via (@VIA) {
                my $f = Data::BloomFilter::Shared::Redis->new($via->[1]->(), $key, 2_000_000, $fp,
                    { layout => $layout, %{ $kind->{opts} } });
                push @rows, { kind => $kind, via => $via->[0], f => $f, name => "$kind->{name}, $via->[0]" };
            }
            $kind->{fill}->($rows[-2]{f}) if $kind->{fill};
        }
        my %plain = map { $_->{via} => $_ } grep { $_->{kind} == $KINDS[0] } @rows;
        my $f = $rows[0]{f};
        say '';
        say sprintf '%s, fp_rate %s: k = %d probes, m = %.1f Mbit, a query reads %d %s', $layout, $fp,
            $f->hashes, $f->bits / 1e6, $f->{fields}, $layout eq 'blocked' ? '64-bit fields' : 'bits';

        # Single calls: blocks of $BLOCK PINGs, then each row's adds and
        # contains, in turn, so that load from elsewhere hits all alike; the
        # ratio is taken per block, and its median reported.
        my (%t, @ping);
        my $single = items($SINGLE);
        while (my @block = splice @$single, 0, $BLOCK) {
            my $t0 = time;
            $redis->ping for @block;
            my $ping = time - $t0;
            push @ping, $ping / @block;
            for my $r (@rows) {
                my $rf = $r->{f};
                $t0 = time;
                $rf->add($_) for @block;
                my $add = time - $t0;
                $t0 = time;
                $rf->contains($_) for @block;
                my $contains = time - $t0;
                push @{ $r->{add} }, $add / $ping;
                push @{ $r->{contains} }, $contains / $ping;
            }
        }
        # Batches: each row on new items and then the same ones again, every
        # row in each repetition.
        for (1 .. $REPS) {
            my $t0 = time;
            for my $b (1 .. $ITEMS / $BATCH) {
                $redis->echo('x', sub { }) for 1 .. $BATCH;
                $redis->wait_all_responses;
            }
            push @{ $t{echos} }, $ITEMS / (time - $t0);
            for my $r (@rows) {
                my @batches;
                my $it = items($ITEMS);
                push @batches, [splice @$it, 0, $BATCH] while @$it;
                $t0 = time;
                $r->{f}->add_many($_) for @batches;
                $r->{rep}{add_many} = $ITEMS / (time - $t0);
                $t0 = time;
                scalar $r->{f}->contains_many($_) for @batches;
                $r->{rep}{contains_many} = $ITEMS / (time - $t0);
            }
            for my $r (@rows) {
                for my $op ('add_many', 'contains_many') {
                    push @{ $r->{$op} }, $r->{rep}{$op};
                    push @{ $r->{"${op}_x"} }, $plain{ $r->{via} }{rep}{$op} / $r->{rep}{$op};
                }
            }

            # The server alone, on new items and on the same items again.
            my $alone = items($ITEMS);
            for my $verb (1, 0) {
                my (@enc, %fields);
                my $it = [@$alone];
                while (my @b = splice @$it, 0, $BATCH) {
                    my ($cmds, $lines) = ('', 0);
                    while (my @c = splice @b, 0, 100) {
                        my @a = Data::BloomFilter::Shared::Redis::_xs_args($verb,
                            $f->_geo, \@c, undef, \my $masks);
                        $cmds .= resp($verb ? 'BITFIELD' : 'BITFIELD_RO', $f->{bitskey}, @a);
                        $lines += 1 + @a / ($verb ? 4 : 3);
                    }
                    push @enc, $cmds;
                    $fields{$cmds} = $lines;
                }
                push @{ $t{ $verb ? 'alone_add' : 'alone_contains' } }, server_alone(\@enc, \%fields, $ITEMS);
            }
        }

        # The server's time, each row and operation alone (CONFIG RESETSTAT
        # before it): per command, and per item of the row's own commands.
        for my $r (@rows) {
            my $it = items($STATS > $ITEMS ? $STATS : $ITEMS);
            my @single = @$it[0 .. $STATS - 1];
            my @batches;
            push @batches, [@$it[$_ * $BATCH .. ($_ + 1) * $BATCH - 1]] for 0 .. $ITEMS / $BATCH - 1;
            for my $op (
                ['add',           $STATS, sub { $r->{f}->add($_) for @single }],
                ['contains',      $STATS, sub { $r->{f}->contains($_) for @single }],
                ['add_many',      $ITEMS, sub { $r->{f}->add_many($_) for @batches }],
                ['contains_many', $ITEMS, sub { scalar $r->{f}->contains_many($_) for @batches }],
                )
            {
                my ($name, $n, $code) = @$op;
                $redis->config('resetstat');
                $code->();
                my $s = server_stats();
                my $us = 0;
                my $own = $name eq 'contains_many' && $r->{kind}{own_query} || $r->{kind}{own};
                $us += $_->[0] * $_->[1] for @$s{ grep { $s->{$_} } @$own };
                $r->{server}{$name} = { per_item => $us / $n, cmds => $s };
            }
        }

        # The floor of a windowed batch: a script that does nothing, carrying a
        # windowed add's arguments for a command of 100 items, per item.
        my %floor;
        {
            my $sha = $redis->script_load('return 0');
            my $it = items(100 * 20);
            $redis->config('resetstat');
            while (my @c = splice @$it, 0, 100) {
                my @a = Data::BloomFilter::Shared::Redis::_xs_args(1, $f->_geo, \@c, undef, \my $masks);
                $redis->evalsha($sha, 1, 'bench-floor', $f->hashes, 1, @a);
            }
            $floor{set_args} = server_stats()->{evalsha}[1] / 100;
            $it = items(100 * 20);
            $redis->config('resetstat');
            while (my @c = splice @$it, 0, 100) {
                my @a = Data::BloomFilter::Shared::Redis::_xs_args(1, $f->_geo, \@c, undef, \my $masks);
                $redis->evalsha($sha, 1, 'bench-floor', $f->hashes, 1, @a[grep { $_ % 4 == 2 } 0 .. $#a]);
            }
            $floor{offsets} = server_stats()->{evalsha}[1] / 100;
            # A single call's: the script alone, and what each redis.call in a
            # script costs (a windowed add of a new item at g = 4 makes six:
            # HMGET, TIME, its SET, a read of each older generation).
            $redis->config('resetstat');
            $redis->evalsha($sha, 1, 'bench-floor', $f->hashes, 1, (1) x (4 * $f->hashes)) for 1 .. 2000;
            $floor{single} = server_stats()->{evalsha}[1];
            my $calls = $redis->script_load("for i = 1, 10 do redis.call('EXISTS', KEYS[1]) end return 0");
            $redis->config('resetstat');
            $redis->evalsha($calls, 1, 'bench-floor') for 1 .. 2000;
            $floor{call} = (server_stats()->{evalsha}[1] - $floor{single}) / 10;
        }

        my %m = map { $_ => median(@{ $t{$_} }) } keys %t;
        printf "  PING round trip %.1f us (median of blocks of %d); pipelined ECHOs %.0f /s\n", median(@ping) * 1e6,
            $BLOCK, $m{echos};
        printf "  %-26s %6s %9s %9s %7s %9s %7s  %s\n", 'row', 'add', 'contains', 'add_many', '', 'cont_many', '',
            'server us per item: add contains add_many contains_many';
        printf "  %-26s %6s %9s %9s %7s %9s %7s\n", '', 'xPING', 'xPING', 'items/s', 'xplain', 'items/s', 'xplain';
        for my $r (@rows) {
            printf "  %-26s %6.2f %9.2f %9.0f %7.2f %9.0f %7.2f  %.2f %.2f %.3f %.3f\n", $r->{name},
                median(@{ $r->{add} }), median(@{ $r->{contains} }),
                median(@{ $r->{add_many} }), median(@{ $r->{add_many_x} }),
                median(@{ $r->{contains_many} }), median(@{ $r->{contains_many_x} }),
                map { $r->{server}{$_}{per_item} } qw(add contains add_many contains_many);
        }
        say '  server usec_per_call by command (calls), each row and operation after CONFIG RESETSTAT:';
        for my $r (@rows) {
            for my $op (qw(add contains add_many contains_many)) {
                my $s = $r->{server}{$op}{cmds};
                printf "    %-26s %-14s %s\n", $r->{name}, $op,
                    join ', ', map { sprintf '%s %.2f (%d)', $_, $s->{$_}[1], $s->{$_}[0] } sort keys %$s;
            }
        }
        printf "  the server alone (plain BITFIELD): adds %.0f items/s, queries %.0f items/s\n", $m{alone_add},
            $m{alone_contains};
        printf "  floor of a windowed command, server us per item: a bare EVALSHA with the items' BITFIELD arguments"
            . " %.2f, with their offsets only %.2f\n", $floor{set_args}, $floor{offsets};
        printf "  floor of a windowed single call: a bare EVALSHA with one item's arguments %.2f us, and %.2f us"
            . " per redis.call in a script\n", $floor{single}, $floor{call};
    }

    # A filter that grows, grown to 10 times its first capacity (4 stages
    # at grow 2), beside a plain filter of the same final size (the
    # capacity whose bits come nearest the stages' together): queries of
    # the items held and of absent ones, adds of the items held again and
    # of new ones (both filters the same; not enough to add a stage), from
    # the address, in items per second (median of $REPS).
    {
        my $c = $ITEMS / 10;
        my $g = Data::BloomFilter::Shared::Redis->new($server, "gbench", $c, $fp, { layout => $layout, grow => 2 });
        my $held = items(10 * $c);
        $g->add_many([@$held[$_ * $BATCH .. ($_ + 1) * $BATCH - 1]]) for 0 .. @$held / $BATCH - 1;
        my $want = $g->bits;
        my ($lo, $hi) = (1, 100 * $ITEMS);
        while ($hi - $lo > 1) {
            my $mid = int(($lo + $hi) / 2);
            (Data::BloomFilter::Shared::Redis::_xs_geometry($layout, $mid, $fp))[0] < $want ? ($lo = $mid) : ($hi = $mid);
        }
        my $p = Data::BloomFilter::Shared::Redis->new($server, "gplain", $hi, $fp, { layout => $layout });
        $p->add_many([@$held[$_ * $BATCH .. ($_ + 1) * $BATCH - 1]]) for 0 .. @$held / $BATCH - 1;
        my $absent = items(scalar @$held);
        my @runs = (['held', 'contains_many', sub { $held }], ['absent', 'contains_many', sub { $absent }],
            ['again', 'add_many', sub { $held }], ['new', 'add_many', sub { $_[0] eq 'grown' ? items(int($c / 2 / $BATCH) * $BATCH) : $_[1] }]);
        # One pass: every run on each filter ($each gets the tag, the run's
        # name and a sub that runs its batches; both filters add the same
        # new items).
        my $pass = sub {
            my ($each) = @_;
            my $new;
            for my $via (['grown', $g], ['plain', $p]) {
                my ($tag, $filter) = @$via;
                for my $run (@runs) {
                    my ($what, $op, $items) = @$run;
                    my $it = $items->($tag, $new);
                    $new = $it if $what eq 'new';
                    $each->($tag, $what, scalar @$it,
                        sub { scalar $filter->$op([@$it[$_ * $BATCH .. ($_ + 1) * $BATCH - 1]]) for 0 .. @$it / $BATCH - 1 });
                }
            }
        };
        my %r;
        for (1 .. $REPS) {
            $pass->(sub {
                my ($tag, $what, $n, $batches) = @_;
                my $t0 = time;
                $batches->();
                push @{ $r{"$tag $what"} }, $n / (time - $t0);
            });
        }
        # The server's time per item of each, one more pass each alone
        # (CONFIG RESETSTAT before it): the time of the commands the client
        # sent (scripts, BITFIELD_RO; not the commands a script runs, which
        # its time holds, nor the one HMGET per batch read, also a script's
        # first command) over the items.
        my %us;
        $pass->(sub {
            my ($tag, $what, $n, $batches) = @_;
            $redis->config('resetstat');
            $batches->();
            my $st = server_stats();
            my $total = 0;
            my @own = $tag eq 'grown' ? qw(evalsha eval bitfield_ro) : @{ $KINDS[0]{own} };
            $total += $_->[0] * $_->[1] for @$st{ grep { $st->{$_} } @own };
            $us{"$tag $what"} = $total / $n;
        });
        my %m = map { $_ => median(@{ $r{$_} }) } keys %r;
        my $ks = $g->stats->{stage_info};
        my $fields = 0;
        $fields += $_->{hashes} for @$ks;
        printf "  grown (after 10x capacity, %d stages, %.1f Mbit) vs plain of the same size (%.1f Mbit), own socket:\n",
            $g->stages, $want / 1e6, $p->bits / 1e6;
        printf "    probes of an absent item: %d (every stage: %s) against the plain filter's %d\n", $fields,
            join('+', map { $_->{hashes} } @$ks), $p->hashes;
        printf "    %-24s %9s %9s %7s  %s\n", 'items/s', 'grown', 'plain', 'ratio', 'server us per item: grown, plain, ratio';
        printf "    %-24s %9.0f %9.0f %6.2fx  %.2f %.2f %.2fx\n", $_->[1], $m{"grown $_->[0]"}, $m{"plain $_->[0]"},
            $m{"plain $_->[0]"} / $m{"grown $_->[0]"}, $us{"grown $_->[0]"}, $us{"plain $_->[0]"},
            $us{"grown $_->[0]"} / ($us{"plain $_->[0]"} || 1)
            for ['held', 'contains_many, held'], ['absent', 'contains_many, absent'], ['again', 'add_many, held again'],
            ['new', 'add_many, new'];
    }
}
}
