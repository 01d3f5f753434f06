# What the manual says of a memory limit (new_memfd): a filter in shared
# memory is reserved when it is created, and one the process's memory
# cgroup has no room for croaks in `new`, before anything is reserved,
# rather than bringing the kernel's OOM killer; one that fits is created
# and works. A real memory cgroup (v1 or v2, root only) of 64 MiB, and
# children in it (t/39-memory-room.t has the other creators).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child child_status_text spew);
use Data::BloomFilter::Shared;

plan skip_all => 'needs root (a memory cgroup)' if $> != 0;

my $LIMIT = 64 << 20;
my ($dir, $limit_file, $procs);
if (-e '/sys/fs/cgroup/cgroup.controllers') {    # v2
    my $root = '/sys/fs/cgroup';
    plan skip_all => 'cgroup v2 without the memory controller'
        if do { open my $fh, '<', "$root/cgroup.controllers" or die; local $/; <$fh> } !~ /\bmemory\b/;
    ($dir, $limit_file) = ("$root/bfs-test-$$", 'memory.max');
} elsif (-d '/sys/fs/cgroup/memory') {           # v1
    ($dir, $limit_file) = ("/sys/fs/cgroup/memory/bfs-test-$$", 'memory.limit_in_bytes');
} else {
    plan skip_all => 'no memory cgroup';
}
mkdir $dir or plan skip_all => "cannot make a cgroup: $!";
END { rmdir $dir if defined $dir }
eval { spew("$dir/$limit_file", "$LIMIT\n"); 1 } or plan skip_all => "cannot set a memory limit: $@";
eval { spew("$dir/memory.swap.max", "0\n") } if $limit_file eq 'memory.max';

# Run `$code` in a child moved into the cgroup (`in_child`'s result).
sub in_cgroup {
    my ($code) = @_;
    return in_child(sub { spew("$dir/cgroup.procs", "$$\n"); $code->() }, 120);
}

my $r = in_cgroup(sub {
    my $f = Data::BloomFilter::Shared->new(undef, 10_000_000, 0.01);
    $f->add("x$_") for 1 .. 1000;
    return 'ok ' . $f->contains('x7');
});
is($r->{status}, 0, 'a 16 MiB filter under a 64 MiB memory limit is created') or diag child_status_text($r);
is($r->{out}, 'ok 1', 'and works');

$r = in_cgroup(sub {
    my $f = eval { Data::BloomFilter::Shared->new(undef, 200_000_000, 0.01) };
    return $f ? 'created' : "croaked: $@";
});
is($r->{signal}, 0, 'a 256 MiB filter under a 64 MiB memory limit: the process lives')
    or diag child_status_text($r);
like($r->{out}, qr/^croaked: Data::BloomFilter::Shared->new: the filter needs \d+ bytes \(258 MiB\), but the memory cgroup allows [\d.]+ MiB more/,
    'new croaks, naming the cgroup');

done_testing;
