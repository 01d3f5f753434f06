# What the POD and README promise of windowed filters and no other test
# checks: the clock set back and forward, retention exact on the period grid,
# the window accessor's rounding and limits, stats of the current generation,
# ops, clear of every generation, frozen and read-only handles that forget
# with time, read-only copies while steps land, reopening with other window
# options, the blocked layout's generations, batches, the bytes at their
# documented offsets, the command line's durations, and the step words at
# their limit.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child reap croaks_like slurp spew run_cli);
use BFClock qw(with_fake_clock);
use BFStop qw(run_stopped);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "16-window-promises: global timeout\n" };
alarm 600;    # a hang guard: an idle host takes about 20 s, a loaded one minutes

# --- the clock ----------------------------------------------------------------------------------
# "A clock set back steps nothing and brings back nothing already forgotten
# (items live longer by the jump); a clock set forward forgets early." The
# host's clock cannot be set back under the other processes of a test run,
# so one process gets a clock of its own (t/lib/BFClock.pm).

# The lines "key value" of a child's output, as a hash.
sub kv { return map { /^(\S+) ?(.*)$/ ? ($1, $2) : () } split /\n/, $_[0] }

# The generation start a filter file's view word holds (src/math/window.rs,
# View: a flag << 63 | generation start << 5 | ring slot, at 256): moves on
# with every step, whatever the clock says.
sub view_m {
    open(my $fh, '<:raw', $_[0]) or die "$_[0]: $!";
    sysseek($fh, 256, 0) && sysread($fh, my $w, 8) == 8 or die "$_[0]: $!";
    return (unpack('Q<', $w) & ~(1 << 63)) >> 5;
}

subtest 'the clock: set back, set forward, exact on the grid' => sub {
    # 30 s window, 4 generations: a period of 10 s. Time is base + x s.
    my $code = <<'PERL';
my $base = 1_900_000_000 * 1_000_000_000;    # 2030, far from the real time
my $at = sub { set_clock($base + int($_[0] * 1e9)) };
my %r;
$at->(0);
my $f = $C->new(undef, 1000, 0.01, { window => 30, generations => 4 });
my $epoch0 = unpack 'Q<', substr($f->serialize, 64, 8);
$r{epoch_offset_ns} = $epoch0 - $base;    # the tick the module adds
my $s = sub { my $st = $f->stats; "$st->{generation} " . sprintf('%.3f', $st->{generation_start} - $base / 1e9) };
my $has = sub { join '', map { $f->contains($_) ? 1 : 0 } @_ };
$f->add('A');
$at->(9.9);   $f->add('L');     # late in period 0
$at->(10);    $f->add('B');
$at->(20);    $f->add('C');
$at->(30);    $f->add('D');
$r{at30} = $s->();
$at->(39.9);  $r{q39} = $has->(qw(A L B C D));
# The queries at 40 s take no step: the filter's bytes (its view and
# generations) are the same after them; its stats say what the clock says.
$at->(40);    my $img40 = $f->serialize;
$r{q40} = $has->(qw(A L B C D));
$r{q40_nostep} = $f->serialize eq $img40 ? 1 : 0;
$r{q40_stats} = $s->();
$r{q40_many} = join '', $f->contains_many([qw(A L B C D)]);
$f->add('E');
$r{add40} = $s->();                             # the write stepped
# Forward 30 s: forgets as if the time had passed.
$at->(70);    $f->add_many(['X']);    # add_many steps too
$r{fwd70} = $s->();
$r{q70} = $has->(qw(B C D E X));
# Back 25 s: no step back, nothing forgotten comes back.
$at->(45);
$r{back_new_B} = $f->add('B');
$f->add('Y');
$r{back45} = $s->();
$r{q45} = $has->(qw(B C D E X Y));
$at->(60);    $f->add('n1');
$r{back60} = $s->();
# Items live longer by the jump: X and Y (added at 70 and at 45 after
# the jump) go with the generation of 70, at 110.
$at->(109.9); $r{q109} = $has->(qw(X Y));
$at->(110);   $r{q110} = $has->(qw(X Y));
# A filter stepped only by rotate never steps with time, ten years on.
$at->(0);
my $m = $C->new(undef, 1000, 0.01, { window => undef, generations => 2 });
$m->add('kept');
$at->(10 * 365 * 86400);
$m->add('later');
$r{manual} = $m->stats->{generation} . ' ' . $m->contains('kept');
print map { "$_ $r{$_}\n" } sort keys %r;
PERL
    my ($out, $err) = with_fake_clock($code, "$dir/clock1");
    plan skip_all => $err if !defined $out;
    is($err, undef, 'the child ran');
    my %r = kv($out);
    # The module's clock is the coarse clock plus one tick (a few ms): a
    # shim without effect would show the real time here instead.
    cmp_ok($r{epoch_offset_ns} // -1, '>=', 0, 'the module reads the chosen clock')
        or return diag($out);
    cmp_ok($r{epoch_offset_ns}, '<', 100_000_000, '... plus at most a tick');
    my $tick = sprintf '%.3f', $r{epoch_offset_ns} / 1e9;
    is($r{at30}, "3 " . sprintf('%.3f', 30 + $tick), 'generation 3 at 30 s, started 30 s after the first');
    is($r{q39}, '11111', 'at 39.9 s: everything added since 0 still seen (A seen past t + window, within the upper bound)');
    is($r{q40}, '00111', 'at 40 s = 0 + window * g / (g - 1): A and L (added late, at 9.9 s) forgotten, by a query');
    is($r{q40_nostep}, 1, '... which took no step: the filter is byte for byte as before');
    is($r{q40_stats}, "4 " . sprintf('%.3f', 40 + $tick), '... and stats say the generation the clock says is current');
    is($r{q40_many}, '00111', 'contains_many forgets on time too');
    is($r{add40}, "4 " . sprintf('%.3f', 40 + $tick), 'the next write steps');
    is($r{fwd70}, "7 " . sprintf('%.3f', 70 + $tick), 'clock set forward 30 s: add_many steps, once, to generation 7');
    is($r{q70}, '00011', '... and B, C, D (added at 10, 20, 30) forgotten as if the time had passed; E (40) kept');
    is($r{back_new_B}, 1, 'clock set back 25 s: a forgotten item is new');
    is($r{back45}, "7 " . sprintf('%.3f', 70 + $tick), '... the filter does not step back');
    is($r{q45}, '100111', '... nothing forgotten comes back (C, D), B added again is seen, E, X, Y seen');
    is($r{back60}, "7 " . sprintf('%.3f', 70 + $tick), '... nor steps while the clock is behind the current generation');
    is($r{q109}, '11', 'X and Y seen at 109.9 s: Y lived 64.9 s of the clock, longer by the jump');
    is($r{q110}, '00', 'and forgotten at 110 s, with the generation of 70');
    is($r{manual}, '0 1', 'window => undef: ten years on, no step, nothing forgotten');
};

# A copy on a host whose clock is ahead forgets early, as the original would
# there: this process keeps the real time, the copy's process runs 45 s ahead.
subtest 'the clock: a copy on a host ahead forgets early' => sub {
    my $src = $C->new(undef, 1000, 0.01, { window => 30, generations => 4 });
    $src->add('z');
    spew("$dir/ahead.bytes", $src->serialize);
    my $ahead = int((time + 45) * 1e9);
    my ($out, $err) = with_fake_clock(<<"PERL", "$dir/clock2");
set_clock($ahead);
open(my \$fh, '<:raw', '$dir/ahead.bytes') or die \$!;
my \$bytes = do { local \$/; <\$fh> };
my \$d = \$C->deserialize(\$bytes);
print 'copy ', \$d->contains('z'), ' ', \$d->generations, "\\n";
PERL
    plan skip_all => $err if !defined $out;
    is($out, "copy 0 4\n", 'the copy, 45 s ahead, has forgotten z (upper bound 40 s)');
    ok($src->contains('z'), 'the original, on time, holds it');
};

# "The window ... in seconds, as it was given (to 0.1 microsecond)"; "The
# window is from 0.001 seconds to 3653 days."
subtest 'the window accessor: as given, and limits' => sub {
    for ([1, 4, '1.000000000'], [1, 2, '1.000000000'], [1, 16, '1.000000000'], [0.001, 4, '0.001000000'],
        [7, 8, '7.000000000'], [2, 4, '2.000000000'], [0.1, 4, '0.100000000'], [1.2345678, 16, '1.234567800'])
    {
        my ($w, $g, $want) = @$_;
        my $f = $C->new(undef, 100, 0.01, { window => $w, generations => $g });
        is(sprintf('%.9f', $f->window), $want, "window $w, $g generations: $want s");
        is(sprintf('%.9f', $f->stats->{window}), $want, '... in stats too');
    }
    my $max = $C->new(undef, 100, 0.01, { window => 3653 * 86400 });
    is($max->window, 315619200, 'the longest window, 3653 days, is taken');
    croaks_like(sub { $C->new(undef, 100, 0.01, { window => 3653 * 86400 + 1 }) },
        qr/\AData::BloomFilter::Shared->new: window of 315619201 seconds is longer than the longest, 315619200 \(3653 days\) at /,
        'a second more');
    croaks_like(sub { $C->new(undef, 100, 0.01, { window => 0.000999 }) },
        qr/\AData::BloomFilter::Shared->new: window of 0.000999 seconds is shorter than the shortest, 0.001 at /,
        'a microsecond less than the shortest');
};

# "For a windowed filter bits_set, count, fill_ratio and estimated_fpp
# describe the current generation"; "each a full filter of the chosen
# layout sized for capacity"; stats adds window, generations, generation and
# generation_start; overfull follows count.
subtest 'stats: the current generation' => sub {
    my @plain_keys = sort keys %{ $C->new(undef, 100, 0.01)->stats };
    for my $layout (qw(standard blocked)) {
        my $w = $C->new(undef, 10_000, 0.01, { layout => $layout, window => undef, generations => 3 });
        my $p = $C->new(undef, 10_000, 0.01, { layout => $layout });
        is($w->layout, $layout, "$layout: the layout");
        is_deeply([$w->bits, $w->hashes], [$p->bits, $p->hashes], "$layout: each generation is a plain filter's geometry");
        is_deeply([sort keys %{ $w->stats }], [sort @plain_keys, qw(window generations generation generation_start)],
            "$layout: stats has a plain filter's keys and the four of a window");
        $w->add_many([map {"old-$_"} 1 .. 3000]);
        $w->rotate;
        is(scalar $w->contains_many([map {"old-$_"} 1 .. 3000]), 3000, "$layout: the old items are still seen");
        my $s = $w->stats;
        is_deeply([@$s{qw(bits_set count fill_ratio estimated_fpp)}], [0, 0, 0, 0],
            "$layout: after a step the current generation is empty, and stats say so");
        is_deeply([map { 0 + $w->$_ } qw(bits_set count fill_ratio estimated_fpp)], [0, 0, 0, 0],
            "$layout: so do the accessors");
        my @new = map {"new-$_"} 1 .. 700;
        $w->add_many(\@new);
        $p->add_many(\@new);
        for my $acc (qw(bits_set count fill_ratio estimated_fpp)) {
            is($w->$acc, $p->$acc, "$layout: $acc is a plain filter's of the current generation's items");
            is($w->stats->{$acc}, $p->$acc, "$layout: stats $acc too");
        }
        my $small = $C->new(undef, 100, 0.01, { layout => $layout, window => undef, generations => 2 });
        $small->add_many([map {"o-$_"} 1 .. 400]);
        is($small->stats->{overfull}, 1, "$layout: overfull with 4 times the capacity in the current generation");
        $small->rotate;
        is($small->stats->{overfull}, 0, "$layout: not once they are in an older one");
    }
};

# generation: "the period since creation it started in"; generation_start:
# "when that period started".
subtest 'stats: generation and generation_start on the grid' => sub {
    my $f = $C->new(undef, 100, 0.01, { window => 0.2, generations => 3 });
    my $start0 = $f->stats->{generation_start};
    my $t_end = time + 0.5;
    my @bad;
    while (time < $t_end) {
        $f->add('tick ' . time);
        my $s = $f->stats;
        my $want = $start0 + $s->{generation} * 0.1;
        push @bad, "generation $s->{generation} started at $s->{generation_start}, not $want"
            if abs($s->{generation_start} - $want) > 1e-6;
        sleep 0.01;
    }
    # The add steps to the period of the time it ran, between the two
    # readings of the time around it, however late the host ran it (the
    # module's clock may be a tick ahead of Time::HiRes's).
    my $before = time;
    $f->add('last');
    my $s = $f->stats;
    my $after = time;
    is(scalar @bad, 0, 'generation_start is the first start plus generation periods') or diag(join "\n", @bad[0 .. 4]);
    cmp_ok($s->{generation}, '>=', 4, "half a second of writes: generation $s->{generation} (periods of 0.1 s)");
    cmp_ok($s->{generation_start}, '>', $before - 0.1 - 0.02, 'the current period started at most a period before the add');
    cmp_ok($s->{generation_start}, '<', $after + 0.02, '... and not after it');
};

# "ops counts write calls ... each add, add_many (however many items, none
# too), ... clear and freeze is one; queries are not counted", summed over
# every process: for windowed filters too.
subtest 'ops on a windowed filter' => sub {
    my $path = "$dir/ops.bf";
    my $f = $C->new($path, 1000, 0.01, { window => 3600, generations => 3 });
    my $ops = sub { $f->stats->{ops} };
    my $o = $ops->();
    $f->add('a');
    is($ops->() - $o, 1, 'add: one');
    $f->add_many([]);
    $f->add_many([qw(b c d)]);
    is($ops->() - $o, 3, 'add_many: one each, an empty one too');
    $f->contains('a');
    $f->contains_many([qw(a b)]);
    $f->stats;
    is($ops->() - $o, 3, 'queries: none');
    my $r = in_child(sub { my $h = $C->new($path, 1000, 0.01); $h->add('x'); $h->add_many(['y']); 'done' });
    is($r->{out}, 'done', 'another process added');
    is($ops->() - $o, 5, 'its calls are summed in');
    $f->clear;
    is($ops->() - $o, 6, 'clear: one');
    $f->rotate;
    is($ops->() - $o, 7, 'rotate: one');
    $f->freeze;
    is($ops->() - $o, 8, 'freeze: one');
};

# "clear forgets every generation", for every process sharing the filter.
subtest 'clear forgets every generation' => sub {
    for my $layout (qw(standard blocked)) {
        my $path = "$dir/clear-$layout.bf";
        my $f = $C->new($path, 1000, 0.01, { layout => $layout, window => undef, generations => 4 });
        for my $gen (1 .. 4) {
            $f->add_many([map {"g$gen-$_"} 1 .. 50]);
            $f->rotate if $gen < 4;
        }
        my @all = map { my $g = $_; map {"g$g-$_"} 1 .. 50 } 1 .. 4;
        is(scalar $f->contains_many(\@all), 200, "$layout: items in all four generations");
        my $r = in_child(sub { $C->new($path, 1000, 0.01)->clear; 'cleared' });
        is($r->{out}, 'cleared', "$layout: another process clears");
        is(scalar $f->contains_many(\@all), 0, "$layout: every generation forgotten");
        is($f->add('g1-1'), 1, "$layout: an item of the oldest is new again");
    }
};

# "A frozen windowed filter still forgets with time", through the freezing
# handle and through new_readonly; its mutations croak, rotate included.
subtest 'a frozen windowed filter forgets with time' => sub {
    my $path = "$dir/frozen.bf";
    # 0.3 s window, 3 generations: forgotten by t + 0.45 s. The clock is
    # the test's (t/lib/BFClock.pm): "seen at once" is checked at once
    # however late the host runs the process.
    my ($out, $err) = with_fake_clock(<<"PERL", "$dir/clock-frozen");
my \$base = 1_900_000_000;
my \$at = sub { set_clock(int((\$base + \$_[0]) * 1e9)) };
\$at->(0);
my \$f = \$C->new('$path', 1000, 0.01, { window => 0.3, generations => 3 });
\$f->add('x');
\$f->freeze;
my \$ro = \$C->new_readonly('$path');
print 'seen ', (\$f->contains('x') && \$ro->contains('x') ? 1 : 0), "\\n";
\$at->(0.3);
print 'seen_window ', (\$f->contains('x') && \$ro->contains('x') ? 1 : 0), "\\n";
\$at->(0.45 + 0.02);
print 'freezer ', (\$f->contains('x') ? 1 : 0), "\\n";
print 'ro ', (\$ro->contains('x') ? 1 : 0), "\\n";
print 'ro_many ', scalar(\$ro->contains_many(['x'])), "\\n";
PERL
    plan skip_all => $err if !defined $out;
    is($err, undef, 'the child ran') or diag($out);
    my %r = kv($out);
    is($r{seen}, 1, 'seen at once, through both handles');
    is($r{seen_window}, 1, '... and a window after the add');
    # The mutations croak, through a handle that froze the filter.
    my $f = $C->new("$dir/frozen2.bf", 1000, 0.01, { window => 0.3, generations => 3 });
    $f->add('x');
    $f->freeze;
    for my $call ([add => sub { $f->add('y') }], [rotate => sub { $f->rotate }], [clear => sub { $f->clear }],
        [add_many => sub { $f->add_many(['y']) }])
    {
        croaks_like($call->[1], qr/\AData::BloomFilter::Shared->$call->[0]: filter is frozen \(read-only\) at /,
            "frozen: $call->[0]");
    }
    is($r{freezer}, 0, 'forgotten after the upper bound, by the freezing handle');
    is($r{ro}, 0, '... and by a new_readonly handle');
    is($r{ro_many}, 0, '... in a batch too');
};

# A read-only descriptor of a live windowed filter: queries, sees another
# process's adds and steps, forgets with time; every mutator croaks.
subtest 'a read-only descriptor of a windowed filter' => sub {
    my $path = "$dir/ro.bf";
    my $f = $C->new($path, 1000, 0.01, { window => undef, generations => 3 });
    $f->add('a');
    open(my $fh, '<', $path) or die "$path: $!";
    my $ro = $C->new_from_fd($fh);
    is($ro->readonly, 1, 'readonly 1');
    is_deeply([$ro->generations, $ro->window], [3, undef], 'with the window');
    ok($ro->contains('a'), 'sees the items');
    my $bytes = $f->serialize;
    for my $call ([add => sub { $ro->add('b') }], [add_many => sub { $ro->add_many(['b']) }],
        [rotate => sub { $ro->rotate }], [clear => sub { $ro->clear }], [freeze => sub { $ro->freeze }])
    {
        croaks_like($call->[1], qr/\AData::BloomFilter::Shared->$call->[0]: filter handle is read-only at /,
            "read-only: $call->[0]");
    }
    is($f->serialize, $bytes, 'and changes nothing');
    my $r = in_child(sub { my $h = $C->new($path, 1000, 0.01); $h->rotate; $h->rotate; $h->add('b'); 'ok' });
    is($r->{out}, 'ok', 'another process steps twice and adds');
    is($ro->stats->{generation}, 2, 'the read-only handle sees the steps');
    ok($ro->contains('a') && $ro->contains('b'), '... and the items of both generations');
    $r = in_child(sub { $C->new($path, 1000, 0.01)->rotate; 'ok' });
    ok(!$ro->contains('a') && $ro->contains('b'), 'a third step: the first item forgotten');

    # On the test's clock (t/lib/BFClock.pm): seen within the window
    # however late the host runs the process.
    my $timed = "$dir/ro-timed.bf";
    my ($out, $err) = with_fake_clock(<<"PERL", "$dir/clock-ro");
my \$base = 1_900_000_000;
my \$at = sub { set_clock(int((\$base + \$_[0]) * 1e9)) };
\$at->(0);
my \$w = \$C->new('$timed', 1000, 0.01, { window => 0.3, generations => 3 });
\$w->add('x');
undef \$w;    # no writer left: nothing steps
open(my \$th, '<', '$timed') or die "$timed: \$!";
my \$rt = \$C->new_from_fd(\$th);
\$at->(0.29);
print 'seen ', (\$rt->contains('x') ? 1 : 0), "\\n";
\$at->(0.45 + 0.02);
print 'gone ', (\$rt->contains('x') ? 0 : 1), "\\n";
PERL
    plan skip_all => $err if !defined $out;
    is($err, undef, 'timed: the child ran') or diag($out);
    my %t = kv($out);
    is($t{seen}, 1, 'timed: seen');
    is($t{gone}, 1, 'timed: forgotten after the upper bound with no writer at all');
};

# "A read-only handle copies again when two or more steps land, up to 16
# times (then it croaks)"; a writable handle holds the next clear back, so
# its copy succeeds.
subtest 'copies through a read-only handle while steps land' => sub {
    # Consistent copies: items of step j are added right after the step to
    # j, so a copy of generation m (3 generations) holds those of m - 2 and
    # m - 1. A copy that croaks must say the documented words.
    # The copier is another process, stopped in the middle of each pass
    # over the generations (t/lib/BFStop.pm); this process steps (and adds
    # that step's items) at every third stop, so that one step lands during
    # some attempts (answered for the later view) and two during others
    # (copied again), wherever the host's scheduler puts the two processes.
    my $path = "$dir/ro-copy.bf";
    my $f = $C->new($path, 100_000, 0.001, { window => undef, generations => 3 });
    my $j = 0;
    my $step = sub {
        $f->rotate;
        $j++;
        $f->add_many([map {"s$j i$_"} 1 .. 10]);
    };
    $step->() for 1 .. 3;    # every copy is of generation 3 or later
    my $every_third = sub { $step->() if $_[1] % 3 == 0; 1 };
    my $r0 = run_stopped(<<"PERL", file => $path, on_stop => $every_third);
open(my \$fh, '<', '$path') or die "$path: \$!";
my \$ro = \$C->new_from_fd(\$fh);
my (\$checked, \$croaked, \$stepped) = (0, 0, 0);
for my \$round (1 .. 100) {
    my \$before = \$ro->stats->{generation};
    my \$bytes = eval { \$ro->serialize };
    if (!defined \$bytes) {
        print "bad round \$round: \$@"
            if \$@ !~ /\\AData::BloomFilter::Shared->serialize: the filter stepped during each of 16 attempts to copy it at /;
        \$croaked++;
        next;
    }
    my \$d = \$C->deserialize(\$bytes);
    my \$m = \$d->stats->{generation};
    for my \$s ((\$m > 2 ? \$m - 2 : 1) .. \$m - 1) {
        my \$missing = grep { !\$d->contains("s\$s i\$_") } 1 .. 10;
        print "bad round \$round: generation \$m, step \$s missing \$missing\n" if \$missing;
    }
    \$checked++ if \$m > 2;
    \$stepped++ if \$m != \$before;
}
print "counts \$checked \$croaked \$stepped\n";
PERL
    plan skip_all => $r0->{skip} if $r0->{skip};
    is($r0->{error}, undef, 'the read-only copier ran') or diag($r0->{out});
    my @bad = $r0->{out} =~ /^(bad .*)$/mg;
    my ($checked, $croaked, $stepped) = $r0->{out} =~ /^counts (\d+) (\d+) (\d+)$/m;
    is(scalar @bad, 0, 'every read-only copy holds the steps its generation number says') or diag(join "\n", @bad[0 .. 9]);
    cmp_ok($checked // 0, '>', 50, ($checked // 0) . " copies were checked ($croaked croaked, $stepped of a later generation than before the copy)")
        or diag($r0->{out});
    cmp_ok($stepped // 0, '>', 0, "steps landed during copies ($r0->{stops} stops, $j steps)");

    # 16 generations of 120 KiB, a 1 ms window (a period of 67 us). The
    # copies run in another process that stops in the middle of
    # each pass over the generations (t/lib/BFStop.pm); at each stop this
    # process steps the filter twice, so that two steps land during every
    # attempt, however the host schedules the two. Only the order of events
    # is the test's: the steps are real ones, taken while the copier is
    # stopped, as a descheduled copier sees them.
    my $big = "$dir/ro-big.bf";
    my $b = $C->new($big, 100_000, 0.01, { window => 0.001, generations => 16 });
    my ($steps, $bad_steps) = (0, 0);
    my $two_steps = sub {
        for (1, 2) {
            my $v = view_m($big);
            $b->rotate;
            $steps++;
            $bad_steps++ if view_m($big) <= $v;
        }
        return 1;
    };
    my $r = run_stopped(<<"PERL", file => $big, on_stop => $two_steps);
open(my \$fh, '<', '$big') or die "$big: \$!";
my \$rb = \$C->new_from_fd(\$fh);
my \$ok = eval { \$rb->serialize; 1 };
print \$ok ? "a copy\n" : "croaked: \$@";
PERL
    plan skip_all => $r->{skip} if $r->{skip};
    is($r->{error}, undef, 'the read-only copier ran') or diag($r->{out});
    like($r->{out}, qr/\Acroaked: Data::BloomFilter::Shared->serialize: the filter stepped during each of 16 attempts to copy it at /,
        'a read-only copy of a filter stepping every ms croaks with the documented words') or diag($r->{out});
    cmp_ok($r->{stops}, '>=', 16, "it was stopped during its attempts ($r->{stops} stops, $steps steps)");
    # Each attempt reads each of the three watched pages about once, so
    # about three stops each (45 seen for 16): at most 8 each still tells
    # 16 attempts from 16 for each of many sizings (a windowed filter's
    # copy is not sized again; 64 sizings took over 2,000 stops).
    cmp_ok($r->{stops}, '<=', 8 * 16, "it croaked after its 16 attempts, not more ($r->{stops} stops)");
    is($bad_steps, 0, 'and each rotate at a stop was a step');

    # A writable handle's copy succeeds while the filter steps: it holds the
    # cleaner word, so no spare is cleared under it and at most one step
    # lands. At each stop this process adds, waits two periods of the window
    # (a sleep lasts at least that long however busy the host) and adds
    # again: the generation the clock says moves on by two or more during
    # every copy (a read-only handle would copy again). A filter of its own:
    # the rotates above took the other's view far ahead of the clock.
    $big = "$dir/rw-big.bf";
    $b = $C->new($big, 100_000, 0.01, { window => 0.001, generations => 16 });
    my $adds = 0;
    my $writes = sub {
        $b->add('during ' . $adds++);
        sleep 0.0002;
        $b->add('during ' . $adds++);
        return 1;
    };
    my @copies;
    for my $copy (1 .. 3) {
        my $w = run_stopped(<<"PERL", file => $big, on_stop => $writes);
my \$h = \$C->new('$big', 100_000, 0.01);
my \$gen0 = \$h->stats->{generation};
my \$bytes = eval { \$h->serialize };
my \$gen1 = \$h->stats->{generation};
print defined \$bytes ? "copy \$gen0 \$gen1\n" : "croaked: \$@";
PERL
        is($w->{error}, undef, "writable copy $copy: the copier ran") or diag($w->{out});
        push @copies, [$w->{stops}, $w->{out}];
    }
    my @failed = grep { $_->[1] !~ /\Acopy \d+ \d+$/ } @copies;
    is(scalar @failed, 0, 'a writable handle copies it meanwhile (' . scalar(@copies) . ' copies)')
        or diag(join "\n", map { $_->[1] } @failed);
    my @stepped = grep { $_->[1] =~ /\Acopy (\d+) (\d+)/ && $2 > $1 + 1 && $_->[0] > 0 } @copies;
    is(scalar @stepped, scalar @copies,
        'while the filter stepped (stopped during each copy, two steps or more of the clock)')
        or diag(join "\n", map {"$_->[0] stops: $_->[1]"} @copies);
};

# "An existing file keeps its window; an explicit window or generations
# that differs from it croaks" (and changes nothing).
subtest 'reopening with window options' => sub {
    my $timed = "$dir/reopen-timed.bf";
    my $manual = "$dir/reopen-manual.bf";
    my $plain = "$dir/reopen-plain.bf";
    $C->new($timed, 1000, 0.01, { window => 3600, generations => 5 })->add('t');
    $C->new($manual, 1000, 0.01, { window => undef, generations => 3 })->add('m');
    $C->new($plain, 1000, 0.01)->add('p');
    my $same = $C->new($timed, 1000, 0.01, { window => 3600, generations => 5 });
    ok($same->contains('t') && $same->generations == 5, 'the same window and generations, explicit: opens');
    ok($C->new($manual, 1000, 0.01, { window => undef, generations => 3 })->contains('m'),
        'window => undef with the same generations: opens a filter stepped by hand');
    my %before = map { ($_ => slurp($_)) } $timed, $manual, $plain;
    for ([$timed, { window => undef, generations => 5 }, 'window 3600s, 5 generations', 'manual steps, 5 generations'],
        [$manual, { window => 60, generations => 3 }, 'manual steps, 3 generations', 'window 60s, 3 generations'],
        [$plain, { window => undef, generations => 3 }, 'no window', 'manual steps, 3 generations'])
    {
        my ($path, $opts, $has, $asked) = @$_;
        croaks_like(sub { $C->new($path, 1000, 0.01, $opts) },
            qr/\AData::BloomFilter::Shared->new: window mismatch \(the filter has \Q$has\E, not \Q$asked\E\) at /,
            "$has, asked for $asked");
    }
    is(slurp($_), $before{$_}, "$_: unchanged by the refusals") for sort keys %before;
    {
        # The options name the window only, the same as the file's; the
        # generations are not given: the file's 5 stand.
        my $f = eval { $C->new($timed, 1000, 0.01, { window => 3600 }) };
        ok($f, 'the same window without generations opens a file of 5 generations') or diag($@);
        is($f && $f->generations, 5, 'and keeps its 5 generations');
        croaks_like(sub { $C->new($timed, 1000, 0.01, { window => 7200 }) },
            qr/\AData::BloomFilter::Shared->new: window mismatch \(the filter has window 3600s, 5 generations, not window 7200s, 5 generations\) at /,
            'another window without generations still croaks');
        # The same for a windowed filter's bytes.
        my $bytes = $f->serialize;
        my $d = eval { $C->deserialize($bytes, { window => 3600 }) };
        is($d && $d->generations, 5, 'its bytes with the window alone: 5 generations') or diag($@);
        ok($d && $d->contains('t'), 'and its item');
        is($C->new(undef, 1000, 0.01, { window => 3600 })->generations, 4, 'a new filter: 4 generations');
    }
};

# "each a full filter of the chosen layout": with every generation full, a
# blocked windowed filter's rate is up to g times fp_rate.
subtest 'blocked generations: false positives at capacity' => sub {
    for my $g (2, 4) {
        my $f = $C->new(undef, 10_000, 0.01, { layout => 'blocked', window => undef, generations => $g });
        for my $gen (1 .. $g) {
            $f->rotate if $gen > 1;
            $f->add_many([map {"g$gen-$_"} 1 .. 10_000]);
        }
        my $n = 100_000;
        my $fp = $f->contains_many([map {"absent-$_"} 1 .. $n]) / $n;
        my $bound = $g * 0.01;
        cmp_ok($fp, '<=', $bound + 3 * sqrt($bound * (1 - $bound) / $n), "blocked g $g: at most g * fp_rate ($fp)");
        cmp_ok($fp, '>', 0.01, "blocked g $g: above one generation's rate: every generation is looked at");
    }
};

# add_many on a windowed filter: how many were new in every context, the out
# array 0 for items a live older generation holds; contains_many likewise.
subtest 'batches on a windowed filter' => sub {
    for my $layout (qw(standard blocked)) {
        my $f = $C->new(undef, 1000, 0.001, { layout => $layout, window => undef, generations => 3 });
        my @old = map {"old-$_"} 1 .. 50;
        my @new = map {"new-$_"} 1 .. 50;
        $f->add_many(\@old);
        is($f->rotate, 1, "$layout: rotate, a method that changes the filter, returns true");
        my @out = ('junk') x 200;
        my @list = $f->add_many([@old, @new], \@out);
        is_deeply(\@list, [50], "$layout: list context: one number, the new ones");
        is_deeply(\@out, [(0) x 50, (1) x 50], "$layout: the out array: 0 for items of an older generation, 1 for new");
        is(join('', $f->contains_many([@old, @new, 'none'])), ('1' x 100) . '0', "$layout: contains_many, list context");
        $f->contains_many([@old, 'none'], \my @present);
        is_deeply(\@present, [(1) x 50, 0], "$layout: contains_many's out array");
        $f->rotate;
        $f->rotate;
        is(scalar $f->contains_many(\@old), 50, "$layout: re-added, the old ones live on");
        $f->rotate;
        is(scalar $f->contains_many([@old, @new]), 0, "$layout: and are forgotten g steps after");
    }
};

# The command line: durations as numbers of seconds and with every unit,
# the limits, and info --json's generation_start in seconds since the epoch.
subtest 'command line durations and limits' => sub {
    my $cli = \&run_cli;
    my $n = 0;
    for ([3600, 3600], ['1.5', 1.5], ['45s', 45], ['7d', 7 * 86400], ['90m', 5400], ['0.001', 0.001],
        ['3653d', 315619200])
    {
        my ($arg, $secs) = @$_;
        my $path = "$dir/cli-w" . $n++ . '.bf';
        my ($rc, $out) = $cli->('create', $path, '-n', 100, '--window', $arg, '--generations', 2);
        is($rc, 0, "create --window $arg") or diag($out);
        my $f = $C->new($path, 100, 0.01);
        ok(abs($f->window - $secs) < 1e-9, "--window $arg: $secs s");
    }
    for my $arg (qw(3654d 0.0009)) {
        my $path = "$dir/cli-bad.bf";
        my ($rc, $out) = $cli->('create', $path, '-n', 100, '--window', $arg);
        is($rc, 2, "--window $arg: a usage error");
        like($out, qr/\Abloomfilter-shared: --window: .*(longer than the longest|shorter than the shortest)/,
            "--window $arg: says which limit");
        ok(!-e $path, "--window $arg: no file");
    }
    my $t = time;
    my ($rc, $out) = $cli->('create', "$dir/cli-json.bf", '-n', 100, '--window', '1h');
    my $t_after = time;
    ($rc, $out) = $cli->('info', '--json', "$dir/cli-json.bf");
    require JSON::PP;
    my $j = JSON::PP->new->decode($out);
    # Created between the two readings (the module's clock may be a tick
    # ahead), however long the command took to start.
    ok($j->{generation_start} > $t - 0.1 && $j->{generation_start} < $t_after + 0.1,
        "info --json: generation_start in seconds since the epoch ($j->{generation_start}, created from $t to $t_after)");
};

# "serialize of a windowed filter writes its window, generations, the
# instant its periods are counted from, the current generation's number, and
# every generation's bits and time of last add": at the offsets of "The byte
# format", the generations current first in age order (not the ring's), the
# spare left behind.
subtest 'the bytes of a windowed filter, at the documented offsets' => sub {
    for my $layout (qw(standard blocked)) {
        for my $window (undef, 3600) {
            my $what = "$layout, window " . ($window // 'none');
            my $f = $C->new(undef, 1000, 0.01, { layout => $layout, window => $window, generations => 3 });
            my @items = map { my $s = $_; [map {"step $s item $_"} 1 .. 30] } 0 .. 4;
            for my $step (0 .. 4) {
                $f->add_many($items[$step]);
                $f->rotate if $step < 4;
            }
            my $b = $f->serialize;
            my $gen_bytes = $f->bits / 8;
            is(length $b, 3 * ($gen_bytes + 8) + 88, "$what: g * (bits / 8 + 8) + 88 bytes");
            is(substr($b, 0, 8), 'BLOOMSER', "$what: magic");
            is_deeply([unpack 'V V V V', substr($b, 8, 16)], [2, $layout eq 'standard' ? 1 : 2, $f->hashes, 3],
                "$what: version 2, hash scheme, k, g at 20");
            is_deeply([unpack 'Q< Q<', substr($b, 24, 16)], [$f->bits, 1000], "$what: m and capacity");
            is(unpack('d<', substr($b, 40, 8)), 0.01, "$what: fp_rate");
            is(unpack('Q<', substr($b, 48, 8)), 0, "$what: seed");
            is(unpack('Q<', substr($b, 56, 8)), ($window // 0) * 1e9, "$what: window in ns at 56");
            my ($epoch0, $gen) = unpack 'Q< Q<', substr($b, 64, 16);
            is($gen, 4, "$what: the generation number at 72");
            is($gen, $f->stats->{generation}, "$what: ... stats' generation");
            if ($window) {
                my $start = ($epoch0 + $gen * $window * 1e9 / 2) / 1e9;
                ok(abs($start - $f->stats->{generation_start}) < 1e-6,
                    "$what: epoch0 at 64, plus generation periods, is generation_start");
            }
            is_deeply([unpack 'Q<3', substr($b, 80, 24)], [5, 4, 3],
                "$what: last words at 80, current first: one more than the period (step) of the latest add");
            for my $age (0 .. 2) {
                my $plain = $C->new(undef, 1000, 0.01, { layout => $layout });
                $plain->add_many($items[4 - $age]);
                my $want = substr($plain->serialize, 56, $gen_bytes);
                is(substr($b, 80 + 24 + $age * $gen_bytes, $gen_bytes), $want,
                    "$what: bit array $age holds the items of step " . (4 - $age));
            }
            my $d = $C->deserialize($b);
            $d->rotate;
            is($d->bits_set, 0, "$what: the copy's spare (its next current generation) starts clean");
        }
    }
};

# "the generation number is at its limit (corrupted file)": rotate found the
# shared step words holding what no step writes.
subtest 'step words at their limit' => sub {
    my $path = "$dir/limit.bf";
    my $f = $C->new($path, 1000, 0.01, { window => undef, generations => 3 });
    $f->add('a');
    $f->rotate;
    undef $f;
    # src/shm/format.rs (offsets) and src/math/window.rs (View): the view
    # word (a flag << 63 | generation start << 5 | ring slot) at 256, the
    # clean words at 512 (the spare's holds its start + 1).
    my $h = slurp($path);
    my $view = unpack 'Q<', substr($h, 256, 8);
    my ($m, $pos) = ($view >> 5, $view & 31);
    my ($spare) = grep { unpack('Q<', substr($h, 512 + 8 * $_, 8)) == $m + 1 } 0 .. 3;
    ok(defined $spare, 'the spare generation is found clean') or return;
    my $max = (1 << 58) - 1;
    substr($h, 256, 8) = pack 'Q<', $max << 5 | $pos;
    substr($h, 512 + 8 * $spare, 8) = pack 'Q<', $max + 1;
    spew($path, $h);
    my $g = $C->new($path, 1000, 0.01);
    is($g->stats->{generation}, $max, 'the generation number read is the largest');
    croaks_like(sub { $g->rotate },
        qr/\AData::BloomFilter::Shared->rotate: the generation number is at its limit \(corrupted file\) at /,
        'rotate');
    ok($g->contains('a'), 'the items are still there');
};

done_testing;
