# bloomfilter-shared never destroys data: outputs are built beside their
# name and renamed (or linked) into place, an existing file is replaced only
# with --force and never when it is a filter that may be in use, symbolic
# links are refused, and file names are printed on one line.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use POSIX ();
use Time::HiRes qw(time sleep);
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib reap slurp spew cli cli_argv);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my (undef, $script) = cli_argv();
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "73-cli-safety: global timeout\n" };
alarm 300;
$ENV{PERL5LIB} = perl5lib();
chdir $dir or die "chdir: $!";

# The command's code runs in this process (cli, t/lib/BFTest.pm) where a
# process of its own adds nothing: what it refuses and what it leaves on
# disk are the same. A kill, a stop, a mount namespace run the script
# ($script) as a process.

# An error: exit 2, nothing on stdout, exactly one line on stderr matching $re.
sub refused_ok {
    my ($args, $re, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my ($rc, $out, $err) = cli(undef, @$args);
    subtest $name => sub {
        is($rc, 2, 'exit 2');
        is($out, '', 'nothing on stdout');
        like($err, qr/\Abloomfilter-shared: [^\n]*\n\z/, 'one line on stderr');
        like($err, $re, 'says what was wrong');
    };
}

# The directory's entries, temporary files included.
sub entries {
    my ($d) = @_;
    opendir(my $dh, $d // '.') or die "opendir: $!";
    return [sort grep { $_ ne '.' && $_ ne '..' } readdir $dh];
}

sub filter_file {
    my ($path, @items) = @_;
    my $f = $C->new($path, 1000, 0.01);
    $f->add($_) for @items;
    return $f;
}

filter_file('a.bf', qw(a1 a2));
my $a_bytes = $C->new_from_fd(do { open(my $fh, '+<', 'a.bf') or die; $fh })->serialize;

# --- export A -o A, and other outputs onto existing files -----------------------------------
{
    my $before = slurp('a.bf');
    refused_ok([qw(export a.bf -o a.bf)], qr/a\.bf: file exists \(use --force to replace it\)/,
        'export A -o A is refused');
    is(slurp('a.bf'), $before, '... and A is whole');
    refused_ok([qw(export a.bf -o a.bf --force)],
        qr/a\.bf: is a filter that is not frozen, which processes may be using: not replaced, even with --force/,
        'export A -o A --force is refused: A is a live filter');
    is(slurp('a.bf'), $before, '... and A is whole');
    ok($C->new_from_fd(do { open(my $fh, '+<', 'a.bf') or die; $fh })->contains('a1'),
        '... and still a filter holding its items');

    spew('b.bytes', 'old contents');
    refused_ok([qw(export a.bf -o b.bytes)], qr/b\.bytes: file exists/, 'export onto an existing file');
    is(slurp('b.bytes'), 'old contents', '... leaves it as it was');
    my ($rc, $out, $err) = cli(undef, qw(export a.bf -o b.bytes --force));
    is($rc . $out . $err, '0', 'export --force onto an existing file');
    is(slurp('b.bytes'), $a_bytes, '... replaces it with the bytes');
    is(sprintf('%04o', (stat 'b.bytes')[2] & 07777), '0600', '... mode 0600 by default');
    ($rc) = cli(undef, qw(export a.bf -o c.bytes --mode 0640));
    is(sprintf('%04o', (stat 'c.bytes')[2] & 07777), '0640', 'export --mode 0640');
    refused_ok([qw(export a.bf --force)], qr/--force and --mode apply to -o OUT only/,
        'export --force without -o');

    # import and create refuse an existing file, replace it with --force.
    spew('junk.bf', 'junk');
    refused_ok([qw(create junk.bf -n 100)], qr/junk\.bf: file exists/, 'create onto a file');
    is(slurp('junk.bf'), 'junk', '... leaves it');
    ($rc, $out, $err) = cli(undef, qw(create junk.bf -n 100 --force));
    is($rc . $out . $err, '0', 'create --force onto a file that is no filter');
    is($C->new_from_fd(do { open(my $fh, '+<', 'junk.bf') or die; $fh })->capacity, 100,
        '... makes it a new filter');
    refused_ok([qw(import junk.bf -i b.bytes)], qr/junk\.bf: file exists/, 'import onto a file');
    refused_ok([qw(import junk.bf -i b.bytes --force)], qr/junk\.bf: is a filter that is not frozen/,
        'import --force onto a live filter');
    is($C->new_from_fd(do { open(my $fh, '+<', 'junk.bf') or die; $fh })->capacity, 100,
        '... leaves it');
    $C->new_from_fd(do { open(my $fh, '+<', 'junk.bf') or die; $fh })->freeze;
    ($rc, $out, $err) = cli(undef, qw(import junk.bf -i b.bytes --force));
    is($rc . $out . $err, '0', 'import --force onto a frozen filter');
    my $imported = $C->new_from_fd(do { open(my $fh, '+<', 'junk.bf') or die; $fh });
    ok(!$imported->frozen && $imported->contains('a2'), '... replaces it with the bytes\' filter');

    # The 0.04 format's magic: possibly in use, never replaced.
    spew('old.bf', 'BOOM' . "\0" x 252);
    refused_ok([qw(export a.bf -o old.bf --force)], qr/old\.bf: is a filter file in the 0\.04 format/,
        'a file of the 0.04 format is not replaced');
    is(length slurp('old.bf'), 256, '... and is left as it was');
    unlink 'old.bf', 'c.bytes';
    is_deeply(entries(), [qw(a.bf b.bytes junk.bf)], 'no temporary file left behind');
}

# --- a failed export or import leaves its output untouched ------------------------------------
{
    spew('b.bytes', 'old contents');
    refused_ok([qw(export nope.bf -o b.bytes --force)], qr/nope\.bf: No such file/,
        'export --force of a missing filter');
    is(slurp('b.bytes'), 'old contents', '... leaves the output untouched');
    spew('notafilter', 'x' x 700_000);    # larger than any header
    refused_ok([qw(export notafilter -o b.bytes --force)], qr/notafilter: bad magic/,
        'export --force of a file that is not a filter');
    is(slurp('b.bytes'), 'old contents', '... leaves the output untouched');
    refused_ok([qw(export notafilter -o new.bytes)], qr/notafilter: bad magic/,
        'export of a file that is not a filter to a new name');
    ok(!-e 'new.bytes', '... creates nothing');
    refused_ok([qw(import b.bytes -i notafilter --force)], qr/notafilter: bad magic/,
        'import --force of bytes that are no filter');
    is(slurp('b.bytes'), 'old contents', '... leaves FILE untouched');
    unlink 'notafilter';
    is_deeply(entries(), [qw(a.bf b.bytes junk.bf)], 'no temporary file left behind');
}

# --- no space: the output is untouched and no file is left ----------------------------------
SKIP: {
    skip 'needs root and unshare(1) to mount a small tmpfs', 4
        if $> != 0 || system('unshare --help >/dev/null 2>&1') != 0;
    my $big = $C->new("$dir/big.bf", 500_000, 0.01);    # 4.6 Mbit: 600 KiB of bytes
    $big->add("item-$_") for 1 .. 100;
    my $small = "$dir/small";
    mkdir $small or die "mkdir: $!";
    # In a mount namespace of its own: the tmpfs is gone with the process.
    my $sh = <<'SH';
set -e
mount -t tmpfs -o size=256k tmpfs "$1"
printf 'old contents' > "$1/b.bytes"
set +e
"$2" "$3" export "$4" -o "$1/b.bytes" --force 2>"$1/err1"; echo "rc1=$?"
"$2" "$3" export "$4" -o "$1/new.bytes" 2>"$1/err2"; echo "rc2=$?"
echo "b=$(cat "$1/b.bytes")"
echo "err1=$(cat "$1/err1")"
echo "err2=$(cat "$1/err2")"
rm "$1/err1" "$1/err2"
echo "ls=$(ls -A "$1" | tr '\n' ' ')"
SH
    open(my $ph, '-|', 'unshare', '-m', 'sh', '-c', "exec 2>&1\n$sh", 'sh', $small, $^X, $script,
        "$dir/big.bf") or die "unshare: $!";
    my $out = do { local $/; <$ph> } // '';
    close $ph;
    skip "cannot mount a tmpfs here: $out", 4 if $out =~ /mount:/;
    like($out, qr/^rc1=2$/m, 'export --force onto a full file system fails');
    like($out, qr/^err1=bloomfilter-shared: .*b\.bytes: write error: No space left on device$/m,
        '... saying so');
    like($out, qr/^b=old contents$/m, '... and leaves the output as it was');
    like($out, qr/^rc2=2\n(?s:.*)^ls=b\.bytes $/m,
        'export to a new name on a full file system fails and leaves no file at all');
    unlink "$dir/big.bf";
    rmdir $small;
}

# --- processes using the target survive ------------------------------------------------------

# A child that keeps adding to and querying $path (a live filter, or with
# $frozen a frozen one it maps read-only) until told to stop; it reports
# whether it still sees $item. Returns (pid, stop).
sub user_of {
    my ($path, $frozen, $item) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    pipe(my $stop_r, my $stop_w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        close $stop_w;
        my $f = $frozen ? $C->new_readonly($path) : $C->new($path, 1000, 0.01);
        syswrite $w, "up\n";
        my $rin = '';
        vec($rin, fileno $stop_r, 1) = 1;
        my $n = 0;
        while (!select(my $rout = $rin, undef, undef, 0)) {
            $f->add('user-' . $n++) if !$frozen;
            $f->contains('x' . $n) for 1 .. 100;
            $f->bits_set;    # reads every word of the mapping
            alarm 60 if $n == 1;
        }
        syswrite $w, ($f->contains($item) ? 'sees' : 'lost') . "\n";
        POSIX::_exit(0);
    }
    close $w;
    close $stop_r;
    my $up = <$r> // '';
    die "user of $path did not start\n" if $up ne "up\n";
    return ($pid, sub {
        close $stop_w;
        my $said = <$r> // '';
        chomp $said;
        my ($status) = reap($pid, 30);
        return ($status, $said);
    });
}

{
    filter_file('live.bf', 'live-item');
    my $before = slurp('live.bf');
    my ($pid, $stop) = user_of('live.bf', 0, 'live-item');
    sleep 0.2;
    refused_ok([qw(export a.bf -o live.bf)], qr/live\.bf: file exists/,
        'export onto a filter in use');
    refused_ok([qw(export a.bf -o live.bf --force)], qr/live\.bf: is a filter that is not frozen/,
        'export --force onto a filter in use');
    refused_ok([qw(import live.bf -i b.bytes --force)], qr/live\.bf: is a filter that is not frozen/,
        'import --force onto a filter in use');
    refused_ok([qw(create live.bf -n 10 --force)], qr/live\.bf: is a filter that is not frozen/,
        'create --force onto a filter in use');
    sleep 0.2;
    my ($status, $said) = $stop->();
    is($status, 0, 'the process adding to the filter all along survives (no SIGBUS)');
    is($said, 'sees', '... and still sees its items');
    ok($C->new('live.bf', 1000, 0.01)->contains('live-item'), 'the file keeps its items');

    # A frozen filter may be replaced with --force: its readers keep the
    # file they mapped, whole.
    filter_file('frozen.bf', 'frozen-item')->freeze;
    ($pid, $stop) = user_of('frozen.bf', 1, 'frozen-item');
    refused_ok([qw(export a.bf -o frozen.bf)], qr/frozen\.bf: file exists/,
        'export onto a frozen filter without --force');
    sleep 0.2;
    my ($rc, $out, $err) = cli(undef, qw(export a.bf -o frozen.bf --force));
    is($rc . $err, '0', 'export --force onto a frozen filter in use');
    sleep 0.2;
    ($status, $said) = $stop->();
    is($status, 0, 'its reader survives (no SIGBUS)');
    is($said, 'sees', '... and still sees the filter it mapped');
    is(slurp('frozen.bf'), $a_bytes, 'the name now holds the exported bytes');
    unlink 'live.bf', 'frozen.bf';
}

# --- killed at any moment, an output is the old file or the new one, whole ------------------
{
    my $x = $C->new('x.bf', 2_000_000, 0.01);
    my $y = $C->new('y.bf', 2_000_000, 0.01);
    $x->add_many([map { "x$_" } 1 .. 20_000]);
    $y->add_many([map { "y$_" } 1 .. 20_000]);
    my ($xb, $yb) = ($x->serialize, $y->serialize);
    spew('out.bytes', $xb);
    my (%seen, @bad, %status_early);
    srand(71);
    for my $round (1 .. 16) {
        my $from = $round % 2 ? 'y.bf' : 'x.bf';
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            open(STDOUT, '>', '/dev/null');
            open(STDERR, '>', '/dev/null');
            # Half the rounds replace out.bytes, half create new.bytes.
            { exec $^X, $script, 'export', $from, '-o',
                $round % 4 < 2 ? ('out.bytes', '--force') : ('new.bytes') }
            POSIX::_exit(127);
        }
        # Kill it once its temporary file exists (while it writes), a little
        # later, or (the rounds where it finished first) not at all.
        my $deadline = time + 10;
        until (glob('.out.bytes.*.tmp') || glob('.new.bytes.*.tmp') || time > $deadline) {
            if (waitpid($pid, POSIX::WNOHANG()) == $pid) {
                $status_early{$round} = $?;
                last;
            }
            sleep 0.0005;
        }
        sleep rand 0.01;
        kill 'KILL', $pid;
        my ($status) = exists $status_early{$round} ? ($status_early{$round}) : reap($pid, 30);
        my $out = slurp('out.bytes');
        push @bad, "round $round: out.bytes is neither" if $out ne $xb && $out ne $yb;
        if (-e 'new.bytes') {
            my $new = slurp('new.bytes');
            push @bad, "round $round: new.bytes is partial" if $new ne $xb && $new ne $yb;
            unlink 'new.bytes';
        }
        $seen{($status & 127) ? 'killed' : 'finished'}++;
        $seen{'killed with a temporary file'}++ if glob('.out.bytes.*.tmp') || glob('.new.bytes.*.tmp');
        unlink glob('.out.bytes.*.tmp'), glob('.new.bytes.*.tmp');
    }
    is_deeply(\@bad, [], 'an export killed at any moment leaves the old or the new bytes, never a mix');
    note('rounds: ' . join ', ', map { "$_ $seen{$_}" } sort keys %seen);
    unlink glob('.out.bytes.*.tmp'), glob('.new.bytes.*.tmp'), 'out.bytes', 'x.bf', 'y.bf';
}

# --- a name that appears while the output is built is not overwritten ----------------------
{
    my $big = $C->new('bigm.bf', 5_000_000, 0.01);    # 8 MiB of bits: each merge takes a while
    $big->add('m-item');
    undef $big;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open(STDERR, '>', "$dir/race.err") or POSIX::_exit(126);
        { exec $^X, $script, 'merge', 'race.bf', ('bigm.bf') x 200 }
        POSIX::_exit(127);
    }
    my ($caught, $done) = (0, 0);
    my $deadline = time + 30;
    while (time < $deadline) {
        if (my @tmp = glob('.race.bf.*.tmp')) {
            kill 'STOP', $pid;
            $caught = 1;
            last;
        }
        last if ($done = waitpid($pid, POSIX::WNOHANG()) == $pid);
        sleep 0.001;
    }
    ok($caught, 'merge into a new OUT builds it under a temporary name');
    ok(!-e 'race.bf', '... and the name does not exist meanwhile');
    spew('race.bf', 'mine') if !-e 'race.bf';
    kill 'CONT', $pid;
    my ($status) = $done ? ($?) : reap($pid, 60);
    is($status >> 8, 2, 'when the name appears meanwhile, the merge fails');
    like(slurp("$dir/race.err"), qr/\Abloomfilter-shared: race\.bf: file exists \(use --force to replace it\)\n\z/,
        '... saying so');
    is(slurp('race.bf'), 'mine', '... and leaves the file that appeared as it is');
    is_deeply([glob('.race.bf.*.tmp')], [], '... removing its temporary file');
    unlink 'race.bf', 'bigm.bf', "$dir/race.err";
}

# --- symbolic links and other kinds of files are refused as outputs ------------------------
{
    spew('target.txt', 'target');
    symlink('target.txt', 'link.out') or die "symlink: $!";
    symlink('missing.txt', 'dangling.out') or die "symlink: $!";
    for my $args ([qw(export a.bf -o link.out)], [qw(export a.bf -o link.out --force)],
        [qw(import link.out -i b.bytes --force)], [qw(create link.out -n 10 --force)],
        [qw(export a.bf -o dangling.out)], [qw(create dangling.out -n 10)],
        [qw(import dangling.out -i b.bytes)], [qw(merge dangling.out a.bf)])
    {
        my ($name) = grep { /\.out\z/ } @$args;
        refused_ok($args, qr/\Q$name\E: is a symbolic link \(refused\)/,
            "@$args: the link is refused");
    }
    is(slurp('target.txt'), 'target', 'the file a link points to is untouched');
    ok(-l 'link.out' && -l 'dangling.out', 'the links are still links');
    ok(!-e 'missing.txt', 'nothing was created where a dangling link points');

    mkdir 'adir' or die "mkdir: $!";
    refused_ok([qw(export a.bf -o adir --force)], qr/adir: is a directory/, 'a directory as output');
    POSIX::mkfifo('fifo', 0600) or die "mkfifo: $!";
    refused_ok([qw(export a.bf -o fifo --force)], qr/fifo: is not a regular file/,
        'a FIFO as output (without waiting for a reader)');
    ok(-p 'fifo', '... stays a FIFO');
    refused_ok([qw(export a.bf -o /dev/null --force)], qr{/dev/null: is not a regular file},
        'a device as output');
    ok(-c '/dev/null', '... stays a device');
    require IO::Socket::UNIX;
    my $sock = IO::Socket::UNIX->new(Local => 'sock', Listen => 1) or die "socket: $!";
    refused_ok([qw(create sock -n 10 --force)], qr/sock: is not a regular file/, 'a socket as output');
    ok(-S 'sock', '... stays a socket');
    close $sock;
    unlink 'sock';
    unlink 'target.txt', 'link.out', 'dangling.out', 'fifo';
    rmdir 'adir';
}

# --- file names are printed escaped, on one line ----------------------------------------------
{
    my $forged = "x\nbloomfilter-shared: forged";
    refused_ok(['info', $forged], qr/\Abloomfilter-shared: x\\nbloomfilter-shared: forged: No such file/,
        'a newline in a name is printed as \n');
    refused_ok(['info', "tab\there\r\e[31m"], qr/: tab\\there\\r\\x\{1b\}\[31m: No such file/,
        'tabs, carriage returns and escape sequences are escaped');
    refused_ok(['info', "caf\xc3\xa9 \xe2\x80\xaegnp.bf"],
        qr/: caf\xc3\xa9 \\x\{202e\}gnp\.bf: No such file/,
        'UTF-8 is kept; an invisible right-to-left override is escaped');
    refused_ok(['info', "bad\xff\xfe"], qr/: bad\\x\{ff\}\\x\{fe\}: No such file/,
        'bytes that are not UTF-8 are escaped');
    refused_ok(['info', 'back\\slash'], qr/: back\\\\slash: No such file/,
        'a backslash is doubled, so an escape cannot be forged');
    refused_ok(['create', "$forged/f.bf", qw(-n 10)],
        qr/\Abloomfilter-shared: x\\nbloomfilter-shared: forged\/f\.bf: .*No such file/,
        'create into a missing directory whose name holds a newline');
    refused_ok([qw(create a2.bf --capacity), "1\nbloomfilter-shared: forged"],
        qr/--capacity must be a positive integer .*, not '1\\nbloomfilter-shared: forged'/,
        'usage errors quoting an argument are one line too');
    refused_ok([qw(info a.bf), "--x\nforged"], qr/unknown option: x\\nforged/,
        'an option with a newline');

    # Names the tool itself prints in summaries and in info.
    my $odd = "odd\nname.bf";
    filter_file($odd, 'odd-item');
    my ($rc, $out, $err) = cli("one\n", 'add', $odd);
    is($err, "bloomfilter-shared: odd\\nname.bf: 1 line, 1 new, 0 probably seen before\n",
        'add: the summary names the file on one line');
    ($rc, $out) = cli(undef, 'info', $odd);
    like($out, qr/^file +odd\\nname\.bf$/m, 'info: the file line is escaped');
    spew('ser.bytes', $a_bytes);
    refused_ok(['info', "ser.bytes"], qr/this is serialized bytes/, 'serialized bytes');
    rename 'ser.bytes', "ser\n.bytes";
    refused_ok(['info', "ser\n.bytes"], qr/ser\\n\.bytes: this is serialized bytes: use import .* -i ser\\n\.bytes/,
        '... named escaped, twice');
    unlink $odd, "ser\n.bytes";
}

done_testing;
