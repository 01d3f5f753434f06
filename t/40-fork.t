# Filters shared with forked children: disjoint adders, grandchildren,
# racing adders of the same items (at most one told "new"), and readers that
# see every completed add while writers run; on every layout.
use strict;
use warnings;
use Test::More;
use POSIX ();
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(reap child_status_text for_each_layout);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $top = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "40-fork: global timeout\n" };

# fork, run $code in the child (exit 0 if it returns true, 1 if false, 3 if
# it dies); returns the pid.
sub child(&) {
    my ($code) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        alarm 60;
        my $ok = eval { $code->() };
        if ($@) { print STDERR "child $$ died: $@"; POSIX::_exit(3) }
        exit($ok ? 0 : 1);    # a normal exit: the child's handles are DESTROYed
    }
    return $pid;
}

sub statuses { [map { (reap($_, 60))[0] } @_] }

# The same suite on every layout (t/lib/BFTest.pm, for_each_layout), each
# in a directory of its own: a file of one layout does not open as another.
for_each_layout([qw(standard blocked datasketches)], sub {
    my ($layout) = @_;
    my $dir = "$top/$layout";
    mkdir $dir or die "$dir: $!";
    alarm 120;    # a hang guard for each pass, not a bound

    # --- disjoint adders ----------------------------------------------------------------------------
    for my $kind (qw(anonymous memfd file)) {
        my $f = $kind eq 'anonymous' ? $C->new(undef, 20_000, 0.01)
              : $kind eq 'memfd'     ? $C->new_memfd('fork', 20_000, 0.01)
              :                        $C->new("$dir/fork.bf", 20_000, 0.01);
        is($f->add('from-parent'), 1, "$kind: parent adds before fork");
        my $n = 3;
        my @pids = map {
            my $i = $_;
            child {
                return 0 unless $f->contains('from-parent');
                $f->add("c$i-$_") for 1 .. 1000;
                $f->add_many([map { "cm$i-$_" } 1 .. 1000]);
                1;
            }
        } 1 .. $n;
        is_deeply(statuses(@pids), [(0) x $n], "$kind: $n children saw the parent's item and exited 0");
        my @all = map { my $i = $_; (map({ "c$i-$_" } 1 .. 1000), map({ "cm$i-$_" } 1 .. 1000)) } 1 .. $n;
        is(scalar $f->contains_many(\@all), scalar @all, "$kind: parent sees every child's adds (no false negatives)");
        is($f->add('c1-1'), 0, "$kind: a child's item is not new to the parent");
        cmp_ok(abs($f->count - (@all + 1)), '<=', 0.05 * (@all + 1), "$kind: count reflects all processes");
    }

    # --- child and grandchild with the inherited handle ------------------------------------------------
    {
        my $f = $C->new(undef, 1000, 0.01);
        my $pid = child {
            my $gpid = child {
                $f->add('grandchild') == 1 or return 0;
                1;
            };
            my ($st) = reap($gpid, 30);
            return 0 unless $st == 0;
            return 0 unless $f->contains('grandchild');
            $f->add('child') == 1 or return 0;
            1;
        };
        is_deeply(statuses($pid), [0], 'child (and its grandchild) exited 0');
        is($f->contains('grandchild'), 1, 'parent sees the grandchild\'s add');
        is($f->contains('child'), 1, 'parent sees the child\'s add');
        is($f->add('parent-after'), 1, 'parent still adds');
    }

    # --- two children adding the same items in the same order -------------------------------------------
    # Per item, at most one of them may be told "new".
    for my $mode (qw(add add_many)) {
        my $f = $C->new(undef, 50_000, 0.001);
        my $n = 20_000;
        my @items = map { "same-$_" } 1 .. $n;
        pipe(my $gate_r, my $gate_w) or die;
        my @files = map { "$dir/results-$mode-$_" } 1 .. 2;
        my @pids = map {
            my $file = $files[$_ - 1];
            child {
                close $gate_w;
                my $x = <$gate_r>;    # both start when the parent closes the gate
                my $bits = '';
                if ($mode eq 'add') {
                    vec($bits, $_, 1) = $f->add($items[$_]) for 0 .. $#items;
                } else {
                    my $i = 0;
                    for (my $s = 0; $s < @items; $s += 50) {
                        my $e = $s + 49 > $#items ? $#items : $s + 49;
                        $f->add_many([@items[$s .. $e]], \my @was_new);
                        vec($bits, $i++, 1) = $_ for @was_new;
                    }
                }
                open(my $fh, '>:raw', $file) or return 0;
                print $fh $bits;
                close $fh;
            };
        } 1 .. 2;
        close $gate_r;
        close $gate_w;
        is_deeply(statuses(@pids), [0, 0], "$mode race: both children exited 0");
        my @r = map { open(my $fh, '<:raw', $_) or die "$_: $!"; local $/; scalar <$fh> } @files;
        my ($both, $neither) = (0, 0);
        for my $i (0 .. $n - 1) {
            my ($a, $b) = (vec($r[0], $i, 1), vec($r[1], $i, 1));
            $both++ if $a && $b;
            $neither++ if !$a && !$b;
        }
        is($both, 0, "$mode race: no item of $n was reported new to both children");
        cmp_ok($neither, '<=', 0.01 * $n, "$mode race: few items new to neither ($neither, false positives)");
        is(scalar $f->contains_many(\@items), $n, "$mode race: every item present afterwards");
    }

    # --- readers during writers ---------------------------------------------------------------------------
    # Writers report each completed add through a pipe; the parent checks each
    # reported item at once. A reader child meanwhile checks, for items it can
    # see were finished, that they are present.
    {
        my $f = $C->new(undef, 50_000, 1e-6);
        pipe(my $r, my $w) or die;
        my @writers = map {
            my $i = $_;
            child {
                close $r;
                $w->autoflush(1);
                for my $j (1 .. 3000) {
                    $f->add("w$i-$j");
                    $f->add("done-w$i-$j");    # marker: w$i-$j completed
                    print $w "w$i-$j\n" if $j % 3 == 0;
                }
                close $w;
                1;
            };
        } 1 .. 2;
        my $reader = child {
            close $w;
            my ($checked, $bad) = (0, 0);
            for my $round (1 .. 20) {
                for my $i (1 .. 2) {
                    for my $j (1 .. 3000) {
                        next unless $f->contains("done-w$i-$j");
                        $checked++;
                        $bad++ unless $f->contains("w$i-$j");
                    }
                }
            }
            print STDERR "reader: $bad of $checked completed items missing\n" if $bad;
            $bad == 0;
        };
        close $w;
        my ($seen, $missing) = (0, 0);
        while (my $line = <$r>) {
            chomp $line;
            $seen++;
            $missing++ unless $f->contains($line);
        }
        close $r;
        is_deeply(statuses(@writers), [0, 0], 'writers exited 0');
        is_deeply(statuses($reader), [0], 'reader child saw every completed add (marker implies item)');
        is($seen, 2000, 'parent got every progress report');
        is($missing, 0, 'parent found every reported add at once');
        my @all = map { my $i = $_; map { "w$i-$_" } 1 .. 3000 } 1 .. 2;
        is(scalar $f->contains_many(\@all), scalar @all, 'every write present at the end');
    }

    # --- a child that inherited the handle after the parent dropped others -------------------------------------
    {
        my $f = $C->new(undef, 1000, 0.01);
        my @kids = map { my $i = $_; child { $f->add("short$i"); POSIX::_exit(0) } } 1 .. 20;
        is_deeply(statuses(@kids), [(0) x 20], '20 children that _exit without DESTROY');
        is(scalar $f->contains_many([map { "short$_" } 1 .. 20]), 20, 'their adds are there');
        my $p = child { $f->add('after-many-children') == 1 };
        is_deeply(statuses($p), [0], 'a later child still attaches and adds');
        is($f->contains('after-many-children'), 1, 'parent sees it');
    }

    alarm 0;
});

done_testing;
