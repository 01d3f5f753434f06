# A filter that grows where its next stage finds no room (C10, §8 N4): a
# small tmpfs (ENOSPC), a file size limit (RLIMIT_FSIZE) and a memfd sealed
# against growing (EPERM). The add that needed the stage croaks naming the
# reason, the process lives (no SIGBUS, no SIGXFSZ), every item added
# before is present, the stages are as they were, adds of present items
# still say "not new"; once there is room, the next add grows the filter.
# Both layouts.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib run_sh);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);

# The child's part: adds until an add croaks, then reports one line per
# check; the last line is "alive". Arguments: tmpfs|fsize|memfd, the
# directory, the layout.
my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my ($mode, $where, $layout) = @ARGV;
my $C = 'Data::BloomFilter::Shared';
$| = 1;
my %o = (layout => $layout, grow => 2);
my $path = "$where/g.bf";
my $f = $mode eq 'memfd' ? $C->new_memfd('sealed', 1000, 0.01, \%o) : $C->new($path, 1000, 0.01, \%o);
my ($n, $err) = (0, undef);
while ($n < 3_000_000) {
    if ($mode eq 'memfd' && $n == 10_000) {
        # Sealed once it has grown a few stages (F_ADD_SEALS, F_SEAL_GROW),
        # through a duplicate of its descriptor: a seal is the file's.
        open(my $fh, '+<&', $f->memfd) or die "dup: $!";
        fcntl($fh, 1033, 4) or die "F_ADD_SEALS: $!";
        print "sealed at stages: ", $f->stages, "\n";
    }
    my $i = $n + 1;
    if (!eval { $f->add("i$i"); 1 }) { $err = $@; last }
    $n = $i;
}
(my $e = $err // 'none') =~ s/\n//g;
my $stages = $f->stages;
my $refused = 'i' . ($n + 1);
my $missing = sub { scalar grep { !$f->contains("$_[0]$_") } 1 .. $_[1] };
print "error: $e\n";
print "added: $n\n";
print "stages: $stages\n";
print "refused present: ", $f->contains($refused), "\n";
(my $again = eval { $f->add($refused); 'added' } // $@) =~ s/\n//g;
print "again: $again\n";
print "missing: ", $missing->('i', $n), "\n";
print "new again: ", scalar(grep { $f->add("i$_") } 1 .. $n), "\n";
print "stages after: ", $f->stages, "\n";
my $sum = 0;
$sum += $_->{capacity} for @{ $f->stats->{stage_info} };
print "capacity: ", ($f->capacity == $sum && @{ $f->stats->{stage_info} } == $stages ? 'the stages' : 'wrong'), "\n";
if ($mode ne 'memfd') {
    my $g = $C->new($path, 1000, 0.01, {layout => $layout});
    print "reopened: stages ", $g->stages, ", missing ", scalar(grep { !$g->contains("i$_") } 1 .. $n), "\n";
}
# Room again: a bigger tmpfs, or the soft limit raised (the hard one is
# unlimited). A seal cannot be lifted.
if ($mode eq 'tmpfs') {
    system('mount', '-o', 'remount,size=64m', $where) == 0 or print "remount failed\n";
}
elsif ($mode eq 'fsize') {
    system('prlimit', "--pid=$$", '--fsize=unlimited:unlimited') == 0 or print "prlimit failed\n";
}
if ($mode ne 'memfd') {
    (my $r = eval { $f->add($refused) } // $@) =~ s/\n//g;
    print "with room: $r, stages ", $f->stages, "\n";
    # On until one more stage is added (the new stage's capacity, and some).
    my ($j, $more, $grown) = (0, 0, $f->stages);
    my $cap = $f->stats->{stage_info}[-1]{capacity};
    while ($f->stages == $grown && $j < 2 * $cap) { $more += $f->add('more' . ++$j) ? 1 : 0 }
    print "more: ", ($more > 0.98 * $j ? 'new' : "only $more of $j new"), ", stages ", $f->stages, "\n";
    print "missing after: ", $missing->('i', $n) + $missing->('more', $j), "\n";
}
print "alive\n";
PERL

sub line {
    my ($out, $name) = @_;
    return $out =~ /^\Q$name\E: (.*)$/m ? $1 : "(no line for $name)";
}

# The checks every case shares; $why matches the reason the add names.
sub check {
    my ($what, $out, $status, $why, $room) = @_;
    like($out, qr/^alive$/m, "$what: the process lives through it") or diag("status $status\n$out");
    is($status, 0, "$what: ... and exits normally (no signal)") or diag($out);
    like(line($out, 'error'),
        qr/^\Q$C\E->add: the filter is full and its next stage needs the file to grow to \d+ bytes: .*$why.*; nothing was added at /,
        "$what: the add that needed a stage croaks naming add and the reason");
    my $stages = line($out, 'stages');
    cmp_ok($stages, '>=', 3, "$what: ... after the filter grew ($stages stages, " . line($out, 'added') . ' items)');
    is(line($out, 'refused present'), 0, "$what: the refused item is absent");
    like(line($out, 'again'), qr/^\Q$C\E->add: the filter is full .*$why/, "$what: adding it again croaks again");
    is(line($out, 'missing'), 0, "$what: every item added before is present");
    is(line($out, 'new again'), 0, "$what: ... and adding it again says not new, no croak");
    is(line($out, 'stages after'), $stages, "$what: the stages are as they were");
    is(line($out, 'capacity'), 'the stages', "$what: capacity and stats are those stages'");
    return if !$room;
    is(line($out, 'reopened'), "stages $stages, missing 0", "$what: a handle opened now sees the same stages and items");
    is(line($out, 'with room'), '1, stages ' . ($stages + 1), "$what: with room, the refused item is added, growing the filter");
    like(line($out, 'more'), qr/^new, stages (\d+)$/, "$what: ... which takes new items on, until it fills");
    cmp_ok((line($out, 'more') =~ /stages (\d+)/)[0] // 0, '>', $stages + 1, "$what: ... and grows again");
    is(line($out, 'missing after'), 0, "$what: every item is still there");
}

local $ENV{PERL5LIB} = perl5lib();

for my $layout (qw(standard blocked)) {
    # --- a 256 KiB tmpfs --------------------------------------------------------------------------
    SKIP: {
        my $ns = ($> == 0) && system('unshare -m true >/dev/null 2>&1') == 0;
        skip 'needs root and mount namespaces (unshare -m) to mount a small tmpfs', 15 unless $ns;
        my $mnt = "$dir/tiny-$layout";
        mkdir $mnt or die;
        my ($out, $status) = run_sh("mount -t tmpfs -o size=256k tmpfs '$mnt' || exit 98; exec \"\$@\" tmpfs '$mnt' $layout",
            $script, 'unshare', '-m');
        skip "cannot mount a tmpfs here (status $status)", 15 if $status >> 8 == 98;
        check("$layout, 256 KiB tmpfs", $out, $status, 'ENOSPC', 1);
        ok(!-e "$mnt/g.bf", "$layout: the tmpfs was private to the child");
    }

    # --- a file size limit of 256 KiB -------------------------------------------------------------
    SKIP: {
        skip 'needs prlimit(1) to set and raise an exact file size limit', 14
            unless system('prlimit --fsize=262144:unlimited true >/dev/null 2>&1') == 0;
        my $sub = "$dir/limited-$layout";
        mkdir $sub or die;
        my ($out, $status) = run_sh("exec \"\$@\" fsize '$sub' $layout", $script, 'prlimit', '--fsize=262144:unlimited');
        check("$layout, RLIMIT_FSIZE 256 KiB", $out, $status, 'more than the file size limit \(RLIMIT_FSIZE, 262144 bytes\)', 1);
    }

    # --- a memfd sealed against growing -----------------------------------------------------------
    {
        my ($out, $status) = run_sh("exec \"\$@\" memfd '$dir' $layout", $script);
        like(line($out, 'sealed at stages'), qr/^\d+$/, "$layout, sealed memfd: sealed against growing")
            or diag($out);
        check("$layout, sealed memfd", $out, $status, 'EPERM', 0);
    }
}

# --- add_many across the stage that has no room ---------------------------------------------------
for my $layout (qw(standard blocked)) {
    my $f = $C->new_memfd('sealed-batch', 1000, 0.01, {layout => $layout, grow => 2});
    $f->add("a$_") for 1 .. 900;
    open(my $fh, '+<&', $f->memfd) or die "dup: $!";
    fcntl($fh, 1033, 4) or die "F_ADD_SEALS: $!";
    my @batch = map {"b$_"} 1 .. 300;
    my $ok = eval { $f->add_many(\@batch); 1 };
    my $err = $@;
    my $present = grep { $f->contains($_) } @batch;
    ok(!$ok, "$layout: add_many of 300 new items with room for about 100, on a sealed memfd, croaks");
    like($err, qr/^\Q$C\E->add_many: the filter is full and its next stage .*EPERM/, "$layout: ... naming add_many and EPERM");
    is($f->stages, 1, "$layout: ... and adds no stage");
    # The batch's leading items went in before the stage was needed: the
    # croak says how many, and they are present.
    my ($first) = $err =~ /; the first (\d+) items of this batch were added, none after/;
    ok(defined $first && $first <= $present && !grep({ !$f->contains($_) } @batch[0 .. ($first // 0) - 1]),
        "$layout: ... saying how many of the batch went in (" . ($first // 'none') . ", $present present)");
}

done_testing;
