# README.pod read cold: every command and every piece of code it shows runs
# as written, where that is practical here. Perl snippets run against the
# built module (a file under /dev/shm goes to a temporary directory
# instead); the command-line session runs and prints what its comments say;
# the server commands name files and options that exist; the install
# commands, which would install things, are checked for their syntax and the
# packages they name. The two commands of TRY IT are the ones CI runs.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib slurp spew);

my $top = "$FindBin::Bin/..";
my $pod = slurp("$top/README.pod");
my $dir = tempdir(CLEANUP => 1);
$SIG{ALRM} = sub { die "65-readme: global timeout\n" };
alarm 600;

# The verbatim blocks, each with its =head1/=head2: indented paragraphs,
# those in a row (blank lines inside a piece of code) taken as one.
my (@blocks, $head, $in_block);
for my $para (split /\n{2,}/, $pod) {
    if ($para !~ /\A[ \t]/) {
        $head = $1 if $para =~ /\A=head\d\s+(.*)/;
        $in_block = 0;
        next;
    }
    (my $code = $para) =~ s/^    //mg;
    if ($in_block) { $blocks[-1]{code} .= "\n\n$code"; next }
    push @blocks, { head => $head, code => $code };
    $in_block = 1;
}
cmp_ok(scalar @blocks, '>=', 10, 'README has its examples (' . scalar(@blocks) . ' verbatim blocks)');
my $lines = () = $pod =~ /\n/g;
cmp_ok($lines, '<=', 300, "README stays short for a newcomer ($lines lines; the figures live in bench/RESULTS.md)");

# A block is shell when its first line starts with a command, else Perl
# (or a table, which has neither code nor commands).
my $SHELL = qr/\A(?:sudo|apt-get|curl|\.|perl|export|eval|starman|uwsgi|bloomfilter-shared|printf|tail|make|prove)\b/;
sub kind {
    my ($code) = @_;
    my ($first) = grep { /\S/ && !/^\s*#/ } split /\n/, $code;
    return 'shell' if $first =~ $SHELL;
    return 'perl' if $code =~ /Data::BloomFilter::Shared|\bmy \$|\bfork\b/;
    return 'table';
}
my %by = (shell => [], perl => [], table => []);
push @{ $by{ kind($_->{code}) } }, $_ for @blocks;

# Every file the README names is in the distribution.
for my $file (sort { $a cmp $b } keys %{ { map { $_ => 1 } $pod =~ /F<([^>]+)>/g } }) {
    # ~/.profile, /dev/shm, /usr/local, app.psgi: the reader's.
    next if $file =~ m{\A(?:~|/)} || $file eq 'app.psgi';
    ok(-e "$top/$file", "F<$file> exists");
}

# --- TRY IT: the two commands -------------------------------------------------------------------
my ($try) = grep { $_->{head} eq 'TRY IT' } @blocks;
ok($try, 'a TRY IT block') or BAIL_OUT('README lost its TRY IT section');
like($try->{code}, qr{^perl Makefile\.PL && make && prove -l t\b}m,
    'the test command is exactly the one CI runs: perl Makefile.PL && make && prove -l t');
my ($demo) = $try->{code} =~ m{^perl Makefile\.PL && make && (perl -Mblib eg/\S+\.pl)\b}m;
ok($demo, 'the demo command, after the same build') or diag($try->{code});
SKIP: {
    skip 'no demo command', 2 if !$demo;
    # The build is done (this test runs from it): the demo as written.
    my $out = `cd '$top' && $demo 2>&1`;
    is($?, 0, "$demo runs") or diag($out);
    like($out, qr/^4 workers handled \d+ events once each/m, '... and four workers handled each event once');
}

# TRY IT's commands write a new Makefile, without INSTALL's INSTALL_BASE:
# a make install after them would go to the system's directories. Its text
# says so before the commands (and Makefile.PL when it drops one:
# t/15-newcomer.t).
{
    my ($intro) = $pod =~ /^=head1 TRY IT\n\n(.*?)\n\n/ms;
    my $drops = $try->{code} =~ /^perl Makefile\.PL(?! INSTALL_BASE)/m
        && $pod =~ /^    perl Makefile\.PL INSTALL_BASE=/m;
    if ($drops) {
        like($intro // '', qr/\bINSTALL_BASE\b.*\brun INSTALL's line again before any later C<make install>/s,
            "TRY IT says that its perl Makefile.PL drops INSTALL's INSTALL_BASE");
    }
    else {
        pass("TRY IT's commands keep INSTALL's INSTALL_BASE");
    }
}

# --- Perl snippets --------------------------------------------------------------------------------
# Run each in a child perl against the built module, in a temporary
# directory, with /dev/shm/ taken as that directory. What each prints is
# returned. A snippet that goes on from an earlier one has the module
# loaded, as the reader's program would.
my $USE = 'use Data::BloomFilter::Shared;';
sub run_perl {
    my ($code, $name, %o) = @_;
    (my $body = $code) =~ s{'/dev/shm/}{'$dir/}g;
    my $file = "$dir/snippet-$name.pl";
    spew($file, "use strict;\nuse warnings;\n$USE\n$body\n" . ($o{postlude} // ''));
    local $ENV{PERL5LIB} = perl5lib();
    my $out = `cd '$dir' && '$^X' '$file' 2>&1`;
    return ($?, $out);
}

my $n = 0;
for my $b (@{ $by{perl} }) {
    $n++;
    local $ENV{PERL5LIB} = perl5lib();
    (my $body = $b->{code}) =~ s{'/dev/shm/}{'$dir/}g;
    spew("$dir/compile-$n.pl", "use strict;\nuse warnings;\n$USE\n$body\n");
    my $out = `'$^X' -c '$dir/compile-$n.pl' 2>&1`;
    is($?, 0, "$b->{head}, Perl snippet $n: compiles under strict and warnings") or diag("$out\n$b->{code}");
    unlike($out, qr/^(?!.*syntax OK).+/m, "... without a warning") or diag($out);
}

{
    my ($ex) = grep { $_->{head} eq 'EXAMPLE' } @{ $by{perl} };
    ok($ex, 'the EXAMPLE') or last;
    my ($st, $out) = run_perl($ex->{code}, 'example', postlude => 'print "new $new was_new @was_new present $present\n";');
    is($st, 0, 'EXAMPLE runs') or diag($out);
    is($out, "processing order-1\nprocessing order-2\nnew 3 was_new 0 0 1 1 1 present 5\n",
        '... handles order-1 and order-2 once each, and the batch counts are as its comments say');
}
{
    my ($fork) = grep { $_->{head} eq 'Plain fork' } @{ $by{perl} };
    ok($fork, 'the plain fork example') or last;
    my ($st, $out) = run_perl($fork->{code}, 'fork', postlude => <<'PERL');
my @all = map { my $n = $_; map { "job-$n-$_" } 1 .. 1000 } 1 .. 4;
print "parent sees ", scalar $f->contains_many(\@all), "\n";
PERL
    is($st, 0, 'plain fork runs') or diag($out);
    is($out, "parent sees 4000\n", '... and the parent sees every child\'s adds');
}
{
    my ($psgi) = grep { $_->{head} =~ /Starman/ } @{ $by{perl} };
    ok($psgi, 'the app.psgi of Starman') or last;
    my ($st, $out) = run_perl($psgi->{code}, 'psgi', postlude => <<'PERL');
my @r = map { $app->({ PATH_INFO => $_ }) } '/seen/a', '/seen/b', '/seen/a', '/other';
print join(',', map { $_->[0] . ' ' . join('', @{ $_->[2] }) } @r), "\n";
PERL
    is($st, 0, 'app.psgi loads and answers') or diag($out);
    is($out, "200 new\n,200 new\n,200 seen\n,404 \n", '... new, new, seen, and 404 for another path');
}
{
    my ($win) = grep { $_->{head} =~ /WINDOWS/ } @{ $by{perl} };
    ok($win, 'the windows example') or last;
    my ($st, $out) = run_perl($win->{code}, 'window', postlude => <<'PERL');
print join(' ', $recent->window, $recent->generations, $recent->add('x'), $recent->add('x')), "\n";
PERL
    is($st, 0, 'the windowed filter is made') or diag($out);
    is($out, "86400 4 1 0\n", '... with a 24 hour window of 4 generations');
}
SKIP: {
    my ($redis) = grep { $_->{head} =~ /REDIS/ } @{ $by{perl} };
    ok($redis, 'the Redis example');
    my ($bin) = grep { -x } map { "$_/redis-server" } split(/:/, $ENV{PATH} // ''), '/usr/sbin', '/usr/bin';
    skip 'redis-server is not installed (Debian: redis-server)', 2 if !$bin;
    skip 'Redis::Fast is not installed (Debian: libredis-fast-perl)', 2 if !eval { require Redis::Fast; 1 };
    skip 'no Redis example', 2 if !$redis;
    require RedisServer;
    my $srv = RedisServer->new;
    (my $code = $redis->{code}) =~ s/'127\.0\.0\.1:6379'/"'" . $srv->address . "'"/e
        or fail('the example connects to 127.0.0.1:6379');
    my ($st, $out) = run_perl($code, 'redis', postlude => 'print $fleet->add(q(event-42)), "\n";');
    is($st, 0, 'the Redis example runs against a real server') or diag($out);
    is($out, "new\n0\n", '... prints new once, and the id is seen afterwards');
}

# --- shell commands -------------------------------------------------------------------------------
for my $b (@{ $by{shell} }) {
    spew("$dir/syntax.sh", $b->{code});
    my $out = `bash -n '$dir/syntax.sh' 2>&1`;
    is($?, 0, "$b->{head}: the commands parse as shell") or diag("$out\n$b->{code}");
}

# INSTALL: the packages exist (where apt knows its lists), and the build
# commands take INSTALL_BASE on perl Makefile.PL, as the text says.
{
    my @install = grep { $_->{head} eq 'INSTALL' } @{ $by{shell} };
    my $all = join "\n", map { $_->{code} } @install;
    my ($pkgs) = $all =~ /apt-get install ([^\n]+)/;
    ok($pkgs, 'INSTALL names Debian packages') or diag($all);
    like($all, qr{^perl Makefile\.PL INSTALL_BASE=\S+ && make && make test && make install$}m,
        'INSTALL_BASE on perl Makefile.PL');
    like($all, qr{^eval "\$\(perl -Mlocal::lib\)"$}m, 'and the local::lib way');
    like($all, qr{rustup\.rs}, 'and Rust from rustup');
  SKIP: {
        my $policy = `apt-cache policy perl 2>/dev/null` // '';
        skip 'apt-cache has no package lists here', 1 if $? || $policy !~ /Candidate: \S/;
        my @missing = grep { `apt-cache policy $_ 2>/dev/null` !~ /Candidate: (?!\(none\))\S/ } split ' ', $pkgs // '';
        is("@missing", '', "every package of apt-get install is known to apt ($pkgs)");
    }
}

# COMMAND LINE: the session runs, in a temporary directory, with the built
# CLI first on PATH, and prints what its comments say.
{
    my ($cli) = grep { $_->{head} eq 'COMMAND LINE' } @{ $by{shell} };
    ok($cli, 'a command-line session') or last;
    my $bin = "$dir/bin";
    mkdir $bin;
    spew("$bin/bloomfilter-shared", "#!/bin/sh\nexec '$^X' '$top/blib/script/bloomfilter-shared' \"\$@\"\n");
    chmod 0755, "$bin/bloomfilter-shared";
    my $work = "$dir/cli";
    mkdir $work;
    local $ENV{PATH} = "$bin:$ENV{PATH}";
    local $ENV{PERL5LIB} = perl5lib();
    for my $line (grep { /\S/ } split /\n/, $cli->{code}) {
        my ($cmd, $comment) = $line =~ /\A(.*?)\s*(?:#\s*(.*))?\z/;
        open(my $ph, '-|', 'bash', '-o', 'pipefail', '-c', "cd '$work' && $cmd 2>&1") or die "bash: $!";
        my $out = do { local $/; <$ph> } // '';
        close $ph;
        is($? >> 8, 0, "$cmd: exits 0") or diag($out);
        if (($comment // '') =~ /\Aprints (.+)\z/) {
            my @want = split /,\s*/, $1;
            is($out, join('', map {"$_\n"} @want), "... and prints @want");
        }
    }
    ok(-e "$work/all.bloom" && -e "$work/seen.bytes", 'the files it names were made');
}

# Servers: the commands name files that exist and options the servers have.
{
    my $servers = join "\n", map { $_->{code} } grep { $_->{head} =~ /Starman|uWSGI|Mojolicious/ } @{ $by{shell} };
    like($servers, qr/^starman --preload-app\b/m, 'Starman is started with --preload-app');
    like($servers, qr/^uwsgi --plugin psgi\b(?!.*--lazy)/m, 'uWSGI in its default mode (no --lazy-apps)');
    for my $file ($servers =~ m{\b((?:eg|t)/\S+\.p[ls]\w*)}g) {
        ok(-e "$top/$file", "$file exists");
    }
  SKIP: {
        skip 'starman is not installed (Debian: starman)', 1 if !grep { -x "$_/starman" } split /:/, $ENV{PATH};
        my $help = `starman --help 2>&1`;
        ok($help =~ /--preload-app/ && $help =~ /--workers/ && $help =~ /--listen/, 'starman has the options shown');
    }
  SKIP: {
        skip 'uwsgi is not installed (Debian: uwsgi-core)', 1 if !grep { -x "$_/uwsgi" } split /:/, $ENV{PATH};
        my $help = `uwsgi --help 2>&1`;
        ok(!grep({ $help !~ /\Q$_\E\b/ } qw(--master --processes --http-socket --plugin --lazy-apps)),
            'uwsgi has the options shown');
    }
}

done_testing;
