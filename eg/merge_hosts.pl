#!/usr/bin/perl
# Many hosts, one filter: build filters apart, ship their bytes, merge them.
#
# Each "host" (here a forked process; in real life another machine) builds a
# filter of its own part of a data set with the same capacity, fp_rate and
# shared secret seed, and writes `serialize` bytes to a file, as it would
# ship them over the network. A collector deserializes every file, merges
# them into one filter, checks that every item of every part is present, and
# freezes the union into a file that readers open with `new_readonly`.
#
#   perl -Mblib eg/merge_hosts.pl [hosts [items-per-host [dir]]]
#
# (after perl Makefile.PL && make). dir defaults to a temporary directory.
use strict;
use warnings;
use Data::BloomFilter::Shared;
use File::Temp qw(tempdir);
use POSIX ();

my $hosts = shift // 4;
my $per_host = shift // 50_000;
my $dir = shift // tempdir(CLEANUP => 1);
die "usage: $0 [hosts [items-per-host [dir]]]\n"
    if $hosts !~ /\A[1-9][0-9]*\z/ || $per_host !~ /\A[1-9][0-9]*\z/ || !-d $dir;

my $C = 'Data::BloomFilter::Shared';
$| = 1;    # nothing buffered at fork time; each process's lines appear whole

# Every filter that will be merged must agree on these three. The seed is a
# secret shared by the hosts (from configuration in practice): it makes the
# probe positions unpredictable to whoever chooses the items.
my $capacity = $hosts * $per_host;    # sized for the union, not one part
my $fp_rate = 0.01;
my $seed = $ENV{BLOOM_SEED} // do {
    open(my $rnd, '<:raw', '/dev/urandom') or die "/dev/urandom: $!";
    read($rnd, my $b, 8) == 8 or die "/dev/urandom: short read";
    unpack 'Q<', $b;
};

# Host $h owns every item whose number is $h modulo $hosts.
sub part {
    my ($h) = @_;
    return map { "user:" . ($h + $hosts * $_) } 0 .. $per_host - 1;
}

# --- on each host: build, serialize, ship -------------------------------------------------
my @pids;
for my $h (0 .. $hosts - 1) {
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my $f = $C->new(undef, $capacity, $fp_rate, { seed => $seed });
        $f->add_many([part($h)]);
        my $bytes = $f->serialize;
        # Write under a temporary name and rename: the collector never sees
        # half a file. The name says what it holds: serialized bytes, which
        # `deserialize` (or `bloomfilter-shared import`) turns into a filter,
        # not a filter file that `new` opens.
        my $file = "$dir/host-$h.bytes";
        open(my $fh, '>:raw', "$file.tmp") or die "$file.tmp: $!";
        print {$fh} $bytes or die "$file.tmp: $!";
        close $fh or die "$file.tmp: $!";
        rename "$file.tmp", $file or die "rename $file: $!";
        printf "host %d: %d items, shipped %d bytes as %s\n", $h, $per_host, length $bytes, $file;
        POSIX::_exit(0);
    }
    push @pids, $pid;
}
for my $pid (@pids) {
    waitpid($pid, 0);
    die "a host failed (status $?)\n" if $?;
}

# --- on the collector: receive, deserialize, merge ----------------------------------------------
my $union = $C->new(undef, $capacity, $fp_rate, { seed => $seed });
for my $h (0 .. $hosts - 1) {
    my $file = "$dir/host-$h.bytes";
    my $bytes = do {
        open(my $fh, '<:raw', $file) or die "$file: $!";
        local $/;
        <$fh>;
    };
    # The bytes come from the network: deserialize checks every field, the
    # length and the checksum, and croaks on anything wrong.
    my $part = $C->deserialize($bytes);
    $union->merge($part);    # croaks unless geometry and seed match
}

my ($present, $total) = (0, 0);
for my $h (0 .. $hosts - 1) {
    my @items = part($h);
    $present += $union->contains_many(\@items);
    $total += @items;
}
die "merged filter misses " . ($total - $present) . " of $total items\n"
    if $present != $total;
printf "merged %d filters: %d of %d items present\n", $hosts, $present, $total;
printf "union count: %d (estimated from %d of %d bits set; true %d)\n",
    $union->count, $union->bits_set, $union->bits, $total;
my @absent = map { "nobody:$_" } 1 .. 10_000;
my $fp = $union->contains_many(\@absent);
printf "false positives: %d of %d absent items (%.2f%%; sized for %.2f%%)\n",
    $fp, scalar @absent, 100 * $fp / @absent, 100 * $fp_rate;

# A filter built without the secret cannot be merged in.
{
    my $stranger = $C->new(undef, $capacity, $fp_rate);
    eval { $union->merge($stranger); 1 } and die "a filter of another seed was merged\n";
    print "refused a filter of another seed: $@";
}

# --- freeze the union into a file for readers ------------------------------------------------
my $frozen = "$dir/union.bloom";
{
    my $file = $C->deserialize($union->serialize, { path => $frozen, mode => 0644 });
    $file->freeze;
}
printf "frozen into %s (%d bytes)\n", $frozen, -s $frozen;

# A reader (any process, even on a read-only file system) maps it PROT_READ.
my $pid = fork // die "fork: $!";
if ($pid == 0) {
    my $ro = $C->new_readonly($frozen);
    my $found = 0;
    $found += $ro->contains_many([part($_)]) for 0 .. $hosts - 1;
    printf "reader %d: new_readonly: readonly=%d frozen=%d, found %d of %d items\n",
        $$, $ro->readonly, $ro->frozen, $found, $total;
    POSIX::_exit($found == $total ? 0 : 1);
}
waitpid($pid, 0);
die "the reader failed (status $?)\n" if $?;
