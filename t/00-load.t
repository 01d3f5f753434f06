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

is(Data::BloomFilter::Shared->CLONE_SKIP, 0,
    'CLONE_SKIP returns 0: a new thread gets objects that say where they belong (t/43-threads.t)');

my $f = Data::BloomFilter::Shared->new(undef, 100);
isa_ok($f, 'Data::BloomFilter::Shared', 'new(undef, 100)');

# The C API's numbers and the layouts' names come from the header through
# one table in the XS; what it gives is what the header says.
my %c = Data::BloomFilter::Shared::_constants();
is_deeply([@c{qw(OK LAYOUT_DEFAULT LAYOUT_STANDARD LAYOUT_BLOCKED GENERATIONS_DEFAULT)}],
    [0, 0, 1, 2, 1], 'constants: status, layout codes, generations default');
is_deeply([@c{qw(LAYOUT_DATASKETCHES DATASKETCHES_SEED)}], [3, 9001],
    'constants: the datasketches layout code and its default seed');
is_deeply([@c{qw(ERR_ARG ERR_IO ERR_FORMAT ERR_FROZEN ERR_READONLY ERR_MISMATCH ERR_PANIC ERR_BUSY)}],
    [1 .. 8], 'constants: the error statuses');
is_deeply([@c{qw(REPLY_INCOMPLETE REPLY_INTS REPLY_ERROR REPLY_STATUS REPLY_OTHER)}],
    [0 .. 4], 'constants: the reply kinds');
is_deeply([Data::BloomFilter::Shared::_layouts()], [standard => $c{LAYOUT_STANDARD},
    blocked => $c{LAYOUT_BLOCKED}, datasketches => $c{LAYOUT_DATASKETCHES}],
    'layouts: names and codes, the default first');
for my $layout (qw(standard blocked datasketches)) {
    my $g = Data::BloomFilter::Shared->new(undef, 100, 0.01, { layout => $layout });
    is($g->layout, $layout, "layout name of a $layout filter from the table");
    is($g->stats->{layout}, $layout, '... and in stats');
}

done_testing;
