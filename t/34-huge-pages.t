# A filter in shared memory (anonymous or a memfd) whose bit array is 4 MiB
# or more asks the kernel for transparent huge pages, as the README and the
# manual say: with /sys/kernel/mm/transparent_hugepage/shmem_enabled set to
# "advise", its bits are mapped by 2 MiB pages; set to "never", by small
# ones, and the filter works the same. The setting is the machine's: this
# test sets it (root only) and puts the old one back.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(slurp spew);
use Data::BloomFilter::Shared;

my $C       = 'Data::BloomFilter::Shared';
my $SETTING = '/sys/kernel/mm/transparent_hugepage/shmem_enabled';
plan skip_all => 'needs root (the transparent huge page setting is the machine\'s)' if $> != 0;
plan skip_all => "needs $SETTING" if !-e $SETTING;
plan skip_all => 'needs /proc/self/smaps_rollup' if !-r '/proc/self/smaps_rollup';
my ($old) = slurp($SETTING) =~ /\[(\w+)\]/ or plan skip_all => "cannot read $SETTING";
eval { spew($SETTING, "advise\n"); 1 } or plan skip_all => "$SETTING is not writable here";
END { spew($SETTING, "$old\n") if defined $old }

# KiB of shared memory this process maps with 2 MiB pages.
sub pmd_kib {
    my ($kib) = slurp('/proc/self/smaps_rollup') =~ /^ShmemPmdMapped:\s+(\d+) kB/m;
    return $kib // 0;
}

# Filters whose bit arrays (all generations, for a windowed one) are 8 MiB.
my @kinds = (
    [ 'new(undef), standard' => sub { $C->new(undef, 5_000_000, 0.01) } ],
    [ 'new_memfd, blocked'   => sub { $C->new_memfd('huge', 7_000_000, 0.01, { layout => 'blocked' }) } ],
    [ 'new(undef), windowed' => sub { $C->new(undef, 2_500_000, 0.01, { window => 3600, generations => 2 }) } ],
    [ 'deserialize into a memfd' => sub {
        my $bytes = $C->new(undef, 5_000_000, 0.01)->serialize;
        $C->deserialize($bytes, { memfd => 'copy' });
    } ],
);

# Help the kernel find 2 MiB of contiguous memory.
eval { spew('/proc/sys/vm/compact_memory', "1\n") };

for my $setting (qw(advise never)) {
    spew($SETTING, "$setting\n");
    for my $k (@kinds) {
        my ($name, $make) = @$k;
        my $before = pmd_kib();
        my $f = $make->();
        my $bits_kib = $f->bits / 8 / 1024 * ($f->generations // 1);
        cmp_ok($bits_kib, '>=', 4096, "$name: a bit array of 4 MiB or more ($bits_kib KiB)");
        my $huge = pmd_kib() - $before;
        if ($setting eq 'advise') {
            cmp_ok($huge, '>=', $bits_kib / 2,
                "$setting, $name: the bits are mapped by huge pages ($huge of $bits_kib KiB)");
        } else {
            is($huge, 0, "$setting, $name: no huge pages");
        }
        my @items = map { "item-$_" } 1 .. 1000;
        is($f->add_many(\@items), 1000, "$setting, $name: new items are new");
        is(scalar(grep { $f->contains($_) } @items), 1000, "$setting, $name: and found");
    }
}

done_testing;
