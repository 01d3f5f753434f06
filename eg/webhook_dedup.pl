#!/usr/bin/perl
# Webhook senders deliver at least once: a timeout or a lost answer makes
# them send the same delivery again, with the same delivery id. This
# Mojolicious::Lite app processes each delivery id once across all its
# prefork workers, and remembers ids for a day with a windowed filter.
#
#   perl -Mblib eg/webhook_dedup.pl prefork -l http://127.0.0.1:8080 -w 4
#   curl -i -X POST -H 'X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958' \
#       -d '{}' http://127.0.0.1:8080/webhook      # 202 {"accepted":true,...}
#   (the same again)                              # 200 {"duplicate":true}
#   curl -i -X POST http://127.0.0.1:8080/webhook  # 400: no delivery id
#
# Hypnotoad (hypnotoad eg/webhook_dedup.pl) works the same way. Settings,
# from the environment:
#   WEBHOOK_FILTER    the filter file (/dev/shm/webhook-deliveries.bloom)
#   WEBHOOK_SPOOL     where processed deliveries go (/tmp/webhook-spool.txt)
#   WEBHOOK_CAPACITY  distinct deliveries per window (1_000_000)
#   WEBHOOK_WINDOW    the window in seconds (86400; small ones for tests)
#
# The filter is a file, not anonymous memory: it outlives the server. A
# restart, a crash or a hot deploy (hypnotoad starts a new manager) opens the
# same file and keeps the last 24 hours of delivery ids, so redeliveries of
# the minutes around a deploy are still caught. The reopen keeps the window
# and generations stored in the file (a different WEBHOOK_WINDOW for an
# existing file makes the start fail with "window mismatch": remove the
# file to change it). /dev/shm is memory: it survives restarts, not a
# reboot; put the file on a disk to survive that too.
#
# "Seen" in time: an id delivered at time t is a duplicate until at least
# t + 24 h, and forgotten by t + 32 h (window * g / (g - 1) with the default
# g = 4 generations); a redelivery within the window extends that from its
# own time. Make the window cover your senders' retry schedules (some retry
# for days).
use strict;
use warnings;
use Mojolicious::Lite;
use Fcntl qw(O_WRONLY O_APPEND O_CREAT);
use Data::BloomFilter::Shared;

my $path     = $ENV{WEBHOOK_FILTER}   // '/dev/shm/webhook-deliveries.bloom';
my $spool    = $ENV{WEBHOOK_SPOOL}    // '/tmp/webhook-spool.txt';
my $capacity = $ENV{WEBHOOK_CAPACITY} // 1_000_000;
my $window   = $ENV{WEBHOOK_WINDOW}   // 24 * 3600;

# A false positive here is not a wasted lookup: it silently drops a real
# delivery. So the rate is low, 0.0001 per generation. A query looks in up
# to 4 generations, so it is at most 0.0004 even with every generation at
# capacity; at the expected load each generation holds only a third of a
# day (a third of the capacity) and the rate is far lower. The cost: about
# 22 MiB of shared memory for a million deliveries a day (printed below).
my $fp_rate = 0.0001;

# Loading the app happens in the manager, before it forks the workers: the
# filter and the spool descriptor are inherited by every worker (and by the
# workers forked later to replace them).
my $seen = Data::BloomFilter::Shared->new($path, $capacity, $fp_rate,
    { window => $window, mode => 0600 });
printf STDERR "webhook_dedup: %s, window %gs in %d generations, %.1f MiB mapped\n",
    $path, $seen->window, $seen->generations, $seen->stats->{mmap_size} / 2**20;

# O_APPEND: every write goes to the end of the file, and one write of one
# line is never interleaved with another worker's.
sysopen(my $spool_fh, $spool, O_WRONLY | O_APPEND | O_CREAT, 0600)
    or die "webhook_dedup: cannot open $spool: $!\n";

# The headers senders put their delivery id in: GitHub's, a generic one,
# and the IETF draft's Idempotency-Key. The first one given is taken; all
# share one filter, which is fine for ids that are UUIDs.
my @ID_HEADERS = qw(X-GitHub-Delivery X-Delivery-ID Idempotency-Key);
my $MAX_ID     = 200;

post '/webhook' => sub {
    my ($c) = @_;
    my ($id) = grep { defined && length } map { $c->req->headers->header($_) } @ID_HEADERS;
    if (!defined $id) {
        return $c->render(status => 400,
            json => { error => 'no delivery id: send it in an '
                . join(', ', @ID_HEADERS[0 .. $#ID_HEADERS - 1]) . " or $ID_HEADERS[-1] header" });
    }
    # Printable ASCII only (ids are UUIDs or similar): no tab or newline can
    # reach the spool, and the bytes are the same whichever worker reads them.
    if (length($id) > $MAX_ID || $id =~ /[^\x21-\x7e]/) {
        return $c->render(status => 400,
            json => { error => "delivery id must be 1 to $MAX_ID printable ASCII characters" });
    }
    # A real service checks the sender's signature (X-Hub-Signature-256...)
    # before this line, so that nobody else can mark ids as seen.

    # add() is true for exactly one of the workers that get the same id at
    # the same moment: only that one processes the delivery.
    return $c->render(status => 200, json => { duplicate => \1 }) if !$seen->add($id);

    # The filter is a "seen" gate, not a lock: an id cannot be taken back
    # out. If processing fails after add() said new, the sender's retry is
    # answered as a duplicate and the delivery is lost. So the only work
    # done here is the cheapest durable step, the spool append; the real work
    # reads the spool and retries on its own. A failed append answers 500 and
    # logs the id for replay by hand. (The other order, process first and
    # add() after success, retries failures but lets two workers process the
    # same concurrent delivery: choose it only for idempotent work.)
    my $line = "$id\t$$\n";
    my $wrote = syswrite($spool_fh, $line);
    if (!defined $wrote || $wrote != length $line) {
        $c->app->log->error("delivery $id not spooled: " . ($! || 'short write'));
        return $c->render(status => 500, json => { error => 'delivery not stored' });
    }
    $c->render(status => 202, json => { accepted => \1, id => $id });
};

app->start;
