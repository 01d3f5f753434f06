# Windowed filters as bytes: serialize, then deserialize anonymous, to a
# file and to a memfd; the same window, generation and items, forgotten after
# the same steps; the window options against the bytes; plain bytes into a
# window; a 2-second window on the test's clock; copies while another
# process steps; a copier killed mid-copy.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child reap croaks_like time_bound wait_until);
use BFClock qw(with_fake_clock);
use BFStop qw(run_stopped);
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "08-window-serial: global timeout\n" };
alarm 180;

sub items { my ($step) = @_; return map { "step $step item $_" } 1 .. 20 }

# What a filter answers for the items of steps 0 .. $steps - 1.
sub answers {
    my ($f, $steps) = @_;
    return join '', map { $f->contains($_) ? 1 : 0 } map { items($_) } 0 .. $steps - 1;
}

# A filter stepped by hand through $steps steps, 20 items each.
sub stepped {
    my ($opts, $steps) = @_;
    my $f = $C->new(undef, 1000, 0.001, $opts);
    for my $s (0 .. $steps - 1) {
        $f->add_many([items($s)]);
        $f->rotate if $s < $steps - 1;
    }
    return $f;
}

subtest 'round trips: anonymous, file, memfd' => sub {
    my $n = 0;
    for my $layout (qw(standard blocked)) {
        for my $g (2, 4) {
            for my $window (undef, 3600) {
                my $steps = $g + 2;
                my $f = stepped({ window => $window, generations => $g, layout => $layout }, $steps);
                my $bytes = $f->serialize;
                is(length $bytes, $g * ($f->bits / 8 + 8) + 88,
                    "$layout g $g: g * (bits / 8 + 8) + 88 bytes");
                my %copies = (
                    anonymous => $C->deserialize($bytes),
                    file      => $C->deserialize($bytes, { path => "$dir/copy" . $n++ . '.bf' }),
                    memfd     => $C->deserialize($bytes, { memfd => 'copy' }),
                );
                ok($copies{file}->path, 'the file copy has its path');
                cmp_ok($copies{memfd}->memfd, '>=', 0, 'the memfd copy has its descriptor');
                my $via_fd = $C->new_from_fd($copies{memfd}->memfd);
                is($via_fd->generations, $g, 'the memfd passes on with its window');
                my $want = answers($f, $steps);
                like($want, qr/\A0+1+\z/, 'the source forgot the oldest steps, holds the rest');
                for my $to (sort keys %copies) {
                    my $d = $copies{$to};
                    my $what = "$layout g $g window " . ($window // 'none') . " $to";
                    is($d->generations, $g, "$what: generations");
                    is($d->window, $f->window, "$what: window");
                    is($d->stats->{generation}, $steps - 1, "$what: the generation number");
                    is($d->stats->{generation_start}, $f->stats->{generation_start},
                        "$what: its start");
                    is($d->layout, $layout, "$what: layout");
                    is($d->bits_set, $f->bits_set, "$what: bits_set");
                    is(answers($d, $steps), $want, "$what: every item answers the same");
                    is($d->serialize, $bytes, "$what: serializes to the same bytes");
                }
                # Stepped alike, the copy forgets exactly when the source does.
                my @left;
                for my $k (1 .. $g) {
                    $_->rotate for $f, values %copies;
                    my $a = answers($f, $steps);
                    push @left, ($a =~ tr/1//);
                    is(answers($copies{$_}, $steps), $a, "$layout g $g: $_ after $k more steps")
                        for sort keys %copies;
                }
                is($left[-1], 0, "$layout g $g: all forgotten after g more steps (@left)");
            }
        }
    }
};

subtest 'read-only and frozen handles serialize too' => sub {
    my $path = "$dir/ro.bf";
    my $f = $C->new($path, 1000, 0.01, { window => 3600, generations => 3 });
    $f->add('x');
    open(my $fh, '<', $path) or die "$path: $!";
    my $ro = $C->new_from_fd($fh);
    ok($ro->readonly, 'a read-only descriptor');
    is($ro->serialize, $f->serialize, 'a read-only handle gives the same bytes');
    $f->freeze;
    my $frozen = $C->new_readonly($path);
    my $d = $C->deserialize($frozen->serialize);
    ok($d->contains('x') && !$d->frozen, 'a frozen filter copies to a live one');
    is($d->generations, 3, 'with its window');
};

subtest 'options against the bytes' => sub {
    my $timed = $C->new(undef, 1000, 0.01, { window => 3600, generations => 4 });
    my $manual = $C->new(undef, 1000, 0.01, { window => undef, generations => 3 });
    $timed->add('t');
    $manual->add('m');
    my ($tb, $mb) = ($timed->serialize, $manual->serialize);
    ok($C->deserialize($tb, { window => 3600, generations => 4 })->contains('t'),
        'the same window and generations');
    ok($C->deserialize($tb, { window => 3600 })->contains('t'), 'the same window, default generations');
    ok($C->deserialize($mb, { window => undef, generations => 3 })->contains('m'),
        'window => undef with the generations of a filter stepped by hand');
    my $pfx = qr/\AData::BloomFilter::Shared->deserialize: /;
    for ([$tb, { window => 60, generations => 4 }, 'window 3600s, 4 generations', 'window 60s, 4 generations'],
        [$tb, { window => 3600, generations => 3 }, 'window 3600s, 4 generations', 'window 3600s, 3 generations'],
        [$tb, { window => undef, generations => 4 }, 'window 3600s, 4 generations', 'manual steps, 4 generations'],
        [$mb, { window => undef, generations => 4 }, 'manual steps, 3 generations', 'manual steps, 4 generations'],
        [$mb, { window => 10, generations => 3 }, 'manual steps, 3 generations', 'window 10s, 3 generations'])
    {
        my ($bytes, $opts, $has, $asked) = @$_;
        my $p = "$dir/mismatch.bf";
        croaks_like(sub { $C->deserialize($bytes, { %$opts, path => $p }) },
            qr/${pfx}window mismatch \(the bytes have \Q$has\E, not \Q$asked\E\) at /, "$has vs $asked");
        ok(!-e $p, '... and no file');
    }
    croaks_like(sub { $C->deserialize($tb, { generations => 4 }) },
        qr/${pfx}the generations option needs the window option/, 'generations alone');
    croaks_like(sub { $C->deserialize($tb, { window => -1 }) },
        qr/${pfx}window must be a positive number of seconds \(or undef\), got -1 at /, 'a bad window');
    croaks_like(sub { $C->deserialize($tb, { window => 3600, generations => 17 }) },
        qr/${pfx}generations must be an integer from 2 to 16, got 17 at /, 'bad generations');
    croaks_like(sub { $C->deserialize($tb, { path => "$dir/both.bf", memfd => 'x' }) },
        qr/${pfx}the path and memfd options exclude each other at /, 'path and memfd');
    ok(!-e "$dir/both.bf", '... and no file');
    croaks_like(sub { $C->deserialize($tb, { memfd => "a\0b" }) },
        qr/${pfx}name contains a NUL byte, got 'a\\x\{0\}b' at /, 'a memfd name with NUL: the name shown');
};

subtest 'plain bytes into a window' => sub {
    my $plain = $C->new(undef, 1000, 0.01, { seed => 99 });
    $plain->add_many([qw(p q r)]);
    my $pb = $plain->serialize;
    for my $g (2, 4) {
        my $d = $C->deserialize($pb, { window => undef, generations => $g });
        is($d->generations, $g, "g $g: a windowed filter");
        is($d->bits, $plain->bits, "g $g: the bytes' geometry");
        is($d->hashes, $plain->hashes, "g $g: the bytes' hashes");
        is($d->seed, 99, "g $g: the bytes' seed");
        is($d->bits_set, $plain->bits_set, "g $g: the bits are the current generation's");
        is($d->stats->{generation}, 0, "g $g: generation 0");
        is($d->add('p'), 0, "g $g: its items are seen");
        for my $k (1 .. $g - 1) {
            $d->rotate;
            ok($d->contains('q'), "g $g: seen after $k steps");
        }
        $d->rotate;
        ok(!$d->contains('q') && !$d->contains('r'), "g $g: forgotten at the ${g}th step");
    }
    my $t0 = time;
    my $d = $C->deserialize($pb, { window => 600, generations => 3, path => "$dir/plain-window.bf" });
    my $t1 = time;
    ok(abs($d->window - 600) < 1e-6, 'a timed window');
    # Between the two readings (the module's clock may be a tick ahead).
    my $start = $d->stats->{generation_start};
    ok($start > $t0 - 0.1 && $start < $t1 + 0.1, "starting now ($start, made from $t0 to $t1)");
    ok($d->contains('r'), 'holding the items');
    my $again = $C->new("$dir/plain-window.bf", 1, 0.5);
    is($again->generations, 3, 'a reopen of the file keeps the window');
    ok(!defined $C->deserialize($pb)->generations, 'plain bytes without options stay plain');
};

subtest 'a 2-second window travels to another process' => sub {
    # g = 4: period 2/3 s; seen until t + 2 s at least, forgotten by
    # t + 8/3 s (plus a period of grid). The clock is the test's
    # (t/lib/BFClock.pm): the source and its copy, in another process as on
    # another host, read the time the test sets, so that the copy looks
    # within the window and after it however late the host runs it.
    my ($out, $err) = with_fake_clock(<<'PERL', "$dir/clock-travel");
use POSIX ();
my $base = 1_900_000_000;    # seconds; 2030, far from the real time
my $at = sub { set_clock(int(($base + $_[0]) * 1e9)) };
$at->(0);
my $src = $C->new(undef, 1000, 0.001, { window => 2, generations => 4 });
$src->add('early');
$at->(0.7);
$src->add('x');
my $bytes = $src->serialize;
my $t = 0.7;
pipe(my $r, my $w) or die "pipe: $!";
my $pid = fork // die "fork: $!";
if (!$pid) {
    close $r;
    my $d = $C->deserialize($bytes, { path => "$ENV{BFS_TEST_FAKE_CLOCK}.bf" });
    my @log;
    # A look every 50 ms of the clock from the add on, for 4.2 s.
    for my $i (0 .. 84) {
        my $now = $t + $i * 0.05;
        $at->($now);
        $d->add("noise $i");    # a writer, so that steps are taken
        my ($x, $early) = map { $d->contains($_) ? 1 : 0 } 'x', 'early';
        push @log, sprintf('%.3f %d %d %.3f', $now - $t, $x, $early, $now - $t);
    }
    print $w map {"$_\n"} @log;
    close $w;
    POSIX::_exit(0);
}
close $w;
my @log = <$r>;
waitpid($pid, 0);
print "child $?\n", map {"log $_"} @log;
print 'source ', ($src->contains('x') ? 1 : 0), "\n";
PERL
    plan skip_all => $err if !defined $out;
    is($err, undef, 'the child ran') or diag($out);
    like($out, qr/^child 0$/m, 'the copying process ran') or diag($out);
    # Each log line: the time of the look (before, after: one reading here)
    # since x's add, x seen, early seen.
    my @log = map { [split / /] } $out =~ /^log (.*)$/mg;
    cmp_ok(scalar @log, '>', 40, 'it looked many times');
    my @gone_early = grep { $_->[3] < 1.98 && !$_->[1] } @log;
    is(scalar @gone_early, 0, 'x is seen on the copy within the window of its add on the source')
        or diag(explain \@gone_early);
    my @kept = grep { $_->[0] > 2 * 4 / 3 + 2 / 3 + 0.1 && $_->[1] } @log;
    is(scalar @kept, 0, 'and forgotten by window * g / (g - 1) plus a period') or diag(explain \@kept);
    ok((grep { $_->[1] } @log) && (grep { !$_->[1] } @log), 'both seen and forgotten were observed');
    my @early_kept = grep { $_->[0] > -0.7 + 2 * 4 / 3 + 0.1 && $_->[2] } @log;
    is(scalar @early_kept, 0, 'an item added 0.7 s earlier is forgotten earlier');
    like($out, qr/^source 0$/m, 'as on the source');
};

subtest 'copies while another process steps' => sub {
    # 2 MiB generations: a copy takes long enough for steps to land.
    my $f = $C->new_memfd('steps', 1_000_000, 0.001, { window => undef, generations => 3 });
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        BFTest::die_with_parent();    # killed below, or with the test
        my $w = $C->new_from_fd($f->memfd);
        my $j = 0;
        while (1) {
            $w->rotate;
            $j++;
            $w->add_many([map { "s$j i$_" } 1 .. 10]);
        }
    }
    # Items of step j are added right after the step to j: a copy of
    # generation m holds all of steps m - 2 and m - 1 (step 0 has none).
    my @bad;
    my $checked = 0;
    # Copies of generation 3 or later are checked: the copies begin once
    # the stepper took its third step, however long the host takes to run
    # it (300 s: a hang guard, not a bound).
    ok(wait_until(sub { $f->stats->{generation} >= 3 }, 300), 'the stepper steps');
    for my $round (1 .. 100) {
        my $d = $C->deserialize($f->serialize);
        my $m = $d->stats->{generation};
        for my $s (($m > 2 ? $m - 2 : 1) .. $m - 1) {
            my $missing = grep { !$d->contains("s$s i$_") } 1 .. 10;
            push @bad, "round $round: generation $m, step $s missing $missing" if $missing;
        }
        $checked++ if $m > 2;
    }
    kill 'KILL', $pid;
    reap($pid);
    is(scalar @bad, 0, 'every copy holds the steps its generation number says') or diag(join "\n", @bad[0 .. 9]);
    cmp_ok($checked, '>', 50, "$checked copies were checked");
};

subtest 'a copier killed mid-copy holds up no step' => sub {
    # A writable handle's serialize holds the cleaner word while it copies:
    # killed there, the next writer takes the word over (its owner is dead)
    # and steps go on. The copier is another process, stopped in the middle
    # of its pass over the generations (t/lib/BFStop.pm); it is killed at
    # that stop, with the cleaner word (at 264, src/shm/format.rs) held.
    my $path = "$dir/killed.bf";
    my $f = $C->new($path, 1_000_000, 0.001, { window => undef, generations => 3 });
    my $cleaner = sub {
        open(my $fh, '<:raw', $path) or die "$path: $!";
        sysseek($fh, 264, 0) && sysread($fh, my $w, 4) == 4 or die "$path: $!";
        return unpack 'V', $w;
    };
    my ($worst, @bad, @held) = (0);
    for my $round (1 .. 8) {
        my $r = run_stopped(<<"PERL", file => $path, on_stop => sub {
my \$c = \$C->new('$path', 1_000_000, 0.001);
print "serializing\\n";
\$c->serialize while 1;
PERL
            my ($pid) = @_;
            # A stop outside a copy (opening the filter) goes on to one.
            return 1 if !$cleaner->();
            kill 'KILL', $pid;
            return 0;
        });
        push @held, $round if $r->{stops} && ($r->{status} & 127) == 9;
        my $t0 = time;
        $f->rotate for 1 .. 3;
        my $took = time - $t0;
        $worst = $took if $took > $worst;
        $f->add("after $round");
        push @bad, "round $round: item missing" if !$f->contains("after $round");
    }
    is(scalar @held, 8, 'each copier was killed in a copy, holding the cleaner word') or diag("killed so: @held");
    is(scalar @bad, 0, 'the filter works after each kill') or diag(join "\n", @bad);
    time_bound($worst, 1, '3 steps after a kill take under 1 s (the worst of 8)');
    my $d = $C->deserialize($f->serialize);
    ok($d->contains('after 8'), 'and copies again');
};

done_testing;
