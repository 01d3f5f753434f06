# "The same filter" (a merge or intersect with itself is a no-op) means the
# same mapped object: the same file by device and inode, the same memfd, the
# same anonymous region. A copy of a file is another filter, although its
# bytes (and the id stored in them) are the same.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use File::Copy qw(copy);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my @orig = map { "orig-$_" } 1 .. 200;
my @more = map { "copy-only-$_" } 1 .. 200;

sub present { my ($f, $items) = @_; return scalar $f->contains_many($items) }

# merge of a copy into its original
{
    my $a = $C->new("$dir/a.bf", 10_000, 0.01);
    $a->add_many(\@orig);
    $a->sync;
    copy("$dir/a.bf", "$dir/b.bf") or die "copy: $!";
    my $b = $C->new("$dir/b.bf", 10_000, 0.01);
    is(present($b, \@orig), 200, 'the copy holds the original\'s items');
    $b->add_many(\@more);
    is(present($a, \@more), 0, 'items added to the copy are not in the original (before merge)');
    ok($a->merge($b), 'merge of the copy into the original');
    is(present($a, \@more), 200, '... brings in every item added to the copy');
    is(present($a, \@orig), 200, '... and keeps the original\'s');
    is($C->new("$dir/a.bf", 10_000, 0.01)->bits_set, $a->bits_set, '... in the file itself');
}

# The command-line tool's merge of a copy (cp) into its original.
{
    my $a = $C->new("$dir/cli-a.bf", 10_000, 0.01);
    $a->add_many(\@orig);
    $a->sync;
    copy("$dir/cli-a.bf", "$dir/cli-b.bf") or die "copy: $!";
    $C->new("$dir/cli-b.bf", 10_000, 0.01)->add_many(\@more);
    local $ENV{PERL5LIB} = perl5lib();
    my $cli = "$FindBin::Bin/../blib/script/bloomfilter-shared";
    system($^X, $cli, 'merge', "$dir/cli-a.bf", "$dir/cli-b.bf");
    is($?, 0, 'bloomfilter-shared merge ORIGINAL COPY exits 0');
    is(present($a, \@more), 200, '... and the original has every item added to the copy');
}

# intersect with a copy that was cleared
{
    my $a = $C->new("$dir/c.bf", 10_000, 0.01);
    $a->add_many(\@orig);
    $a->sync;
    copy("$dir/c.bf", "$dir/d.bf") or die "copy: $!";
    my $d = $C->new("$dir/d.bf", 10_000, 0.01);
    $d->clear;
    $d->add_many([@orig[0 .. 9]]);
    ok($a->intersect($d), 'intersect with a copy that was cleared and refilled with 10 items');
    is(present($a, [@orig[0 .. 9]]), 10, '... keeps the items both have');
    cmp_ok(present($a, \@orig), '<', 20, '... and drops (nearly) all the others');
    is($a->bits_set, $d->bits_set, '... leaving exactly the copy\'s bits');
}

# Two handles of one file, a memfd and its descriptor, an anonymous filter
# and itself: the same filter, whichever way reached.
{
    my $p = "$dir/e.bf";
    my $h1 = $C->new($p, 10_000, 0.01);
    $h1->add_many(\@orig);
    my $h2 = $C->new($p, 10_000, 0.01);
    my $bits = $h1->bits_set;
    ok($h1->merge($h2) && $h1->intersect($h2), 'merge and intersect with a second handle of the same file');
    is($h1->bits_set, $bits, '... leave it as it was');
    open(my $fh, '<', $p) or die;
    my $ro = $C->new_from_fd($fh);
    ok($h1->merge($ro) && $h1->intersect($ro), 'and with a read-only handle of it');
    is($h1->bits_set, $bits, '... too');

    my $m = $C->new_memfd('same', 10_000, 0.01);
    $m->add_many(\@orig);
    my $m2 = $C->new_from_fd($m->memfd);
    ok($m->merge($m2) && $m->intersect($m2), 'a memfd with a handle made from its descriptor');
    is($m->bits_set, $bits, '... unchanged');
    my $other = $C->new_memfd('same', 10_000, 0.01);
    ok($other->merge($m), 'a different memfd merges');
    is($other->bits_set, $bits, '... all of it');

    my $anon = $C->new(undef, 10_000, 0.01);
    $anon->add_many(\@orig);
    ok($anon->merge($anon) && $anon->intersect($anon), 'an anonymous filter with itself');
    is($anon->bits_set, $bits, '... unchanged');
    my $anon2 = $C->new(undef, 10_000, 0.01);
    $anon2->add('z');
    ok($anon2->intersect($anon), 'another anonymous filter is not the same one');
    cmp_ok($anon2->bits_set, '<', 7, '... and the intersection took effect');
}

done_testing;
