# Data::BloomFilter::Shared::Redis when things go wrong, for real: the server
# killed and restarted mid-stream (appendfsync always: no acknowledged add
# lost), a connection dropped mid-batch (the croak says how much of the batch
# is known applied), a full server (maxmemory: creation and adds croak and
# leave nothing half-made).
use strict;
use warnings;
use Test::More;
use FindBin ();
use lib "$FindBin::Bin/lib";
use RedisServer qw(redis_or_skip);
use Time::HiRes qw(sleep time);
use Data::BloomFilter::Shared;

redis_or_skip();
require Data::BloomFilter::Shared::Redis;
my $R = 'Data::BloomFilter::Shared::Redis';
$SIG{ALRM} = sub { die "82-redis-faults: global timeout\n" };
alarm 300;    # a hang guard: an idle host takes seconds, a loaded one minutes

my $BATCH_RE = qr/\A\Q$R\E->add_many: .+: (\d+) of (\d+) items known added; (\d+) refused by the server or not sent \(not added\); the other (\d+) may or may not have been added \(the results are undef for items not known added\) at /;

# An adder in a child: batches of $size items "$tag-N", reporting on a pipe
# every item whose add was acknowledged (whatever its 0/1), then the croak.
sub adder {
    my ($address, $name, $tag, $size, $batches) = @_;
    pipe my $rd, my $wr or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $rd;
        $wr->autoflush(1);
        my $f = $R->new($address, $name, 2_000_000, 0.01);
        my $i = 0;
        for (1 .. $batches) {
            my @batch = map { "$tag-" . $i++ } 1 .. $size;
            my @w;
            my $ok = eval { $f->add_many(\@batch, \@w); 1 };
            print {$wr} "ACK $batch[$_]\n" for grep { defined $w[$_] } 0 .. $#batch;
            if (!$ok) {
                (my $e = $@) =~ s/\n/ /g;
                print {$wr} "ERR $e\n";
                my $undef = grep { !defined } @w;
                print {$wr} "UNDEF $undef\n";
                last;
            }
            print {$wr} "BATCH\n";
        }
        close $wr;
        POSIX::_exit(0);
    }
    close $wr;
    return ($pid, $rd);
}

# --- the server killed mid-stream and restarted: no acknowledged add lost ------------------------
{
    my $srv = RedisServer->new(appendonly => 'yes', appendfsync => 'always');
    $R->new($srv->address, 'durable', 2_000_000, 0.01);
    my ($pid, $rd) = adder($srv->address, 'durable', 'd', 500, 100_000);
    my (@acked, $err, $undef, $batches);
    while (my $l = <$rd>) {
        chomp $l;
        if ($l eq 'BATCH') {
            # Kill once a stream of batches is flowing.
            $srv->stop('KILL') if ++$batches == 20;
        }
        elsif ($l =~ /\AACK (.*)/) { push @acked, $1 }
        elsif ($l =~ /\AERR (.*)/) { $err = $1 }
        elsif ($l =~ /\AUNDEF (\d+)/) { $undef = $1 }
    }
    waitpid $pid, 0;
    ok defined $err, 'the adder croaked when the server died' or diag "after $batches batches";
    like $err, $BATCH_RE, 'saying how much of the batch is known added';
    my ($known, $n, $refused, $rest) = ($err // '') =~ $BATCH_RE;
    is $refused + $rest, $undef, 'the out array has undef exactly for the items not known added';
    cmp_ok scalar @acked, '>=', 20 * 500, 'at least 20 batches acknowledged before the kill';
    $srv->start;    # same directory: it replays its append-only file
    my $f = $R->new($srv->address, 'durable', 2_000_000, 0.01);
    is scalar $f->contains_many(\@acked), scalar @acked, 'after the restart every acknowledged add is there';
    is $f->add($acked[-1]), 0, 'and is seen';
}

# --- a connection dropped mid-batch ---------------------------------------------------------------
{
    my $srv = RedisServer->new;
    my $admin = $srv->client;
    $R->new($srv->address, 'dropped', 2_000_000, 0.01);
    my ($pid, $rd) = adder($srv->address, 'dropped', 'x', 400_000, 1);
    # Wait until a good part of the batch has run, then cut the adder off.
    # The adder is stopped meanwhile, so that a busy host that runs this
    # process late cannot let it finish the batch first.
    my $until = time + 20;
    while (time < $until) {
        my ($calls) = ($admin->info('commandstats')->{cmdstat_bitfield} // '') =~ /calls=(\d+)/;
        if (($calls // 0) >= 300) {
            kill 'STOP', $pid;
            last;
        }
        sleep 0.005;
    }
    my $killed = $admin->client_kill('TYPE', 'normal', 'SKIPME', 'yes');
    kill 'CONT', $pid;
    cmp_ok $killed, '>=', 1, 'the adder connection was killed';
    my (@acked, $err, $undef);
    while (my $l = <$rd>) {
        chomp $l;
        if ($l =~ /\AACK (.*)/) { push @acked, $1 }
        elsif ($l =~ /\AERR (.*)/) { $err = $1 }
        elsif ($l =~ /\AUNDEF (\d+)/) { $undef = $1 }
    }
    waitpid $pid, 0;
    like $err, $BATCH_RE, 'a dropped connection croaks with how much of the batch is known added';
    my ($known, $n, $refused, $rest) = ($err // '') =~ $BATCH_RE;
    is $n, 400_000, 'of the whole batch';
    cmp_ok $refused, '>', 0, 'the rest of the batch was not sent';
    cmp_ok $rest, '<=', 64 * 100, 'at most 64 commands of 100 items are in doubt';
    cmp_ok $known, '>', 0, 'the replies that came are counted';
    cmp_ok $known, '<', $n, 'and the rest is not claimed';
    is $known, scalar @acked, 'the out array has a result for each known item';
    is $refused + $rest, $undef, 'and undef for each other';
    like $err, qr/->add_many: (?:Server closed the connection|Connection reset by peer|Error while reading from Redis server)\b/, "the client's error is given";
    my $f = $R->new($srv->address, 'dropped', 2_000_000, 0.01);
    is scalar $f->contains_many(\@acked), scalar @acked, 'every item known added is there';
}

# --- after a broken connection: ours is made afresh, the caller's is kept ------------------------
{
    my $srv = RedisServer->new;
    my $admin = $srv->client;
    my $ours = $R->new($srv->address, 'recon', 10_000, 0.01);
    my $given = Redis::Fast->new(server => $srv->address, reconnect => 0);
    my $theirs = $R->new($given, 'recon', 10_000, 0.01);
    is $ours->add('a'), 1, 'before the kill';
    $admin->client_kill('TYPE', 'normal', 'SKIPME', 'yes');
    # Closed before anything of the call was sent: noticed, and made afresh.
    is $ours->add('b'), 1, 'a single add after its connection was killed goes over a new one';
    is $ours->add('c'), 1, 'and the next';
    is $ours->contains('a'), 1, 'and sees the filter';
    my $e = eval { $theirs->add('d'); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->add: /, "the caller's killed client croaks";
    $e = eval { $theirs->add('d'); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->add: /, "and is kept: the caller decides";

    # The socket a filter made from an address keeps for its batches: one
    # the server closed between batches is noticed before anything is sent
    # on it, and the batch goes over a new one.
    is $ours->add_many([qw(e f)]), 2, 'a batch over the own socket';
    my $sock = $ours->{links}{''}{fh};
    ok $sock, 'which it keeps';
    $admin->client_kill('TYPE', 'normal', 'SKIPME', 'yes');
    is $ours->add_many([qw(g h)], \my @w), 2, 'a batch after the socket was killed';
    is_deeply \@w, [1, 1], 'item by item';
    isnt $ours->{links}{''}{fh}, $sock, 'over a new socket';
    is_deeply [$ours->contains_many([qw(e f g h i)])], [1, 1, 1, 1, 0], 'and sees the filter';
}

# --- a merge cut short leaves an upload that expires ---------------------------------------------
{
    my $srv = RedisServer->new;
    my $rc = $srv->client;
    my $cap = 20_000_000;    # 2^28 bits: a 32 MiB upload, 8 slices
    # The upload key lives from the first slice to the merge's end (tens
    # of ms): the watcher (this process) and the server run ahead of the
    # load while the watcher polls every 1 ms, and a merge that ended before
    # its key was seen is tried again on a new filter (at most 5 times; on
    # an idle host the first is seen).
    RedisServer::run_first($srv->pid);
    RedisServer::run_first($$);
    my ($f, $tmp, $name);
    for my $try (1 .. 5) {
        $name = "cut$try";
        $f = $R->new($srv->address, $name, $cap, 0.01);
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            setpriority(0, 0, 0);    # the merger at the load's priority
            my $local = Data::BloomFilter::Shared->new(undef, $cap, 0.01);
            $local->add_many([map { "m$_" } 1 .. 1000]);
            $R->new($srv->address, $name, $cap, 0.01)->merge($local);
            POSIX::_exit(0);
        }
        my $until = time + 20;
        until ($tmp || time > $until || waitpid($pid, POSIX::WNOHANG()) == $pid) {
            ($tmp) = grep { /\{\Q$name\E\}:merge:/ } $rc->keys("{$name}:*");
            sleep 0.001 if !$tmp;
        }
        my $ended = !kill 0, $pid;
        kill 'KILL', $pid;
        waitpid $pid, 0;
        last if $tmp;
        diag "try $try: " . ($ended ? 'the merge ended before its upload key was seen' : 'no upload key within 20 s');
    }
    setpriority(0, 0, 0) if $> == 0;
    ok $tmp, 'the merge had started its upload when it was killed';
    my $ttl = $tmp ? $rc->pttl($tmp) : -3;
    ok $ttl > 0 && $ttl <= 600_000, "the upload key expires by itself (PTTL $ttl ms)"
        or diag "exists: " . $rc->exists($tmp // '');
    is $f->is_empty, 1, 'and nothing was merged';
}

# --- a full server (maxmemory) --------------------------------------------------------------------
{
    my $srv = RedisServer->new(maxmemory => '4mb', 'maxmemory-policy' => 'noeviction');
    my $rc = $srv->client;
    # 2^26 bits = 8 MiB: more than the server may hold.
    my $e = eval { $R->new($srv->address, 'huge', 6_000_000, 0.01); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->new: OOM: the filter needs 8388608 bytes but the server uses \d+ of its maxmemory 4194304 \(nothing was changed\)/,
        'creating a filter larger than maxmemory croaks (OOM)';
    is $rc->exists('{huge}:meta', '{huge}:bits'), 0, 'and leaves neither key: nothing half-made';

    my $f = $R->new($srv->address, 'small', 50_000, 0.01);
    is $f->add('first'), 1, 'a filter that fits works';
    my $i = 0;
    1 while eval { $rc->set('junk:' . $i++, 'j' x 100_000); 1 } && $i < 1000;
    like $@, qr/OOM/, 'the server is full';
    # Redis checks maxmemory before each command against the memory in use,
    # which moves with its buffers: set the limit well below what is in use.
    my $used = $rc->info('memory')->{used_memory};
    $rc->config_set('maxmemory', $used - 500_000);
    my @items = map { "full-$_" } 1 .. 250;
    my @w;
    $e = eval { $f->add_many(\@items, \@w); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->add_many: OOM command not allowed.*: 0 of 250 items known added; 250 refused by the server or not sent \(not added\); the other 0 may or may not have been added/,
        'adds to a full server croak, saying all were refused';
    is scalar(grep { defined } @w), 0, 'no result claimed';
    $e = eval { $f->add('one'); 1 } ? '' : $@;
    like $e, qr/\A\Q$R\E->add: OOM/, 'a single add croaks too';
    is $f->contains('first'), 1, 'queries still work on a full server (BITFIELD_RO)';
    is_deeply [$f->contains_many(['first', 'nope'])], [1, 0], 'batches of queries too';
    $rc->flushdb;
    $f = $R->new($srv->address, 'again', 50_000, 0.01);
    is $f->add_many(\@items), 250, 'with memory freed, adds work again';
}

done_testing;
