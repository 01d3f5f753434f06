# Opening a filter reads the header, the control line and the stage table,
# never the bit array (doc/DESIGN.md, §5): a writer who sets a grown file's
# `stages` word (offset 156) to 32 and extends the file sparsely makes no
# opener read a hole. Shown on tmpfs, where a page read from a hole is
# allocated and stays with the file after the reader exits: the file's
# allocated blocks (st_blocks) are the same after each open as before it.
# The stage count is believed as far as the file's size backs it; on a
# file too short for it the open croaks. The reopen warning still names
# the first stage's capacity. Both layouts.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $fs = `stat -f -c %T /dev/shm 2>/dev/null` // '';
plan skip_all => "needs /dev/shm on tmpfs (it is '$fs')" if $fs !~ /^tmpfs\s*$/;
my $dir = tempdir(DIR => '/dev/shm', CLEANUP => 1);

sub blocks { (stat $_[0])[12] }

# Set the stages word of the file at $path to $n (native order, as the
# module writes it).
sub forge_stages {
    my ($path, $n) = @_;
    open(my $fh, '+<:raw', $path) or die "$path: $!";
    sysseek($fh, 156, 0) or die "seek: $!";
    syswrite($fh, pack('L', $n)) == 4 or die "write: $!";
    close $fh or die "close: $!";
}

# Extend the file at $path sparsely until it covers its published stages:
# each attach that finds it too short names the size the stages need. The
# attaches go through a read-only descriptor, which no version of the
# module reads the bits of at attach. Returns the number of extensions.
sub extend_sparsely {
    my ($path) = @_;
    for my $round (1 .. 40) {
        open(my $fh, '<:raw', $path) or die "$path: $!";
        my $f = eval { $C->new_from_fd($fh) };
        return $round - 1 if $f;
        $@ =~ /shorter than its stages \(\d+ bytes, the published stages need (\d+)\)/
            or die "unexpected: $@";
        truncate($path, $1) or die "truncate $path to $1: $!";
    }
    die "$path: still too short after 40 extensions";
}

for my $layout (qw(standard blocked)) {
    # A bound of 2^22 items keeps the forged file at 16 MiB: the holes an
    # opener that reads them would fill are then small enough to do no harm
    # on a machine running the old code.
    my %o = (layout => $layout, grow => 2, max_capacity => 2**22);
    my $p = "$dir/$layout.bf";
    my $f = $C->new($p, 1000, 0.01, \%o);
    $f->add("item$_") for 1 .. 100;
    undef $f;
    my $q = "$dir/$layout-frozen.bf";
    $f = $C->new($q, 1000, 0.01, \%o);
    $f->add("item$_") for 1 .. 100;
    $f->freeze;
    undef $f;

    forge_stages($_, 32) for $p, $q;
    my $before = blocks($p);
    my $frozen_before = blocks($q);
    # Too short for its forged stages: a clean croak, nothing read.
    my $g = eval { $C->new($p, 1000, 0.01, { grow => 2 }) };
    ok(!$g, "$layout: a forged stage count the file is too short for: new croaks");
    like($@, qr/->new: file is shorter than its stages/, "$layout: ... naming what is wrong");
    cmp_ok(extend_sparsely($p), '>', 1, "$layout: the file extended sparsely to cover its forged stages");
    extend_sparsely($q);
    my $size = -s $p;
    cmp_ok($size, '>', 16 * blocks($p) * 512, "$layout: ... sparsely ($size bytes, "
            . blocks($p) * 512 . ' allocated)');
    is(blocks($p), $before, "$layout: attaching through a read-only descriptor read no hole");

    my @warned;
    {
        local $SIG{__WARN__} = sub { push @warned, @_ };
        $g = eval { $C->new($p, 1000, 0.01, { grow => 2 }) };
    }
    ok($g, "$layout: new() of the forged file succeeds") or diag $@;
    is(blocks($p), $before, "$layout: ... and reads no hole (st_blocks unchanged)");
    cmp_ok($g->stages, '>', 1, "$layout: ... the stage count believed as far as the file backs it ("
            . $g->stages . ')');
    is("@warned", '', "$layout: ... with no warning when the capacity asked for is the first stage's");
    undef $g;

    @warned = ();
    {
        local $SIG{__WARN__} = sub { push @warned, @_ };
        $g = $C->new($p, 2000, 0.01, { grow => 2 });
    }
    is(scalar(@warned), 1, "$layout: reopened with another capacity: one warning");
    like($warned[0] // '', qr/->new: the file's capacity 1000 is kept, not the capacity 2000 asked for/,
        "$layout: ... naming the first stage's capacity, from the header");
    is(blocks($p), $before, "$layout: ... and the warning read no hole");
    undef $g;

    open(my $rw, '+<:raw', $p) or die "$p: $!";
    $g = $C->new_from_fd($rw);
    is(blocks($p), $before, "$layout: new_from_fd of a read-write descriptor reads no hole");
    undef $g;
    close $rw;

    $g = eval { $C->new_readonly($q) };
    ok($g && $g->stages > 1, "$layout: new_readonly of a forged frozen file succeeds") or diag $@;
    is(blocks($q), $frozen_before, "$layout: ... and reads no hole");
    undef $g;
}

done_testing;
