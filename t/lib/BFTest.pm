package BFTest;
# Helpers shared by the Data::BloomFilter::Shared tests: running code in a
# child process under a time limit and reaping it whatever happens.
use strict;
use warnings;
use POSIX qw(WNOHANG _exit);
use Time::HiRes qw(time sleep);
use IO::Select ();
use Exporter 'import';

our @EXPORT_OK = qw(in_child reap spawn_perl start_child child_status_text perl5lib slurp spew readable_build
    run_sh run_cli for_each_layout croaks_like dies_like sleep_until wait_until time_bound
    become_user die_with_parent cli cli_process cli_sh cli_argv);

my %live;    # pid => 1 for children not yet reaped
my $ORIG_PID = $$;    # the test process

# The multi-process suites run on every layout: for_each_layout runs
# $code->($layout) once per name of @$layouts, each in a subtest of its
# own. Within the pass of a layout other than standard, every filter the
# test makes with new or new_memfd (in this process or in a child forked
# during the pass) asks for that layout (reopening a file asks for it too,
# so a file of another layout croaks), and each one made is checked to
# have it; the standard pass asks nothing, as a user who names no layout.
# BFTEST_LAYOUT=NAME runs only the pass of that layout.
sub for_each_layout {
    my ($layouts, $code) = @_;
    my $only = $ENV{BFTEST_LAYOUT};
    die "BFTest: BFTEST_LAYOUT=$only is not one of @$layouts\n"
        if $only && !grep { $_ eq $only } @$layouts;
    for my $layout (grep { !$only || $_ eq $only } @$layouts) {
        Test::More::subtest("layout $layout" => sub { with_layout($layout, $code) });
    }
}

sub with_layout {
    my ($layout, $code) = @_;
    return $code->($layout) if $layout eq 'standard';
    require Data::BloomFilter::Shared;
    my $class = 'Data::BloomFilter::Shared';
    no strict 'refs';
    no warnings 'redefine';
    my %orig = map { $_ => \&{"${class}::$_"} } qw(new new_memfd);
    # The originals come back however the pass ends (a die included).
    my $restore = BFTest::Guard->new(sub { *{"${class}::$_"} = $orig{$_} for keys %orig });
    for my $method (keys %orig) {
        my $orig = $orig{$method};
        my $at = 4;    # the options' position in @_, for both
        *{"${class}::$method"} = sub {
            my @args = @_;
            my $last = $args[$at];
            my %o = ref $last eq 'HASH' ? %$last
                : defined $last && $method eq 'new' ? (mode => $last) : ();
            $o{layout} //= $layout;
            $args[3] = undef if @args < 4;
            $args[$at] = \%o;
            my $f = $orig->(@args);
            die "BFTest: $method made a " . $f->layout . " filter, not $layout\n"
                if $f->layout ne $layout;
            return $f;
        };
    }
    return $code->($layout);
}

# In a child of the test process running as root: become $uid, with $gid
# as its only group (real and effective), for tests where another user
# writes a filter; the child then dies with the test (die_with_parent).
# Dies if root is still there.
sub become_user {
    my ($uid, $gid) = @_;
    $) = "$gid $gid";
    $( = $gid;
    POSIX::setgid($gid) or die "setgid: $!";
    POSIX::setuid($uid) or die "setuid: $!";
    die "still root" if $> == 0 || $< == 0;
    die_with_parent();
}

# prctl's number, looked up as the test's own uid: a child of another uid
# may not read the directories of @INC. The headers are read afresh into a
# package of ours (h2ph's files define their subs in the package that
# first requires them).
my $SYS_prctl = do { package BFTest::Syscall; local %INC; require 'syscall.ph'; SYS_prctl() };

# In a child forked by the test process: be killed (SIGKILL) when the test
# process ends, so that a test that dies never leaves a child waiting for
# a file it will not write (prove reads the test's output until every
# holder of it has gone). A change of uid clears the setting (prctl(2),
# PR_SET_PDEATHSIG): become_user sets it after. Exits at once if the test
# process has already gone.
sub die_with_parent {
    syscall($SYS_prctl, 1, 9) == 0 or die "prctl(PR_SET_PDEATHSIG): $!";    # 1: PR_SET_PDEATHSIG; 9: SIGKILL
    _exit(0) if getppid() != $ORIG_PID;
}

# Two checks: $code croaks, and its message matches $re.
sub croaks_like {
    my ($code, $re, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;    # failures name the caller's line
    my $ok = eval { $code->(); 1 };
    Test::More::ok(!$ok, "$name: croaks");
    Test::More::like($@, $re, "$name: message");
}

# One check: the block croaks with a message matching $re (a block that
# does not croak fails, saying so).
sub dies_like(&$$) {
    my ($code, $re, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;    # failures name the caller's line
    local $@;
    eval { $code->(); 1 } and return Test::More::fail("$name: did not croak");
    Test::More::like($@, $re, $name);
}

# A whole file's bytes; write bytes to a file.

sub slurp {
    my ($path) = @_;
    open(my $fh, '<:raw', $path) or die "$path: $!";
    local $/;
    return scalar <$fh>;
}

sub spew {
    my ($path, $bytes) = @_;
    open(my $fh, '>:raw', $path) or die "$path: $!";
    print $fh $bytes;
    close $fh or die "$path: $!";
}

# Sleep until the epoch time $t (from Time::HiRes::time); at once if that
# is past, as it may be on a busy host (a negative sleep dies).
sub sleep_until {
    my ($t) = @_;
    my $d = $t - time;
    sleep $d if $d > 0;
}

# Poll $cond every $poll seconds (default 0.01) until it returns true or
# $timeout seconds (default 60) have passed. Returns its last value: a test
# that needs something to happen waits for it, however slow the host,
# instead of sleeping a fixed time and hoping.
sub wait_until {
    my ($cond, $timeout, $poll) = @_;
    my $deadline = time + ($timeout // 60);
    while (1) {
        my $v = $cond->();
        return $v if $v || time > $deadline;
        sleep($poll // 0.01);
    }
}

# A wall-clock bound the design promises of a wait (a stall after a kill, a
# rotation after a crash), as one test. On a loaded host a process waits
# for a CPU longer than any such bound (with a busy loop on every core, a
# few hundred ms is common), so the verdict is by default the hang check:
# under $hang seconds (default 30, or 20 times the bound if that is more),
# which only a wait that never ends (or ends by a timeout of seconds)
# exceeds; the design bound is then reported with diag when it is missed.
# BFTEST_STRICT_TIMING=1 (an idle machine) makes the design bound the
# verdict.
sub time_bound {
    my ($took, $bound, $name, $hang) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $hang //= $bound * 20 > 30 ? $bound * 20 : 30;
    my $limit = $ENV{BFTEST_STRICT_TIMING} ? $bound : $hang;
    Test::More::diag(sprintf '%s: took %.3f s, over the design bound of %.3f s (a loaded host?)',
        $name, $took, $bound) if $took >= $bound && $limit > $bound;
    return Test::More::cmp_ok($took, '<', $limit,
        sprintf '%s (%.3f s; bound %.3f s, hang check %.0f s)', $name, $took, $bound, $limit);
}

# Wait for $pid at most $timeout seconds; SIGKILL it if it is still running.
# Returns ($status, $timed_out).
sub reap {
    my ($pid, $timeout) = @_;
    $timeout //= 30;
    my $deadline = time + $timeout;
    while (1) {
        my $r = waitpid($pid, WNOHANG);
        if ($r == $pid || $r == -1) {
            delete $live{$pid};
            return ($r == -1 ? -1 : $?, 0);
        }
        if (time > $deadline) {
            kill 'KILL', $pid;
            waitpid($pid, 0);
            delete $live{$pid};
            return ($?, 1);
        }
        sleep 0.005;
    }
}

# Run $code in a forked child under alarm($timeout). Whatever $code returns
# (a string) comes back through a pipe. If $code dies, the child exits 3 and
# the message comes back. Returns a hashref:
#   { status, exit, signal, timed_out, died, out }
sub in_child {
    my ($code, $timeout) = @_;
    $timeout //= 20;
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        close $r;
        alarm $timeout;
        my $out = eval { $code->() };
        my $died = $@;
        $out = $died unless defined $out || !$died;
        $out //= '';
        syswrite $w, $out;
        close $w;
        _exit($died ? 3 : 0);
    }
    $live{$pid} = 1;
    close $w;
    # Read while waiting: a child whose output outgrows the pipe's buffer
    # would otherwise block on its write until the time limit.
    my $out = '';
    my $deadline = time + $timeout + 10;
    my $sel = IO::Select->new($r);
    my ($status, $timed_out);
    while (1) {
        if ($sel->count && $sel->can_read(0.005)) {
            $sel->remove($r) unless sysread($r, $out, 65536, length $out);
        }
        my $got = waitpid($pid, WNOHANG);
        if ($got == $pid || $got == -1) {
            ($status, $timed_out) = ($got == -1 ? -1 : $?, 0);
            last;
        }
        if (time > $deadline) {
            kill 'KILL', $pid;
            waitpid($pid, 0);
            ($status, $timed_out) = ($?, 1);
            last;
        }
        sleep 0.005 unless $sel->count;
    }
    delete $live{$pid};
    1 while sysread($r, $out, 65536, length $out);
    close $r;
    return {
        status    => $status,
        exit      => $status >> 8,
        signal    => $status & 127,
        timed_out => $timed_out,
        died      => (($status >> 8) == 3 ? 1 : 0),
        out       => $out,
    };
}

# Start a child running $code->($report), under alarm(30); $report->($line)
# sends a line to the parent (once the work it names is complete). The
# child says "ready" first, and this returns once it has: (pid, the read
# handle of the lines that follow). Reap it with `reap`.
sub start_child {
    my ($code) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        close $r;
        alarm 30;
        $w->autoflush(1);
        my $report = sub { syswrite $w, "$_[0]\n" };
        $report->('ready');
        eval { $code->($report) };
        _exit(0);
    }
    $live{$pid} = 1;
    close $w;
    my $ready = <$r>;
    die "child did not start" unless defined $ready && $ready eq "ready\n";
    return ($pid, $r);
}

sub child_status_text {
    my ($res) = @_;
    return 'timed out' if $res->{timed_out};
    return "killed by signal $res->{signal}" if $res->{signal};
    return "exit $res->{exit}: $res->{out}";
}

# PERL5LIB value that makes an exec'd perl see the same module as we do.
sub perl5lib {
    require Cwd;
    return join ':', map { ref $_ ? () : Cwd::abs_path($_) // $_ } @INC;
}

# A copy of the built module (and the CLI) under $dir that every user can
# read, for tests that run code as another uid: the build directory itself
# may be private (a 0700 temporary directory, say), and a library path
# another user cannot search makes perl die. $dir is made searchable.
# Returns (library directory for PERL5LIB, path of the CLI script).
sub readable_build {
    my ($dir) = @_;
    my ($arch) = grep { !ref && -e "$_/auto/Data/BloomFilter/Shared/Shared.so" } @INC;
    my ($lib) = grep { !ref && -e "$_/Data/BloomFilter/Shared.pm" } @INC;
    die "no built module in \@INC" unless $arch && $lib;
    my $to = "$dir/readable-build";
    mkdir $to;
    mkdir "$to/lib";
    for my $from ($arch, $lib) {
        system('cp', '-r', "$from/.", "$to/lib") == 0 or die "cp $from: $?";
    }
    my $script = "$lib/../script/bloomfilter-shared";
    if (-e $script) {
        system('cp', $script, "$to/bloomfilter-shared") == 0 or die "cp $script: $?";
    }
    system('chmod', '-R', 'a+rX', $to) == 0 or die "chmod: $?";
    chmod((stat $dir)[2] & 07777 | 0711, $dir);
    return ("$to/lib", "$to/bloomfilter-shared");
}

# --- the command line tool, bloomfilter-shared -------------------------------------------
#
# cli($stdin, @args) runs it in this process: Data::BloomFilter::Shared::CLI::run(@args)
# (what script/bloomfilter-shared runs), with STDIN reading the string
# $stdin (undef: nothing) and STDOUT and STDERR going to files for the
# call. Returns (exit code, stdout, stderr), and checks, as a test, that
# run returned rather than died (for errors and --help too). Most cases
# need nothing more: the tool's outputs and files are the same.
#
# A process is needed where the case is about one: an exit by a signal,
# pipes between commands, a terminal, the umask, another user, a kill.
# cli_process($stdin, @args) runs the real script (this perl, this module)
# as a process, at most 60 s; cli_sh($cmd) runs the shell command line
# $cmd, as a user types it, with bloomfilter-shared on PATH. Both return
# (exit code, or 128 + the signal that ended it; stdout; stderr).
# cli_argv() is the command to exec for the tool, with PERL5LIB set to
# perl5lib().

my $cli_dir;    # the files of the calls, and bin/ with the command on PATH

sub cli_files {
    return $cli_dir if $cli_dir;
    require File::Temp;
    $cli_dir = File::Temp::tempdir(CLEANUP => 1);
    # Another user's command (setpriv) finds the command on PATH too.
    chmod 0711, $cli_dir or die "chmod $cli_dir: $!";
    mkdir "$cli_dir/bin" or die "mkdir: $!";
    my ($perl, $script) = cli_argv();
    spew("$cli_dir/bin/bloomfilter-shared", qq{#!/bin/sh\nexec '$perl' '$script' "\$@"\n});
    chmod 0755, "$cli_dir/bin", "$cli_dir/bin/bloomfilter-shared" or die "chmod: $!";
    return $cli_dir;
}

sub cli_argv {
    require FindBin;
    require Cwd;
    return ($^X, Cwd::abs_path("$FindBin::Bin/../script/bloomfilter-shared"));
}

# An argument list as one line of a test's name.
sub cli_shown { join ' ', map { s/([^\x20-\x7e])/sprintf '\\x%02x', ord $1/ger } @_ }

sub cli {
    my ($stdin, @args) = @_;
    require Data::BloomFilter::Shared::CLI;
    my $d = cli_files();
    my ($in, $out, $err) = map {"$d/$_"} qw(stdin stdout stderr);
    spew($in, $stdin // '');
    open(my $save_in, '<&', \*STDIN) or die "dup STDIN: $!";
    open(my $save_out, '>&', \*STDOUT) or die "dup STDOUT: $!";
    open(my $save_err, '>&', \*STDERR) or die "dup STDERR: $!";
    open(STDIN, '<', $in) or die "$in: $!";
    open(STDOUT, '>', $out) or die "$out: $!";
    open(STDERR, '>', $err) or die "$err: $!";
    # --help's manual is the POD of the command run().
    my $status = eval { local $0 = (cli_argv())[1]; Data::BloomFilter::Shared::CLI::run(@args) };
    my $died = $@;
    # STDOUT first: the command closes it, and the lowest free descriptor
    # is the one it had.
    open(STDOUT, '>&', $save_out) or die "restore STDOUT: $!";
    open(STDERR, '>&', $save_err) or die "restore STDERR: $!";
    open(STDIN, '<&', $save_in) or die "restore STDIN: $!";
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    Test::More::is($died, '', 'run(' . cli_shown(@args) . ') returns rather than dies');
    return ($status, slurp($out), slurp($err));
}

# Runs @cmd with the command's files as its standard input and outputs.
sub cli_spawn {
    my ($stdin, @cmd) = @_;
    my $d = cli_files();
    my ($in, $out, $err) = map {"$d/$_"} qw(stdin stdout stderr);
    spew($in, $stdin // '');
    local $ENV{PERL5LIB} = perl5lib();
    local $ENV{PATH} = "$d/bin:$ENV{PATH}";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open(STDIN, '<', $in) or _exit(126);
        open(STDOUT, '>', $out) or _exit(126);
        open(STDERR, '>', $err) or _exit(126);
        { exec @cmd }
        _exit(127);
    }
    $live{$pid} = 1;
    my ($status, $timed_out) = reap($pid, 60);
    die "@cmd: timed out\n" if $timed_out;
    my $rc = $status & 127 ? 128 + ($status & 127) : $status >> 8;
    return ($rc, slurp($out), slurp($err));
}

sub cli_process {
    my ($stdin, @args) = @_;
    return cli_spawn($stdin, cli_argv(), @args);
}

sub cli_sh {
    my ($cmd) = @_;
    return cli_spawn(undef, 'sh', '-c', $cmd);
}

# The tool as a process with @args; returns (its exit code, its output and
# errors together).
sub run_cli {
    my ($rc, $out, $err) = cli_process(undef, @_);
    return ($rc, $out . $err);
}

# Run `@cmd sh -c $prelude sh perl -e $script` (the prelude ends by
# exec'ing "$@", to which it may append arguments), for at most
# $RUN_SH_LIMIT seconds (60; a caller whose script runs longer on a loaded
# host sets it with local). Returns (its output, its status). The caller
# sets PERL5LIB.
our $RUN_SH_LIMIT = 60;

sub run_sh {
    my ($prelude, $script, @cmd) = @_;
    local $SIG{ALRM} = sub { die "timeout\n" };
    alarm $RUN_SH_LIMIT;
    my $out = eval {
        open(my $ph, '-|', @cmd, 'sh', '-c', $prelude, 'sh', $^X, '-e', $script) or die "sh: $!";
        local $/;
        my $o = <$ph> // '';
        close $ph;
        $o;
    };
    alarm 0;
    return ($out // "timed out\n", $?);
}

# fork + exec perl with @args (a script given with -e, say); returns the pid.
sub spawn_perl {
    my (@args) = @_;
    local $ENV{PERL5LIB} = perl5lib();
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        { exec $^X, @args }
        _exit(127);
    }
    $live{$pid} = 1;
    return $pid;
}

END {
    # Never leave a child behind, whatever happened to the test (only in the
    # process that loaded us: a child's copy of %live lists its siblings).
    local $?;
    return unless $$ == $ORIG_PID;
    for my $pid (keys %live) {
        kill 'KILL', $pid;
        waitpid($pid, 0);
    }
}

# Runs its code when it goes out of scope.
package BFTest::Guard;
sub new { my ($class, $code) = @_; return bless { code => $code }, $class }
sub DESTROY { $_[0]{code}->() }

1;
