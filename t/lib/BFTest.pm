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
    run_sh run_cli for_each_layout croaks_like sleep_until wait_until time_bound
    become_user);

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

# In a child running as root: become $uid, with $gid as its only group
# (real and effective), for tests where another user writes a filter.
# Dies if root is still there.
sub become_user {
    my ($uid, $gid) = @_;
    $) = "$gid $gid";
    $( = $gid;
    POSIX::setgid($gid) or die "setgid: $!";
    POSIX::setuid($uid) or die "setuid: $!";
    die "still root" if $> == 0 || $< == 0;
}

# A whole file's bytes; write bytes to a file.
# Two checks: $code croaks, and its message matches $re.
sub croaks_like {
    my ($code, $re, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;    # failures name the caller's line
    my $ok = eval { $code->(); 1 };
    Test::More::ok(!$ok, "$name: croaks");
    Test::More::like($@, $re, "$name: message");
}

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

my %live;    # pid => 1 for children not yet reaped
my $ORIG_PID = $$;

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

# Run the built CLI (script/bloomfilter-shared, with this module) with
# @args; returns (its exit code, its output and errors together).
sub run_cli {
    my (@args) = @_;
    require FindBin;
    my $script = "$FindBin::Bin/../script/bloomfilter-shared";
    local $ENV{PERL5LIB} = perl5lib();
    my $cmd = join ' ', map {"'$_'"} $^X, $script, @args;
    my $out = `$cmd 2>&1`;
    return ($? >> 8, $out);
}

# Run `@cmd sh -c $prelude sh perl -e $script` (the prelude ends by
# exec'ing "$@", to which it may append arguments), for at most 60 s.
# Returns (its output, its status). The caller sets PERL5LIB.
sub run_sh {
    my ($prelude, $script, @cmd) = @_;
    local $SIG{ALRM} = sub { die "timeout\n" };
    alarm 60;
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
