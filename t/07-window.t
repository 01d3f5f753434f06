# Windowed filters: options and croaks, retention exact in rotations,
# retention with real time (a 2-second window), a due step with the spare
# not clear, every process sees the same generation, concurrent adders
# across steps, SIGKILL storms during steps.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child reap croaks_like run_cli);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "07-window: global timeout\n" };
alarm 240;

subtest 'options and croaks' => sub {
    my $f = $C->new(undef, 1000, 0.01, { window => 2 });
    is($f->generations, 4, 'generations default to 4');
    ok(abs($f->window - 2) < 1e-6, 'window in seconds');
    my $plain = $C->new(undef, 1000, 0.01);
    is($plain->window, undef, 'a plain filter has no window');
    is($plain->generations, undef, 'nor generations');
    ok(!exists $plain->stats->{generations}, 'nor window keys in stats');
    is($f->stats->{mmap_size}, $plain->stats->{mmap_size} + 4 * $plain->bits / 8,
        'g + 1 generations of the bit array');
    my $s = $f->stats;
    is($s->{generations}, 4, 'stats: generations');
    ok(abs($s->{window} - 2) < 1e-6, 'stats: window');
    is($s->{generation}, 0, 'stats: first generation');
    ok(abs($s->{generation_start} - time) < 5, 'stats: its start is now');
    my $m = $C->new(undef, 1000, 0.01, { window => undef, generations => 3 });
    is($m->window, undef, 'stepped by hand: no window');
    is($m->generations, 3, 'stepped by hand: generations');
    is($m->stats->{generation_start}, undef, 'no start time without a window');

    my $pfx = qr/\AData::BloomFilter::Shared->new: /;
    for my $bad (0, -1, 'abc', 'nan', 9**9**9, []) {
        croaks_like(sub { $C->new(undef, 1000, 0.01, { window => $bad }) },
            qr/${pfx}window must be a positive number of seconds \(or undef\) at /,
            "window => " . (ref $bad ? 'ref' : $bad));
    }
    croaks_like(sub { $C->new(undef, 1000, 0.01, { window => 0.0001 }) },
        qr/${pfx}window of 0.0001 seconds is shorter than the shortest, 0.001 at /, 'too short');
    croaks_like(sub { $C->new(undef, 1000, 0.01, { window => 86400 * 3654 }) },
        qr/${pfx}window of 315705600 seconds is longer than the longest, 315619200 \(3653 days\) at /,
        'too long');
    for my $bad (1, 17, 'x', 2.5, -2, undef) {
        croaks_like(sub { $C->new(undef, 1000, 0.01, { window => 2, generations => $bad }) },
            qr/${pfx}generations must be an integer from 2 to 16 at /,
            'generations => ' . ($bad // 'undef'));
    }
    croaks_like(sub { $C->new(undef, 1000, 0.01, { generations => 3 }) },
        qr/${pfx}the generations option needs the window option \(window => undef for a filter stepped only by rotate\) at /,
        'generations alone');
    croaks_like(sub { $C->new_memfd('w', 1000, 0.01, { window => -5 }) },
        qr/\AData::BloomFilter::Shared->new_memfd: window must be a positive number/, 'new_memfd checks too');
    my $mfd = $C->new_memfd('w', 1000, 0.01, { window => 3, generations => 2 });
    is($mfd->generations, 2, 'new_memfd makes windowed filters');
    my $other = $C->new_from_fd($mfd->memfd);
    is($other->generations, 2, 'a descriptor attaches with the window');
    ok(abs($other->window - 3) < 1e-6, 'and its length');

    for my $op (qw(merge intersect)) {
        croaks_like(sub { $f->$op($plain) }, qr/->$op: $op is not supported on a windowed filter at /, $op);
        croaks_like(sub { $plain->$op($f) }, qr/->$op: $op is not supported on a windowed filter at /, "$op into plain");
    }
    croaks_like(sub { $f->invert }, qr/->invert: invert is not supported on a windowed filter at /, 'invert');
    croaks_like(sub { $plain->rotate }, qr/->rotate: rotate needs a windowed filter at /, 'rotate on plain');
    croaks_like(sub { $f->rotate(1) }, qr/->rotate: takes no arguments at /, 'rotate args');

    $f->add('z');
    $f->clear;
    ok(!$f->contains('z'), 'clear forgets every generation');

    my $path = "$dir/keep.bloom";
    my $a = $C->new($path, 1000, 0.01, { window => 3600, generations => 5 });
    $a->add('kept');
    $a->rotate;
    undef $a;
    my $b = $C->new($path, 1000, 0.01);
    is($b->generations, 5, 'a reopen keeps generations');
    ok(abs($b->window - 3600) < 1e-6, 'and the window');
    is($b->stats->{generation}, 1, 'and the current generation');
    ok($b->contains('kept'), 'and the items');
    croaks_like(sub { $C->new($path, 1000, 0.01, { window => 60 }) },
        qr/${pfx}window mismatch \(the filter has window 3600s, 5 generations, not window 60s, 5 generations\) at /,
        'another window');
    croaks_like(sub { $C->new($path, 1000, 0.01, { window => 3600, generations => 4 }) },
        qr/${pfx}window mismatch /, 'other generations');
    croaks_like(sub { $C->new("$dir/plain.bloom", 1000, 0.01); $C->new("$dir/plain.bloom", 1000, 0.01, { window => 60 }) },
        qr/${pfx}window mismatch \(the filter has no window, not window 60s, 4 generations\) at /,
        'a window asked of a plain file');
};

# The window fields are checked on attach; the step words are untrusted too.
subtest 'corrupt windowed files' => sub {
    my $path = "$dir/corrupt.bloom";
    $C->new($path, 1000, 0.01, { window => 60, generations => 3 })->add('a');
    open(my $fh, '<:raw', $path) or die "open: $!";
    my $good = do { local $/; <$fh> };
    close $fh;
    my $write = sub {
        my ($bytes) = @_;
        open(my $o, '>:raw', $path) or die "open: $!";
        print {$o} $bytes;
        close $o or die "close: $!";
    };
    # 104: generations (immutable header); 192..216: window, epoch0, checksum.
    for my $off (104, 192, 200, 208) {
        my $bad = $good;
        substr($bad, $off, 1) = chr(ord(substr($bad, $off, 1)) ^ 1);
        $write->($bad);
        my $ok = eval { $C->new($path, 1000, 0.01); 1 };
        ok(!$ok, "byte $off flipped: refused");
        like($@, qr/->new: .*header checksum mismatch \(corrupted file\)/, "byte $off: says so");
    }
    # Junk in the view, last[], clean[], cleaner and cursor words: answers
    # may be wrong, but nothing crashes or hangs, and rotate keeps working
    # or says it cannot.
    for my $junk ("\xff" x 8, "\x1f" . "\0" x 7, "\x55" x 8) {
        my $bad = $good;
        substr($bad, $_, 8) = $junk for 256, 264, 272, 280, map({ 320 + 8 * $_ } 0 .. 3),
            map({ 512 + 8 * $_ } 0 .. 3);
        $write->($bad);
        my $r = in_child(sub {
            my $f = $C->new($path, 1000, 0.01);
            $f->add('b');
            $f->contains('a');
            my $ok = eval { $f->rotate; 1 };
            return 'rotate: ' . ($ok ? 'ok' : $@ =~ /->rotate: / ? 'refused' : "died: $@");
        }, 10);
        like($r->{out}, qr/\Arotate: (?:ok|refused)\z/, 'junk step words: no crash, no hang')
            or diag explain $r;
    }
};

# An item added between two rotations is seen through g - 1 more and
# forgotten at the gth; re-adding extends its life.
subtest 'retention in rotations' => sub {
    for my $layout (qw(standard blocked)) {
        for my $g (2, 4, 16) {
            my $f = $C->new(undef, 1000, 0.01, { layout => $layout, window => undef, generations => $g });
            is($f->add('item'), 1, "$layout g $g: new");
            is($f->add('item'), 0, "$layout g $g: then seen");
            my @seen;
            for my $k (1 .. $g) {
                $f->rotate;
                push @seen, $f->contains('item') ? 1 : 0;
            }
            is_deeply(\@seen, [(1) x ($g - 1), 0], "$layout g $g: seen through g - 1 rotations");
            is($f->add('item'), 1, "$layout g $g: forgotten, so new again");
            $f->rotate for 1 .. $g - 1;
            is($f->add('item'), 0, "$layout g $g: seen just before its end");
            my @again;
            for my $k (1 .. $g) {
                $f->rotate;
                push @again, $f->contains('item') ? 1 : 0;
            }
            is_deeply(\@again, [(1) x ($g - 1), 0], "$layout g $g: re-adding started its life over");
            my @items = map { "i$_" } 1 .. 200;
            my @out;
            is($f->add_many(\@items, \@out), 200, "$layout g $g: add_many of new items");
            $f->rotate for 1 .. $g - 1;
            is(scalar $f->contains_many(\@items), 200, "$layout g $g: contains_many sees them");
            $f->rotate;
            is(scalar $f->contains_many(\@items), 0, "$layout g $g: and forgets them");
            is($f->stats->{generation}, 4 * $g - 1, "$layout g $g: one generation per rotation");
        }
    }
};

# What WINDOWED FILTERS says of memory and false positives.
subtest 'memory and false positives' => sub {
    my $w = $C->new(undef, 1_000_000, 0.001, { window => 86400 });
    my $p = $C->new(undef, 1_000_000, 0.001);
    is($p->bits / 8, 2 * 1024 * 1024, 'a plain filter of 1 000 000 at 0.001: 2 MiB of bits');
    is($w->stats->{mmap_size} - $p->stats->{mmap_size}, 4 * 2 * 1024 * 1024,
        'the windowed one 5 times that');
    for my $g (2, 4) {
        my $f = $C->new(undef, 10_000, 0.01, { window => undef, generations => $g });
        for my $gen (1 .. $g) {
            $f->rotate if $gen > 1;
            $f->add_many([map { "g$gen-$_" } 1 .. 10_000]);
        }
        my $n = 100_000;
        my $fp = $f->contains_many([map { "absent-$_" } 1 .. $n]) / $n;
        cmp_ok($fp, '<=', $g * 0.01, "g $g, every generation at capacity: at most g * fp_rate ($fp)");
    }
};

# Real time: a 2-second window. Seen at every moment before t + window,
# forgotten by t + window * g / (g - 1) plus one period.
subtest 'retention with real time' => sub {
    my %kids;
    for my $g (2, 4) {
        # Both at once: each in its own child, so the test waits once.
        $kids{$g} = in_child(sub {
            my $f = $C->new(undef, 1000, 0.01, { window => 2, generations => $g });
            my $period = 2 / ($g - 1);
            my $t = time;
            return "not new\n" if !$f->add('x');
            my @gone;
            while (time < $t + 1.95) {
                push @gone, sprintf('%.3f', time - $t) if !$f->contains('x');
                sleep 0.02;
            }
            return "gone at @gone\n" if @gone;
            # Re-added at 1.95 s: its life is counted from now.
            my $t2 = time;
            return "re-add new\n" if $f->add('x');
            while (time < $t2 + 1.95) {
                return sprintf("re-added, gone at %.3f\n", time - $t2) if !$f->contains('x');
                sleep 0.02;
            }
            sleep($t2 + 2 * $g / ($g - 1) + $period - time + 0.05);
            return sprintf("kept at %.3f\n", time - $t2) if $f->contains('x');
            return "not new again\n" if !$f->add('x');
            my $gen = $f->stats->{generation};
            return "generation $gen\n" if $gen < $g;
            return "ok\n";
        }, 30);
    }
    for my $g (2, 4) {
        is($kids{$g}{out}, "ok\n", "g $g: seen within the window, forgotten after it");
    }
};

# A filter with few writes: the calls since a step were too few to clear
# the next spare a slice each (a generation of 120 KiB: two slices), so a
# write that finds the next step due clears the rest first and steps. An
# item of a generation that expired while nobody wrote stays forgotten when
# the next add comes (writing that generation again would bring it back).
subtest 'few writes: a due step clears the spare first' => sub {
    for my $layout (qw(standard blocked)) {
        my $f = $C->new(undef, 100_000, 0.01, { layout => $layout, window => 1, generations => 2 });
        my $t0 = time;
        $f->add('x');
        sleep($t0 + 1.3 - time);
        $f->add('z');    # grid 1: steps, then clears one slice of the new spare
        my $gen = $f->stats->{generation};
        # z's generation expires at grid 3 (g periods after grid 1).
        sleep($t0 + 3.4 - time);
        ok(!$f->contains('z'), "$layout: z forgotten");
        ok($f->add('y'), "$layout: y new");
        ok(!$f->contains('z'), "$layout: z not brought back by y's add");
        cmp_ok($f->stats->{generation}, '>', $gen, "$layout: y's add stepped");
        ok($f->add('z'), "$layout: z new again");
    }
};

# The same with two processes writing at once after the expiry, on
# generations of 72 MiB (one clears the spare, for some milliseconds; the
# other waits for that clear): neither brings z back.
subtest 'few writes: two processes at the due step' => sub {
    my $f = $C->new(undef, 50_000_000, 0.01, { layout => 'blocked', window => 1, generations => 2 });
    my $t0 = time;
    $f->add('x');
    sleep($t0 + 1.3 - time);
    $f->add('z');
    my $start = $t0 + 3.4;
    my @pids;
    for my $who (1, 2) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            sleep($start - time);
            my $new = $f->add("y$who");
            POSIX::_exit($new && !$f->contains('z') ? 0 : 1);
        }
        push @pids, $pid;
    }
    for my $pid (@pids) {
        waitpid($pid, 0);
        is($? >> 8, 0, "writer $pid: new, and z not brought back");
    }
    ok(!$f->contains('z'), 'z forgotten after both');
    ok($f->contains('y1') && $f->contains('y2'), 'both added');
};

# Every process sees the same generation, with time and with rotate.
subtest 'one generation for every process' => sub {
    my $f = $C->new("$dir/shared.bloom", 10_000, 0.01, { window => 2, generations => 3 });
    pipe(my $r, my $w) or die;
    my @pids;
    for my $n (1 .. 3) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            my $g = $C->new("$dir/shared.bloom", 10_000, 0.01);
            my @lines;
            for my $i (1 .. 6) {
                $g->add("child$n-$i");
                my $s = $g->stats;
                push @lines, "$n $s->{generation}";
                sleep 0.25;
            }
            syswrite $w, join('', map { "$_\n" } @lines);
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    close $w;
    my @seen = <$r>;
    reap($_, 20) for @pids;
    my %by_child;
    for (@seen) {
        my ($n, $gen) = split;
        push @{ $by_child{$n} }, $gen;
    }
    is(scalar keys %by_child, 3, 'every child reported');
    my $now = $f->stats->{generation};
    ok($now >= 1, "time moved the filter on (generation $now)");
    for my $n (sort keys %by_child) {
        my @g = @{ $by_child{$n} };
        ok(!grep({ $g[$_] < $g[$_ - 1] } 1 .. $#g), "child $n: generations never go back");
        ok($g[-1] <= $now, "child $n: never ahead of the parent");
    }
    # rotate in one process is seen at once by every other.
    my $before = $f->stats->{generation};
    $f->rotate;
    my $r2 = in_child(sub { $C->new("$dir/shared.bloom", 10_000, 0.01)->stats->{generation} });
    cmp_ok($r2->{out}, '>=', $before + 1, 'a rotation in one process is seen in another');
};

# Concurrent adders of the same items while another process rotates: each
# item is new to exactly one of them.
subtest 'concurrent adders across steps' => sub {
    for my $layout (qw(standard blocked)) {
        my $f = $C->new(undef, 100_000, 0.001, { layout => $layout, window => undef, generations => 16 });
        my @items = map { "item-$_" } 1 .. 20_000;
        my @pids;
        my @readers;
        for my $n (1 .. 3) {
            pipe(my $r, my $w) or die;
            my $pid = fork // die "fork: $!";
            if (!$pid) {
                close $r;
                my @new;
                for my $i (0 .. $#items) {
                    push @new, $i if $f->add($items[$i]);
                }
                syswrite $w, join(',', @new);
                POSIX::_exit(0);
            }
            close $w;
            push @pids, $pid;
            push @readers, $r;
        }
        my $rot = fork // die "fork: $!";
        if (!$rot) {
            # 12 steps while they add: nothing expires with 16 generations.
            for (1 .. 12) { sleep 0.01; $f->rotate }
            POSIX::_exit(0);
        }
        my %count;
        for my $r (@readers) {
            local $/;
            my $s = <$r>;
            $count{$_}++ for split /,/, $s // '';
        }
        reap($_, 60) for @pids, $rot;
        my $gen = $f->stats->{generation};
        is($gen, 12, "$layout: 12 steps taken");
        my @twice = grep { $count{$_} > 1 } keys %count;
        is(scalar @twice, 0, "$layout: no item new to two adders");
        # Absent ones are false positives of adds (rare at 0.001).
        cmp_ok(scalar keys %count, '>', 0.99 * @items, "$layout: almost every item new once");
        is(scalar $f->contains_many(\@items), scalar @items, "$layout: all present");
    }
};

# SIGKILL storms: children adding and rotating are killed at random moments,
# in steps and in the clearing of a large spare. Afterwards the filter keeps
# working at once, in every process.
# The blocked layout's storm also kills lock-free adders and steps between
# closing the filter to them and opening it again.
subtest 'SIGKILL storm during steps' => sub {
    for my $layout (qw(standard blocked)) {
        # 8 MiB generations: a clear takes long enough to be killed inside.
        my $path = "$dir/storm-$layout.bloom";
        my $f = $C->new($path, 5_000_000, 0.01, { layout => $layout, window => undef, generations => 3 });
        srand($ENV{BFS_CRASH_SEED} // time);
        my $rounds = 25;
        my $slow = 0;
        my $broken = 0;
        for my $round (1 .. $rounds) {
            my @pids;
            for my $n (1 .. 2) {
                my $pid = fork // die "fork: $!";
                if (!$pid) {
                    my $h = $C->new($path, 5_000_000, 0.01);
                    my $i = 0;
                    while (1) {
                        $h->add("r$round-$n-" . $i++);
                        $h->rotate if $i % 50 == 0;
                    }
                }
                push @pids, $pid;
            }
            sleep 0.005 + rand(0.05);
            kill 'KILL', @pids;
            reap($_, 10) for @pids;
            # In a child with a time limit: a hang (a step that never comes)
            # must fail here, not stall the test.
            my $r = in_child(sub {
                my $h = $C->new($path, 5_000_000, 0.01);
                my $t = time;
                my $before = $h->stats->{generation};
                $h->rotate;
                $h->add("after-$round");
                my $ok = $h->contains("after-$round") && $h->stats->{generation} > $before;
                return ($ok ? 'ok' : 'broken') . (time - $t > 2 ? ' slow' : '');
            }, 5);
            $slow++ if $r->{timed_out} || $r->{out} =~ /slow/;
            $broken++ if $r->{out} !~ /\Aok/;
            last if $broken;
        }
        is($broken, 0, "$layout: after $rounds storms: a rotation and an add work");
        ok($f->contains("after-$rounds"), "$layout: seen by a handle opened before the storms");
        is($slow, 0, "$layout: and finish within 2 s");
        my $r = in_child(sub {
            my $h = $C->new($path, 5_000_000, 0.01);
            $h->rotate;
            $h->add('child-after');
            $h->contains('child-after') ? 'ok' : 'lost';
        });
        is($r->{out}, 'ok', "$layout: another process too");
        ok($f->contains('child-after'), "$layout: and its add is seen here");
    }
};

# The command line: create --window, info shows it.
subtest 'command line' => sub {
    my $cli = \&run_cli;
    my ($rc, $out) = $cli->('create', "$dir/cli.bloom", '-n', 1000, '--window', '24h', '--generations', 3);
    is($rc, 0, 'create --window 24h --generations 3') or diag $out;
    my $f = $C->new("$dir/cli.bloom", 1000, 0.01);
    ok(abs($f->window - 86400) < 1e-6, 'a 24 hour window');
    is($f->generations, 3, 'of 3 generations');
    ($rc, $out) = $cli->('create', "$dir/cli4.bloom", '-n', 1000, '--window', '90m');
    is($rc, 0, 'create --window 90m');
    is($C->new("$dir/cli4.bloom", 1000, 0.01)->generations, 4, 'generations default to 4');
    ($rc, $out) = $cli->('info', "$dir/cli.bloom");
    like($out, qr/^window\s+86400 s$/m, 'info shows the window');
    like($out, qr/^generations\s+3$/m, 'and the generations');
    like($out, qr/^generation\s+0$/m, 'and the current one');
    like($out, qr/^generation_start\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/m, 'and its start');
    ($rc, $out) = $cli->('info', '--json', "$dir/cli.bloom");
    require JSON::PP;
    my $j = JSON::PP->new->decode($out);
    is_deeply([@$j{qw(window generations generation)}], [86400, 3, 0], 'info --json too');
    ($rc, $out) = $cli->('info', "$dir/plain.bloom");
    unlike($out, qr/^window/m, 'a plain filter shows no window');
    ($rc, $out) = $cli->('create', "$dir/bad.bloom", '-n', 1000, '--window', '5x');
    is($rc, 2, 'a bad duration is a usage error');
    like($out, qr/\Abloomfilter-shared: --window: duration '5x' has an unknown unit 'x' \(use s, m, h or d\)/,
        'naming the unit');
    ($rc, $out) = $cli->('create', "$dir/bad.bloom", '-n', 1000, '--generations', 3);
    is($rc, 2, '--generations alone');
    like($out, qr/--generations needs --window/, 'says so');
    ($rc, $out) = $cli->('create', "$dir/bad.bloom", '-n', 1000, '--window', '1h', '--generations', 17);
    is($rc, 2, '--generations 17');
    like($out, qr/--generations must be an integer from 2 to 16, not '17'/, 'says so');
    ok(!-e "$dir/bad.bloom", 'no file left by the errors');
};

done_testing;
