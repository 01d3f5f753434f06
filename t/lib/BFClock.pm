package BFClock;
# A clock of the test's choosing for the module, in a child perl: a
# preloaded clock_gettime answers CLOCK_REALTIME_COARSE (the clock the module
# reads, and no other) from a file of 8 bytes of ns, which the child (or any
# process of it) rewrites as it goes; 0 there means the real time. The module
# is the real one; only the time it reads is chosen. Tests of windows use it
# so that their verdict does not depend on how fast the host runs them: time
# moves only when the test moves it, and the host's clock is not touched.
use strict;
use warnings;
use Config;
use File::Basename qw(dirname);
use Exporter 'import';
use BFTest qw(perl5lib spew);

our @EXPORT_OK = qw(with_fake_clock);

my $shim_c = <<'C';
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile const int64_t *fake;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int frozen = -1;
    static struct timespec mono;
    if (syscall(SYS_clock_gettime, id, ts) != 0)
        return -1;
    if (id == CLOCK_MONOTONIC) {
        if (frozen < 0)
            frozen = getenv("BFS_TEST_FREEZE_MONOTONIC") != NULL;
        if (frozen) {
            if (!mono.tv_sec && !mono.tv_nsec)
                mono = *ts;
            *ts = mono;
        }
        return 0;
    }
    if (id != CLOCK_REALTIME_COARSE)
        return 0;
    if (!fake) {
        const char *path = getenv("BFS_TEST_FAKE_CLOCK");
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (fd < 0)
            return 0;
        void *m = mmap(0, 8, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            return 0;
        fake = m;
    }
    int64_t ns = *fake;
    if (ns > 0) {
        ts->tv_sec = ns / 1000000000;
        ts->tv_nsec = ns % 1000000000;
    }
    return 0;
}
C

# The child's prelude: strict, warnings, the module, $C, and set_clock($ns).
my $prelude = <<'PERL';
use strict; use warnings;
use Data::BloomFilter::Shared;
my $C = 'Data::BloomFilter::Shared';
sub set_clock {
    open(my $fh, '+<:raw', $ENV{BFS_TEST_FAKE_CLOCK}) or die "clock: $!";
    syswrite($fh, pack('q<', $_[0])) == 8 or die "clock: $!";
    close $fh;
}
PERL

# Runs $code (Perl source, after the prelude above) in a new perl whose
# module reads its time from the file $clock (made, holding 0, if absent);
# the shim is built beside it. Returns (its stdout and stderr, undef) or
# (undef, why the shim could not be built) or (its output, how it failed).
#
# With freeze_monotonic => 1, CLOCK_MONOTONIC stands still in the child and
# its forks too: the module's waits for another process (a clear, a drain of
# adds in flight) then last as long as that process takes, instead of
# giving up after tens of milliseconds as they do for a stopped process. On
# a loaded host a running process can make no progress for that long, and
# the module then takes the path it documents for a stopped one; a test of
# the path where nobody is stopped freezes that clock. Only for code where
# nobody is stopped: a wait for a stopped process would never end.
sub with_fake_clock {
    my ($code, $clock, %opt) = @_;
    my $dir = dirname($clock);
    my $shim = "$dir/fakeclock.so";
    if (!-e $shim) {
        spew("$dir/fakeclock.c", $shim_c);
        my $out = `$Config{cc} -shared -fPIC -O1 -o $shim $dir/fakeclock.c 2>&1`;
        return (undef, "cannot build the clock shim with $Config{cc}: $out") if $?;
    }
    spew($clock, pack 'q<', 0) if !-e $clock;
    (my $script = $clock) =~ s/\z/-child.pl/;
    spew($script, $prelude . $code);
    local $ENV{LD_PRELOAD} = $shim;
    local $ENV{BFS_TEST_FAKE_CLOCK} = $clock;
    local $ENV{BFS_TEST_FREEZE_MONOTONIC} = 1 if $opt{freeze_monotonic};
    local $ENV{PERL5LIB} = perl5lib();
    my $out = `$^X $script 2>&1`;
    return ($out, $? ? "the child exited $?: $out" : undef);
}

1;
