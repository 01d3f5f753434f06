package BFStop;
# A child perl stopped in the middle of a pass over a filter's bits, at a
# point the test chooses and not where a loaded host's scheduler happens to
# put it: a preloaded shim takes away read access to three pages of the
# filter's shared mapping in the child (near a sixth, a half and five
# sixths of the file: in three different generations of a windowed filter,
# whose g + 1 generations each take at most a third of it). The child's
# first read of one of them faults; the fault's handler gives that page
# back, takes the other two away again and stops the process (SIGSTOP).
# The parent sees the stop (waitpid with WUNTRACED), does what the test
# needs at that moment (steps the filter, kills the child) and continues
# it. A pass that reads at least two of the three pages (a copy of a
# windowed filter reads every generation but the spare, so two or three of
# them; a plain filter's copy all three) finds one of them taken away, and
# is stopped at least once before it ends: the race a test needs is made
# by the test, however slow or busy the host.
#
# The module is the real one, with no hook; only the pages' protection in
# the child is the test's. Only mappings of the filter named (by device and
# inode) are touched: the module's shared mapping of it.
use strict;
use warnings;
use Config;
use File::Basename qw(dirname);
use POSIX qw(WUNTRACED WIFSTOPPED);
use Exporter 'import';
use BFTest qw(perl5lib spew slurp);

our @EXPORT_OK = qw(run_stopped);

my $shim_c = <<'C';
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGES 3
#define MAPS 8

static struct { uintptr_t addr; size_t len; int prot; } maps[MAPS];
static dev_t want_dev;
static ino_t want_ino;
static int armed;
static uintptr_t pagesz;

static uintptr_t page_at(int m, int k)
{
    return (maps[m].addr + maps[m].len / (2 * PAGES) * (2 * k + 1)) & ~(pagesz - 1);
}

/* Every watched page of mapping m unreadable but `keep`. */
static void protect_but(int m, uintptr_t keep)
{
    for (int k = 0; k < PAGES; k++) {
        uintptr_t p = page_at(m, k);
        mprotect((void *)p, pagesz, p == keep ? maps[m].prot : PROT_NONE);
    }
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr & ~(pagesz - 1);
    for (int m = 0; m < MAPS; m++) {
        if (!maps[m].len)
            continue;
        for (int k = 0; k < PAGES; k++) {
            if (page_at(m, k) == a) {
                protect_but(m, a);
                raise(SIGSTOP);
                return; /* the read is made again, and succeeds */
            }
        }
    }
    /* Not ours: the fault happens again, with the default action. */
    signal(sig, SIG_DFL);
}

__attribute__((constructor)) static void init(void)
{
    struct stat st;
    const char *path = getenv("BFS_TEST_STOP_FILE");
    pagesz = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (!path || stat(path, &st) != 0)
        return;
    want_dev = st.st_dev;
    want_ino = st.st_ino;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, 0);
    armed = 1;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    void *p = (void *)r;
    struct stat st;
    if (armed && p != MAP_FAILED && fd >= 0 && (flags & MAP_SHARED) && off == 0
        && len >= 16 * PAGES * pagesz && fstat(fd, &st) == 0 && st.st_dev == want_dev
        && st.st_ino == want_ino) {
        for (int m = 0; m < MAPS; m++) {
            if (!maps[m].len) {
                maps[m].addr = (uintptr_t)p;
                maps[m].len = len;
                maps[m].prot = prot;
                protect_but(m, 0);
                break;
            }
        }
    }
    return p;
}

int munmap(void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    for (int m = 0; m < MAPS; m++)
        if (maps[m].len && maps[m].addr < a + len && a < maps[m].addr + maps[m].len)
            maps[m].len = 0;
    return (int)syscall(SYS_munmap, addr, len);
}
C

# Runs $code (Perl source, after a prelude of strict, warnings, the module
# and $C) in a new perl whose mapping of the filter file $opt{file} stops
# it as above. At each stop the parent calls $opt{on_stop}->($pid, $n) ($n:
# the stops so far, from 1): true continues the child, false leaves it to
# the caller (who has killed it). $opt{dir} holds the shim and the script.
# Returns a hashref: { out (stdout and stderr), status (as $?), stops,
# error (a timeout), skip (why the shim could not be built) }. A child not
# done after $opt{timeout} seconds (default 300: a hang guard, not a bound)
# is killed.
sub run_stopped {
    my ($code, %opt) = @_;
    my $dir = $opt{dir} // dirname($opt{file});
    my $shim = "$dir/stopshim.so";
    if (!-e $shim) {
        spew("$dir/stopshim.c", $shim_c);
        my $out = `$Config{cc} -shared -fPIC -O1 -o $shim $dir/stopshim.c 2>&1`;
        return { skip => "cannot build the stop shim with $Config{cc}: $out" } if $?;
    }
    my $n = ++$BFStop::runs;
    my $script = "$dir/stopped-$n.pl";
    my $log = "$dir/stopped-$n.out";
    spew($script, "use strict; use warnings; use Data::BloomFilter::Shared;\n"
        . "my \$C = 'Data::BloomFilter::Shared';\n$code");
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open(STDOUT, '>', $log) or POSIX::_exit(120);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(121);
        $ENV{LD_PRELOAD} = $shim;
        $ENV{BFS_TEST_STOP_FILE} = $opt{file};
        $ENV{PERL5LIB} = perl5lib();
        exec($^X, $script) or POSIX::_exit(122);
    }
    my ($stops, $status, $error) = (0);
    my $timeout = $opt{timeout} // 300;
    my ($outer, $t0) = (alarm(0), time);    # the caller's hang guard, given back below
    my $ok = eval {
        local $SIG{ALRM} = sub { die "timeout\n" };
        alarm $timeout;
        while (1) {
            my $r = waitpid($pid, WUNTRACED);
            die "waitpid: $!\n" if $r != $pid;
            # $? is not set for a stop: the native status is.
            if (WIFSTOPPED(${^CHILD_ERROR_NATIVE})) {
                $stops++;
                kill 'CONT', $pid if $opt{on_stop}->($pid, $stops);
                next;
            }
            $status = $?;
            last;
        }
        alarm 0;
        1;
    };
    if (!$ok) {
        alarm 0;
        $error = $@ =~ /^timeout/ ? "the child was not done after $timeout s" : $@;
        kill 'KILL', $pid;
        kill 'CONT', $pid;
        waitpid($pid, 0);
        $status = $?;
    }
    alarm($outer - (time - $t0) > 0 ? $outer - (time - $t0) : 1) if $outer;
    my $out = -e $log ? slurp($log) : '';
    return { out => $out, status => $status, stops => $stops, error => $error };
}

1;
