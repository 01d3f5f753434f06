#!/usr/bin/perl
# Data::BloomFilter::Shared::Redis from one Perl process against one
# redis-server:
#   - a single add / contains as a ratio to a PING round trip through the
#     same Redis::Fast client, timed in the same run (goal: add <= 1.5x PING);
#   - adds of new items and queries of the items added, in batches of 1000
#     (add_many, contains_many), in items per second: through a Redis::Fast
#     client passed in, and from a filter made from the address (whose
#     batches go over a socket of its own). Goals: 300 000 adds/s and
#     500 000 contains/s. For scale, the same client's pipelined ECHOs in
#     batches of 1000 (the cheapest command);
#   - the server alone: the same BITFIELD commands, encoded before the clock
#     starts, written to a plain socket a batch at a time and their replies
#     read back (no client library): what the server allows any client;
#   - a windowed filter (window 3600 s, 4 generations, three older ones
#     holding a batch row's items each) beside the plain one: its single calls
#     as a ratio to PING, its batches in items per second and as a ratio to
#     the plain filter's in the same repetition (goal: batches within 2x),
#     and the server's own time per call (INFO commandstats usec_per_call)
#     of its script (EVALSHA) and of the plain filter's BITFIELD, with the
#     time per item of each.
# Both layouts, at fp rates 0.01 and 0.001.
#
#   perl -Mblib bench/redis.pl [--quick] [--server HOST:PORT]
#
# Without --server it starts redis-server (Debian: redis-server) on a free
# loopback port in a temporary directory, without persistence, and stops it.
# Batch rows are timed $REPS times, interleaved, the median printed; single
# calls in blocks (see below).
# Times are wall-clock: the server is another process, whose time counts.
use 5.022;
use strict;
use warnings;

use File::Temp qw(tempdir);
use Getopt::Long;
use IO::Socket::INET ();
use Socket ();
use POSIX ();
use Time::HiRes qw(time sleep);

use Data::BloomFilter::Shared::Redis;
use Redis::Fast;

$| = 1;
GetOptions('quick' => \my $quick, 'server=s' => \my $server)
    or die "usage: perl -Mblib bench/redis.pl [--quick] [--server HOST:PORT]\n";

my $REPS   = $quick ? 3 : 5;
my $SINGLE = $quick ? 10_000 : 40_000;    # single calls of each kind
my $BLOCK  = 100;                         # ... timed in blocks of this many
my $ITEMS  = $quick ? 50_000 : 200_000;   # items per batch row
my $BATCH  = 1000;

my $pid;
if (!defined $server) {
    my $s = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0) or die "port: $!";
    my $port = $s->sockport;
    close $s;
    my $dir = tempdir(CLEANUP => 1);
    $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', '/dev/null';
        { exec 'redis-server', '--port', $port, '--bind', '127.0.0.1', '--dir', $dir,
            '--save', '', '--appendonly', 'no', '--logfile', "$dir/log" }
        POSIX::_exit(127);
    }
    $server = "127.0.0.1:$port";
    my $until = time + 10;
    until (eval { Redis::Fast->new(server => $server, reconnect => 0)->ping }) {
        die "redis-server did not start\n" if time > $until;
        sleep 0.05;
    }
}
END { if ($pid) { kill 'TERM', $pid; waitpid $pid, 0 } }

my $redis = Redis::Fast->new(server => $server, reconnect => 0);
my $raw = IO::Socket::INET->new(PeerAddr => $server, Proto => 'tcp') or die "connect: $!";
$raw->setsockopt(Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1);
my $version = $redis->info('server')->{redis_version};
say "redis-server $version at $server; Perl $^V; ", `nproc` =~ s/\s+//r, ' CPUs; load ',
    (split ' ', `cat /proc/loadavg`)[0];

sub median { my @s = sort { $a <=> $b } @_; $s[@s / 2] }

my $run = 0;
sub items { my ($n) = @_; $run++; [map { "bench-$run-$_" } 1 .. $n] }

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
    my $f = Data::BloomFilter::Shared::Redis->new($redis, "bench", 2_000_000, $fp, { layout => $layout });
    my $fa = Data::BloomFilter::Shared::Redis->new($server, "bench", 2_000_000, $fp, { layout => $layout });
    my %wopt = (layout => $layout, window => 3600, generations => 4);
    my $w = Data::BloomFilter::Shared::Redis->new($redis, "wbench", 2_000_000, $fp, \%wopt);
    my $wa = Data::BloomFilter::Shared::Redis->new($server, "wbench", 2_000_000, $fp, \%wopt);
    # Three older generations of a batch row's items each: a windowed add
    # checks them all.
    for (1 .. 3) {
        my $it = items($ITEMS);
        $wa->add_many([splice @$it, 0, $BATCH]) while @$it;
        $wa->rotate;
    }
    say '';
    say sprintf '%s, fp_rate %s: k = %d probes, m = %.1f Mbit, a query reads %d %s', $layout, $fp,
        $f->hashes, $f->bits / 1e6, $f->{fields}, $layout eq 'blocked' ? '64-bit fields' : 'bits';

    my %t;
    # Single calls: blocks of $BLOCK PINGs, adds and contains in turn, so
    # that load from elsewhere hits all three alike; the ratio is taken per
    # block, and its median reported.
    my $single = items($SINGLE);
    while (my @block = splice @$single, 0, $BLOCK) {
        my $t0 = time;
        $redis->ping for @block;
        my $ping = time - $t0;
        $t0 = time;
        $f->add($_) for @block;
        my $add = time - $t0;
        $t0 = time;
        $f->contains($_) for @block;
        my $contains = time - $t0;
        $t0 = time;
        $w->add($_) for @block;
        my $wadd = time - $t0;
        $t0 = time;
        $w->contains($_) for @block;
        my $wcontains = time - $t0;
        push @{ $t{wadd_ratio} }, $wadd / $ping;
        push @{ $t{wcontains_ratio} }, $wcontains / $ping;
        push @{ $t{ping} }, $ping / @block;
        push @{ $t{add_ratio} }, $add / $ping;
        push @{ $t{contains_ratio} }, $contains / $ping;
    }
    for (1 .. $REPS) {
        my $t0;

        $t0 = time;
        for my $b (1 .. $ITEMS / $BATCH) {
            $redis->echo('x', sub { }) for 1 .. $BATCH;
            $redis->wait_all_responses;
        }
        push @{ $t{pings} }, $ITEMS / (time - $t0);
        # The client passed in, then the filter's own socket (made from
        # the address), each on new items and then the same ones again.
        for my $via (['', $f], ['_own', $fa], ['_w', $w], ['_w_own', $wa]) {
            my ($tag, $filter) = @$via;
            my @batches;
            my $it = items($ITEMS);
            push @batches, [splice @$it, 0, $BATCH] while @$it;
            $t0 = time;
            $filter->add_many($_) for @batches;
            push @{ $t{"add_many$tag"} }, $ITEMS / (time - $t0);
            $t0 = time;
            scalar $filter->contains_many($_) for @batches;
            push @{ $t{"contains_many$tag"} }, $ITEMS / (time - $t0);
        }
        for my $op ('add_many', 'contains_many') {
            push @{ $t{"${op}_wratio"} }, $t{"${op}_own"}[-1] / $t{"${op}_w_own"}[-1];
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
    # The server's time per call of the script and of BITFIELD, over one
    # more batch row of each filter (a batch's command carries 100 items).
    # (Each alone: the script's own BITFIELDs are counted as BITFIELDs.)
    my %us;
    for my $run (['bitfield', $fa], ['evalsha', $wa]) {
        my ($cmd, $filter) = @$run;
        $redis->config('resetstat');
        my $it = items($ITEMS);
        $filter->add_many([splice @$it, 0, $BATCH]) while @$it;
        ($us{$cmd}) = ($redis->info('commandstats')->{"cmdstat_$cmd"} // '') =~ /usec_per_call=([0-9.]+)/;
    }
    my ($bf_us, $ev_us) = @us{qw(bitfield evalsha)};
    my %m = map { $_ => median(@{ $t{$_} }) } keys %t;
    printf "  PING round trip            %7.1f us (median of blocks of %d)\n", $m{ping} * 1e6, $BLOCK;
    printf "  add, one item              %5.2fx PING  (goal <= 1.5x)\n", $m{add_ratio};
    printf "  contains, one item         %5.2fx PING\n", $m{contains_ratio};
    printf "  pipelined ECHOs            %9.0f /s\n", $m{pings};
    printf "  batches of %d, items/s:     add_many  contains_many  (goals 300000, 500000)\n", $BATCH;
    printf "    a Redis::Fast client passed in  %9.0f  %9.0f\n", $m{add_many}, $m{contains_many};
    printf "    from the address (own socket)   %9.0f  %9.0f\n", $m{add_many_own}, $m{contains_many_own};
    printf "  the server alone: adds     %9.0f items/s, queries %.0f items/s\n", $m{alone_add}, $m{alone_contains};
    say '  windowed, 4 generations:';
    printf "    add, one item              %5.2fx PING\n", $m{wadd_ratio};
    printf "    contains, one item         %5.2fx PING\n", $m{wcontains_ratio};
    printf "    a Redis::Fast client passed in  %9.0f  %9.0f\n", $m{add_many_w}, $m{contains_many_w};
    printf "    from the address (own socket)   %9.0f  %9.0f\n", $m{add_many_w_own}, $m{contains_many_w_own};
    printf "    plain / windowed (own socket)   %8.2fx  %8.2fx  (goal <= 2x)\n", $m{add_many_wratio},
        $m{contains_many_wratio};
    printf "  server time per add call: BITFIELD %.1f us, the windowed script %.1f us (%.2f, %.2f us per item)\n",
        $bf_us // 0, $ev_us // 0, ($bf_us // 0) / 100, ($ev_us // 0) / 100;

    # A filter that grows, grown to 10 times its first capacity (4 stages
    # at grow 2), beside a plain filter of the same final size (the
    # capacity whose bits come nearest the stages' together): queries of
    # the items held and of absent ones, and adds of the items held again,
    # from the address, in items per second (median of $REPS).
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
        my %r;
        for (1 .. $REPS) {
            for my $via (['grown', $g], ['plain', $p]) {
                my ($tag, $filter) = @$via;
                for my $run (['held', 'contains_many', $held], ['absent', 'contains_many', $absent],
                             ['again', 'add_many', $held]) {
                    my ($what, $op, $it) = @$run;
                    my $t0 = time;
                    scalar $filter->$op([@$it[$_ * $BATCH .. ($_ + 1) * $BATCH - 1]]) for 0 .. @$it / $BATCH - 1;
                    push @{ $r{"$tag $what"} }, @$it / (time - $t0);
                }
            }
        }
        my %m = map { $_ => median(@{ $r{$_} }) } keys %r;
        printf "  grown (after 10x capacity, %d stages, %.1f Mbit) vs plain of the same size (%.1f Mbit), own socket:\n",
            $g->stages, $want / 1e6, $p->bits / 1e6;
        printf "    %-24s %9s %9s %7s\n", 'items/s', 'grown', 'plain', 'ratio';
        printf "    %-24s %9.0f %9.0f %6.2fx\n", $_->[1], $m{"grown $_->[0]"}, $m{"plain $_->[0]"},
            $m{"plain $_->[0]"} / $m{"grown $_->[0]"}
            for ['held', 'contains_many, held'], ['absent', 'contains_many, absent'], ['again', 'add_many, held again'];
    }
}
}
