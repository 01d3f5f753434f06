# Merge and intersect of filters that grow: a merge grows the filter to the
# other's stages and keeps every item of both, on files and memfds; a
# second process (fork) sees the merged stages; intersect takes a filter of
# one stage and keeps what both hold; the refusals croak with the reason;
# children SIGKILLed at random moments while they merge never lose an item
# of either filter. Both layouts.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(reap croaks_like);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $seed = $ENV{BFS_CRASH_SEED} // int(time);
srand($seed);
diag("BFS_CRASH_SEED=$seed") if $ENV{TEST_VERBOSE};
$SIG{ALRM} = sub { die "68-grow-merge: global timeout\n" };
alarm 240;

# How many items "$tag-$from" .. "$tag-$to" $f does not hold.
sub missing { my ($f, $tag, $from, $to) = @_; return scalar grep { !$f->contains("$tag-$_") } $from .. $to }
sub fill_of { my ($f, $i) = @_; return $f->stats->{stage_info}[$i]{fill} }

# A filter of $kind ('file' or 'memfd') that grows by 2 from 1000 items.
my $n = 0;
sub grown {
    my ($kind, $layout) = @_;
    my %o = (layout => $layout, grow => 2);
    $n++;
    return $kind eq 'file' ? $C->new("$dir/f$n.bf", 1000, 0.01, \%o)
         : $kind eq 'memfd' ? $C->new_memfd("grow-merge-$n", 1000, 0.01, \%o)
         :                    $C->new(undef, 1000, 0.01, \%o);
}

# Another handle of $f, made in a child (by path, or from the memfd).
sub reopen {
    my ($f, $kind) = @_;
    return $kind eq 'file' ? $C->new($f->path, 1000, 0.01) : $C->new_from_fd($f->memfd);
}

for my $layout (qw(standard blocked)) {
    for my $kind (qw(file memfd)) {
        my $t = "$layout $kind";

        # --- merge: grows to the other's stages, keeps every item ---------------------------------
        my $f = grown($kind, $layout);
        $f->add("a-$_") for 1 .. 2500;
        my $o = grown('anon', $layout);
        $o->add("b-$_") for 1 .. 9000;
        is($f->stages, 2, "$t: the filter has 2 stages");
        is($o->stages, 4, "$t: the other has 4");
        $f->merge($o);
        is($f->stages, 4, "$t: merge grew the filter to the other's stages");
        is(missing($f, 'a', 1, 2500) + missing($f, 'b', 1, 9000), 0, "$t: every item of both is in");
        cmp_ok(fill_of($f, 0), '>', 1000, "$t: stage 0's fill counts the merged items (over its capacity)");
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            my $ok = eval {
                my $g = reopen($f, $kind);
                $g->stages == 4 && missing($g, 'a', 1, 2500) + missing($g, 'b', 1, 9000) == 0;
            };
            POSIX::_exit($ok ? 0 : 1);
        }
        is(reap($pid), 0, "$t: another process sees the merged stages and every item");

        # --- a merge that overfills the newest stage: the next item grows it ----------------------
        my $g = grown($kind, $layout);
        my $h = grown('anon', $layout);
        $g->add("g-$_") for 1 .. 700;
        $h->add("h-$_") for 1 .. 700;
        $g->merge($h);
        is($g->stages, 1, "$t: a merge of one-stage filters adds no stage");
        ok($g->add('one more'), "$t: ... the next item is new");
        is($g->stages, 2, "$t: ... and adds a stage (the merged stage was over its capacity)");

        # --- intersect --------------------------------------------------------------------------
        croaks_like(sub { $f->intersect($o) },
            qr/^\Q$C\E->intersect: the other filter has grown to 4 stages; an item both filters hold can sit in different stages/,
            "$t: intersect with a filter of more stages croaks");
        is(missing($f, 'a', 1, 2500) + missing($f, 'b', 1, 9000), 0, "$t: ... and changes nothing");
        my $one = grown('anon', $layout);
        $one->add("a-$_") for 1 .. 300;
        $one->add("c-$_") for 1 .. 300;
        my $i = grown($kind, $layout);
        $i->add("a-$_") for 1 .. 2500;
        is($i->stages, 2, "$t: the filter to intersect has 2 stages");
        $i->intersect($one);
        is(missing($i, 'a', 1, 300), 0, "$t: intersect keeps every item both hold");
        cmp_ok(missing($i, 'a', 301, 900), '>', 540, "$t: ... and drops most items only it held in stage 0");
        cmp_ok(missing($i, 'c', 1, 300), '>', 270, "$t: ... and adds none of the other's");

        # --- mismatches -------------------------------------------------------------------------
        croaks_like(sub { $f->merge($C->new(undef, 1000, 0.01, {layout => $layout})) },
            qr/^\Q$C\E->merge: growth mismatch \(grows by 2 vs does not grow\)/, "$t: merge with a plain filter croaks");
        croaks_like(sub { $f->intersect($C->new(undef, 1000, 0.01, {layout => $layout, grow => 4})) },
            qr/^\Q$C\E->intersect: growth mismatch \(grows by 2 vs grows by 4\)/, "$t: intersect with another factor croaks");
        my $before = $f->serialize;
        $f->merge($f);
        $f->intersect(reopen($f, $kind));
        ok($f->serialize eq $before, "$t: merge and intersect with the same filter change nothing");
    }

    # --- no room to grow or for the journal -----------------------------------------------------
    # A memfd sealed against growing: a merge that needs a stage croaks
    # naming EPERM; one that needs only the journal croaks that there is no
    # room for it. Either way every item stays and nothing of the other is in.
    {
        my $t = "$layout sealed memfd";
        my $f = grown('memfd', $layout);
        $f->add("a-$_") for 1 .. 2500;
        open(my $fh, '+<&', $f->memfd) or die "dup: $!";
        fcntl($fh, 1033, 4) or die "F_ADD_SEALS: $!";    # F_SEAL_GROW
        my $big = grown('anon', $layout);
        $big->add("b-$_") for 1 .. 9000;
        croaks_like(sub { $f->merge($big) },
            qr/^\Q$C\E->merge: the filter must grow to the other filter's 4 stages, and its next stage needs the file to grow to \d+ bytes: EPERM: .*a memfd sealed against growing\); nothing was merged \(stages added before stay, empty\)/,
            "$t: a merge that needs a stage");
        my $small = grown('anon', $layout);
        $small->add("c-$_") for 1 .. 500;
        croaks_like(sub { $f->merge($small) },
            qr/^\Q$C\E->merge: the filter's memfd is sealed against growing, so it has no room for the journal that makes a merge of filters that grow crash-safe; nothing was changed/,
            "$t: a merge that needs only the journal");
        croaks_like(sub { $f->intersect($small) }, qr/^\Q$C\E->intersect: the filter's memfd is sealed against growing/,
            "$t: an intersect");
        is($f->stages, 2, "$t: the stages are as they were");
        is(missing($f, 'a', 1, 2500), 0, "$t: every item is in");
        cmp_ok(missing($f, 'c', 1, 500), '>', 490, "$t: ... and nothing of the other");
    }

    # A file size limit (RLIMIT_FSIZE) that stops the growth: the merge
    # croaks naming it and the process lives (no SIGXFSZ).
    SKIP: {
        skip 'needs prlimit(1) to set a file size limit', 4
            unless system('prlimit --fsize=262144:unlimited true >/dev/null 2>&1') == 0;
        my $t = "$layout RLIMIT_FSIZE";
        my $f = grown('file', $layout);
        $f->add("a-$_") for 1 .. 2500;
        my $o = grown('anon', $layout);
        $o->add("b-$_") for 1 .. 9000;
        pipe(my $rd, my $wr) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $rd;
            my $limit = (-s $f->path) + 4096;
            system('prlimit', "--pid=$$", "--fsize=$limit:unlimited") == 0 or POSIX::_exit(2);
            my $err = eval { $f->merge($o); 'merged' } // $@;
            $err =~ s/\n//g;
            syswrite($wr, join "\n", $err, $f->stages, missing($f, 'a', 1, 2500), missing($f, 'b', 1, 9000), "alive\n");
            POSIX::_exit(0);
        }
        close $wr;
        my @got = split /\n/, do { local $/; <$rd> } // '';
        is(reap($pid), 0, "$t: the merging process lives");
        like($got[0] // '', qr/^\Q$C\E->merge: the filter must grow to the other filter's 4 stages, and its next stage needs the file to grow to \d+ bytes: more than the file size limit \(RLIMIT_FSIZE, \d+ bytes\); nothing was merged/,
            "$t: the merge croaks naming the limit");
        is($got[2], 0, "$t: every item of the filter is in");
        cmp_ok($got[3] // 0, '>', 8900, "$t: ... and nothing of the other (stages: " . ($got[1] // '?') . ')');
    }

    # --- SIGKILL while merging ------------------------------------------------------------------
    # A child opens the filter on its own, fills a grown filter of its own
    # and merges it in; the parent kills it at a random moment. Whatever the
    # moment, every item the filter held is still in, and a merge the child
    # reported finished has all of the child's items in.
    for my $kind (qw(file memfd)) {
        my $t = "$layout $kind";
        my $f = grown($kind, $layout);
        $f->add("a-$_") for 1 .. 3000;
        # How long a merge of the children's size takes here: the kills
        # land within it (after the child says it starts merging).
        my $took = do {
            my ($x, $y) = (grown('anon', $layout), grown('anon', $layout));
            $x->add("x-$_") for 1 .. 3000;
            $y->add("y-$_") for 1 .. 20_000;
            my $t0 = time;
            $x->merge($y);
            time - $t0;
        };
        my ($rounds, $mid, $done, $bad) = (15, 0, 0, 0);
        my @finished;
        for my $r (1 .. $rounds) {
            pipe(my $rd, my $wr) or die "pipe: $!";
            my $pid = fork // die "fork: $!";
            if (!$pid) {
                close $rd;
                alarm 60;
                eval {
                    my $g = reopen($f, $kind);
                    my $o = grown('anon', $layout);
                    $o->add("k$r-$_") for 1 .. 20_000;
                    syswrite($wr, "merging\n");
                    $g->merge($o);
                    syswrite($wr, "done\n");
                };
                POSIX::_exit(1);
            }
            close $wr;
            my $said = '';
            1 while $said !~ /\n/ && sysread($rd, $said, 64, length $said);
            sleep(rand(1.5 * $took));
            kill 'KILL', $pid;
            reap($pid);
            $said .= do { local $/; <$rd> } // '';
            close $rd;
            if ($said =~ /done/) { $done++; push @finished, $r }
            elsif ($said =~ /merging/) { $mid++ }
            $f->add('touch');
            $bad++ if missing($f, 'a', 1, 3000);
            $bad++ if grep { missing($f, "k$_", 1, 20_000) } @finished;
        }
        is($bad, 0, "$t: $rounds merging children killed at random moments lost no item");
        diag(sprintf "%s: %d kills during a merge, %d after it finished (a merge takes %.1f ms)",
            $t, $mid, $done, 1000 * $took) if $ENV{TEST_VERBOSE};
        my $o = grown('anon', $layout);
        $o->add("z-$_") for 1 .. 5000;
        $f->merge($o);
        is(missing($f, 'a', 1, 3000) + missing($f, 'z', 1, 5000), 0, "$t: the filter merges again after the kills");
    }
}

done_testing;
