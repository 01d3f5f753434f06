# The command line tool's code runs in-process: Data::BloomFilter::Shared::CLI::run
# takes the arguments, writes what the command writes and returns its exit
# status, without ending the process (also for --help and for errors).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(cli);    # run(@args) with its stdin and outputs in files; checks that it returns
use Data::BloomFilter::Shared;
use Data::BloomFilter::Shared::CLI;

my $dir = tempdir(CLEANUP => 1);

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

($st, $out, $err) = cli('', '--help');
is($st, 0, '--help: exit 0');
like($out, qr/\ANAME\s+bloomfilter-shared - .*SYNOPSIS/s, "... the manual: the command's POD");

($st, $out, $err) = cli('', '--version');
is($st, 0, '--version: exit 0');
like($out, qr/\Abloomfilter-shared \(Data::BloomFilter::Shared\) \Q$Data::BloomFilter::Shared::VERSION\E\n\z/,
    '... the version');

# The process goes on after run(): the options parser is as it was.
my @a = ('-ab');
Getopt::Long::GetOptionsFromArray(\@a, 'ab' => \my $ab);
ok($ab, "run() leaves Getopt::Long's configuration as it found it");

# The library's messages that a command passes on speak the tool's options,
# never the Perl API's (an option as name => value, an argument as fp_rate,
# a method). Each case makes one such message.
{
    my $ds = "$dir/words-ds.bf";
    cli('', 'create', $ds, '--capacity', '1000', '--layout', 'datasketches');
    cli('', 'export', $ds, '--format', 'datasketches', '-o', "$dir/words.ds");
    my $gr = "$dir/words-grow.bf";
    cli('', 'create', $gr, '--capacity', '10', '--grow', '2', '--max-capacity', '20');
    cli('', 'export', $gr, '-o', "$dir/words-grow.bytes");
    cli('', 'create', "$dir/words-wds.bf", '--capacity', '1000', '--window', '1h', '--layout', 'datasketches');
    my $n = 0;
    for my $case (
        [['export', $f, '--format', 'datasketches', '-o', "$dir/no.ds"],
            qr/--format datasketches needs a filter of layout datasketches \(this one is standard\): create it with --layout datasketches$/],
        [['export', "$dir/words-wds.bf", '--format', 'datasketches', '-o', "$dir/no.ds"],
            qr/--format datasketches holds one bit array, not a windowed filter's generations$/],
        [['create', "$dir/no.bf", '--capacity', '1e12', '--fp-rate', '1e-9'],
            qr/--capacity and --fp-rate need more than 2\^38 bits \(32 GiB\); use a larger --fp-rate or several filters$/],
        [['create', "$dir/no.bf", '--capacity', '1e12', '--fp-rate', '1e-9', '--layout', 'datasketches'],
            qr/--capacity and --fp-rate need more bits than a DataSketches image holds .*; use a larger --fp-rate/],
        [['create', "$dir/no.bf", '--capacity', '1000', '--grow', '2', '--max-capacity', '10'],
            qr/: --max-capacity 10 is below --capacity 1000$/],
        [['create', "$dir/no.bf", '--capacity', '1000', '--grow', '2', '--max-capacity', '1e18'],
            qr/: --max-capacity 1000000000000000000 is out of reach: \d+ stages hold at most \d+ items at this --capacity, --fp-rate and --grow$/],
        [['create', "$dir/no.bf", '--capacity', '1000', '--grow', '2', '--window', '1h'],
            qr/: --grow and --window do not go together: a windowed filter forgets old items instead of growing$/],
        [['create', "$dir/no.bf", '--capacity', '1000', '--seed', '99999999999999999999999'],
            qr/: --seed must be an integer between 0 and 2\*\*64-1, got a number above 2\*\*64-1 \(not shown: a seed is a secret\)$/],
        [['import', "$dir/no.bf", '-i', "$dir/words.ds", '--window', '1h'],
            qr/: a DataSketches image makes a plain filter: --window and --generations do not apply to it$/],
        [['import', "$dir/no.bf", '-i', "$dir/words-grow.bytes", '--window', '1h'],
            qr/: --window does not go with these bytes: they are of a filter that grows$/],
        [['add', $gr], qr/: the filter is full: it holds its --max-capacity of 20 items; /, join('', map {"$_\n"} 1 .. 100)],
      )
    {
        my ($args, $want, $stdin) = @$case;
        ($st, $out, $err) = cli($stdin // '', @$args);
        is($st, 2, "@$args[0 .. 1] ...: exit 2");
        like($err, qr/\Abloomfilter-shared: [^\n]*$want[^\n]*\n\z/, "... in the tool's words") or diag($err);
        unlike($err, qr/=>|->|\b(?:fp_rate|max_capacity|new_\w+|serialize|deserialize|oct|hex)\b|\$|\boptions?\b/,
            '... with no word of the Perl API');
        ok(!-e "$dir/no.bf" && !-e "$dir/no.ds", '... and no file made');
    }
}

done_testing;
