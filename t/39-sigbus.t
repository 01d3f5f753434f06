# Pages taken from under a filter's mapping by another process (a truncated
# file, a hole punched on a full tmpfs) fail the call that touched them,
# naming the file, and every later call on that handle; the process lives
# and its other handles work. No process of the module ever shrinks the
# file or punches a hole in it: a journal word forged by another writer
# cannot make an honest process take a live merger's journal from under it.
# Every case runs in a process of its own, whose exit status is checked: a
# SIGBUS would end it (signal 7).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib run_sh);
use POSIX ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $MSG = 'the filter file was truncated or its pages were removed by another process';

# Run $script (perl -e) with @args in a child process: (output, status).
sub run_script {
    my ($script, @args) = @_;
    local $ENV{PERL5LIB} = perl5lib();
    my $quoted = join ' ', map { "'$_'" } @args;
    return run_sh("exec \"\$@\" $quoted", $script);
}

sub line {
    my ($out, $name) = @_;
    return $out =~ /^\Q$name\E: (.*)$/m ? $1 : "(no line for $name)";
}

sub lives_ok_status {
    my ($out, $status, $what) = @_;
    like($out, qr/^alive$/m, "$what: the process lives") or diag("status $status\n$out");
    is($status, 0, "$what: ... and exits normally (no SIGBUS: status $status)");
}

my $prelude = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my $C = 'Data::BloomFilter::Shared';
$| = 1;
# One line per call: "name: ok RESULT" or "name: MESSAGE".
sub try_ {
    my ($name, $code) = @_;
    my $r = eval { 'ok ' . ($code->() // 'undef') };
    (my $e = $r // $@) =~ s/\n//g;
    print "$name: $e\n";
}
PERL

# --- (a) a file truncated under a reader and a writer -------------------------------------------
{
    my $script = $prelude . <<'PERL';
my ($path, $other) = @ARGV;
my $w = $C->new($path, 100_000, 0.01);
$w->add("item $_") for 1 .. 1000;
open(my $fh, '<', $path) or die "$path: $!";
my $r = $C->new_from_fd(fileno $fh);
try_('reader before', sub { $r->contains('item 5') });
system('truncate', '-s', '0', $path) == 0 or die "truncate: $?";
try_('reader contains', sub { $r->contains('item 5') });
try_('reader again', sub { $r->contains('item 6') });
try_('reader count', sub { $r->count });
try_('writer add', sub { $w->add('new item') });
try_('writer again', sub { $w->add('another') });
try_('writer contains', sub { $w->contains('item 5') });
try_('writer add_many', sub { $w->add_many(['x', 'y']) });
try_('writer contains_many', sub { scalar $w->contains_many(['x', 'y']) });
try_('writer clear', sub { $w->clear });
try_('writer stats', sub { $w->stats->{count} });
my $n = $C->new($other, 1000, 0.01);
$n->add('x');
try_('another filter', sub { $n->contains('x') });
undef $w;
undef $r;
print "alive\n";
PERL
    my ($out, $status) = run_script($script, "$dir/a.bf", "$dir/other.bf");
    lives_ok_status($out, $status, 'a truncated file');
    is(line($out, 'reader before'), 'ok 1', 'the reader works before');
    # The reader came from a descriptor: it knows no path.
    for my $call ('reader contains', 'reader again', 'reader count') {
        like(line($out, $call), qr/^\Q$C\E->(contains|count): \Q$MSG\E at /,
            "$call croaks naming the method (a descriptor's handle has no path)");
    }
    for my $call ('writer add', 'writer again', 'writer contains', 'writer add_many', 'writer contains_many',
        'writer clear', 'writer stats') {
        like(line($out, $call), qr/^\Q$C\E->\w+: \Q$dir\E\/a\.bf: \Q$MSG\E at /, "$call croaks");
    }
    is(line($out, 'another filter'), 'ok 1', 'a new handle on another filter works');
}

# --- a frozen file truncated under new_readonly -------------------------------------------------
{
    my $script = $prelude . <<'PERL';
my ($path) = @ARGV;
my $f = $C->new($path, 100_000, 0.01);
$f->add("item $_") for 1 .. 1000;
$f->freeze;
undef $f;
my $r = $C->new_readonly($path);
try_('before', sub { $r->contains('item 5') });
system('truncate', '-s', '8192', $path) == 0 or die "truncate: $?";
try_('contains', sub { $r->contains('item 5') });
try_('contains_many', sub { scalar $r->contains_many(['item 5']) });
try_('bits_set', sub { $r->bits_set });
try_('reopen', sub { $C->new_readonly($path) });
undef $r;
print "alive\n";
PERL
    my ($out, $status) = run_script($script, "$dir/frozen.bf");
    lives_ok_status($out, $status, 'a truncated frozen file');
    is(line($out, 'before'), 'ok 1', 'new_readonly works before');
    for my $call (qw(contains contains_many bits_set)) {
        like(line($out, $call), qr/^\Q$C\E->$call: \Q$dir\E\/frozen\.bf: \Q$MSG\E at /,
            "new_readonly handle: $call croaks");
    }
    like(line($out, 'reopen'), qr/^\Q$C\E->new_readonly: .*frozen\.bf: .*(too small|shorter)/i,
        'new_readonly of the truncated file croaks as for any short file');
}

# --- (b) a hole punched in the bit array of a full tmpfs ----------------------------------------
# A hole on tmpfs reads zeros; the page is allocated when touched, which
# fails on a full file system: SIGBUS.
SKIP: {
    my $ns = ($> == 0) && system('unshare -m true >/dev/null 2>&1') == 0;
    skip 'needs root and mount namespaces (unshare -m) to mount a small tmpfs', 6 unless $ns;
    skip 'needs fallocate(1) (util-linux)', 6 unless system('fallocate --help >/dev/null 2>&1') == 0;
    my $mnt = "$dir/tiny";
    mkdir $mnt or die;
    my $script = $prelude . <<'PERL';
my ($mnt) = @ARGV;
my $path = "$mnt/f.bf";
my $f = $C->new($path, 1_000_000, 0.01);
my $g = $C->new(undef, 1000, 0.01);
my $size = -s $path;
my $mib = 1 << 20;
system('fallocate', '-p', '-o', $size - $mib, '-l', $mib, $path) == 0 or die "fallocate: $?";
# Fill the file system up again, the punched MiB included.
open(my $fill, '>', "$mnt/fill") or die "fill: $!";
my $block = "\0" x 65536;
1 while syswrite($fill, $block);
print 'full: ', ($!{ENOSPC} ? 'yes' : "no ($!)"), "\n";
close $fill;
try_('add', sub { $f->add("item $_") for 1 .. 20_000; 'all added' });
try_('again', sub { $f->contains('item 1') });
$g->add('x');
try_('another filter', sub { $g->contains('x') });
undef $f;
print "alive\n";
PERL
    local $ENV{PERL5LIB} = perl5lib();
    my ($out, $status) = run_sh("mount -t tmpfs -o size=4m tmpfs '$mnt' || exit 98; exec \"\$@\" '$mnt'",
        $script, 'unshare', '-m');
    skip "cannot mount a tmpfs here (status $status)", 6 if $status >> 8 == 98;
    lives_ok_status($out, $status, 'a hole on a full tmpfs');
    is(line($out, 'full'), 'yes', 'the tmpfs was full');
    like(line($out, 'add'), qr/^\Q$C\E->add: \Q$mnt\E\/f\.bf: \Q$MSG\E at /, 'an add into the hole croaks');
    like(line($out, 'again'), qr/^\Q$C\E->contains: .*\Q$MSG\E at /, '... and so does every later call');
    is(line($out, 'another filter'), 'ok 1', 'another handle works on');
}

# --- $SIG{BUS}: Perl installs its own handler -----------------------------------------------------
# Set before the first filter: kept, and handed every SIGBUS that is not a
# filter's. Set after: it replaces the module's, and a lost page goes to it
# (run at once, inside the call: it must end the process); the module puts
# its own back, in front of it, when it next maps a filter.
{
    my $script = $prelude . <<'PERL';
use POSIX ();
my ($path, $case) = @ARGV;
my $h = sub { print "user handler\n"; POSIX::_exit(42) if $case eq 'after' };
$SIG{BUS} = $h if $case eq 'before';
my $f = $C->new($path, 100_000, 0.01);
$f->add("item $_") for 1 .. 100;
$SIG{BUS} = $case eq 'default' ? 'DEFAULT' : $case eq 'ignore' ? 'IGNORE' : $h if $case ne 'before';
$C->new(undef, 1000, 0.01) if $case eq 'again';
kill 'BUS', $$ if $case eq 'before' || $case eq 'again';
system('truncate', '-s', '0', $path) == 0 or die "truncate: $?";
try_('contains', sub { $f->contains('item 5') });
print "alive\n";
PERL
    my ($out, $status) = run_script($script, "$dir/sig-before.bf", 'before');
    lives_ok_status($out, $status, '$SIG{BUS} set before the first filter');
    like($out, qr/^user handler$/m, '... it runs for a SIGBUS sent with kill');
    like(line($out, 'contains'), qr/^\Q$C\E->contains: .*\Q$MSG\E at /, '... and a lost page croaks');
    ($out, $status) = run_script($script, "$dir/sig-after.bf", 'after');
    is($status >> 8, 42, '$SIG{BUS} set after: a lost page goes to it, inside the call')
        or diag("status $status\n$out");
    like($out, qr/^user handler$/m, '... it ran');
    ($out, $status) = run_script($script, "$dir/sig-again.bf", 'again');
    lives_ok_status($out, $status, '$SIG{BUS} set after, then a filter made');
    like($out, qr/^user handler$/m, '... it runs for a SIGBUS sent with kill');
    like(line($out, 'contains'), qr/^\Q$C\E->contains: .*\Q$MSG\E at /, '... and a lost page croaks again');
    for my $how (qw(default ignore)) {
        ($out, $status) = run_script($script, "$dir/sig-$how.bf", $how);
        is($status & 127, 7, "\$SIG{BUS} = '\U$how\E' after the filter: a lost page ends the process with SIGBUS")
            or diag("status $status\n$out");
    }
}

# --- a handle in another thread -----------------------------------------------------------------
SKIP: {
    require Config;
    skip 'perl without ithreads', 3 unless $Config::Config{useithreads};
    my $script = $prelude . <<'PERL';
use threads;
my ($path) = @ARGV;
my $got = threads->create(sub {
    my $f = $C->new($path, 100_000, 0.01);
    $f->add('item');
    system('truncate', '-s', '0', $path) == 0 or die "truncate: $?";
    my $e = eval { $f->contains('item'); 'no croak' } // $@;
    $e =~ s/\n//g;
    return $e;
})->join;
print "thread: $got\n";
print "alive\n";
PERL
    my ($out, $status) = run_script($script, "$dir/thread.bf");
    lives_ok_status($out, $status, 'a handle in another thread');
    like(line($out, 'thread'), qr/^\Q$C\E->contains: .*\Q$MSG\E at /, '... its lost page croaks there');
}

# --- (c) a forged journal word, a clear loop and a merger ---------------------------------------
# Another writer of the file rewrites the journal word (control line, offset
# 152) with a token whose slot does not exist, over and over: the journal
# looks abandoned. A process clearing the filter in a loop reclaims an
# abandoned journal; a merger uses it meanwhile. Bounded by iterations: the
# merger merges MERGES times, the clearer clears until the merger is done.
{
    my $MERGES = 400;
    my $forger = <<'PERL';
my ($path, $parent) = @ARGV;
open(my $fh, '+<', $path) or die "forger: $path: $!";
my $word = pack('L', 0x7ff);
while (getppid() == $parent) {    # until killed, or the test has gone
    sysseek($fh, 152, 0);
    syswrite($fh, $word);
    select(undef, undef, undef, 0.0005);
}
PERL
    my $clearer = $prelude . <<'PERL';
my ($path, $done, $parent) = @ARGV;
my $f = $C->new($path, 1_000_000, 0.01);
my $n = 0;
until (-e $done || getppid() != $parent) { eval { $f->clear }; $n++ }
print "clears: $n\n";
print "alive\n";
PERL
    my $merger = $prelude . <<'PERL';
my ($path, $done, $merges) = @ARGV;
my $f = $C->new($path, 1_000_000, 0.01);
my $o = $C->new(undef, 1_000_000, 0.01);
$o->add_many([map { "other $_" } 1 .. 10_000]);
my $ok = 0;
for (1 .. $merges) { $ok++ if eval { $f->merge($o); 1 } }
open(my $fh, '>', $done) or die;
print "merges: $ok\n";
print "alive\n";
PERL
    my $cross = $> == 0 && system('setpriv --help >/dev/null 2>&1') == 0;
    chmod 0711, $dir;
    for my $forged (0, 1) {
        my $path = "$dir/journal-$forged.bf";
        my $done = "$dir/done-$forged";
        my $f = $C->new($path, 1_000_000, 0.01, { mode => 0666 });
        undef $f;
        local $ENV{PERL5LIB} = perl5lib();
        my @forger;
        if ($forged) {
            my @as = $cross ? ('setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups') : ();
            my $pid = fork // die "fork: $!";
            if (!$pid) { { exec @as, $^X, '-e', $forger, $path, $$ } POSIX::_exit(127) }
            @forger = ($pid);
        }
        my $cpid = open(my $cph, '-|', $^X, '-e', $clearer, $path, $done, $$) or die "clearer: $!";
        # 400 merges take 2 s on an idle host, 14 s beside xt/load.sh's
        # load; the limit only catches a merger that never ends.
        local $BFTest::RUN_SH_LIMIT = 600;
        my ($out, $status) = run_script($merger, $path, $done, $MERGES);
        open(my $touch, '>', $done) or die; close $touch; # the clearer stops even if the merger died
        my $cout = do { local $/; <$cph> } // '';
        close $cph;
        my $cstatus = $?;
        kill 'KILL', @forger;
        waitpid($_, 0) for @forger;
        my $what = $forged ? 'with the journal word forged' . ($cross ? ' (by uid nobody)' : ' (same uid)')
                           : 'control run, no forger';
        lives_ok_status($out, $status, "$what: the merger");
        # With the word forged a merge may croak (the journal taken over
        # under it): counted, not judged; the process must live.
        is(line($out, 'merges'), $MERGES, "$what: every merge done") unless $forged;
        lives_ok_status($cout, $cstatus, "$what: the clearer");
        note("$what: " . line($out, 'merges') . " merges, " . line($cout, 'clears') . ' clears');
    }
}

done_testing;
