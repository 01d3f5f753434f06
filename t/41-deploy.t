use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use File::Spec;
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(slurp spew readable_build for_each_layout);
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

# Adders of the same items at once, in the deployments where a process
# cannot see the others: /proc mounted hidepid=2 with two users, /proc not
# mounted, each adder in its own PID namespace. No item may be told new
# twice, and none may be lost. Everything is real: mount namespaces, a
# hidepid /proc, setpriv to other uids, unshare --pid. On the standard and
# the blocked layouts (the parent makes the file; the adders open it as it
# is).

plan skip_all => 'needs root (mount namespaces, setpriv)' if $> != 0;
for my $tool (qw(unshare setpriv)) {
    plan skip_all => "needs $tool" unless grep { -x "$_/$tool" } File::Spec->path;
}
system('unshare -m true 2>/dev/null') == 0 or plan skip_all => 'unshare -m is not permitted here';

my $N = 300_000;
my $dir = tempdir(CLEANUP => 1);
chmod 0777, $dir;

# The built module, copied where other uids can read it; the adders get
# only that copy (the build directory may be private).
my ($blib) = readable_build($dir);
delete $ENV{PERL5LIB};

# One adder: opens the filter, waits for the start signal, adds every item
# in order and writes one bit per item it was told was new.
spew("$dir/adder.pl", <<'PERL');
use strict;
use warnings;
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';
my ($path, $n, $out, $go) = @ARGV;
my $f = Data::BloomFilter::Shared->new($path, $n, 0.01);
$f->add("warm-up $$");    # claim a slot before the race
open(my $ready, '>', "$out.ready") or die "$out.ready: $!";    # says so
close $ready;
select(undef, undef, undef, 0.002) until -e $go;
my $bits = "\0" x (($n + 7) >> 3);
for my $i (0 .. $n - 1) {
    vec($bits, $i, 1) = 1 if $f->add("item-$i");
}
open(my $fh, '>:raw', "$out.tmp") or die "$out: $!";
print $fh $bits;
close $fh or die "$out: $!";
rename "$out.tmp", $out or die "$out: $!";
PERL
chmod 0644, "$dir/adder.pl";

# Run a race on a filter of $layout: $prefix->($i) gives the command words
# that run adder $i.
sub race {
    my ($layout, $name, $procs, $outer, $prefix) = @_;
    my $case = "$dir/$layout-$name";
    mkdir $case;
    chmod 0777, $case;
    my $path = "$case/f.bf";
    {
        my $f = Data::BloomFilter::Shared->new($path, 2 * $N, 0.01, 0666);
    }
    chmod 0666, $path;
    my $go = "$case/go";
    my @adders = map {
        join ' ', $prefix->($_), $^X, "-I$blib", "$dir/adder.pl", $path, $N, "$case/out$_", $go
    } 1 .. $procs;
    # All adders start in the background, inside the outer setting, a few
    # clock ticks apart (so that no two share a start time); the start file
    # is made once all have opened the filter and claimed a slot (each says
    # so with a file of its own), however long a busy host takes to start
    # them.
    my $script = join "\n",
        (map { "$_ &\nsleep 0.05" } @adders),
        # (300 s: a hang guard for an adder that died, not a bound)
        'n=0',
        'until ' . join(' && ', map {"[ -e $case/out$_.ready ]"} 1 .. $procs)
            . '; do n=$((n + 1)); [ $n -gt 30000 ] && break; sleep 0.01; done',
        "touch $go", 'wait', '';
    spew("$case/run.sh", $script);
    my $rc = system(@$outer, 'sh', "$case/run.sh");
    is($rc, 0, "$name: every adder exited normally") or return;
    my @outs = map { slurp("$case/out$_") } 1 .. $procs;
    my ($twice, $new) = (0, 0);
    my $seen = "\0" x length $outs[0];
    for my $o (@outs) {
        $twice += unpack('%32b*', $seen & $o);
        $new += unpack('%32b*', $o);
        $seen |= $o;
    }
    is($twice, 0, "$name: no item told new twice ($new told new over $procs adders)");
    my $f = Data::BloomFilter::Shared->new($path, 2 * $N, 0.01);
    my $lost = grep { !$f->contains("item-$_") } 0 .. $N - 1;
    is($lost, 0, "$name: no item lost");
    cmp_ok($new, '>', $N * 0.98, "$name: the items were new to someone");
}

# The same races on each layout (t/lib/BFTest.pm, for_each_layout).
for_each_layout([qw(standard blocked)], sub {
    my ($layout) = @_;

    # /proc remounted hidepid=2 in a private mount namespace; adders of two
    # users (neither root, so neither sees the other's processes).
    SKIP: {
        my $ok = system(q{unshare -m sh -c 'mount -t proc -o hidepid=2 proc /proc' 2>/dev/null}) == 0;
        skip 'cannot mount /proc with hidepid=2 here', 4 unless $ok;
        race($layout, 'hidepid', 6,
            [qw(unshare -m --propagation private sh -c), 'mount -t proc -o hidepid=2 proc /proc && exec "$@"', 'sh'],
            sub { my $uid = $_[0] % 2 ? 65534 : 65533; ("setpriv --reuid=$uid --regid=$uid --clear-groups") });
    }

    # No /proc at all.
    race($layout, 'no-proc', 6, [qw(unshare -m --propagation private sh -c), 'umount -l /proc && exec "$@"', 'sh'], sub { () });

    # Each adder in its own PID namespace (so each is pid 1 there), sharing
    # one file: containers sharing /dev/shm.
    race($layout, 'pid-namespaces', 6, [], sub { ('unshare --pid --fork --mount-proc') });
});

done_testing;
