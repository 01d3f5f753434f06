#!/usr/bin/perl
# Writes the seed inputs of the fuzz targets into tests/corpus/<target>/
# (see tests/fuzz/oracles.rs for the input formats). Run from the top of a
# built tree: perl -Mblib xt/fuzz-seeds.pl
use strict;
use warnings;
use File::Temp qw(tempdir);
use File::Path qw(make_path);
use Data::BloomFilter::Shared;
use lib 't/lib';
use BFTest qw(slurp spew);

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $out = 'tests/corpus';
make_path("$out/$_") for qw(decode serial open image);


my @filters = (
    [small    => 10,         0.5,  0],
    [default  => 1000,       0.01, 0],
    [seeded   => 1000,       0.01, 12345],
    [k32      => 100,        1e-10, 0],
    [huge     => 3_000_000,  0.01, 0],    # bits on a 2 MiB boundary
    [blocked  => 1000,       0.01, 0, { layout => 'blocked' }],
    # Windowed files: the window facts follow the control line (192..216).
    ['windowed-file'    => 100, 0.01, 0, { window => 60, generations => 4 }],
    ['windowed-blocked' => 100, 0.01, 7, { window => undef, generations => 2, layout => 'blocked' }],
);
for my $spec (@filters) {
    my ($name, $cap, $rate, $seed, $opts) = @$spec;
    my $path = "$dir/$name.bf";
    my $f = $C->new($path, $cap, $rate, { seed => $seed, %{ $opts // {} } });
    $f->add_many([map { "seed-item-$_" } 1 .. 20]);
    my $size = -s $path;
    # The header as a reader takes it: immutable part, control line, window facts.
    my $head = substr(slurp($path), 0, 216);
    # decode: flags, size (u64 LE), the header.
    spew("$out/decode/$name", "\0" . pack('Q<', $size) . $head);
    # open: flags, selector (odd, delta 64: the exact size), the header.
    spew("$out/open/$name", "\0\x81" . $head);
    if ($name ne 'huge' && $name !~ /^windowed/) {
        # serial: flags, the portable bytes.
        spew("$out/serial/$name", "\0" . $f->serialize);
    }
    if ($name eq 'default') {
        $f->freeze;
        spew("$out/open/frozen", "\0\x81" . substr(slurp($path), 0, 216));
    }
}

# Windowed filters' portable bytes (version 2): timed and stepped by hand,
# both layouts, 2 to 16 generations, a step taken so that the current
# generation is not the first.
my @windowed = (
    ['windowed-timed'   => 10,  0.5, { window => 3600,  generations => 3 }],
    ['windowed-manual'  => 20,  0.1, { window => undef, generations => 2, layout => 'blocked' }],
    ['windowed-g16'     => 10,  0.5, { window => 0.001, generations => 16 }],
);
for my $spec (@windowed) {
    my ($name, $cap, $rate, $opts) = @$spec;
    my $f = $C->new(undef, $cap, $rate, $opts);
    $f->add_many([map { "seed-item-$_" } 1 .. 5]);
    $f->rotate;
    $f->add('seed-item-late');
    spew("$out/serial/$name", "\0" . $f->serialize);
}

# DataSketches images (the datasketches layout): empty, a few items, one
# hash, many hashes, an uncounted num_bits_set (2^64 - 1), and words all 0
# under a non-empty preamble (both forms DataSketches reads).
my @images = (
    ['ds-empty'  => 1000, 0.01, 9001, 0],
    ['ds-items'  => 1000, 0.01, 9001, 20],
    ['ds-k1'     => 10,   0.5,  0,    5],
    ['ds-k40'    => 50,   1e-12, 7,   5],
);
for my $spec (@images) {
    my ($name, $cap, $rate, $seed, $n) = @$spec;
    my $f = $C->new(undef, $cap, $rate, { layout => 'datasketches', seed => $seed });
    $f->add_many([map { "seed-item-$_" } 1 .. $n]);
    spew("$out/image/$name", "\0" . $f->serialize(format => 'datasketches'));
}
{
    my $f = $C->new(undef, 100, 0.01, { layout => 'datasketches' });
    $f->add('x');
    my $img = $f->serialize(format => 'datasketches');
    substr($img, 24, 8) = pack 'Q<', ~0;
    spew("$out/image/ds-uncounted", "\0" . $img);
    my $zero = substr($img, 0, 32) . ("\0" x ($f->bits / 8));
    substr($zero, 24, 8) = pack 'Q<', 0;
    spew("$out/image/ds-zero-words", "\0" . $zero);
    # An empty image of the most words: valid, its filter too large to make.
    spew("$out/image/ds-huge-empty", "\0" . pack('C C C C v v Q< l< V', 3, 1, 21, 4, 7, 0, 9001, 2**31 - 5, 0));
}
