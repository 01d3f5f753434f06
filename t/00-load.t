use strict;
use warnings;
use Test::More;

BEGIN { use_ok('Data::BloomFilter::Shared') or BAIL_OUT('cannot load Data::BloomFilter::Shared') }

my $v = Data::BloomFilter::Shared->VERSION;
ok(defined $v && length $v, 'VERSION is defined');
like($v // '', qr/^\d+\.\d+/, 'VERSION looks like a version number');
diag("Data::BloomFilter::Shared $v, Perl $], $^O");

for my $m (qw(new new_memfd new_from_fd new_readonly deserialize
              add add_many contains contains_many merge intersect invert
              is_compatible clear freeze capacity fp_rate bits hashes seed
              count bits_set fill_ratio estimated_fpp is_empty frozen readonly
              path memfd sync unlink stats serialize DESTROY CLONE_SKIP)) {
    can_ok('Data::BloomFilter::Shared', $m);
}

is(Data::BloomFilter::Shared->CLONE_SKIP, 1, 'CLONE_SKIP returns 1');

my $f = Data::BloomFilter::Shared->new(undef, 100);
isa_ok($f, 'Data::BloomFilter::Shared', 'new(undef, 100)');

done_testing;
