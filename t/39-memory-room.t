# No allocation the host cannot hold: a filter larger than the room its
# memory cgroup leaves (or a tmpfs's free space) croaks in the call that
# would make it, naming what was asked and what is available, and the
# process lives: `new` and `new_memfd` in memory, a file on tmpfs, the next
# stage of a filter that grows, the journal of a merge, and `deserialize` (whose bytes may ask for
# at most 64 times their length, at least 16 MiB, unless `max_bytes` says
# otherwise), mutated images included. Beside each, a size that fits works.
# Real memory cgroups (v1 or v2, root only), real tmpfs mounts in a mount
# namespace of their own (`unshare -m`), children in them; the ceiling's
# own checks (max_bytes, the command line's --max-bytes) need neither.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child child_status_text spew run_sh run_cli perl5lib);
use Data::BloomFilter::Shared;
use File::Temp qw(tempdir);
use POSIX ();

my $C = 'Data::BloomFilter::Shared';
my $MIB = 1 << 20;

# An empty DataSketches image (24 bytes: the size without the data)
# declaring $longs words.
sub image {
    my ($longs) = @_;
    return pack('C4 v v Q< l< L<', 3, 1, 21, 4, 3, 0, 9001, $longs, 0);
}

# ---------------------------------------------------------------- the ceiling

my $e = eval { $C->deserialize(image(1 << 16), { max_bytes => 1000 }); 1 } ? '' : $@;
like($e, qr/^\Q$C\E->deserialize: the bytes ask for a filter of \d+ bytes \([\d.]+ KiB\), more than max_bytes allows \(1000 bytes\); nothing was created at /,
    'max_bytes also caps lower than the default');
my $full = $C->new(undef, 1000, 0.01, { layout => 'datasketches' });
$full->add($_) for 1 .. 100;
my $bytes = $full->serialize(format => 'datasketches');
ok(eval { $C->deserialize($bytes, { max_bytes => 1 << 20 }) }, 'an image of its size fits under max_bytes 1 MiB')
    or diag $@;
for my $bad (0, -1, 'x', 1.5, []) {
    my $err = eval { $C->deserialize($bytes, { max_bytes => $bad }); 1 } ? '' : $@;
    like($err, qr/^\Q$C\E->deserialize: max_bytes must be a positive integer /, "max_bytes => " . (ref $bad ? 'a reference' : "'$bad'") . ' croaks');
}

# The command line's import: the same ceiling, --max-bytes for max_bytes.
{
    my $dir = tempdir(CLEANUP => 1);
    spew("$dir/in", image(1 << 21));    # 16 MiB of words, 18 MiB of filter
    my ($st, $out) = run_cli('import', "$dir/a.bf", '-i', "$dir/in");
    is($st, 2, 'import of a 24-byte image declaring 18 MiB fails');
    like($out, qr/: the bytes ask for a filter of 18874368 bytes \(18 MiB\), more than the 16777216 bytes .*: pass --max-bytes to allow more; nothing was created/,
        '... naming both figures and --max-bytes');
    ok(!-e "$dir/a.bf", '... and writes no file');
    ($st, $out) = run_cli('import', "$dir/a.bf", '-i', "$dir/in", '--max-bytes', 20_000_000);
    is($st, 0, '... with --max-bytes 20000000 it is imported') or diag $out;
    is(-s "$dir/a.bf", 18874368, '... as a file of that size');
    ($st, $out) = run_cli('import', "$dir/b.bf", '-i', "$dir/in", '--max-bytes', 'lots');
    like($out, qr/--max-bytes must be a positive integer .*, got lots \(see /, '--max-bytes lots is a usage error');
}

# ---------------------------------------------------------------- cgroups

# The rest needs a memory cgroup: without one (or root), it is skipped.
sub no_cgroup {
    my ($why) = @_;
    SKIP: { skip $why, 1 }
    done_testing;
    exit 0;
}

no_cgroup('needs root (a memory cgroup)') if $> != 0;

my ($root, $limit_file);
if (-e '/sys/fs/cgroup/cgroup.controllers') {    # v2
    $root = '/sys/fs/cgroup';
    no_cgroup('cgroup v2 without the memory controller')
        if do { open my $fh, '<', "$root/cgroup.controllers" or die; local $/; <$fh> } !~ /\bmemory\b/;
    $limit_file = 'memory.max';
} elsif (-d '/sys/fs/cgroup/memory') {            # v1
    ($root, $limit_file) = ('/sys/fs/cgroup/memory', 'memory.limit_in_bytes');
} else {
    no_cgroup('no memory cgroup');
}

my @made;
END { rmdir $_ for reverse @made }

# A new memory cgroup limited to $bytes (no swap on v2), under $parent
# (a directory this made) if given; its directory. Without $bytes, no limit
# of its own.
sub cgroup {
    my ($bytes, $parent) = @_;
    my $dir = ($parent // $root) . "/bfs-room-$$-" . scalar @made;
    mkdir $dir or no_cgroup("cannot make a cgroup: $!");
    push @made, $dir;
    return $dir if !defined $bytes;
    eval { spew("$dir/$limit_file", "$bytes\n"); 1 } or no_cgroup("cannot set a memory limit: $@");
    eval { spew("$dir/memory.swap.max", "0\n") } if $limit_file eq 'memory.max';
    return $dir;
}

# Run `$code` in a child moved into cgroup `$dir` (`in_child`'s result).
sub in_cgroup {
    my ($dir, $code) = @_;
    return in_child(sub { spew("$dir/cgroup.procs", "$$\n"); $code->() }, 120);
}

sub lives_ok {
    my ($r, $name) = @_;
    ok(!$r->{signal} && !$r->{timed_out} && $r->{exit} == 0, "$name: the process lives")
        or diag child_status_text($r);
}

# ---------------------------------------------------------------- memory

my $cg512 = cgroup(512 * $MIB);
for my $ctor (qw(new new_memfd)) {
    my $make = $ctor eq 'new'
        ? sub { $C->new(undef, $_[0], 0.01) }
        : sub { $C->new_memfd('room', $_[0], 0.01) };
    my $r = in_cgroup($cg512, sub {
        my $f = eval { $make->(1e9) };
        return $f ? 'created' : "croaked: $@";
    });
    lives_ok($r, "$ctor of a 2 GiB filter under a 512 MiB memory cgroup");
    like($r->{out}, qr/^croaked: \Q$C\E->$ctor: the filter needs 2149580800 bytes \(2 GiB\), but the memory cgroup allows [\d.]+ MiB more \(\d+ bytes\); nothing was created at /,
        '... croaks naming what was asked, what the cgroup allows, and that nothing was made');
    $r = in_cgroup($cg512, sub {
        my $f = $make->(1e7);
        $f->add("x$_") for 1 .. 1000;
        return 'ok ' . $f->contains('x7') . ' ' . $f->bits;
    });
    lives_ok($r, "$ctor of a 16 MiB filter under the same limit");
    is($r->{out}, 'ok 1 134217728', '... is created and works');
}

# The limit of an ancestor counts: a cgroup without one of its own, under
# one of 64 MiB.
my $cg64 = cgroup(64 * $MIB);
my $nested = cgroup(undef, $cg64);
for my $size (2e8, 1e6) {
    my $r = in_cgroup($nested, sub {
        my $f = eval { $C->new(undef, $size, 0.01) };
        return $f ? 'created ' . $f->add('x') : "croaked: $@";
    });
    lives_ok($r, "new of a filter for $size items in a cgroup under one of 64 MiB");
    like($r->{out}, $size > 1e6 ? qr/^croaked: .*, but the memory cgroup allows [\d.]+ MiB more/ : qr/^created 1$/,
        $size > 1e6 ? '... 258 MiB croaks, naming the cgroup above' : '... 2 MiB is created and works');
}

# merge and intersect copy the other filter into a journal first: under
# 80 MiB, two filters of 32 MiB leave no room for a third; under 160 MiB
# they do.
for my $limit (80, 160) {
    my $cg = cgroup($limit * $MIB);
    my $r = in_cgroup($cg, sub {
        my ($x, $y) = map { $C->new(undef, 1.5e7, 0.01) } 1, 2;
        $x->add('x');
        $y->add('y');
        return join "\n", map {
            my $op = $_;
            eval { $x->$op($y); 1 } ? "$op: done" : "$op: $@";
        } qw(merge intersect);
    });
    lives_ok($r, "merge and intersect of two 32 MiB filters under $limit MiB");
    if ($limit == 80) {
        for my $op (qw(merge intersect)) {
            like($r->{out}, qr/^$op: \Q$C\E->$op: cannot reserve 33554432 bytes for the journal \(a copy of the other filter, 32 MiB\): the memory cgroup allows [\d.]+ MiB more \(\d+ bytes\); nothing was changed at /m,
                "... $op croaks naming the cgroup");
        }
    } else {
        is($r->{out}, "merge: done\nintersect: done", '... both run');
    }
}

# The address space (ulimit -v) counts too.
{
    local $ENV{PERL5LIB} = perl5lib();
    my ($out, $status) = run_sh('ulimit -v 1048576 && exec "$@" 2>&1', qq{
        use $C;
        my \$f = eval { $C->new(undef, 1e9, 0.01) };
        print \$f ? "created\n" : "croaked: \$@";
        print 'small: ', $C->new(undef, 1e6, 0.01)->add('x'), "\n";
    });
    is($status, 0, 'new of a 2 GiB filter under a 1 GiB address space limit: the process lives') or diag $out;
    like($out, qr/^croaked: \Q$C\E->new: the filter needs 2149580800 bytes \(2 GiB\), but the address space limit leaves [\d.]+ MiB \(RLIMIT_AS less VmSize, \d+ bytes\); nothing was created at /m,
        '... croaks naming RLIMIT_AS') or diag $out;
    like($out, qr/^small: 1$/m, '... and a 2 MiB one is created and works');
}

# ---------------------------------------------------------------- deserialize

my $r = in_cgroup($cg512, sub {
    my $f = eval { $C->deserialize(image(1 << 28)) };
    return $f ? 'created' : "croaked: $@";
});
lives_ok($r, 'deserialize of a 24-byte image declaring 2^28 words (2 GiB)');
like($r->{out}, qr/^croaked: \Q$C\E->deserialize: the bytes ask for a filter of \d+ bytes \(2 GiB\), more than the 16777216 bytes \(16 MiB\) that 24 bytes of input may ask for \(64 times their length, at least 16 MiB\): pass max_bytes to allow more; nothing was created at /,
    '... croaks before any allocation, naming both figures and max_bytes');

$r = in_cgroup($cg512, sub {
    my $f = eval { $C->deserialize(image(1 << 28), { max_bytes => 1 << 40 }) };
    return $f ? 'created' : "croaked: $@";
});
lives_ok($r, '... with max_bytes => 2**40');
like($r->{out}, qr/^croaked: \Q$C\E->deserialize: the filter needs \d+ bytes \(2 GiB\), but the memory cgroup allows [\d.]+ MiB more/,
    '... the memory cgroup still refuses it');

$r = in_cgroup($cg512, sub {
    my $f = $C->deserialize(image(1 << 16));
    my $g = $C->deserialize(image(1 << 23), { max_bytes => 80 * $MIB });
    $g->add('x');
    return join ' ', 'ok', $f->bits, $f->bits_set, $g->bits, $g->contains('x');
});
lives_ok($r, 'images declaring 512 KiB (no option) and 64 MiB (max_bytes => 80 MiB)');
is($r->{out}, 'ok 4194304 0 536870912 1', '... are made and work');

# Mutated images, seeded: each child tries its share under a 64 MiB limit;
# none may be killed, whatever the bytes ask for.
my @bases = (image(1 << 10), $bytes, $C->new(undef, 1000, 0.01)->serialize,
    $C->new(undef, 1000, 0.01, { grow => 2 })->serialize);
my ($children, $per_child) = (6, 60);
my %tally;
for my $c (1 .. $children) {
    $r = in_cgroup($cg64, sub {
        srand(1000 + $c);
        my ($ok, $croaked) = (0, 0);
        for my $n (1 .. $per_child) {
            my $b = $bases[$n % @bases];
            # Mostly the header, where sizes are declared; a word count's
            # high bytes (16-19 of an image) half the time.
            for (1 .. 1 + int rand 3) {
                my $at = rand() < 0.5 && $n % @bases < 2 ? 16 + int rand 4 : int rand(length($b) < 96 ? length $b : 96);
                substr($b, $at, 1) = chr int rand 256;
            }
            my $f = eval { $C->deserialize($b) };
            $f ? $ok++ : $croaked++;
        }
        return "$ok $croaked";
    });
    note "child $c: images made, refused: $r->{out}" if !$r->{signal};
    $tally{killed}++ if $r->{signal};
    $tally{other}++ if !$r->{signal} && ($r->{exit} || $r->{out} !~ /^\d+ \d+$/);
    diag "child $c: " . child_status_text($r) if $r->{signal} || $r->{exit};
}
is($tally{killed} // 0, 0, "$children x $per_child mutated images under a 64 MiB limit: no child killed by a signal");
is($tally{other} // 0, 0, '... and each answered or croaked');

# ---------------------------------------------------------------- growth

$r = in_cgroup($cg64, sub {
    my $f = $C->new(undef, 2_000_000, 0.01, { grow => 16 });
    my $i = 0;
    my $ok = eval { $f->add_many([map { 'i' . $i++ } 1 .. 10_000]) while $f->stages < 2; 1 };
    return "grew after $i" if $ok;
    my $batch = $@;
    my $count = $f->count;
    my $single = eval { $f->add("new$_") for 1 .. 1000; 1 } ? 'single adds fit' : $@;
    return join "\n", "batch: $batch", "single: $single",
        'after: ' . join ' ', $f->stages, $f->count == $count ? 'same count' : 'count changed', $f->contains('i7');
});
lives_ok($r, 'a filter that grows, whose next stage (64 MiB) does not fit a 64 MiB cgroup');
like($r->{out}, qr/^batch: \Q$C\E->add_many: the filter is full and its next stage needs the file to grow to \d+ bytes: the stage is 67108864 bytes \(64 MiB\), but the memory cgroup allows [\d.]+ MiB more \(\d+ bytes\); the first \d+ items of this batch were added, none after at /,
    '... croaks on the batch that needs the stage');
like($r->{out}, qr/^single: \Q$C\E->add: the filter is full and its next stage needs the file to grow to \d+ bytes: the stage is 67108864 bytes \(64 MiB\), but the memory cgroup allows [\d.]+ MiB more \(\d+ bytes\); nothing was added at /m,
    '... and on a single add, which adds nothing');
like($r->{out}, qr/^after: 1 same count 1$/m, '... the filter is as it was, and answers');

$r = in_cgroup($cg64, sub {
    my $f = $C->new(undef, 100_000, 0.01, { grow => 16 });
    my $i = 0;
    $f->add_many([map { 'i' . $i++ } 1 .. 10_000]) while $f->stages < 2;
    return join ' ', 'stages', $f->stages, $f->contains('i7'), $f->contains("i$i") ? 'fp' : 'absent';
});
lives_ok($r, 'a filter that grows, whose next stage (4 MiB) fits the same cgroup');
is($r->{out}, 'stages 2 1 absent', '... grows and works');

# ---------------------------------------------------------------- tmpfs

SKIP: {
    my ($unshare) = grep { -x } map {"$_/unshare"} split /:/, $ENV{PATH} // '';
    skip 'no unshare(1)', 11 if !$unshare;
    my $mnt = tempdir(CLEANUP => 1);
    local $ENV{PERL5LIB} = perl5lib();
    # perl -e $script in cgroup $dir, in a mount namespace of its own with
    # a tmpfs of $size at $mnt: (its output, its status).
    my $on_tmpfs = sub {
        my ($dir, $size, $script) = @_;
        my $prelude = qq{echo \$\$ > $dir/cgroup.procs && mount -t tmpfs -o size=$size tmpfs $mnt && exec "\$@" 2>&1};
        return run_sh($prelude, "use $C; my \$mnt = '$mnt'; $script", $unshare, '-m');
    };
    my ($probe, $st) = $on_tmpfs->($cg512, '1m', 'print "mounted\n"');
    skip "cannot mount a tmpfs in a mount namespace: $probe", 11 if $st || $probe ne "mounted\n";

    # Without /proc (an empty tmpfs over it, in this namespace only): the
    # sources it holds are unknown and skipped; filters are made as before.
    my ($out, $status) = run_sh(
        qq{echo \$\$ > $cg512/cgroup.procs && mount -t tmpfs tmpfs /proc && exec "\$@" 2>&1},
        "use $C; print -e '/proc/self/status' ? 'proc' : 'no proc', ' ', $C->new(undef, 1e6, 0.01)->add('x'),"
            . " ' ', $C->new_memfd('m', 1e6, 0.01)->add('x'), qq{\\n};",
        $unshare, '-m');
    is($status, 0, 'without /proc: the process lives') or diag $out;
    is($out, "no proc 1 1\n", '... and new and new_memfd make filters that work');

    my $script = q{
        my $f = eval { Data::BloomFilter::Shared->new("$mnt/big.bf", 1e8, 0.01) };
        print $f ? "created\n" : "croaked: $@";
        opendir my $d, $mnt or die; print 'left: ', join(' ', sort grep { !/^\./ } readdir $d), "\n";
        my $g = Data::BloomFilter::Shared->new("$mnt/small.bf", 1e6, 0.01);
        $g->add('x');
        print 'small: ', $g->contains('x'), ' ', -s "$mnt/small.bf" > 1e6 ? 'sized' : 'short', "\n";
    };
    ($out, $status) = $on_tmpfs->($cg512, '32m', $script);
    is($status & 127, 0, 'a 130 MiB file filter on a 32 MiB tmpfs: the process lives') or diag $out;
    like($out, qr/^croaked: \Q$C\E->new: \Q$mnt\E\/big\.bf: the filter needs 136314880 bytes \(130 MiB\), but the file system has 32 MiB free \(free space on the file system, 33554432 bytes; ENOSPC: No space left on device\); nothing was created at /m,
        '... croaks naming the free space on the file system') or diag $out;
    like($out, qr/^left: $/m, '... and leaves no file');
    like($out, qr/^small: 1 sized$/m, 'a 2 MiB file filter on the same tmpfs is created and works');

    # A tmpfs larger than the cgroup's room: its pages are memory.
    ($out, $status) = $on_tmpfs->($cg64, '1g', q{
        my $f = eval { Data::BloomFilter::Shared->new("$mnt/big.bf", 2e8, 0.01) };
        print $f ? "created\n" : "croaked: $@";
        my $g = Data::BloomFilter::Shared->new("$mnt/small.bf", 1e6, 0.01);
        print 'small: ', $g->add('x'), "\n";
    });
    is($status & 127, 0, 'a 258 MiB file filter on a 1 GiB tmpfs under a 64 MiB cgroup: the process lives')
        or diag $out;
    like($out, qr/^croaked: \Q$C\E->new: \Q$mnt\E\/big\.bf: the filter needs 270532608 bytes \(258 MiB\), but the memory cgroup allows [\d.]+ MiB more \(\d+ bytes\); nothing was created at /m,
        '... croaks naming the memory cgroup: a tmpfs file counts against memory') or diag $out;
    like($out, qr/^small: 1$/m, 'a 2 MiB one there is created and works');

    # A file filter that grows: its next stage is the tmpfs's free space.
    ($out, $status) = $on_tmpfs->($cg512, '2m', q{
        my $f = Data::BloomFilter::Shared->new("$mnt/grow.bf", 100_000, 0.01, { grow => 16 });
        my $i = 0;
        eval { $f->add_many([map { 'i' . $i++ } 1 .. 10_000]) while $f->stages < 2; 1 } and print "grew\n";
        my $e = eval { $f->add("new$_") for 1 .. 1000; 1 } ? "added\n" : $@;
        print "single: $e", 'after: ', $f->stages, ' ', $f->contains('i7'), "\n";
    });
    is($status & 127, 0, 'a file filter that grows on a 2 MiB tmpfs: the process lives') or diag $out;
    like($out, qr/^single: \Q$C\E->add: the filter is full and its next stage needs the file to grow to \d+ bytes: the stage is \d+ bytes \([\d.]+ MiB\), but the file system has [\d.]+ (?:KiB|MiB) free \(free space on the file system, \d+ bytes; ENOSPC: No space left on device\); nothing was added at .*\nafter: 1 1$/m,
        '... whose next stage does not fit croaks on the add that needs it, and answers after') or diag $out;
}

done_testing;
