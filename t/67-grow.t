# Filters that grow, in one process: the accessors before and after growth,
# every item kept through the stages, capacity and bits as the stages'
# totals, max_capacity, bad options, files (reopen, a handle opened before
# the growth, freeze and new_readonly), memfds (new_from_fd and a fork),
# clear, the false-positive rate after growing a hundredfold, count.
# Both layouts.
use strict;
use warnings;
use Test::More;
use POSIX ();
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(reap croaks_like);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "67-grow: global timeout\n" };
alarm 240;

# How many items "$tag-$from" .. "$tag-$to" $f does not hold; how many of
# them its add says are new (adding them). Both are 0 for items added before.
sub missing { my ($f, $tag, $from, $to) = @_; return scalar grep { !$f->contains("$tag-$_") } $from .. $to }
sub told_new { my ($f, $tag, $from, $to) = @_; return scalar grep { $f->add("$tag-$_") } $from .. $to }

sub sum_of { my ($f, $key) = @_; my $s = 0; $s += $_->{$key} for @{ $f->stats->{stage_info} }; return $s }

for my $layout (qw(standard blocked)) {
    my %L = (layout => $layout);

    # --- accessors, and every item kept through the stages ----------------------------------------
    {
        my $plain = $C->new(undef, 1000, 0.01, {%L});
        is($plain->grow, undef, "$layout: grow is undef on a filter that does not grow");
        is($plain->max_capacity, undef, "$layout: ... max_capacity too");
        is($plain->stages, 1, "$layout: ... and it has one stage");

        my $f = $C->new(undef, 1000, 0.01, {%L, grow => 2});
        is($f->grow, 2, "$layout: grow is the factor given");
        is($f->max_capacity, undef, "$layout: max_capacity undef when none given");
        is($f->stages, 1, "$layout: one stage before any add");
        is($f->capacity, 1000, "$layout: capacity is the first stage's before growth");
        my $s0 = $f->stats;
        is(scalar @{ $s0->{stage_info} }, 1, "$layout: stats lists one stage");
        is($s0->{stage_info}[0]{capacity}, 1000, "$layout: ... of the capacity given");
        is($f->bits, $s0->{stage_info}[0]{bits}, "$layout: bits is the first stage's");
        is($s0->{grow}, 2, "$layout: stats has grow");
        is($s0->{stages}, 1, "$layout: stats has stages");
        ok(exists $s0->{max_capacity} && !defined $s0->{max_capacity}, "$layout: stats has max_capacity, undef");

        my $n = 40_000;
        my $new = told_new($f, 'i', 1, $n);
        # Fewer than 2% of new items may collide with earlier ones at 0.01.
        cmp_ok($new, '>', $n * 0.98, "$layout: nearly every item told new while growing ($new of $n)");
        # 1000 + 2000 + ... + 16000 = 31000 < 40000: a sixth stage.
        cmp_ok($f->stages, '>=', 5, "$layout: at least five stages (" . $f->stages . ')');
        my $s = $f->stats;
        is($s->{stages}, $f->stages, "$layout: stats' stages is the accessor's");
        is(scalar @{ $s->{stage_info} }, $f->stages, "$layout: stats lists every stage");
        is($f->capacity, 1000 * (2**$f->stages - 1), "$layout: capacity is 1000 * (2^stages - 1)");
        is($f->capacity, sum_of($f, 'capacity'), "$layout: capacity is the sum of the stages' capacities");
        is($f->bits, sum_of($f, 'bits'), "$layout: bits is the sum of the stages' bits");
        is($s->{capacity}, $f->capacity, "$layout: stats' capacity is the total");
        is($s->{bits}, $f->bits, "$layout: stats' bits is the total");
        my @caps = map { $_->{capacity} } @{ $s->{stage_info} };
        is_deeply(\@caps, [map { 1000 * 2**$_ } 0 .. $#caps], "$layout: each stage twice the last");
        my @bits = map { $_->{bits} } @{ $s->{stage_info} };
        is(scalar(grep { $bits[$_] <= $bits[$_ - 1] } 1 .. $#bits), 0, "$layout: each stage has more bits than the last");
        my @k = map { $_->{hashes} } @{ $s->{stage_info} };
        is(scalar(grep { $k[$_] < $k[$_ - 1] } 1 .. $#k), 0, "$layout: no stage has fewer hashes than the last (tighter rates)");
        is(scalar(grep { $s->{stage_info}[$_]{fill} < $caps[$_] } 0 .. $#caps - 1), 0,
            "$layout: every stage but the newest is full");
        cmp_ok(abs(sum_of($f, 'fill') - $new), '<=', $new * 0.02, "$layout: the fills add up to the new items");
        is(missing($f, 'i', 1, $n), 0, "$layout: every one of $n items present after growth");
        is(told_new($f, 'i', 1, $n), 0, "$layout: ... and none of them is new again");
        my $c = $f->count;
        cmp_ok(abs($c - $n), '<', $n * 0.1, "$layout: count $c within 10% of $n");
        is(scalar $f->contains_many([map {"i-$_"} 1 .. 1000]), 1000, "$layout: contains_many finds them too");
        my $stages = $f->stages;
        $f->add_many([map {"am-$_"} 1 .. 40_000], \my @was_new);
        cmp_ok($f->stages, '>', $stages, "$layout: add_many grows the filter too");
        cmp_ok(scalar(grep {$_} @was_new), '>', 40_000 * 0.98, "$layout: ... telling nearly every item new");
        is(missing($f, 'am', 1, 40_000), 0, "$layout: ... and keeping every item");

        # Its portable bytes carry every stage: back anonymous, in a memfd
        # and in a file, each with the same stages and items, and the same
        # bytes again.
        my $bytes = $f->serialize;
        my $file = "$dir/bytes-$layout.bf";
        for my $to ([], [memfd => 'back'], [path => $file]) {
            my $where = @$to ? $to->[0] : 'anonymous';
            my $d = $C->deserialize($bytes, {@$to});
            is($d->stages, $f->stages, "$layout: deserialize ($where) keeps the stages");
            is($d->grow, 2, "$layout: ... and the growth");
            is(missing($d, 'am', 1, 40_000) + missing($d, 'i', 1, $n), 0, "$layout: ... and every item");
            ok($d->serialize eq $bytes, "$layout: ... and gives the same bytes");
        }
        is($C->new($file, 1000, 0.01)->stages, $f->stages, "$layout: the deserialized file reopens with its stages");
        croaks_like(sub { $C->deserialize($bytes, {grow => 4}) },
            qr/^\Q$C\E->deserialize: growth mismatch \(the bytes are of a filter that grows by 2, not one that grows by 4\)/,
            "$layout: deserialize with another grow");
        croaks_like(sub { $C->deserialize($C->new(undef, 1000, 0.01, \%L)->serialize, {grow => 2}) },
            qr/^\Q$C\E->deserialize: growth mismatch \(the bytes are of a filter that does not grow/,
            "$layout: deserialize of a plain filter's bytes with grow");

        # Refused on a filter that grows (merge and intersect: t/68-grow-merge.t).
        like((eval { $f->invert; 1 } ? '' : $@), qr/->invert: invert is not supported on a filter that grows/,
            "$layout: invert refused");
    }

    # --- max_capacity -----------------------------------------------------------------------------
    {
        my $f = $C->new(undef, 100, 0.01, {%L, grow => 2, max_capacity => 700});
        is($f->max_capacity, 700, "$layout: max_capacity accessor");
        is($f->stats->{max_capacity}, 700, "$layout: ... and in stats");
        my ($added, $err, $refused) = (0, undef, undef);
        for my $i (1 .. 5000) {
            if (!eval { $f->add("m-$i"); 1 }) { ($err, $refused) = ($@, $i); last }
            $added = $i;
        }
        ok(defined $err, "$layout: an add past max_capacity croaks (after $added items)");
        like($err // '', qr/^\Q$C\E->add: the filter is full: it holds its max_capacity of 700 items; nothing was added at /,
            "$layout: ... naming add and the bound");
        cmp_ok($added, '>=', 690, "$layout: ... not before the filter took about its bound ($added)");
        cmp_ok($added, '<=', 720, "$layout: ... nor long after");
        is($f->capacity, 700, "$layout: capacity is the bound (the last stage trimmed)");
        is($f->stages, 3, "$layout: 100 + 200 + 400 (trimmed): three stages");
        is($f->contains("m-$refused"), 0, "$layout: the refused item is not present");
        ok(!eval { $f->add("m-$refused"); 1 }, "$layout: adding it again croaks again");
        is(missing($f, 'm', 1, $added), 0, "$layout: every item added before the bound is present");
        my $again = eval { told_new($f, 'm', 1, $added) } // "croaked: $@";
        is($again, 0, "$layout: ... and adding them again returns false, no croak");
        ok(!eval { $f->add_many(['fresh-1', 'fresh-2']); 1 }, "$layout: add_many of new items at the bound croaks");
        like($@, qr/max_capacity of 700/, "$layout: ... naming the bound");
        is(missing($f, 'm', 1, $added), 0, "$layout: every item still present after the refusals");
    }
    {
        my $f = $C->new(undef, 100, 0.01, {%L, grow => 2, max_capacity => 700});
        $f->add("n-$_") for 1 .. 650;
        my @batch = map {"batch-$_"} 1 .. 100;
        my $ok = eval { $f->add_many(\@batch); 1 };
        my $err = $@;
        my $present = grep { $f->contains($_) } @batch;
        ok(!$ok, "$layout: add_many of 100 new items with room for 50 croaks");
        like($err, qr/^\Q$C\E->add_many: the filter is full: it holds its max_capacity of 700/, "$layout: ... naming add_many and the bound");
        # The batch's leading items went in before the bound: the croak says
        # how many, and they are present.
        my ($first) = $err =~ /; the first (\d+) items of this batch were added, none after/;
        ok(defined $first && $first <= $present && !grep({ !$f->contains($_) } @batch[0 .. ($first // 0) - 1]),
            "$layout: ... saying how many of the batch went in (" . ($first // 'none') . ", $present present)");
    }

    # --- bad options ------------------------------------------------------------------------------
    for my $method (qw(new new_memfd)) {
        my $make = sub { $method eq 'new' ? $C->new(undef, 1000, 0.01, {%L, @_}) : $C->new_memfd('g', 1000, 0.01, {%L, @_}) };
        for my $bad (1, 0, 17, -2, 'x', '', '2 ', 2.5, '1e1', [], {}, undef) {
            my $shown = !defined $bad ? 'undef' : ref $bad ? ref($bad) . ' ref' : "'$bad'";
            croaks_like(sub { $make->(grow => $bad) },
                qr/^\Q$C\E->$method: grow must be an integer from 2 to 16/, "$layout: $method grow => $shown");
        }
        for my $bad (0, -1, 'x', '', 1.5, []) {
            my $shown = ref $bad ? ref($bad) . ' ref' : "'$bad'";
            croaks_like(sub { $make->(grow => 2, max_capacity => $bad) },
                qr/^\Q$C\E->$method: max_capacity must be a positive integer/, "$layout: $method max_capacity => $shown");
        }
        croaks_like(sub { $make->(grow => 2, max_capacity => 999) },
            qr/^\Q$C\E->$method: max_capacity 999 is below the capacity 1000/, "$layout: $method max_capacity below capacity");
        ok(eval { $make->(grow => 2, max_capacity => 1000) }, "$layout: $method max_capacity equal to capacity is fine")
            or diag($@);
        croaks_like(sub { $make->(max_capacity => 5000) },
            qr/^\Q$C\E->$method: the max_capacity option needs the grow option/, "$layout: $method max_capacity without grow");
        croaks_like(sub { $make->(grow => 2, window => 60) },
            qr/^\Q$C\E->$method: grow and window do not go together/, "$layout: $method grow with window");
        ok(eval { $make->(grow => 16) }, "$layout: $method grow => 16 is fine") or diag($@);
    }

    # --- files ------------------------------------------------------------------------------------
    {
        my $path = "$dir/$layout.bf";
        my $f = $C->new($path, 1000, 0.01, {%L, grow => 2});
        my $early = $C->new($path, 1000, 0.01, {%L});    # opened before any growth, without grow
        is($early->grow, 2, "$layout: a second handle without grow sees the file's growth");
        is($early->stages, 1, "$layout: ... and its one stage");
        told_new($f, 'file', 1, 20_000);
        my $stages = $f->stages;
        cmp_ok($stages, '>=', 4, "$layout: the file grew to $stages stages");
        is($early->stages, $stages, "$layout: the handle opened before the growth sees every stage");
        is($early->capacity, $f->capacity, "$layout: ... and the same capacity");
        is($early->bits, $f->bits, "$layout: ... and bits");
        is(missing($early, 'file', 1, 20_000), 0, "$layout: ... and every item");
        is(told_new($early, 'file', 1, 20_000), 0, "$layout: ... and its adds of them return false");
        cmp_ok(told_new($early, 'early', 1, 20_000), '>', 19_600, "$layout: it adds new items, growing further");
        cmp_ok($f->stages, '>', $stages, "$layout: the first handle sees those stages");
        is(missing($f, 'early', 1, 20_000), 0, "$layout: ... and those items");

        my $re = $C->new($path, 1000, 0.01, {%L});
        is($re->grow, 2, "$layout: reopened without grow: grow kept");
        is($re->stages, $f->stages, "$layout: ... stages kept");
        is(missing($re, 'file', 1, 20_000) + missing($re, 'early', 1, 20_000), 0, "$layout: ... items kept");
        my $re2 = $C->new($path, 1000, 0.01, {%L, grow => 2});
        is($re2->stages, $f->stages, "$layout: reopened with the same grow");
        croaks_like(sub { $C->new($path, 1000, 0.01, {%L, grow => 4}) },
            qr/^\Q$C\E->new: .*growth mismatch \(the filter grows by 2, not grows by 4\)/,
            "$layout: reopened with another grow");
        undef $_ for $re, $re2;

        # freeze and new_readonly.
        my $before = $f->stages;
        ok(eval { $f->freeze; 1 }, "$layout: freeze a grown filter") or diag($@);
        my $ro = eval { $C->new_readonly($path) };
        ok($ro, "$layout: new_readonly of the frozen file") or diag($@);
        SKIP: {
            skip "$layout: no read-only handle", 6 unless $ro;
            is($ro->stages, $before, "$layout: read-only handle sees every stage");
            is($ro->grow, 2, "$layout: ... and grow");
            is($ro->capacity, $f->capacity, "$layout: ... and the capacity");
            is(missing($ro, 'file', 1, 20_000) + missing($ro, 'early', 1, 20_000), 0, "$layout: ... and every item");
            croaks_like(sub { $ro->add('after-freeze') }, qr/^\Q$C\E->add: filter handle is read-only/,
                "$layout: ... and refuses adds");
        }
        croaks_like(sub { $f->add('after-freeze-rw') }, qr/^\Q$C\E->add: filter is frozen/,
            "$layout: the frozen filter refuses new items");
        undef $_ for $f, $early, $ro;
    }

    # --- memfd: new_from_fd and a fork see stages added later by the other ------------------------
    {
        my $m = $C->new_memfd('grow', 1000, 0.01, {%L, grow => 2});
        my $n = $C->new_from_fd($m->memfd);
        is($n->grow, 2, "$layout: new_from_fd sees the memfd's growth");
        told_new($m, 'mfd', 1, 10_000);
        my $stages = $m->stages;
        cmp_ok($stages, '>=', 4, "$layout: the memfd grew to $stages stages");
        is($n->stages, $stages, "$layout: the new_from_fd handle sees them");
        is(missing($n, 'mfd', 1, 10_000), 0, "$layout: ... and every item");
        told_new($n, 'nfd', 1, 20_000);
        cmp_ok($m->stages, '>', $stages, "$layout: the first handle sees stages the second added");
        is(missing($m, 'nfd', 1, 20_000), 0, "$layout: ... and its items");

        # A child forked now waits while the parent grows the filter, then
        # checks the parent's items and grows it further itself.
        pipe(my $go_r, my $go_w) or die "pipe: $!";
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if (!$pid) {
            close $go_w;
            alarm 60;
            my $ok = eval {
                defined(my $line = <$go_r>) or die "no go\n";
                chomp $line;
                $m->stages == $line or die "child sees " . $m->stages . " stages, parent has $line\n";
                my $miss = missing($m, 'parent', 1, 40_000);
                die "child misses $miss of the parent's items\n" if $miss;
                told_new($m, 'child', 1, 60_000);
                $m->stages > $line or die "child did not grow the filter\n";
                1;
            };
            print STDERR "child: $@" unless $ok;
            POSIX::_exit($ok ? 0 : 1);
        }
        close $go_r;
        my $s1 = $m->stages;
        told_new($m, 'parent', 1, 40_000);
        cmp_ok($m->stages, '>', $s1, "$layout: the parent grew the memfd after the fork");
        syswrite $go_w, $m->stages . "\n";
        close $go_w;
        my ($st) = reap($pid, 90);
        is($st, 0, "$layout: the forked child saw the parent's later stages and items, and grew it further");
        is(missing($m, 'child', 1, 60_000), 0, "$layout: the parent sees every item the child added");
        is($n->stages, $m->stages, "$layout: ... and so does the new_from_fd handle, with every stage");
    }

    # --- clear ------------------------------------------------------------------------------------
    {
        my $f = $C->new(undef, 1000, 0.01, {%L, grow => 2});
        told_new($f, 'c', 1, 20_000);
        cmp_ok($f->stages, '>=', 4, "$layout: grown before clear");
        ok(eval { $f->clear; 1 }, "$layout: clear") or diag($@);
        is($f->stages, 1, "$layout: clear drops to one stage");
        is($f->capacity, 1000, "$layout: ... capacity back to the first stage's");
        is($f->bits, $f->stats->{stage_info}[0]{bits}, "$layout: ... and bits");
        my $back = 20_000 - missing($f, 'c', 1, 20_000);
        cmp_ok($back, '<', 20, "$layout: ... and the items are gone ($back of 20000 answer present)");
        cmp_ok(told_new($f, 'c', 1, 20_000), '>', 19_600, "$layout: they are new again");
        cmp_ok($f->stages, '>=', 4, "$layout: ... and the filter grows again");
        is(missing($f, 'c', 1, 20_000), 0, "$layout: ... keeping them");
    }

    # --- the false-positive rate after growing a hundredfold --------------------------------------
    {
        my $f = $C->new(undef, 1000, 0.01, {%L, grow => 2});
        my $n = 100_000;
        $f->add_many([map {"fp-in-$_"} 1 .. $n]);
        my $absent = 200_000;
        my $fp = $f->contains_many([map {"fp-out-$_"} 1 .. $absent]) / $absent;
        cmp_ok($fp, '<', 0.01, sprintf '%s: fp rate %.5f over %d absent items after 100x the first capacity (%d stages), below 0.01',
            $layout, $fp, $absent, $f->stages);
        my $c = $f->count;
        cmp_ok(abs($c - $n), '<', $n * 0.1, "$layout: count $c within 10% of $n");
    }
}

# --- the datasketches layout does not grow --------------------------------------------------------
croaks_like(sub { $C->new(undef, 1000, 0.01, {layout => 'datasketches', grow => 2}) },
    qr/^\Q$C\E->new: the datasketches layout does not grow/, 'new: grow with the datasketches layout');
croaks_like(sub { $C->new_memfd('g', 1000, 0.01, {layout => 'datasketches', grow => 2}) },
    qr/^\Q$C\E->new_memfd: the datasketches layout does not grow/, 'new_memfd: grow with the datasketches layout');

# --- the bounds without max_capacity, and one out of reach -------------------------------------
{
    # fp_rate 9.3e-9: stage 0 needs 30 probes, and each later stage more,
    # until a stage would need more than 32: first capacity 1 grown by 2
    # stops after 10 stages, 1023 items.
    my $f = $C->new(undef, 1, 9.3e-9, {grow => 2});
    my ($i, $err) = (0, '');
    eval { $f->add("bound-" . $i++) while $i < 100_000; 1 } or $err = $@;
    my ($stages, $items) = $err =~ /->add: the filter is full: its (\d+) stages hold (\d+) items, the most it can grow to; nothing was added/;
    ok(defined $stages, 'without max_capacity, a new item past the last stage croaks naming the bound')
        or diag($err);
    is($f->stages, $stages // -1, '... its stage count');
    is($f->capacity, $items // -1, '... and its items');
    is(scalar(grep { !$f->contains("bound-$_") } 0 .. $i - 2), 0, '... and every item before stays');
    croaks_like(sub { $C->new(undef, 1000, 0.01, {grow => 2, max_capacity => '4611686018427387904'}) },
        qr/^\Q$C\E->new: max_capacity 4611686018427387904 is out of reach: \d+ stages hold at most \d+ items/,
        'a max_capacity that no number of stages reaches');
}

# --- a file shorter than its stages ---------------------------------------------------------------
{
    my $path = "$dir/short.bf";
    my $f = $C->new($path, 1000, 0.01, {grow => 2});
    $f->add("short-$_") for 1 .. 5000;
    my $stages = $f->stages;
    undef $f;
    truncate($path, (-s $path) - 4096) or die "truncate: $!";
    croaks_like(sub { $C->new($path, 1000, 0.01) },
        qr/^\Q$C\E->new: .*file is shorter than its stages \(\d+ bytes, the published stages need \d+\)/,
        "a file cut short of its $stages stages");
}

# --- mmap_size counts the later stages' mappings ------------------------------------------------
for my $layout (qw(standard blocked)) {
    # Stages of 20 000, 40 000, 80 000 and 160 000 items: their bits are
    # many times the first stage's mapping.
    my $f = $C->new(undef, 20_000, 0.01, { grow => 2, layout => $layout });
    my $s1 = $f->stats;
    $f->add_many([map { "mm$_" } $_ * 10_000 + 1 .. ($_ + 1) * 10_000]) for 0 .. 19;
    my $s = $f->stats;
    cmp_ok($s->{stages}, '>=', 4, "$layout: grown to several stages");
    cmp_ok($s->{mmap_size}, '>=', $s->{bits} / 8, "$layout: mmap_size covers every stage's bits");
    # Beyond the bits, each later stage maps at most one page of rounding.
    cmp_ok($s->{mmap_size} - $s->{bits} / 8, '<=', $s1->{mmap_size} - $s1->{bits} / 8 + 4096 * ($s->{stages} - 1),
        "$layout: ... and not more than the first stage's control area and a page per later stage");
}

# --- a forked child's handle does not count its parent's new items again -------------------------
for my $layout (qw(standard blocked)) {
    my $path = "$dir/fork-fill-$layout.bf";
    # A first stage of 100 000: a writer adds its count to the shared fill
    # word every 1 562 new items (a 64th of the room left), so 300 new
    # items stay the writer's own count until the handle goes away.
    my $f = $C->new($path, 100_000, 0.01, { grow => 2, layout => $layout });
    my $new = grep { $f->add("ff$_") } 1 .. 300;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        $f->add("child$_") for 1 .. 10;    # the child's own new items
        exit 0;                            # the handle goes away here
    }
    reap($pid);
    undef $f;                              # and here, in the parent
    my $again = $C->new($path, 100_000, 0.01, { grow => 2, layout => $layout });
    is($again->stats->{stage_info}[0]{fill}, $new + 10,
        "$layout: the fill word counts the parent's and the child's new items once each");
}

done_testing;
