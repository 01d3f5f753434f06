#!/usr/bin/perl
# What a windowed add in Redis would cost the server if its SET on the
# current generation were a plain BITFIELD rather than one made by a
# script (bench/RESULTS.md, "Single calls and windowed filters"): a
# prototype of the commands only, not of the module. Per 100 items, each
# way pre-encoded and written to a plain socket (no client library), the
# replies read back, in items per second:
#   - plain: BITFIELD SET u1 OFFSET 1 per probe on the filter's bits (what
#     a plain filter's add_many sends);
#   - MULTI, a small script standing for the step (HMGET of the metadata,
#     TIME), BITFIELD SET on the current generation, BITFIELD_RO of the
#     items' query fields (a plain query's) on each of 3 older
#     generations, EXEC;
#   - the same with the older generations read by one read-only script
#     (each generation's first probe of every item, then the other probes
#     of the items whose first was set, as the module's windowed script
#     reads them).
# The older generations hold 50 000 items each (capacity 2 000 000, fp
# 0.01); each way is timed 3 times in turn, the median printed, with its
# ratio to plain.
#
#   perl -Mblib bench/redis_multi.pl [--server HOST:PORT]
#
# Without --server it starts redis-server as bench/redis.pl does.
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
GetOptions('server=s' => \my $server) or die "usage: perl -Mblib bench/redis_multi.pl [--server HOST:PORT]\n";

$server = redis_server($server);

my $r = Redis::Fast->new(server => $server, reconnect => 0);
my $raw = IO::Socket::INET->new(PeerAddr => $server, Proto => 'tcp') or die "connect: $!";
$raw->setsockopt(Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1);
say "redis-server ", $r->info('server')->{redis_version}, " at $server; load ", (split ' ', `cat /proc/loadavg`)[0];

sub resp { join '', '*' . @_ . "\r\n", map { '$' . length($_) . "\r\n$_\r\n" } @_ }

my $STEP = "local m = redis.call('HMGET', KEYS[1], 'format', 'window_us', 'generations', 'epoch', 'grid')"
    . " local t = redis.call('TIME') return 0";
my $LOOK = <<'LUA';
local k = tonumber(ARGV[1])
local n = (#ARGV - 1) / k
local out = {}
for g = 1, #KEYS do
  local alive, na, get = {}, 0, {}
  for i = 0, n - 1 do
    if not out[i + 1] then
      na = na + 1
      alive[na] = i
      get[3 * na - 2], get[3 * na - 1], get[3 * na] = 'GET', 'u1', ARGV[2 + i * k]
    end
  end
  if na > 0 then
    local bits = redis.call('BITFIELD_RO', KEYS[g], unpack(get))
    local still, ns = {}, 0
    get = {}
    for x = 1, na do
      if bits[x] == 1 then
        local i = alive[x]
        ns = ns + 1
        still[ns] = i
        for r = 1, k - 1 do
          local j = 3 * ((ns - 1) * (k - 1) + r)
          get[j - 2], get[j - 1], get[j] = 'GET', 'u1', ARGV[2 + i * k + r]
        end
      end
    end
    if ns > 0 and k > 1 then
      bits = redis.call('BITFIELD_RO', KEYS[g], unpack(get))
      for x = 1, ns do
        local all = true
        for j = (x - 1) * (k - 1) + 1, x * (k - 1) do
          if bits[j] == 0 then all = false break end
        end
        if all then out[still[x] + 1] = true end
      end
    end
  end
end
local res = {}
for i = 1, n do res[i] = out[i] and 1 or 0 end
return res
LUA

# Write each pre-encoded string, and read until its replies have as many
# lines as @$lines says; the seconds taken.
sub timed {
    my ($enc, $lines) = @_;
    my $t0 = time;
    for my $i (0 .. $#$enc) {
        my ($b, $off) = ($enc->[$i], 0);
        while ($off < length $b) {
            my $w = syswrite $raw, $b, length($b) - $off, $off;
            die "write: $!" if !defined $w;
            $off += $w;
        }
        my $buf = '';
        while (($buf =~ tr/\n//) < $lines->[$i]) {
            sysread($raw, $buf, 1 << 20, length $buf) or die "read: $!";
        }
        die "an error reply: $1\n" if $buf =~ /^-(.*)\r$/m;
    }
    return time - $t0;
}

for my $layout (qw(standard blocked)) {
    $r->flushall;
    my $f = Data::BloomFilter::Shared::Redis->new($r, 'p', 2_000_000, 0.01, { layout => $layout });
    my $k = $f->hashes;
    my $look = $r->script_load($LOOK);
    for my $g (1 .. 3) {
        my @it = map { "old-$g-$_" } 1 .. 50_000;
        while (my @c = splice @it, 0, 100) {
            $r->bitfield("{w}:gen:$g", Data::BloomFilter::Shared::Redis::_xs_args(1, $f->_geo, \@c, undef, \my $m));
        }
    }
    $r->hset('{w}:meta', 'format', 'x');
    my %res;
    for my $rep (1 .. 3) {
        for my $kind (qw(plain native script)) {
            my (@enc, @lines);
            my @it = map { "n-$kind-$rep-$_" } 1 .. 30_000;
            while (my @c = splice @it, 0, 100) {
                my $m;
                my @set = Data::BloomFilter::Shared::Redis::_xs_args(1, $f->_geo, \@c, undef, \$m);
                my @q = Data::BloomFilter::Shared::Redis::_xs_args(0, $f->_geo, \@c, undef, \$m);
                if ($kind eq 'plain') {
                    push @enc, resp('BITFIELD', $f->{bitskey}, @set);
                    push @lines, 1 + @set / 4;
                    next;
                }
                my $e = resp('MULTI') . resp('EVAL', $STEP, 1, '{w}:meta') . resp('BITFIELD', '{w}:gen:4', @set);
                if ($kind eq 'native') {
                    $e .= resp('BITFIELD_RO', "{w}:gen:$_", @q) for 3, 2, 1;
                }
                else {
                    $e .= resp('EVALSHA', $look, 3, '{w}:gen:3', '{w}:gen:2', '{w}:gen:1', $k,
                        @set[grep { $_ % 4 == 2 } 0 .. $#set]);
                }
                push @enc, $e . resp('EXEC');
                # +OK, +QUEUED per command, EXEC's header, the step's :0,
                # the SET's array, then the reads' arrays.
                push @lines, 1 + ($kind eq 'native' ? 5 : 3) + 1 + 1 + 1 + @set / 4
                    + ($kind eq 'native' ? 3 * (1 + @q / 3) : 1 + 100);
            }
            push @{ $res{$kind} }, 30_000 / timed(\@enc, \@lines);
        }
    }
    my %m = map { my @s = sort { $a <=> $b } @{ $res{$_} }; ($_ => $s[1]) } keys %res;
    printf "%-8s k = %d: plain %.0f items/s; MULTI, reads BITFIELD_RO %.0f (%.2fx); MULTI, reads a script %.0f (%.2fx)\n",
        $layout, $k, $m{plain}, $m{native}, $m{plain} / $m{native}, $m{script}, $m{plain} / $m{script};
}
