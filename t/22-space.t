# Space is reserved when a filter is made: a file system without room for
# it, or a file size limit (RLIMIT_FSIZE) below its size, croaks there and
# then, leaves no file behind and the process alive; it never ends in a
# SIGBUS or SIGXFSZ later.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib spew run_sh);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $outside = tempdir(CLEANUP => 1);

# 1e6 items at 0.01: a 2 MiB bit array, a 2.3 MiB file.
my $BIG = 1_000_000;
# 1e4 items: a 340 KiB file.
my $SMALL = 10_000;
# What deserialize is given, made here, where no limit applies.
$ENV{BFS_BYTES} = "$outside/big.bytes";
spew($ENV{BFS_BYTES}, Data::BloomFilter::Shared->new(undef, $BIG, 0.01)->serialize);

# The child's part: every case prints one line; the last line is "alive".
my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my ($dir, $big, $small) = @ARGV;
my $C = 'Data::BloomFilter::Shared';
$| = 1;
sub try_ {
    my ($name, $code) = @_;
    my $f = eval { $code->() };
    if ($f) {
        # Touch every page, as users will: on an unreserved file this is
        # where SIGBUS strikes.
        $f->add("probe-$_") for 1 .. 20_000;
        print "$name: made ", $f->bits_set > 0 ? 'and used' : 'empty', "\n";
    } else {
        (my $e = $@) =~ s/\n//g;
        print "$name: $e\n";
    }
}
sub listing {
    opendir(my $dh, $dir) or die "$dir: $!";
    return join(',', map { $_ . '=' . (-s "$dir/$_") } sort grep { !/^\.\.?$/ } readdir $dh);
}
try_('new', sub { $C->new("$dir/big.bf", $big, 0.01) });
print 'after new: [', listing(), "]\n";
my $bytes = do { local $/; open(my $fh, '<:raw', $ENV{BFS_BYTES}) or die "$ENV{BFS_BYTES}: $!"; <$fh> };
try_('deserialize', sub { $C->deserialize($bytes, { path => "$dir/bytes.bf" }) });
print 'after deserialize: [', listing(), "]\n";
{ open(my $fh, '>', "$dir/empty.bf") or die; }
try_('adopt', sub { $C->new("$dir/empty.bf", $big, 0.01) });
print 'after adopt: [', listing(), "]\n";
unlink "$dir/empty.bf";
if (grep { $_ eq 'memfd' } @ARGV) {
    try_('new_memfd', sub { $C->new_memfd('big', $big, 0.01) });
    try_('anonymous', sub { $C->new(undef, $big, 0.01) });
}
try_('small', sub { $C->new("$dir/small.bf", $small, 0.01) });
print "alive\n";
PERL

# Run the script under sh -c "$prelude" (which ends by exec'ing it).
sub run {
    my ($prelude, @cmd) = @_;
    local $ENV{PERL5LIB} = perl5lib();
    return run_sh($prelude, $script, @cmd);
}

sub line {
    my ($out, $name) = @_;
    return $out =~ /^\Q$name\E: (.*)$/m ? $1 : "(no line for $name)";
}

# --- a file system too small for the filter: a 1 MiB tmpfs ----------------------------------
SKIP: {
    my $ns = ($> == 0) && system('unshare -m true >/dev/null 2>&1') == 0;
    skip 'needs root and mount namespaces (unshare -m) to mount a small tmpfs', 11 unless $ns;
    my $mnt = "$dir/tiny";
    mkdir $mnt or die;
    my ($out, $status) = run(
        "mount -t tmpfs -o size=1m tmpfs '$mnt' || exit 98; exec \"\$@\" '$mnt' $BIG $SMALL",
        'unshare', '-m');
    skip "cannot mount a tmpfs here (status $status)", 11 if $status >> 8 == 98;
    like($out, qr/^alive$/m, 'the process lives through all of it')
        or diag("status $status\n$out");
    is($status, 0, '... and exits normally (no SIGBUS)') or diag($out);
    like(line($out, 'new'), qr/->new: .*big\.bf: .*No space left on device/,
        'new of a 2.3 MiB filter on a 1 MiB tmpfs croaks with ENOSPC');
    is(line($out, 'after new'), '[]', '... and leaves no file, under any name');
    like(line($out, 'deserialize'), qr/->deserialize: .*bytes\.bf: .*No space left on device/,
        'deserialize to a path there croaks with ENOSPC');
    is(line($out, 'after deserialize'), '[]', '... and leaves no file');
    like(line($out, 'adopt'), qr/->new: .*empty\.bf: .*No space left on device/,
        'adopting an empty file there croaks with ENOSPC');
    is(line($out, 'after adopt'), '[empty.bf=0]', '... and leaves the empty file as it was, nothing else');
    is(line($out, 'small'), 'made and used', 'a filter that fits is made and works');
    unlike($out, qr/^(new|deserialize|adopt): made/m, 'no filter too large was made');
    ok(!-e "$mnt/big.bf", 'the tmpfs was private to the child');
}

# --- a merge or an intersect whose journal does not fit ------------------------------------
# Both copy the other filter beside this one first (the file grows by one bit
# array while they run). Without room: a croak naming ENOSPC, the filter and
# its file as they were, no SIGBUS; with room again, both work and the file
# keeps the journal's space (no process gives back pages another may map).
my $journal_script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my ($mnt, $cap, $remount) = @ARGV;
my $C = 'Data::BloomFilter::Shared';
$| = 1;
my $path = "$mnt/j.bf";
my $f = $C->new($path, $cap, 0.01);
$f->add_many([map { "mine $_" } 1 .. 5000]);
my $o = $C->new(undef, $cap, 0.01);
$o->add_many([map { "theirs $_" } 1 .. 5000]);
my ($before, $size) = ($f->serialize, -s $path);
print "size: $size\n";
for my $op (qw(merge intersect)) {
    (my $e = eval { $f->$op($o); 'done' } // $@) =~ s/\n//g;
    print "$op: $e\n";
    print "$op filter: ", ($f->serialize eq $before ? 'unchanged' : 'changed'), "\n";
    print "$op file: ", ((-s $path) == $size ? 'same size' : 'size ' . -s $path), "\n";
}
$f->add('after');
print 'usable: ', ($f->contains('after') && $f->contains('mine 1') ? 'yes' : 'no'), "\n";
exit 0 unless $remount;
system('mount', '-o', 'remount,size=8m', $mnt) == 0 or print "remount failed\n";
$f->merge($o);
print 'merged with room: ', ($f->contains('theirs 1') ? 'yes' : 'no'), ', size ', -s $path, "\n";
print "alive\n";
PERL

SKIP: {
    my $ns = ($> == 0) && system('unshare -m true >/dev/null 2>&1') == 0;
    skip 'needs root and mount namespaces (unshare -m) to mount a small tmpfs', 10 unless $ns;
    my $mnt = "$dir/journal";
    mkdir $mnt or die;
    local $ENV{PERL5LIB} = perl5lib();
    # 1e6 items at 0.01: a 2.3 MiB file, and a 2 MiB journal: 3 MiB is too little.
    my ($out, $status) = run_sh("mount -t tmpfs -o size=3m tmpfs '$mnt' || exit 98; exec \"\$@\" '$mnt' 1000000 1",
        $journal_script, 'unshare', '-m');
    skip "cannot mount a tmpfs here (status $status)", 10 if $status >> 8 == 98;
    like($out, qr/^alive$/m, 'merge and intersect without room: the process lives through both')
        or diag("status $status\n$out");
    is($status, 0, '... and exits normally (no SIGBUS)') or diag($out);
    for my $op (qw(merge intersect)) {
        like(line($out, $op), qr/^\Q$C\E->$op: cannot reserve \d+ bytes for the journal .*ENOSPC/,
            "$op croaks naming itself and ENOSPC");
        is(line($out, "$op filter"), 'unchanged', '... the filter is unchanged');
        is(line($out, "$op file"), 'same size', '... and so is its file');
    }
    is(line($out, 'usable'), 'yes', 'the filter works on');
    my ($size) = line($out, 'size') =~ /(\d+)/;
    my ($merged, $now) = line($out, 'merged with room') =~ /^(\w+), size (\d+)$/;
    is($merged, 'yes', 'with room, a merge works');
    # 1e6 items at 0.01: a 1.2 MB bit array, the journal one more, page aligned.
    ok($now && $now > $size && $now <= 2 * $size, "... and the file keeps the journal's space ($size, then $now bytes)");
}

# A file under the file size limit whose journal would take it past the limit:
# 3e5 items, a 836 KiB file, a 512 KiB journal, under a limit of exactly 1 MiB
# (prlimit: a shell's ulimit -f counts in blocks whose size varies).
SKIP: {
    skip 'needs prlimit(1) to set an exact file size limit', 8
        unless system('prlimit --fsize=1048576 true >/dev/null 2>&1') == 0;
    my $sub = "$dir/journal-limited";
    mkdir $sub or die;
    local $ENV{PERL5LIB} = perl5lib();
    my ($out, $status) = run_sh("exec \"\$@\" '$sub' 300000 0", $journal_script, 'prlimit', '--fsize=1048576');
    {
        is($status, 0, 'merge and intersect past RLIMIT_FSIZE: the process exits normally (no SIGXFSZ)')
            or diag($out);
        for my $op (qw(merge intersect)) {
            like(line($out, $op),
                qr/^\Q$C\E->$op: the journal needs the file to grow to \d+ bytes, more than the file size limit \(RLIMIT_FSIZE/,
                "$op croaks naming itself and the limit");
            is(line($out, "$op filter"), 'unchanged', '... the filter is unchanged');
            is(line($out, "$op file"), 'same size', '... and so is its file');
        }
        is(line($out, 'usable'), 'yes', 'the filter works on');
    }
}

# --- a file size limit below the filter's size (ulimit -f) ----------------------------------
{
    my $sub = "$dir/limited";
    mkdir $sub or die;
    # 1024 blocks is at most 1 MiB, whatever the shell's block size.
    my ($out, $status) = run('ulimit -f 1024 || exit 98; exec "$@" ' . "'$sub' $BIG $SMALL memfd");
    like($out, qr/^alive$/m, 'under ulimit -f, the process lives through all of it')
        or diag("status $status\n$out");
    is($status, 0, '... and exits normally (no SIGXFSZ)') or diag($out);
    like(line($out, 'new'), qr/->new: .*big\.bf: .*file size limit \(RLIMIT_FSIZE/,
        'new of a file larger than RLIMIT_FSIZE croaks naming the limit');
    is(line($out, 'after new'), '[]', '... and leaves no file');
    like(line($out, 'deserialize'), qr/->deserialize: .*RLIMIT_FSIZE/,
        'deserialize to a path croaks naming the limit');
    is(line($out, 'after deserialize'), '[]', '... and leaves no file');
    like(line($out, 'adopt'), qr/->new: .*RLIMIT_FSIZE/, 'adopting an empty file croaks naming the limit');
    is(line($out, 'after adopt'), '[empty.bf=0]', '... and leaves the empty file as it was');
    like(line($out, 'new_memfd'), qr/->new_memfd: memfd: .*RLIMIT_FSIZE/,
        'a memfd larger than RLIMIT_FSIZE croaks naming the limit');
    like(line($out, 'anonymous'), qr/->new: memfd: .*RLIMIT_FSIZE/,
        'so does an anonymous filter (a memfd inside)');
    is(line($out, 'small'), 'made and used', 'a filter under the limit is made and works');
}

done_testing;
