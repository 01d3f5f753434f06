# The bloomfilter-shared command: its output, its exit codes and its
# one-line errors. Most cases run the command's code in this process (cli,
# t/lib/BFTest.pm): a process of its own adds nothing to them. The cases
# about a process run the script as one, through sh as a user types it
# (cli_sh): the script itself, pipelines, the umask, a stream answered
# line by line, a pipe nobody reads, a terminal, another user.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use IPC::Open2 ();
use Symbol ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib slurp spew cli cli_sh cli_argv);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my ($perl, $script) = cli_argv();
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "70-cli: global timeout\n" };
alarm 300;
# The streams below run the command themselves.
$ENV{PERL5LIB} = perl5lib();
chdir $dir or die "chdir: $!";

# Lines of input: each of @_ and a newline.
sub lines { join '', map {"$_\n"} @_ }

# An error: exit 2, nothing on stdout, one line on stderr naming the tool
# and matching $re, with no Perl source position in it. $got: what cli or
# cli_sh returned.
sub fails_ok {
    my ($got, $re, $name) = @_;
    my ($rc, $out, $err) = @$got;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    subtest $name => sub {
        is($rc, 2, 'exit 2');
        is($out, '', 'nothing on stdout');
        like($err, qr/\Abloomfilter-shared: [^\n]+\n\z/, 'one line on stderr');
        like($err, $re, 'says what was wrong');
        unlike($err, qr/ line \d+|\.pm\b|Data::BloomFilter::Shared->/, 'no Perl internals');
    };
}

sub json_info {
    my ($file) = @_;
    require JSON::PP;
    my ($rc, $out, $err) = cli(undef, 'info', $file, '--json');
    die "info $file: $err" if $rc;
    return JSON::PP->new->decode($out);
}

# --- the script, as a user runs it ------------------------------------------------------------
{
    my ($rc, $out, $err) = cli_sh('bloomfilter-shared --help');
    is($rc, 0, 'the script: --help exits 0');
    like($out, qr/SYNOPSIS.*create FILE --capacity N.*EXIT STATUS/s, '... and prints its manual');
    ($rc, $out, $err) = cli_sh('bloomfilter-shared --version');
    is($rc . $err, '0', 'the script: --version exits 0, nothing on stderr');
    is($out, "bloomfilter-shared (Data::BloomFilter::Shared) $Data::BloomFilter::Shared::VERSION\n",
        '... and prints the version of the module it runs with');
    fails_ok([cli_sh('bloomfilter-shared frobnicate x')], qr/unknown command 'frobnicate'/,
        'the script: an unknown command');
    ($rc, $out, $err) = cli_sh(q{printf 'zz\n' | bloomfilter-shared check nope.bf; echo "rc=$?"});
    like($out, qr/\Arc=2\n\z/, 'the script: an error is exit 2 to the shell');
}

# --- help and usage ----------------------------------------------------------------------
{
    my ($rc, $out, $err) = cli(undef, qw(--help));
    is($rc, 0, '--help exits 0');
    like($out, qr/SYNOPSIS.*create FILE --capacity N.*EXIT STATUS/s, '--help prints the manual');
    ($rc, $out) = cli(undef, qw(add --help));
    is($rc, 0, 'COMMAND --help exits 0');
    like($out, qr/SYNOPSIS/, '... and prints the manual');

    fails_ok([cli(undef)], qr/missing command/, 'no command');
    fails_ok([cli(undef, qw(frobnicate x))], qr/unknown command 'frobnicate'/, 'unknown command');
    fails_ok([cli(undef, qw(add))], qr/add: missing FILE/, 'add without FILE');
    fails_ok([cli(undef, qw(info a b))], qr/unexpected argument 'b'/, 'extra argument');
    fails_ok([cli(undef, qw(info x --bogus))], qr/unknown option: bogus/, 'unknown option');

    ($rc, $out, $err) = cli(undef, qw(--version));
    is($rc, 0, '--version exits 0');
    is($out, "bloomfilter-shared (Data::BloomFilter::Shared) $Data::BloomFilter::Shared::VERSION\n",
        '--version prints the version of the module it runs with');
    is($err, '', '... and nothing on stderr');
}

# --- the manual is valid POD -------------------------------------------------------------------
{
    require Pod::Checker;
    my $report = '';
    open(my $fh, '>', \$report) or die;
    my $checker = Pod::Checker->new(-warnings => 2);
    $checker->parse_from_file($script, $fh);
    is($checker->num_errors, 0, 'podchecker: no errors in the manual') or diag($report);
    is($checker->num_warnings, 0, 'podchecker: no warnings in the manual') or diag($report);
}

# --- create ----------------------------------------------------------------------------------
{
    my ($rc, $out, $err) = cli(undef, qw(create f.bf --capacity 1000));
    is($rc, 0, 'create exits 0');
    is($out . $err, '', '... silently');
    ok(-f 'f.bf', '... and creates the file');
    is(sprintf('%04o', (stat 'f.bf')[2] & 07777), '0600', '... mode 0600 by default');
    my $ref = $C->new(undef, 1000, 0.01);
    my $info = json_info('f.bf');
    is($info->{capacity}, 1000, 'capacity stored');
    is($info->{bits}, $ref->bits, 'bits as the module computes them');
    is($info->{hashes}, $ref->hashes, 'hashes as the module computes them');

    ($rc) = cli_sh('umask 0; bloomfilter-shared create g.bf -n 2k -p 0.001 --mode 0640 --seed 99');
    is($rc, 0, 'create with every option');
    is(sprintf('%04o', (stat 'g.bf')[2] & 07777), '0640', '--mode 0640');
    $info = json_info('g.bf');
    is($info->{capacity}, 2000, '-n 2k is 2000');
    is($info->{fp_rate}, 0.001, '-p 0.001');
    is($info->{seed}, 99, '--seed 99');
    cli(undef, qw(create h.bf -n 1e6));
    is(json_info('h.bf')->{capacity}, 1_000_000, '-n 1e6');
    cli(undef, qw(create h2.bf -n 1_500_000));
    is(json_info('h2.bf')->{capacity}, 1_500_000, '-n 1_500_000');

    fails_ok([cli(undef, qw(create f.bf --capacity 10))],
        qr/f\.bf: file exists \(use --force to replace it\)/,
        'create refuses an existing file');
    fails_ok([cli(undef, qw(create x.bf))], qr/--capacity is required/, 'capacity required');
    fails_ok([cli(undef, qw(create x.bf -n 0))], qr/--capacity must be a positive integer/,
        'capacity 0');
    fails_ok([cli(undef, qw(create x.bf -n ten))], qr/--capacity must be/, 'capacity not a number');
    fails_ok([cli(undef, qw(create x.bf -n 10 -p 1))], qr/--fp-rate must be/, 'fp-rate 1');
    fails_ok([cli(undef, qw(create x.bf -n 10 -p abc))], qr/--fp-rate must be/, 'fp-rate junk');
    fails_ok([cli(undef, qw(create x.bf -n 10 --mode 0999))], qr/--mode must be an octal/,
        'mode not octal');
    fails_ok([cli(undef, qw(create x.bf -n 10 --seed -1))], qr/--seed must be/, 'negative seed');
    fails_ok([cli(undef, qw(create x.bf -n 10 --seed 18446744073709551616))],
        qr/x\.bf: --seed must be an integer between 0 and 2\*\*64-1, got a number above/, "seed beyond 64 bits (the module says so, in the tool's words)");
    fails_ok([cli(undef, qw(create x.bf -n 1e12 -p 1e-9))], qr/x\.bf: .*too large/,
        'a filter too large');
    fails_ok([cli(undef, qw(create x.bf --capacity 1e21))], qr/--capacity 1e21 is too large/,
        'a capacity beyond any filter');
    ok(!-e 'x.bf', 'no file left by a failed create');
}

# --- add -----------------------------------------------------------------------------------------
{
    my ($rc, $out, $err) = cli("a\nb\na\n", qw(add f.bf --print-new));
    is($rc, 0, 'add --print-new exits 0');
    is($out, "a\nb\n", 'add --print-new prints each new line once');
    is($err, '', '... and nothing on stderr');
    ($rc, $out) = cli("b\nc\n", qw(add f.bf --print-new));
    is($out, "c\n", 'a second run prints only lines not seen by the first');
    ($rc, $out) = cli("a\nb\nc\n", qw(add f.bf --print-new));
    is($rc, 0, 'add --print-new exits 0 when every line was seen');
    is($out, '', '... printing nothing');

    ($rc, $out, $err) = cli("d\ne\nd\n", qw(add f.bf));
    is($rc, 0, 'add exits 0');
    is($out, '', 'add prints nothing on stdout');
    is($err, "bloomfilter-shared: f.bf: 3 lines, 2 new, 1 probably seen before\n",
        'add prints a summary on stderr');
    ($rc, $out, $err) = cli("g\n", qw(add f.bf));
    is($err, "bloomfilter-shared: f.bf: 1 line, 1 new, 0 probably seen before\n",
        'the summary of one line says "1 line"');
    ($rc, $out, $err) = cli("f\n", qw(add f.bf --quiet));
    is($rc . $out . $err, '0', 'add --quiet prints nothing');

    # What an item is: the line without its newline, byte for byte.
    cli("last-without-newline", qw(add f.bf -q));
    cli("\n", qw(add f.bf -q));
    cli("cr\r\n  sp \n\303\251\n", qw(add f.bf -q));
    my $f = $C->new_from_fd(do { open(my $fh, '+<', 'f.bf') or die; $fh });
    is_deeply([$f->contains_many(['a', 'b', 'c', 'd', 'e', 'f'])], [1, 1, 1, 1, 1, 1],
        'every line was added to the file the module sees');
    ok($f->contains('last-without-newline'), 'a last line without newline is an item');
    ok($f->contains(''), 'an empty line is the empty item');
    ok($f->contains("cr\r") && !$f->contains('cr'), 'a carriage return is kept');
    ok($f->contains('  sp ') && !$f->contains('sp'), 'spaces are kept');
    ok($f->contains("\xc3\xa9"), 'bytes are taken as they are');
    ok(!$f->contains('never-added'), 'an item never added is absent');

    # Many lines, so several batches, with repeats within and across batches.
    open(my $fh, '>', 'many.txt') or die;
    my @lines = map { 'item-' . ($_ % 3500) } 0 .. 9999;
    print {$fh} map { "$_\n" } @lines;
    close $fh or die;
    cli(undef, qw(create big.bf -n 10000 -p 0.0001));
    ($rc, $out) = cli(slurp('many.txt'), qw(add big.bf --print-new));
    my @expected = map { "item-$_" } 0 .. 3499;
    is_deeply([split /\n/, $out], \@expected,
        '10000 lines in batches: each distinct line printed once, in input order');
    ($rc, $out, $err) = cli(slurp('many.txt') x 2, qw(add big.bf));
    like($err, qr/: 20000 lines, 0 new, 20000 probably seen before$/, 'summary counts batches');

    fails_ok([cli("x\n", qw(add missing.bf))], qr/missing\.bf: No such file/,
        'add to a missing file');
    ok(!-e 'missing.bf', '... does not create it');
}

# --- add streams: each chunk is answered before the next is written -------------------------
{
    my $pid = IPC::Open2::open2(my $from, my $to, $perl, $script, 'add', 'f.bf', '--print-new');
    local $SIG{ALRM} = sub { kill 'KILL', $pid; die "70-cli: streaming add hung\n" };
    alarm 30;
    my @got;    # per line written: what came out before its marker
    my $n = 0;
    for my $item (qw(stream-1 a stream-2 stream-1 stream-3)) {
        my $mark = 'stream-mark-' . $n++ . "\n";    # always new: always printed
        syswrite $to, "$item\n";
        syswrite $to, $mark;
        my @before;
        while (defined(my $line = <$from>)) {
            last if $line eq $mark;
            push @before, $line;
        }
        push @got, join '', @before;
    }
    close $to;
    my $rest = do { local $/; <$from> };
    waitpid $pid, 0;
    alarm 300;
    is_deeply(\@got, ["stream-1\n", '', "stream-2\n", '', "stream-3\n"],
        'add --print-new answers each line while its input is still open');
    is($?, 0, '... and exits 0 at end of input');
}

# --- add --print-new: a batch is added whole before any of it is printed ----------------------
#
# The tool's stdout is a pipe nobody reads, so it blocks printing once the pipe
# is full: then exactly the batches it has begun to print are in the filter.
# $expect->($pipe_size): how many lines that is; the filter is watched until
# it holds that many (60 s at most: the tool may start late on a busy host),
# then a while longer to see no more come.
sub added_before_blocking {
    my ($file, $lines, $batch_opt, $expect) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    my $pipe_size = fcntl($w, 1032, 0) // 65536;    # F_GETPIPE_SZ
    my $want = $expect->($pipe_size);
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        open(STDIN, '<', 'long.txt') or POSIX::_exit(126);
        open(STDOUT, '>&', $w) or POSIX::_exit(126);
        { exec $perl, $script, 'add', $file, '--print-new', @$batch_opt }
        POSIX::_exit(127);
    }
    close $w;
    my $f = $C->new_from_fd(do { open(my $fh, '+<', $file) or die; $fh });
    for (1 .. 1200) {
        last if $f->contains_many($lines) >= $want;
        select(undef, undef, undef, 0.05);
    }
    select(undef, undef, undef, 0.5);
    my $present = $f->contains_many($lines);
    my $first_absent = 0;
    $first_absent++ while $first_absent < @$lines && $f->contains($lines->[$first_absent]);
    my $out = do { local $/; <$r> };    # now let it finish
    waitpid $pid, 0;
    return ($present, $first_absent, $want, $?, $out);
}
{
    require POSIX;
    my $len = 4000;    # a line, newline included; 60 lines are read at once
    my @lines = map { sprintf("long-%04d-", $_) . 'x' x ($len - 11) } 1 .. 60;
    open(my $fh, '>', 'long.txt') or die;
    print {$fh} map { "$_\n" } @lines;
    close $fh or die;
    cli(undef, qw(create long.bf -n 1000));
    # A batch's output starts only once the previous batch's was written
    # whole: with $pipe bytes of pipe, that is every batch that fits and one.
    my $whole_batches = sub {
        my ($size) = @_;
        return sub {
            my ($pipe) = @_;
            my $n = $size * (int($pipe / ($size * $len)) + 1);
            return $n > 60 ? 60 : $n;
        };
    };
    my ($present, $first_absent, $expect, $status, $out) =
        added_before_blocking('long.bf', \@lines, ['--batch', 7], $whole_batches->(7));
    is($present, $expect, "--batch 7: blocked on a full pipe, $expect lines added (whole batches)");
    is($first_absent, $present, '... the first ones, in input order');
    is($status, 0, '... and it exits 0 once its output is read');
    is($out, join('', map { "$_\n" } @lines), '... having printed every new line');

    cli(undef, qw(create long1.bf -n 1000));
    ($present, $first_absent, $expect) =
        added_before_blocking('long1.bf', \@lines, ['--batch', 1], $whole_batches->(1));
    is($present, $expect, "--batch 1: a line is printed before the next is added ($expect lines added)");
    cli(undef, qw(create long2.bf -n 1000));
    ($present, $first_absent) = added_before_blocking('long2.bf', \@lines, [], sub { 60 });
    is($present, 60, 'by default (batches of 1000) all 60 lines are added before the first is printed');
    unlink 'long.txt', 'long.bf', 'long1.bf', 'long2.bf';

    fails_ok([cli("a\n", qw(add f.bf --batch 0))], qr/--batch must be a positive integer/,
        '--batch 0');
    fails_ok([cli("a\n", qw(add f.bf --batch x))], qr/--batch must be a positive integer/,
        '--batch junk');
    fails_ok([cli("a\n", qw(add f.bf --batch 2M))], qr/--batch 2M is too large \(at most 1000000\)/,
        '--batch too large');
    my ($rc, $o) = cli("b1\nb2\nb1\nb3\n", qw(add f.bf --print-new --batch 1));
    is($o, "b1\nb2\nb3\n", '--batch 1: each new line once');
}

# --- a filter holding more than its capacity: a warning, exit 0 -------------------------------
{
    my $warn_re = qr/\Abloomfilter-shared: warning: over\.bf holds about (\d+) items, more than its capacity 100: false positives now estimated at ([0-9.e-]+) \(sized for 0\.01\)\n\z/;
    cli(undef, qw(create over.bf -n 100));
    my ($rc, $out, $err) = cli(lines(map {"over-$_"} 1 .. 90), qw(add over.bf -q));
    is($rc . $out . $err, '0', 'no warning below the capacity');
    ($rc, $out, $err) = cli(undef, qw(info over.bf));
    is($rc . $err, '0', '... nor from info');
    ($rc, $out, $err) = cli(lines(1 .. 400), qw(add over.bf));
    is($rc, 0, 'add past the capacity exits 0');
    my ($summary, $warning) = split /(?<=\n)/, $err;
    like($summary, qr/\Abloomfilter-shared: over\.bf: 400 lines, \d+ new/, '... prints its summary');
    like($warning // '', $warn_re, '... then a warning');
    my ($count, $fpp) = ($warning // '') =~ $warn_re;
    my $f = $C->new_from_fd(do { open(my $h, '+<', 'over.bf') or die; $h });
    is($count, $f->count, '... with the count');
    is($fpp, sprintf('%.3g', $f->estimated_fpp), '... and the estimated false-positive rate');
    cmp_ok($count, '>', 100, '... which is past the capacity');

    ($rc, $out, $err) = cli(lines(401 .. 420), qw(add over.bf --quiet));
    is($rc, 0, 'add --quiet exits 0');
    like($err, $warn_re, '... and warns even then (only the warning)');
    ($rc, $out, $err) = cli(lines(421 .. 440), qw(add over.bf --print-new));
    like($out, qr/\A(?:4[2-4][0-9]\n)*\z/, 'add --print-new prints only new lines on stdout');
    like($err, $warn_re, '... and warns on stderr');
    ($rc, $out, $err) = cli(undef, qw(info over.bf));
    is($rc, 0, 'info on an overfull filter exits 0');
    like($out, qr/^count +\d+$/m, '... prints the stats on stdout');
    like($err, $warn_re, '... and the warning on stderr');
    ($rc, $out, $err) = cli(undef, qw(info over.bf --json));
    like($err, $warn_re, 'info --json warns too');

    cli(undef, qw(create full.bf -n 1));    # 64 bits
    ($rc, $out, $err) = cli(lines(1 .. 300), qw(add full.bf -q));
    is($rc, 0, 'add to a filter with every bit set exits 0');
    is($err, "bloomfilter-shared: warning: full.bf has every bit set: it holds more than its capacity 1"
        . " and every query now answers present\n", '... and says every bit is set');
    unlink 'full.bf';
}

# A long-running add (a stream) warns while it runs, not only at its end.
{
    require IPC::Open3;
    cli(undef, qw(create stream-over.bf -n 100));
    my $pid = IPC::Open3::open3(my $to, my $from, my $errfh = Symbol::gensym(),
        $perl, $script, 'add', 'stream-over.bf', '-q');
    local $SIG{ALRM} = sub { kill 'KILL', $pid; die "70-cli: streaming overfull add hung\n" };
    alarm 120;
    syswrite $to, join('', map { "s$_\n" } 1 .. 400);
    # The check runs at most every 5 s, counted from the command's start:
    # a line a second until the warning comes (for at most 60 s), however
    # late a busy host started the command.
    my $line = '';
    my $until = time + 60;
    for (my $i = 1; $line eq '' && time < $until; $i++) {
        sleep 1;
        syswrite $to, "one more $i\n";
        my $rin = '';
        vec($rin, fileno $errfh, 1) = 1;
        $line = <$errfh> // '' if select(my $rout = $rin, undef, undef, 0.5);
    }
    like($line // '', qr/\Abloomfilter-shared: warning: stream-over\.bf holds about \d+ items, more than its capacity 100/,
        'a streaming add warns while its input is still open');
    close $to;
    my $rest = do { local $/; <$errfh> };
    waitpid $pid, 0;
    alarm 300;
    is($? . ($rest // ''), '0', '... once, and exits 0 at end of input');
    unlink 'stream-over.bf';
}

# --- check -----------------------------------------------------------------------------------
{
    my ($rc, $out, $err) = cli("a\nzz\nb\n", qw(check f.bf));
    is($rc, 0, 'check exits 0');
    is($out, "a\tpresent\nzz\tabsent\nb\tpresent\n", 'check prints line, tab, present/absent');
    is($err, '', '... and nothing on stderr');
    ($rc, $out) = cli("a\nzz\nb\nyy\n", qw(check f.bf --present));
    is($rc, 0, 'check --present exits 0 when a line is present');
    is($out, "a\nb\n", 'check --present prints the present lines');
    ($rc, $out) = cli("a\nzz\nb\nyy\n", qw(check f.bf --absent));
    is($rc, 0, 'check --absent exits 0 when a line is absent');
    is($out, "zz\nyy\n", 'check --absent prints the absent lines');
    ($rc, $out) = cli("zz\nyy\n", qw(check f.bf --present));
    is($rc, 1, 'check --present exits 1 when no line is present');
    is($out, '', '... printing nothing');
    ($rc, $out) = cli("a\nb\n", qw(check f.bf --absent));
    is($rc, 1, 'check --absent exits 1 when every line is present');
    ($rc, $out) = cli('', qw(check f.bf));
    is($rc, 1, 'check exits 1 on empty input');
    ($rc, $out) = cli_sh(q{printf 'zz\n' | bloomfilter-shared check f.bf --absent | wc -l});
    is($out =~ s/\s+//gr, '1', 'check composes in a pipeline');
    my $before = json_info('f.bf')->{bits_set};
    cli("new-1\nnew-2\n", qw(check f.bf));
    is(json_info('f.bf')->{bits_set}, $before, 'check does not change the filter');
    fails_ok([cli("a\n", qw(check f.bf --present --absent))],
        qr/--present and --absent exclude each other/, '--present with --absent');
    ($rc, $out) = cli(slurp('many.txt'), qw(check big.bf --absent));
    is($rc . $out, '1', 'check over several batches finds every added line');
}

# --- info --------------------------------------------------------------------------------------
{
    my ($rc, $out, $err) = cli(undef, qw(info f.bf));
    is($rc, 0, 'info exits 0');
    my $f = $C->new_from_fd(do { open(my $fh, '+<', 'f.bf') or die; $fh });
    my %text = $out =~ /^(\w+)\s+(.*)$/mg;
    is($text{file}, 'f.bf', 'info names the file');
    is($text{capacity}, 1000, 'info: capacity');
    like($text{bits}, qr/\A${\ $f->bits} \(2\.0 KiB\)\z/, 'info: bits, with the size');
    is($text{hashes}, $f->hashes, 'info: hashes');
    is($text{bits_set}, $f->bits_set, 'info: bits_set');
    is($text{frozen}, 'no', 'info: frozen no');
    my @keys = qw(capacity fp_rate bits hashes seed bits_set count fill_ratio estimated_fpp
        ops mmap_size frozen readonly layout);
    is($text{layout}, 'standard', 'info: layout');
    is_deeply([sort grep { $_ ne 'file' } keys %text], [sort @keys], 'info shows every stat');

    my $j = json_info('f.bf');
    my $s = $f->stats;
    is_deeply([sort keys %$j], [sort 'file', @keys], 'info --json: every stat, and file');
    is($j->{$_}, $s->{$_}, "info --json: $_") for qw(capacity bits hashes seed bits_set count);
    ok(JSON::PP::is_bool($j->{frozen}) && !$j->{frozen}, 'info --json: frozen is a false boolean');

    fails_ok([cli(undef, qw(info nope.bf))], qr/nope\.bf: No such file or directory/,
        'info on a missing file');
    open(my $fh, '>', 'junk.bf') or die;
    print {$fh} "not a filter\n" x 40_000;    # larger than any header
    close $fh;
    fails_ok([cli(undef, qw(info junk.bf))], qr/junk\.bf: bad magic/, 'info on a foreign file');
    spew('f.ser', (cli(undef, qw(export f.bf)))[1]);
    fails_ok([cli(undef, qw(info f.ser))],
        qr/f\.ser: this is serialized bytes: use import \(bloomfilter-shared import NEWFILE -i f\.ser/,
        'info on serialized bytes says to import them');
    fails_ok([cli("a\n", qw(check f.ser))], qr/f\.ser: this is serialized bytes: use import/,
        'check on serialized bytes too');
    fails_ok([cli("a\n", qw(add f.ser))], qr/f\.ser: this is serialized bytes: use import/,
        'add on serialized bytes too');
    symlink('f.bf', 'link.bf') or die;
    fails_ok([cli(undef, qw(info link.bf))], qr/link\.bf: is a symbolic link \(refused\)/,
        'a symbolic link is refused');
    mkdir 'adir';
    fails_ok([cli(undef, qw(info adir))], qr/adir: .*(?:directory)/i, 'a directory is refused');
}

# --- freeze ----------------------------------------------------------------------------------
{
    cli(undef, qw(create fr.bf -n 100));
    cli("frozen-item\n", qw(add fr.bf -q));
    my ($rc, $out, $err) = cli(undef, qw(freeze fr.bf));
    is($rc . $out . $err, '0', 'freeze exits 0 silently');
    my $ro = $C->new_readonly('fr.bf');
    ok($ro->frozen && $ro->contains('frozen-item'), 'the module sees the file frozen, items kept');
    fails_ok([cli("x\n", qw(add fr.bf))], qr/fr\.bf: filter is frozen/,
        'add to a frozen filter');
    ($rc, $out) = cli("frozen-item\nother\n", qw(check fr.bf));
    is($out, "frozen-item\tpresent\nother\tabsent\n", 'check works on a frozen filter');
    my $j = json_info('fr.bf');
    ok($j->{frozen} && $j->{readonly}, 'info: frozen, opened read-only');
    ($rc, $out, $err) = cli(undef, qw(freeze fr.bf));
    is($rc, 0, 'freezing again exits 0');
    is($err, "bloomfilter-shared: fr.bf: already frozen\n", '... saying so');
}

# --- export and import ---------------------------------------------------------------------
{
    my $f = $C->new_from_fd(do { open(my $fh, '+<', 'f.bf') or die; $fh });
    my ($rc, $out, $err) = cli(undef, qw(export f.bf));
    is($rc, 0, 'export exits 0');
    is($out, $f->serialize, 'export writes the serialized bytes to stdout');
    ($rc, $out, $err) = cli(undef, qw(export f.bf -o f.bytes));
    is($rc . $out . $err, '0', 'export -o OUT is silent');
    is(slurp('f.bytes'), $f->serialize, '... and writes OUT');
    ($rc, $out) = cli(undef, qw(export fr.bf));
    is(length $out, length $C->new_readonly('fr.bf')->serialize, 'export of a frozen filter');

    ($rc, $out, $err) = cli_sh('bloomfilter-shared export f.bf | bloomfilter-shared import copy.bf');
    is($rc . $out . $err, '0', 'export | import exits 0 silently');
    my $copy = $C->new_from_fd(do { open(my $fh, '+<', 'copy.bf') or die; $fh });
    is($copy->serialize, $f->serialize, 'the imported filter has the same bits');
    is(sprintf('%04o', (stat 'copy.bf')[2] & 07777), '0600', 'imported file mode 0600');
    ($rc) = cli_sh('umask 0; bloomfilter-shared import copy2.bf -i f.bytes --mode 0644');
    is($rc, 0, 'import -i IN');
    is(sprintf('%04o', (stat 'copy2.bf')[2] & 07777), '0644', 'import --mode 0644');
    ($rc, $out) = cli("a\nzz\n", qw(check copy2.bf));
    is($out, "a\tpresent\nzz\tabsent\n", 'the imported filter answers like the original');

    fails_ok([cli(undef, qw(import copy.bf -i f.bytes))], qr/copy\.bf: file exists/,
        'import refuses an existing file');
    fails_ok([cli(slurp('junk.bf'), qw(import x.bf))], qr/standard input: .*magic/,
        'import of junk');
    fails_ok([cli('', qw(import x.bf))], qr/standard input: empty input/,
        'import of nothing');
    fails_ok([cli(substr(slurp('f.bytes'), 0, 100), qw(import x.bf))], qr/truncated/,
        'import of truncated bytes');
    fails_ok([cli(undef, qw(import x.bf -i nope.bytes))], qr/nope\.bytes: No such file/,
        'import -i of a missing file');
    ok(!-e 'x.bf', 'no file left by a failed import');
    fails_ok([cli(undef, qw(export nope.bf))], qr/nope\.bf: No such file/, 'export of a missing file');
}

# --- export and import of windowed filters ------------------------------------------------------
{
    my ($rc, $out, $err) = cli(undef, qw(create w.bf -n 1000 --window 2h --generations 3));
    is($rc . $out . $err, '0', 'create --window');
    cli("a\nb\n", qw(add w.bf -q));
    my $w = $C->new_from_fd(do { open(my $fh, '+<', 'w.bf') or die; $fh });
    $w->rotate;
    cli("c\n", qw(add w.bf -q));
    ($rc, my $bytes, $err) = cli(undef, qw(export w.bf));
    is($rc . $err, '0', 'export of a windowed filter exits 0');
    ($rc, $out, $err) = cli($bytes, qw(import wcopy.bf));
    is($rc . $out . $err, '0', '... and import of its bytes exits 0 silently');
    my ($src, $copy) = map { json_info($_) } qw(w.bf wcopy.bf);
    is($copy->{window}, 7200, 'info of the import shows the window');
    is($copy->{generations}, 3, '... the generations');
    is($copy->{generation}, 1, '... and the current generation');
    is($copy->{generation_start}, $src->{generation_start}, '... which started when the original did');
    ($rc, $out) = cli(undef, qw(info wcopy.bf));
    like($out, qr/^window\s+7200 s$/m, 'info as text shows the window');
    ($rc, $out) = cli("a\nc\nzz\n", qw(check wcopy.bf));
    is($out, "a\tpresent\nc\tpresent\nzz\tabsent\n", 'the import holds the items of both generations');
    my $c = $C->new_from_fd(do { open(my $fh, '+<', 'wcopy.bf') or die; $fh });
    is($c->serialize, $w->serialize, 'the import serializes as the original does');
    $_->rotate, $_->rotate for $w, $c;
    ok($c->contains('c') && $w->contains('c'), 'both keep an item through g - 1 steps');
    $_->rotate for $w, $c;
    ok(!$c->contains('c') && !$w->contains('c'), 'and forget it at the gth');

    ($rc, $out, $err) = cli(undef, qw(export w.bf -o w.bytes));
    is($rc . $out . $err, '0', 'export -o of a windowed filter');
    ($rc, $out, $err) = cli(undef, qw(import wc2.bf -i w.bytes --window 2h --generations 3));
    is($rc . $out . $err, '0', 'import with the bytes\' own window');
    fails_ok([cli(undef, qw(import wc3.bf -i w.bytes --window 1h))],
        qr/w\.bytes: window mismatch \(the bytes have window 7200s, 3 generations, not window 3600s, 3 generations\)/,
        'import with another window');
    ok(!-e 'wc3.bf', 'no file left by a window mismatch');

    # Plain bytes into a window.
    ($rc, $out, $err) = cli(undef, qw(import pw.bf -i f.bytes --window 1d --generations 2));
    is($rc . $out . $err, '0', 'import of plain bytes with --window');
    my $pw = json_info('pw.bf');
    is($pw->{window}, 86400, '... makes a windowed filter');
    is($pw->{generations}, 2, '... of those generations');
    is($pw->{bits}, json_info('f.bf')->{bits}, '... of the bytes\' geometry');
    ($rc, $out) = cli("a\nzz\n", qw(check pw.bf));
    is($out, "a\tpresent\nzz\tabsent\n", '... holding their items');
    ok(!defined json_info('copy2.bf')->{window}, 'without --window plain bytes stay plain');
    fails_ok([cli(undef, qw(import pw2.bf -i f.bytes --generations 2))], qr/--generations needs --window/,
        'import --generations alone');
}

# --- merge -------------------------------------------------------------------------------------
{
    cli(undef, qw(create m1.bf -n 500 --seed 7));
    cli(undef, qw(create m2.bf -n 500 --seed 7));
    cli("one\nboth\n", qw(add m1.bf -q));
    cli("two\nboth\n", qw(add m2.bf -q));
    my ($rc, $out, $err) = cli(undef, qw(merge all.bf m1.bf m2.bf));
    is($rc . $out . $err, '0', 'merge into a new OUT exits 0 silently');
    my ($m1, $all) = map { json_info($_) } qw(m1.bf all.bf);
    is_deeply([@$all{qw(capacity fp_rate bits hashes seed)}], [@$m1{qw(capacity fp_rate bits hashes seed)}],
        'the new OUT has the geometry and seed of the first IN');
    ($rc, $out) = cli("one\ntwo\nboth\nnone\n", qw(check all.bf));
    is($out, "one\tpresent\ntwo\tpresent\nboth\tpresent\nnone\tabsent\n", 'OUT holds the union');

    cli("three\n", qw(add m2.bf -q));
    my $user = $C->new_from_fd(do { open(my $fh, '+<', 'm1.bf') or die; $fh });
    ok(!$user->contains('three'), 'a process using OUT does not see an item of IN yet');
    ($rc) = cli(undef, qw(merge m1.bf m2.bf));
    is($rc, 0, 'merge into an existing OUT');
    ok($user->contains('three'), '... changes it in place: a process using it sees the union');
    ($rc, $out) = cli("one\nthree\n", qw(check m1.bf --present));
    is($out, "one\nthree\n", '... ORs IN into it');

    cli(undef, qw(create s0.bf -n 500));
    my $before = slurp('all.bf');
    fails_ok([cli(undef, qw(merge all.bf m2.bf s0.bf))],
        qr/s0\.bf: not compatible with all\.bf \(.*seeds differ\)/, 'merge of another seed');
    is(slurp('all.bf'), $before, '... changes nothing, not even the compatible IN');
    cli(undef, qw(create big2.bf -n 50000 --seed 7));
    fails_ok([cli(undef, qw(merge all.bf big2.bf))], qr/big2\.bf: not compatible .*bits/,
        'merge of another size');
    fails_ok([cli(undef, qw(merge new.bf m1.bf s0.bf))],
        qr/s0\.bf: not compatible with m1\.bf \(.*seeds differ\)/, 'merge of incompatible INs');
    ok(!-e 'new.bf', '... creates no OUT');
    fails_ok([cli(undef, qw(merge fr.bf f.bf))], qr/fr\.bf: filter is frozen/,
        'merge into a frozen filter');
    fails_ok([cli(undef, qw(merge only.bf))], qr/merge: missing OUT and at least one IN/,
        'merge without IN');
    fails_ok([cli(undef, qw(merge new.bf nope.bf))], qr/nope\.bf: No such file/,
        'merge of a missing IN');
    ok(!-e 'new.bf', '... creates no OUT');

    # Filters that grow: a new OUT grows alike, from the same first stage.
    cli(undef, qw(create g1.bf -n 50 --seed 7 --grow 2 --max-capacity 100000));
    cli(undef, qw(create g2.bf -n 50 --seed 7 --grow 2 --max-capacity 100000));
    my @a = map {"a$_"} 1 .. 400;
    my @b = map {"b$_"} 1 .. 900;
    cli(lines(@a), qw(add g1.bf -q));
    cli(lines(@b), qw(add g2.bf -q));
    ($rc, $out, $err) = cli(undef, qw(merge gall.bf g1.bf g2.bf));
    is($rc . $out . $err, '0', 'merge of filters that grow into a new OUT');
    my ($g2, $gall) = map { json_info($_) } qw(g2.bf gall.bf);
    cmp_ok($g2->{stages}, '>', 1, '... the second IN has grown');
    is_deeply([@$gall{qw(grow max_capacity stages seed)}], [@$g2{qw(grow max_capacity stages seed)}],
        '... OUT grows alike, to as many stages as the IN with the most');
    is($gall->{stage_info}[0]{capacity}, 50, '... from the same first stage');
    ($rc, $out) = cli(lines(@a, @b), qw(check gall.bf --absent));
    is($out, '', '... holding every item of both');
}

# --- progress line: only on a terminal ------------------------------------------------------
{
    my ($rc, $out, $err) = cli(slurp('many.txt'), qw(add big.bf --print-new));
    is($err, '', 'no progress line on stderr when it is not a terminal (add)');
    ($rc, $out, $err) = cli(slurp('many.txt'), qw(check big.bf));
    is($err, '', 'no progress line on stderr when it is not a terminal (check)');
    ($rc, $out, $err) = cli(slurp('many.txt'), qw(add big.bf));
    unlike($err, qr/\r/, 'only the summary when stderr is not a terminal');
  SKIP: {
        # script(1) gives the command a terminal: the same run then shows progress.
        skip 'script(1) is not installed', 1 if system('script -V >/dev/null 2>&1') != 0;
        ($rc, $out) = cli_sh(q{script -qec 'bloomfilter-shared add big.bf < many.txt' /dev/null});
        like($out, qr/\rbloomfilter-shared: add: \d+ lines, \d+ new/,
            'a progress line when stderr is a terminal');
    }
}

# --- read-only access: frozen and live filters --------------------------------------------
SKIP: {
    skip 'needs root and setpriv(1) to run as an unprivileged user', 4
        if $> != 0 || system('setpriv --help >/dev/null 2>&1') != 0;
    my $nobody = getpwnam('nobody');
    skip 'no user nobody', 4 if !defined $nobody;
    my $as_nobody = "setpriv --reuid=$nobody --regid=$nobody --clear-groups --";
    # Can nobody run the tool from here at all? (not when the checkout is private)
    chmod 0755, $dir;
    chmod 0644, 'fr.bf', 'f.bf';
    my ($rc) = cli_sh("$as_nobody bloomfilter-shared --help");
    skip 'user nobody cannot read the module under test', 4 if $rc != 0;
    my $out;
    ($rc, $out) = cli_sh(qq{printf 'frozen-item\\n' | $as_nobody bloomfilter-shared check fr.bf});
    is($out, "frozen-item\tpresent\n", 'a frozen filter is queried without write access');
    ($rc, $out) = cli_sh(qq{printf 'a\\n' | $as_nobody bloomfilter-shared check f.bf});
    is($out, "a\tpresent\n", 'a live (unfrozen) filter is queried without write access too');
    fails_ok([cli_sh(qq{printf 'a\\n' | $as_nobody bloomfilter-shared add f.bf})], qr/f\.bf: Permission denied/,
        'add without write access');
    ($rc) = cli_sh("$as_nobody bloomfilter-shared info fr.bf");
    is($rc, 0, 'info on a frozen filter without write access');
}

done_testing;
