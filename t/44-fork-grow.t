# Adds stay exactly-once while a filter grows (C10): four forked children
# and the parent add the same items in the same order to a filter of first
# capacity 1000 that grows by 2, through at least five stages; for each
# item at most one process is told new, every item is present afterwards.
# On a file (each child opens it by path), a memfd (each child opens it
# with new_from_fd) and an anonymous filter (the handle inherited through
# fork); both layouts. And a reader that finds each completed add at once
# while another process grows the filter.
use strict;
use warnings;
use Test::More;
use POSIX ();
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(reap);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "44-fork-grow: global timeout\n" };
alarm 300;

my $N = 60_000;       # items: 1000 + 2000 + ... + 32000 = 63000, six stages
my $KIDS = 4;
my $FP = 0.01;
my @items = map {"same-$_"} 0 .. $N - 1;

# Add every item in order, the answers as a bit string (1: told new).
# Even-numbered processes add one by one, odd ones in batches of 100.
sub add_all {
    my ($f, $who) = @_;
    my $bits = '';
    if ($who % 2 == 0) {
        vec($bits, $_, 1) = $f->add($items[$_]) ? 1 : 0 for 0 .. $#items;
    }
    else {
        for (my $s = 0; $s < @items; $s += 100) {
            my $e = $s + 99 > $#items ? $#items : $s + 99;
            $f->add_many([@items[$s .. $e]], \my @was_new);
            vec($bits, $s + $_, 1) = $was_new[$_] ? 1 : 0 for 0 .. $#was_new;
        }
    }
    return $bits;
}

for my $layout (qw(standard blocked)) {
    for my $kind (qw(file memfd anonymous)) {
        my %o = (layout => $layout, grow => 2);
        my $path = "$dir/$layout.bf";
        my $f = $kind eq 'file' ? $C->new($path, 1000, $FP, {%o})
              : $kind eq 'memfd' ? $C->new_memfd('fork-grow', 1000, $FP, {%o})
              :                    $C->new(undef, 1000, $FP, {%o});
        my $fd = $kind eq 'memfd' ? $f->memfd : undef;
        pipe(my $gate_r, my $gate_w) or die "pipe: $!";
        my @files = map {"$dir/$layout-$kind-$_"} 0 .. $KIDS;    # 0 is the parent's
        my @pids;
        for my $k (1 .. $KIDS) {
            my $pid = fork;
            die "fork: $!" unless defined $pid;
            if (!$pid) {
                close $gate_w;
                alarm 120;
                my $ok = eval {
                    # Its own handle, opened before any growth.
                    my $g = $kind eq 'file' ? $C->new($path, 1000, $FP, {layout => $layout})
                          : $kind eq 'memfd' ? $C->new_from_fd($fd)
                          :                    $f;
                    $g->grow == 2 or die "handle does not grow\n";
                    my $x = <$gate_r>;    # all start when the parent closes the gate
                    my $bits = add_all($g, $k);
                    open(my $fh, '>:raw', $files[$k]) or die "$files[$k]: $!\n";
                    print $fh $bits;
                    close $fh or die "$files[$k]: $!\n";
                    1;
                };
                print STDERR "child $k: $@" unless $ok;
                POSIX::_exit($ok ? 0 : 1);
            }
            push @pids, $pid;
        }
        close $gate_r;
        close $gate_w;
        my @r = (add_all($f, 0));
        my @st = map { (reap($_, 150))[0] } @pids;
        is_deeply(\@st, [(0) x $KIDS], "$layout $kind: $KIDS children added the same $N items and exited 0");
        for my $k (1 .. $KIDS) {
            open(my $fh, '<:raw', $files[$k]) or die "$files[$k]: $!";
            local $/;
            push @r, scalar <$fh>;
        }
        my ($twice, $nobody, $told) = (0, 0, 0);
        for my $i (0 .. $N - 1) {
            my $new = 0;
            $new += vec($_, $i, 1) for @r;
            $twice++ if $new > 1;
            $nobody++ if $new == 0;
            $told += $new;
        }
        # How the first answers were shared out: a diagnostic of how much the
        # processes overlapped (no verdict: that depends on the scheduler).
        diag("$layout $kind: items told new to the parent and each child: "
                . join(' ', map { my $b = $_; scalar grep { vec($b, $_, 1) } 0 .. $N - 1 } @r))
            if $ENV{TEST_VERBOSE};
        is($twice, 0, "$layout $kind: no item of $N told new to more than one of " . ($KIDS + 1) . ' processes');
        # An item is told new to nobody only when it was a false positive
        # when the first adder reached it: the filter's rate stays below
        # fp_rate while it grows, so at most fp_rate * N of them are
        # expected; the slack is five standard deviations of that count.
        my $allowed = int($FP * $N + 5 * sqrt($FP * $N));
        cmp_ok($nobody, '<=', $allowed,
            "$layout $kind: items told new to nobody (false positives): $nobody, at most $allowed");
        is($told + $nobody, $N, "$layout $kind: every other item told new to exactly one process");
        is(scalar(grep { !$f->contains($_) } @items), 0, "$layout $kind: every item present afterwards");
        cmp_ok($f->stages, '>=', 5, "$layout $kind: the filter grew through at least five stages (" . $f->stages . ')');
        if ($kind eq 'file') {
            my $g = $C->new($path, 1000, $FP, {layout => $layout});
            is($g->stages, $f->stages, "$layout $kind: a new handle sees the same stages");
        }
        undef $f;
    }
}

# --- a reader while another process grows the filter ----------------------------------------------
# A writer reports every seventh add once it has returned; the parent, with
# a handle opened before any growth, checks that add and the six before it
# at once: a query maps the stages it has not seen and misses nothing.
for my $layout (qw(standard blocked)) {
    for my $kind (qw(file memfd)) {
        my $path = "$dir/reader-$layout.bf";
        my %o = (layout => $layout, grow => 2);
        my $f = $kind eq 'file' ? $C->new($path, 10, $FP, {%o}) : $C->new_memfd('reader', 10, $FP, {%o});
        my $r = $kind eq 'file' ? $C->new($path, 10, $FP, {layout => $layout}) : $C->new_from_fd($f->memfd);
        pipe(my $rd, my $wr) or die "pipe: $!";
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if (!$pid) {
            close $rd;
            alarm 120;
            my $ok = eval {
                my $g = $kind eq 'file' ? $C->new($path, 10, $FP, {layout => $layout}) : $C->new_from_fd($f->memfd);
                for my $i (1 .. 200_000) {
                    $g->add("r-$i");
                    syswrite($wr, "$i\n") or die "report: $!\n" if $i % 7 == 0;
                }
                1;
            };
            print STDERR "writer: $@" unless $ok;
            POSIX::_exit($ok ? 0 : 1);
        }
        close $wr;
        my ($checked, $missed) = (0, 0);
        while (my $line = <$rd>) {
            chomp $line;
            $checked++;
            $missed += grep { !$r->contains("r-$_") } $line - 6 .. $line;
        }
        my ($st) = reap($pid, 150);
        is($st, 0, "$layout $kind reader: the writer added 200000 items");
        is($checked, int(200_000 / 7), "$layout $kind reader: ... and reported every seventh");
        is($missed, 0, "$layout $kind reader: the reader found every reported add at once, while stages were added");
        cmp_ok($r->stages, '>=', 12, "$layout $kind reader: ... through " . $r->stages . ' stages');
    }
}

done_testing;
