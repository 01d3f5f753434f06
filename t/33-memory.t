# Memory follows what is really there: a tied array that claims 2**31-1
# elements is fetched as it goes (no n x 16 bytes up front), and a serialize
# whose string cannot be allocated croaks instead of ending the process with
# "Out of memory!". Both run in children under a real RLIMIT_AS (ulimit -v).
use strict;
use warnings;
use Test::More;
use Data::BloomFilter::Shared;

plan skip_all => 'needs /proc/self/status' if !-r '/proc/self/status';

# Run perl code in a child limited to $kib KiB of address space; its output.
sub limited {
    my ($kib, $code) = @_;
    my @inc = map { "-I$_" } grep { !ref } @INC;
    open my $fh, '-|', 'sh', '-c', 'ulimit -v "$0" && exec "$@" 2>&1', $kib,
        $^X, @inc, '-MData::BloomFilter::Shared', '-e', $code
        or die "sh: $!";
    my $out = do { local $/; <$fh> };
    close $fh;
    return ($? >> 8, $out);
}

sub vm_size_kib {
    my ($code) = @_;
    my ($st, $out) = limited('unlimited', $code . ';
        open my $s, "<", "/proc/self/status" or die; /^VmSize:\s+(\d+)/ and print "$1\n" while <$s>;');
    die "measuring: $out" if $st || $out !~ /^(\d+)$/m;
    return $1;
}

my $TIED = <<'PERL';
package Huge;
sub TIEARRAY { bless { real => $_[1] }, $_[0] }
sub FETCHSIZE { 2**31 - 1 }
sub FETCH { $_[1] < $_[0]{real} ? "item$_[1]" : undef }
package main;
my $f = Data::BloomFilter::Shared->new(undef, 1000, 0.01);
PERL

# 2**31-1 slices of 16 bytes are 32 GiB: far beyond this limit.
my $base = vm_size_kib($TIED);
my $limit = $base + 256 * 1024;
for my $m (qw(add_many contains_many)) {
    for my $real (0, 5) {
        my ($st, $out) = limited($limit, $TIED . qq{
            tie my \@a, 'Huge', $real;
            eval { \$f->$m(\\\@a); 1 } and print "no croak\\n";
            print "croaked: \$\@";
            print "bits set: ", \$f->bits_set, "\\n";
        });
        is($st, 0, "$m of a tied array claiming 2**31-1 ($real real): the process lives") or diag($out);
        like($out, qr/croaked: Data::BloomFilter::Shared->$m: undefined item at index $real /,
            '... and croaks at the first missing element');
        like($out, qr/bits set: 0$/m, '... having added nothing');
    }
}

# A filter of 2**31 bits (256 MiB) is mapped, but its 256 MiB string is not
# allowed on top.
my $BIG = 'my $f = Data::BloomFilter::Shared->new(undef, 2**30, 0.5); $f->add("x");';
my $big_base = vm_size_kib($BIG);
my ($st, $out) = limited($big_base + 64 * 1024, $BIG . q{
    my $s = eval { $f->serialize };
    print defined $s ? "serialized\n" : "croaked: $@";
    my $small = Data::BloomFilter::Shared->new(undef, 100, 0.01);
    print "still working: ", length($small->serialize), "\n";
});
is($st, 0, 'serialize beyond the address-space limit: the process lives') or diag($out);
like($out, qr/croaked: Data::BloomFilter::Shared->serialize: cannot allocate 268435520 bytes for the serialized filter/,
    '... and croaks saying so');
like($out, qr/still working: \d+/, '... and goes on working');

done_testing;
