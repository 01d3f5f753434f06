# The command line tool's code runs in-process: Data::BloomFilter::Shared::CLI::run
# takes the arguments, writes what the command writes and returns its exit
# status, without ending the process (also for --help and for errors).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Data::BloomFilter::Shared;
use Data::BloomFilter::Shared::CLI;

my $dir = tempdir(CLEANUP => 1);

# run(@args) with $stdin as standard input: (status, stdout, stderr).
sub cli {
    my ($stdin, @args) = @_;
    my ($in, $out, $err) = map { "$dir/$_" } qw(stdin stdout stderr);
    open(my $fh, '>', $in) or die "$in: $!";
    print {$fh} $stdin;
    close $fh or die "$in: $!";
    open(my $save_in, '<&', \*STDIN) or die "dup STDIN: $!";
    open(my $save_out, '>&', \*STDOUT) or die "dup STDOUT: $!";
    open(my $save_err, '>&', \*STDERR) or die "dup STDERR: $!";
    open(STDIN, '<', $in) or die "$in: $!";
    open(STDOUT, '>', $out) or die "$out: $!";
    open(STDERR, '>', $err) or die "$err: $!";
    my $status = eval { Data::BloomFilter::Shared::CLI::run(@args) };
    my $died = $@;
    # STDOUT first: the command closes it, and the lowest free descriptor
    # is the one it had.
    open(STDOUT, '>&', $save_out) or die "restore STDOUT: $!";
    open(STDERR, '>&', $save_err) or die "restore STDERR: $!";
    open(STDIN, '<&', $save_in) or die "restore STDIN: $!";
    is($died, '', "run(@args) returns rather than dies");
    my %got = map { my $f = "$dir/$_"; open(my $r, '<', $f) or die "$f: $!"; local $/; ($_ => scalar <$r>) }
        qw(stdout stderr);
    return ($status, $got{stdout}, $got{stderr});
}

my $f = "$dir/seen.bf";

my ($st, $out, $err) = cli('', 'create', $f, '--capacity', '1k', '--fp-rate', '0.001');
is($st, 0, 'create: exit 0');
is($out . $err, '', '... and says nothing');
# Opened by the library with whatever capacity: the file's wins (quietly).
my $bf = do { no warnings 'Data::BloomFilter::Shared'; Data::BloomFilter::Shared->new($f, 1, 0.5) };
is($bf->capacity, 1000, '... a filter of capacity 1k = 1000');
is($bf->fp_rate, 0.001, '... at the rate asked for');

($st, $out, $err) = cli("a\nb\na\n", 'add', $f);
is($st, 0, 'add: exit 0');
is($out, '', '... nothing on stdout');
like($err, qr/\Abloomfilter-shared: .*seen\.bf: 3 lines, 2 new, 1 probably seen before\n\z/,
    '... the summary on stderr');
ok($bf->contains('a') && $bf->contains('b'), '... the lines are in the filter');

($st, $out, $err) = cli("a\nzzz\n", 'check', $f);
is($st, 0, 'check: exit 0 when something was printed');
is($out, "a\tpresent\nzzz\tabsent\n", '... one verdict per line');

($st, $out, $err) = cli("zzz\n", 'check', '--present', $f);
is($st, 1, 'check --present with nothing present: exit 1');
is($out, '', '... prints nothing');

($st, $out, $err) = cli('', 'info', '--json', $f);
is($st, 0, 'info --json: exit 0');
require JSON::PP;
my $info = JSON::PP::decode_json($out);
is($info->{capacity}, 1000, '... capacity');
is($info->{count}, 2, '... count');

($st, $out, $err) = cli('', 'create', "$dir/x.bf", '--capacity', '0');
is($st, 2, 'a usage error: exit 2');
like($err, qr/\Abloomfilter-shared: --capacity must be a positive integer \(like 1000000, 1e6 or 1M\), not '0' \(see bloomfilter-shared --help\)\n\z/,
    '... one line saying what was wrong');
ok(!-e "$dir/x.bf", '... and no file');

($st, $out, $err) = cli('', 'create', "$dir/m.bf", '--capacity', '10', '--mode', '4755');
is($st, 2, '--mode with bits outside 0777: exit 2');
like($err, qr/--mode 4755 has bits outside 0777 \(set-user-ID, set-group-ID or sticky\)/, '... says which bits');
ok(!-e "$dir/m.bf", '... and makes no file');

($st, $out, $err) = cli('', 'create', "$dir/w.bf", '--capacity', '10', '--window', '2x');
is($st, 2, 'a bad duration: exit 2');
like($err, qr/--window: .*unknown unit 'x'/, "... the library's words for it");

($st, $out, $err) = cli('', 'info', "$dir/missing.bf");
is($st, 2, 'a missing file: exit 2');
like($err, qr/missing\.bf: No such file or directory/, '... naming the file');

($st, $out, $err) = cli('', 'bogus');
is($st, 2, 'an unknown command: exit 2');
like($err, qr/unknown command 'bogus'/, '... says so');

# A window reads back as it was given (the filter keeps whole nanoseconds
# per step: 2 s in 3 steps is 2.000000001 s).
for my $w (['2s', '2'], ['1.5s', '1.5'], ['90', '90'], ['2m', '120'], ['0.001', '0.001'],
    ['1d', '86400'], ['7', '7'], ['0.001', '0.001', 16], ['3.7', '3.7', 16], ['0.01', '0.01', 2],
    ['1.1', '1.1', 9])
{
    my ($given, $shown, $g) = @$w;
    my @g = defined $g ? ('--generations', $g) : ();
    my $wf = "$dir/window-$given-" . ($g // 4) . '.bf';
    ($st, $out, $err) = cli('', 'create', $wf, '--capacity', '1000', '--window', $given, @g);
    is($st, 0, "create --window $given @g: exit 0") or diag($err);
    ($st, $out, $err) = cli('', 'info', $wf);
    like($out, qr/^window\s+\Q$shown\E s$/m, "info shows --window $given @g as '$shown s'");
    ($st, $out, $err) = cli('', 'info', '--json', $wf);
    is(JSON::PP::decode_json($out)->{window}, $shown, "info --json: window $shown");
}

($st, $out, $err) = cli('', '--version');
is($st, 0, '--version: exit 0');
like($out, qr/\Abloomfilter-shared \(Data::BloomFilter::Shared\) \Q$Data::BloomFilter::Shared::VERSION\E\n\z/,
    '... the version');

# The process goes on after run(): the options parser is as it was.
my @a = ('-ab');
Getopt::Long::GetOptionsFromArray(\@a, 'ab' => \my $ab);
ok($ab, "run() leaves Getopt::Long's configuration as it found it");

done_testing;
