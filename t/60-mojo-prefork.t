# eg/mojo_prefork.pl under Mojolicious's prefork server: four workers share
# one anonymous filter created before the fork. Several client processes
# ask about the same ids at once; every id must be reported new exactly once
# across all workers, and answers must come from more than one worker.
use strict;
use warnings;
use Test::More;
use Cwd ();
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use PreforkServer;

BEGIN { PreforkServer::skip_unless_usable() }
use Mojo::Util qw(encode url_escape);

my $example = Cwd::abs_path("$FindBin::Bin/../eg/mojo_prefork.pl");
my $dir = tempdir(CLEANUP => 1);
my ($WORKERS, $CLIENTS, $IDS) = (4, 4, 300);
PreforkServer::time_limit('60-mojo-prefork', 180);

# Three attempts of 45 s stay within the time limit.
my $server = PreforkServer->start_ok(undef, example => $example, dir => $dir, workers => $WORKERS,
    start_within => 45, attempts => 3, stop_within => 10);
my $port = $server->port;

# Ids with dots and non-ASCII characters too: they must reach the filter as
# the same bytes whichever worker decodes them.
my @ids = map {
      $_ % 10 == 0 ? "dot.$_.x"
    : $_ % 10 == 1 ? "\x{e9}t\x{e9}-$_"
    :                "id-$_"
} 0 .. $IDS - 1;

sub url_for { "http://127.0.0.1:$port/seen/" . url_escape(encode('UTF-8', $_[0])) }

# Each client asks about every id once, in its own order; so each id is asked
# about $CLIENTS times, often at the same moment by several clients.
my @answers = PreforkServer::run_clients($CLIENTS, sub {
    my ($n, $first_answered, $record) = @_;
    my $ua = Mojo::UserAgent->new(connect_timeout => 10, request_timeout => 30,
        inactivity_timeout => 30);
    my @order = map { ($_ * 7 + $n * 75) % $IDS } 0 .. $IDS - 1;
    @order = reverse @order if $n % 2;
    for my $k (0 .. $#order) {
        my $i = $order[$k];
        my $res = $ua->get(url_for($ids[$i]) => { Accept => 'application/json' })->result;
        die 'HTTP ' . $res->code . " for $ids[$i]\n" if !$res->is_success;
        my $j = $res->json;
        die "answer for another id\n" if !$j || $j->{id} ne $ids[$i];
        $record->($i, $j->{new} ? 1 : 0, $j->{pid});
        $first_answered->() if $k == 0;
    }
}, dir => $dir, alarm => 90, ready_within => 60, reap_within => 120);

my (%new, %pids);
for (@answers) {
    my ($i, $new, $pid) = @$_;
    $new{$i} += $new;
    $pids{$pid}++;
}
is(scalar @answers, $IDS * $CLIENTS, "$IDS ids x $CLIENTS clients answered");
my @wrong = grep { ($new{$_} // 0) != 1 } 0 .. $IDS - 1;
is_deeply([map { "$ids[$_]: new $new{$_} times" } @wrong], [],
    'each distinct id was reported new exactly once across all workers');
# That proves a shared filter only if more than one worker answered: on a
# busy host one may have taken every request, so ask about more ids at once
# until another answers: up to 20 rounds, counted in rounds and not seconds,
# so that a slow host gets as many chances.
for (my $round = 1; keys %pids < 2 && $round <= 20; $round++) {
    my @more = PreforkServer::run_clients($CLIENTS, sub {
        my ($n, $first_answered, $record) = @_;
        my $ua = Mojo::UserAgent->new(connect_timeout => 10, request_timeout => 30,
            inactivity_timeout => 30);
        for my $k (0 .. 19) {
            my $res = $ua->get(url_for("more-$round-$n-$k") => { Accept => 'application/json' })->result;
            die 'HTTP ' . $res->code . "\n" if !$res->is_success;
            $record->($res->json->{pid});
            $first_answered->() if $k == 0;
        }
    }, dir => $dir, alarm => 90, ready_within => 60, reap_within => 120);
    $pids{ $_->[0] }++ for @more;
}
cmp_ok(scalar keys %pids, '>', 1, 'answers came from more than one worker')
    or diag('worker pids: ' . join ' ', keys %pids);
note('answers per worker: ' . join ', ', map { "$_: $pids{$_}" } sort keys %pids);

# The text answer, for people with curl.
{
    my $ua = Mojo::UserAgent->new(connect_timeout => 5, request_timeout => 30);
    my $first = $ua->get(url_for('text-only'))->result;
    like($first->body, qr/\Anew text-only \(worker \d+\)\n\z/, 'text answer: new');
    my $again = $ua->get(url_for('text-only'))->result;
    like($again->body, qr/\Aseen text-only \(worker \d+\)\n\z/, 'text answer: seen');
    my $known = $ua->get(url_for($ids[5]))->result;
    like($known->body, qr/\Aseen \Q$ids[5]\E /, 'an id the clients sent is seen');
}

is_deeply([$server->stop], [], 'the manager and its workers are gone');
done_testing;
