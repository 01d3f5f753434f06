# eg/webhook_dedup.pl under Mojolicious's prefork server: four workers share
# one windowed filter file. Concurrent redeliveries are processed once, a
# restart on the same file keeps the ids, ids are forgotten after the
# window's retention bound, bad delivery ids are refused, and a failed
# spool write answers 500.
use strict;
use warnings;
use Test::More;
use Cwd ();
use Fcntl qw(O_RDONLY);
use File::Temp qw(tempdir);
use FindBin ();
use Time::HiRes qw(time sleep);
use lib "$FindBin::Bin/lib";
use BFTest qw(slurp sleep_until);
use PreforkServer;
use Data::BloomFilter::Shared;

BEGIN { PreforkServer::skip_unless_usable() }

my $example = Cwd::abs_path("$FindBin::Bin/../eg/webhook_dedup.pl");
my $dir = tempdir(CLEANUP => 1);
my ($WORKERS, $CLIENTS, $IDS) = (4, 4, 300);
my @ID_HEADERS = qw(X-GitHub-Delivery X-Delivery-ID Idempotency-Key);
# Hang guards, far above what an idle host takes (about 10 s in all): a busy
# one may take minutes to start servers and answer clients.
PreforkServer::time_limit('63-eg-webhook', 300);

# Start the example with the settings of %$env, or end the test here with
# the server's log.
sub start_or_bail {
    my ($env, $what) = @_;
    return PreforkServer->start_ok($what, example => $example, dir => $dir, env => $env,
        workers => $WORKERS, start_within => 45, attempts => 3, stop_within => 10);
}

# The spool's lines as [id, pid]; a line that is not "id<TAB>pid" (two
# writes interleaved, say) is kept whole as [line] so that it fails below.
sub spool {
    my ($path) = @_;
    return [] if !-e $path;
    my $text = slurp($path);
    my @lines = map { /\A([\x21-\x7e]+)\t([0-9]+)\z/ ? [$1, $2] : [$_] } split /\n/, $text;
    push @lines, ['(no final newline)'] if $text =~ /[^\n]\z/;
    return \@lines;
}

sub ua { Mojo::UserAgent->new(connect_timeout => 5, request_timeout => 10, inactivity_timeout => 10) }

# POST a delivery; returns (code, decoded JSON answer or undef).
sub deliver {
    my ($ua, $port, $id, $header) = @_;
    my %h = defined $id ? (($header // $ID_HEADERS[0]) => $id) : ();
    my $res = $ua->post("http://127.0.0.1:$port/webhook" => \%h => json => { zen => 'hi' })
        ->result;
    return ($res->code, $res->json);
}

my %env = (
    WEBHOOK_FILTER   => "$dir/deliveries.bloom",
    WEBHOOK_SPOOL    => "$dir/spool.txt",
    WEBHOOK_CAPACITY => 10_000,
);
delete local $ENV{WEBHOOK_WINDOW};    # the default window, a day
my @ids = map { sprintf '%08x-cc78-11e3-81ab-%012x', 0x72d3162e + $_, $_ * 7919 } 0 .. $IDS - 1;

# 1. Every client delivers every id, each in its own order and with its own
# header name: each id is delivered $CLIENTS times, often at the same moment
# to several workers.
my $server = start_or_bail(\%env, 'first start');
my $port = $server->port;
my @answers = PreforkServer::run_clients($CLIENTS, sub {
    my ($n, $first_answered, $record) = @_;
    my $ua = ua();
    my @order = map { ($_ * 7 + $n * 75) % $IDS } 0 .. $IDS - 1;
    @order = reverse @order if $n % 2;
    for my $k (0 .. $#order) {
        my $i = $order[$k];
        my ($code, $j) = deliver($ua, $port, $ids[$i], $ID_HEADERS[$n % @ID_HEADERS]);
        $record->($i, $code, $j && $j->{duplicate} ? 1 : 0);
        $first_answered->() if $k == 0;
    }
}, dir => $dir, alarm => 90, ready_within => 60, reap_within => 120);

my (%accepted, %answers);
for (@answers) {
    my ($i, $code, $dup) = @$_;
    $answers{"$code dup $dup"}++;
    $accepted{$i}++ if $code == 202;
}
is(scalar @answers, $IDS * $CLIENTS, "$IDS ids x $CLIENTS clients answered");
is_deeply(\%answers, { '202 dup 0' => $IDS, '200 dup 1' => $IDS * ($CLIENTS - 1) },
    'one 202 per id, every other delivery a 200 duplicate');
is_deeply([grep { ($accepted{$_} // 0) != 1 } 0 .. $IDS - 1], [], 'each id accepted exactly once');

my $spooled = spool($env{WEBHOOK_SPOOL});
is_deeply([grep { @$_ != 2 } @$spooled], [], 'every spool line is one whole "id<TAB>pid"');
my %times;
$times{$_->[0]}++ for @$spooled;
is_deeply(\%times, { map { $_ => 1 } @ids }, 'the spool has every id exactly once, and nothing else');
my %pids = map { $_->[1] // 'none' => 1 } @$spooled;
# That proves a shared filter only if more than one worker processed: on a
# busy host one may have taken every delivery, so deliver more new ids at
# once until another processes one: up to 20 rounds, counted in rounds and
# not seconds, so that a slow host gets as many chances.
for (my $round = 1; keys %pids < 2 && $round <= 20; $round++) {
    PreforkServer::run_clients($CLIENTS, sub {
        my ($n, $first_answered, $record) = @_;
        my $ua = ua();
        for my $k (0 .. 19) {
            my ($code) = deliver($ua, $port, "more-$round-$n-$k");
            die "HTTP $code\n" if $code != 202;
            $first_answered->() if $k == 0;
        }
    }, dir => $dir, alarm => 90, ready_within => 60, reap_within => 120);
    $pids{ $_->[1] // 'none' } = 1 for grep { $_->[0] =~ /\Amore-/ } @{ spool($env{WEBHOOK_SPOOL}) };
}
cmp_ok(scalar keys %pids, '>', 1, 'deliveries were processed by more than one worker')
    or diag('worker pids: ' . join ' ', keys %pids);
my $spool_before = slurp($env{WEBHOOK_SPOOL});

# 2. A restart on the same file: the old ids are still duplicates.
is_deeply([$server->stop], [], 'the manager and its workers are gone');
$server = start_or_bail(\%env, 'restart on the same file');
$port = $server->port;
{
    my $ua = ua();
    my %codes;
    for my $i (0 .. $IDS - 1) {
        my ($code, $j) = deliver($ua, $port, $ids[$i], $ID_HEADERS[$i % @ID_HEADERS]);
        $codes{$code . ($j && $j->{duplicate} ? ' duplicate' : '')}++;
    }
    is_deeply(\%codes, { '200 duplicate' => $IDS }, 'after the restart, redeliveries are duplicates');

    # Bad delivery ids: refused, nothing processed.
    my ($code, $j) = deliver($ua, $port, undef);
    is($code, 400, 'no delivery id: 400');
    like($j && $j->{error}, qr/\Ano delivery id: send it in an X-GitHub-Delivery, /, 'and says so');
    ($code, $j) = deliver($ua, $port, 'x' x 201, 'X-Delivery-ID');
    is($code, 400, 'a 201-byte id: 400');
    like($j && $j->{error}, qr/\Adelivery id must be 1 to 200 printable ASCII characters\z/,
        'and says what an id must be');
    ($code) = deliver($ua, $port, 'a b', 'Idempotency-Key');
    is($code, 400, 'an id with a space: 400');
    ($code) = deliver($ua, $port, '', 'X-GitHub-Delivery');
    is($code, 400, 'an empty id: 400');
    is(slurp($env{WEBHOOK_SPOOL}), $spool_before, 'nothing new in the spool');

    # The restarted server does process new ids, up to 200 bytes.
    my $long = 'y' x 200;
    ($code) = deliver($ua, $port, $long, 'X-Delivery-ID');
    is($code, 202, 'a new 200-byte id after the restart: 202');
    like(slurp($env{WEBHOOK_SPOOL}), qr/\A\Q$spool_before$long\E\t[0-9]+\n\z/,
        'and spooled: one more line');
}
is_deeply([$server->stop], [], 'stopped again');

# 3. A 2-second window on a new file: a delivery is a duplicate for the
# window, and processed again once the retention bound has passed.
my %short = (%env, WEBHOOK_FILTER => "$dir/short.bloom", WEBHOOK_SPOOL => "$dir/short.txt",
    WEBHOOK_WINDOW => 2);
$server = start_or_bail(\%short, 'a 2 s window');
$port = $server->port;
# A query-only handle of the server's filter: it reads the window the file
# stores, and looks without adding (a delivery would extend an id's life).
sysopen(my $ro_fh, $short{WEBHOOK_FILTER}, O_RDONLY) or die "$short{WEBHOOK_FILTER}: $!";
my $ro = Data::BloomFilter::Shared->new_from_fd($ro_fh);
my ($window, $g) = ($short{WEBHOOK_WINDOW}, $ro->generations);
ok(abs($ro->window - $window) < 1e-6, 'WEBHOOK_WINDOW sets the window');
is($g, 4, 'of the default 4 generations');
# The POD's bound: an id delivered at t is forgotten by t + window * g / (g - 1),
# plus one period (window / (g - 1)) of clock granularity, plus a margin.
my $forgotten_by = $window * $g / ($g - 1) + $window / ($g - 1) + 0.1;
{
    my $ua = ua();
    # "once": delivered now and next after the bound. "again": redelivered
    # all through the window.
    my $s = time;
    my ($once) = deliver($ua, $port, 'once');
    my $once_at = time;
    my ($again) = deliver($ua, $port, 'again');
    is("$once $again", '202 202', 'first deliveries: 202');
    my ($checks, @bad, @gone) = (0);
    while (time < $s + $window - 0.15) {
        my $present = $ro->contains('once');
        my $t = time;
        push @gone, sprintf('%.3f', $t - $s) if !$present && $t < $s + $window;
        my ($code, $j) = deliver($ua, $port, 'again', 'Idempotency-Key');
        $t = time;
        if ($t < $s + $window) {    # an answer after the window does not count
            $checks++;
            push @bad, sprintf('%d at %.3f s', $code, $t - $s) if $code != 200 || !$j->{duplicate};
        }
        sleep 0.1;
    }
    my $again_at = time;
    cmp_ok($checks, '>', 0, 'redeliveries were made within the window');
    is_deeply(\@bad, [], sprintf("every redelivery within %g s is a 200 duplicate (%d)", $window, $checks));
    is_deeply(\@gone, [], 'an id delivered once is seen all through the window');
    sleep_until($once_at + $forgotten_by);    # at once if a slow host is past it
    ok(!$ro->contains('once'), sprintf('forgotten %.2f s after its delivery', $forgotten_by));
    my ($code) = deliver($ua, $port, 'once');
    is($code, 202, 'delivered again after the bound: processed again');
    sleep_until($again_at + $forgotten_by);
    ($code) = deliver($ua, $port, 'again');
    is($code, 202, 'a redelivered id: processed again after the bound from its last delivery');
    my %n;
    $n{$_->[0]}++ for @{ spool($short{WEBHOOK_SPOOL}) };
    is_deeply(\%n, { once => 2, again => 2 }, 'each processed twice in all');
}
is_deeply([$server->stop], [], 'stopped after the short window');

# 4. Processing fails after add() said new (a spool on /dev/full, where every
# write fails with ENOSPC): 500 and the id logged; the filter cannot take the
# id back, so the retry is a duplicate, as the example says.
SKIP: {
    skip 'needs a writable /dev/full', 4 if !-c '/dev/full' || !-w _;
    $server = start_or_bail({ %env, WEBHOOK_FILTER => "$dir/full.bloom", WEBHOOK_SPOOL => '/dev/full' },
        'a spool that cannot be written');
    $port = $server->port;
    my $ua = ua();
    my ($code, $j) = deliver($ua, $port, 'unlucky');
    is($code, 500, 'a failed append: 500');
    ($code, $j) = deliver($ua, $port, 'unlucky');
    ok($code == 200 && $j->{duplicate}, 'and the retry is a duplicate');
    $server->stop;
    like($server->log, qr/\[error\] delivery unlucky not spooled: /,
        'the id is in the log for a replay by hand');
}
# Stopping again only looks: whichever server ran last, nothing of it is left.
is_deeply([$server->stop], [], 'the manager and its workers are gone at the end');
done_testing;
