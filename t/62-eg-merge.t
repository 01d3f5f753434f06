# eg/merge_hosts.pl runs and does what it says: hosts ship seeded filters as
# bytes, the collector merges them, every item is present, and the frozen
# union opens with new_readonly.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $script = "$FindBin::Bin/../eg/merge_hosts.pl";
my $dir = tempdir(CLEANUP => 1);
my ($hosts, $per_host) = (3, 2000);
my $total = $hosts * $per_host;
my $seed = '18446744073709551557';    # the largest prime below 2**64

ok(-f $script, 'eg/merge_hosts.pl exists');

# Run it with the module this test uses, the secret in BLOOM_SEED, and
# stderr kept apart.
my $errfile = "$dir/stderr.txt";
my $pid = open(my $out, '-|') // die "fork: $!";
if (!$pid) {
    $ENV{PERL5LIB} = perl5lib();
    $ENV{BLOOM_SEED} = $seed;
    open(STDERR, '>', $errfile) or die "$errfile: $!";
    exec $^X, $script, $hosts, $per_host, $dir;
    die "exec: $!";
}
my @lines = <$out>;
close $out;
my $status = $?;
my $stderr = do { local $/; open(my $fh, '<', $errfile) or die "$errfile: $!"; <$fh> // '' };
is($status, 0, 'the example exits 0') or diag("stdout:\n@lines\nstderr:\n$stderr");
is($stderr, '', 'and writes nothing to stderr');
my $text = join '', @lines;

# The hosts' shipped files: one per host, each the serialized size of the
# union's geometry, carrying the shared seed and exactly its own part.
my $size = $C->new(undef, $total, 0.01)->bits / 8 + 64;
for my $h (0 .. $hosts - 1) {
    my $file = "$dir/host-$h.bytes";
    like($text, qr/^host $h: $per_host items, shipped $size bytes as \Q$file\E$/m, "host $h reports its shipment");
    is(-s $file, $size, "host $h: the file has the serialized size");
    my $bytes = do { open(my $fh, '<:raw', $file) or die "$file: $!"; local $/; <$fh> };
    my $f = $C->deserialize($bytes);
    is($f->seed . '', $seed, "host $h: built with the shared seed");
    my @own = map { 'user:' . ($h + $hosts * $_) } 0 .. $per_host - 1;
    is(scalar $f->contains_many(\@own), $per_host, "host $h: has every item of its part");
    my @other = map { 'user:' . (($h + 1) % $hosts + $hosts * $_) } 0 .. $per_host - 1;
    cmp_ok(scalar $f->contains_many(\@other), '<', $per_host / 10, "host $h: not the other parts");
}

is_deeply([map { s{\A\Q$dir\E/}{}r } sort glob "$dir/host-*"],
    [map { "host-$_.bytes" } 0 .. $hosts - 1],
    'the shipped files are named *.bytes (serialized bytes, not filter files)');

like($text, qr/^merged $hosts filters: $total of $total items present$/m, 'the union has every item');
my ($count) = $text =~ /^union count: (\d+) \(estimated from \d+ of \d+ bits set; true $total\)$/m;
ok(defined $count, 'the union count is printed');
cmp_ok(abs(($count // 0) - $total), '<', $total * 0.05, "the union count ($count) is within 5% of $total");
like($text, qr/^false positives: \d+ of 10000 absent items/m, 'the false-positive check is printed');
like($text, qr/^refused a filter of another seed: Data::BloomFilter::Shared->merge: seed mismatch/m,
    'a filter of another seed is refused');

my $frozen = "$dir/union.bloom";
like($text, qr/^frozen into \Q$frozen\E \(\d+ bytes\)$/m, 'the frozen file is announced');
like($text, qr/^reader \d+: new_readonly: readonly=1 frozen=1, found $total of $total items$/m,
    'the reader finds every item through new_readonly');
my $ro = $C->new_readonly($frozen);
ok($ro->frozen, 'the union file is frozen');
is($ro->seed . '', $seed, 'the union file keeps the seed');
is(sprintf('%04o', (stat $frozen)[2] & 07777), '0644', 'the union file has the mode the example asked for');
my @all = map { "user:$_" } 0 .. $total - 1;
is(scalar $ro->contains_many(\@all), $total, 'the union file holds every item of every part');

done_testing;
