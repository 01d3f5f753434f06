# Children SIGKILLed at random moments while a filter grows (C10): a few
# children add fresh items (each its own range) to a filter of first
# capacity 10 that grows by 2, and report each add once it has returned;
# the parent kills one at a random moment, starts another, and so on.
# Afterwards every reported add is present, the filter still takes new
# items and grows further, and it went through many stages. File (children
# open it by path), memfd (children open it with new_from_fd) and anonymous
# (the handle inherited through fork); both layouts. Whether a kill landed
# inside a growth is only reported.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use IO::Select ();
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(reap);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $seed = $ENV{BFS_CRASH_SEED} // int(time);
srand($seed);
diag("BFS_CRASH_SEED=$seed") if $ENV{TEST_VERBOSE};
$SIG{ALRM} = sub { die "53-crash-grow: global timeout\n" };
alarm 240;

my $WRITERS = 3;
my $ROUNDS = 40;

# A writer: its own handle (by path for a file, new_from_fd for a memfd,
# else the inherited one),
# items "w$id-1", "w$id-2", ... each reported after its add returned.
sub start_writer {
    my ($f, $kind, $path, $layout, $id) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        close $r;
        alarm 120;
        eval {
            my $g = $kind eq 'file' ? $C->new($path, 10, 0.01, {layout => $layout})
                  : $kind eq 'memfd' ? $C->new_from_fd($f->memfd)
                  :                    $f;
            for (my $j = 1; ; $j++) {
                $g->add("w$id-$j");
                syswrite($w, "$j\n") or die "report: $!";
            }
        };
        print STDERR "writer $id: $@" if $@;
        POSIX::_exit(1);
    }
    close $w;
    return {pid => $pid, fh => $r, id => $id, buf => '', last => 0};
}

# Read what the writers report until they have reported $acks more adds
# between them (so that none waits on a full pipe); keep each one's last
# complete line. Counted in adds, not seconds: each round lets the writers
# make progress however slowly the host runs them (120 s per call: a hang
# guard, not a bound).
sub pump {
    my ($kids, $acks) = @_;
    my $until = time + 120;
    my %by_fh = map { (0 + $_->{fh}) => $_ } grep { $_->{fh} } values %$kids;
    my $sel = IO::Select->new(map { $_->{fh} } values %by_fh);
    my $sum = sub { my $n = 0; $n += $_->{last} for values %by_fh; $n };
    my $want = $sum->() + $acks;
    while ($sel->count && $sum->() < $want) {
        my $left = $until - time;
        last if $left <= 0;
        for my $fh ($sel->can_read($left)) {
            my $k = $by_fh{0 + $fh};
            my $got = sysread($fh, $k->{buf}, 65536, length $k->{buf});
            if (!$got) { $sel->remove($fh); next }
            last_line($k);
        }
    }
}

sub last_line {
    my ($k) = @_;
    my $cut = rindex($k->{buf}, "\n");
    return if $cut < 0;
    my $whole = substr($k->{buf}, 0, $cut);
    $k->{buf} = substr($k->{buf}, $cut + 1);
    $k->{last} = $1 if $whole =~ /(\d+)\z/;
}

# SIGKILL a writer, reap it and read the rest of what it reported.
sub kill_writer {
    my ($k) = @_;
    kill 'KILL', $k->{pid};
    my ($st) = reap($k->{pid}, 30);
    my $fh = $k->{fh};
    while (sysread($fh, $k->{buf}, 65536, length $k->{buf})) { }
    last_line($k);    # a line cut short by the kill is not counted
    close $fh;
    $k->{fh} = undef;
    return $st;
}

for my $layout (qw(standard blocked)) {
    for my $kind (qw(file memfd anonymous)) {
        my $path = $kind eq 'file' ? "$dir/$layout.bf" : undef;
        my %o = (layout => $layout, grow => 2);
        my $f = $kind eq 'memfd' ? $C->new_memfd('crash-grow', 10, 0.01, {%o}) : $C->new($path, 10, 0.01, {%o});
        my $next_id = 0;
        my %kids = map { my $k = start_writer($f, $kind, $path, $layout, ++$next_id); ($k->{id} => $k) } 1 .. $WRITERS;
        my @done;                       # writers killed, with what they reported
        my ($sigkilled, $in_growth, $parent_ok) = (0, 0, 0);    # $in_growth: a diagnostic only
        # At least $ROUNDS kills, and on until the filter has 8 stages (1270
        # items); at most 200. Each kill comes after 8 to 20 more reported
        # adds (at a random moment of the victim's work), so 200 rounds
        # bring 1600 adds or more however slow the host.
        my $round = 0;
        while ($round < 200 && ($round < $ROUNDS || $f->stages < 8)) {
            $round++;
            my $before = $f->stages;
            pump(\%kids, 8 + int rand 13);
            my ($victim) = (values %kids)[int rand scalar keys %kids];
            delete $kids{$victim->{id}};
            my $st = kill_writer($victim);
            $sigkilled++ if ($st & 127) == 9;
            push @done, $victim;
            $in_growth++ if $f->stages != $before;
            # The parent's add goes on, whatever the victim held (a lock of
            # the growth it was in, say); a hang ends in the global timeout.
            my $ok = eval { $f->add("parent-$round") || $f->contains("parent-$round") };
            $parent_ok++ if $ok;
            diag("round $round: $@") if !$ok && $@;
            my $k = start_writer($f, $kind, $path, $layout, ++$next_id);
            $kids{$k->{id}} = $k;
        }
        pump(\%kids, 10);
        for my $k (values %kids) { kill_writer($k); push @done, $k }
        is($sigkilled, $round, "$layout $kind: $round writers killed by SIGKILL at random moments");
        is($parent_ok, $round, "$layout $kind: the parent's add after each kill completed");
        diag("$layout $kind: $in_growth of $round kills fell in a while when a stage was added; stages now " . $f->stages)
            if $ENV{TEST_VERBOSE};

        my ($acked, $lost) = (0, 0);
        for my $k (@done) {
            $acked += $k->{last};
            $lost += grep { !$f->contains("w$k->{id}-$_") } 1 .. $k->{last};
        }
        cmp_ok($acked, '>', 500, "$layout $kind: writers reported $acked adds");
        is($lost, 0, "$layout $kind: every reported add is present");
        is(scalar(grep { !$f->contains("parent-$_") } 1 .. $round), 0, "$layout $kind: ... and every add of the parent");
        if ($kind eq 'file') {
            my $g = $C->new($path, 10, 0.01, {layout => $layout});
            my $miss = 0;
            for my $k (@done) { $miss += grep { !$g->contains("w$k->{id}-$_") } 1 .. $k->{last} }
            is($miss, 0, "$layout $kind: ... seen through a handle opened now too");
            is($g->stages, $f->stages, "$layout $kind: ... with the same stages");
        }
        my $stages = $f->stages;
        cmp_ok($stages, '>=', 8, "$layout $kind: the filter went through at least eight stages ($stages)");

        # Still usable: new items are new, kept, and make it grow again.
        my $newest = $f->stats->{stage_info}[-1]{capacity};
        my ($i, $new) = (0, 0);
        while ($f->stages == $stages && $i < 3 * $newest + 10_000) {
            $new += $f->add('after-' . ++$i) ? 1 : 0;
        }
        cmp_ok($f->stages, '>', $stages, "$layout $kind: fresh adds grow the filter further ($i items)");
        cmp_ok($new, '>', $i * 0.98, "$layout $kind: ... told new ($new of $i)");
        is(scalar(grep { !$f->contains("after-$_") } 1 .. $i), 0, "$layout $kind: ... and kept");
    }
}

done_testing;
