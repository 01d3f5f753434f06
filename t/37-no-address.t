use strict;
use warnings;
no warnings 'portable';    # 64-bit addresses in hex
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(_exit);
use Data::BloomFilter::Shared;
use lib 't/lib';
use BFTest qw(slurp wait_until);

# No address in the shared file (doc/DESIGN.md, C8 b): while writers hold
# their process slots and keep adding, no aligned 8-byte word of the file
# lies inside any address range (/proc/PID/maps) of any of them, for each
# layout and for a windowed filter. The scan is checked to find an address
# when one is there.

plan skip_all => 'needs /proc/PID/maps' unless -r "/proc/$$/maps";

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $WRITERS = 3;
my $SLOTS_OFF = 4096;    # process slots: 1024 x 64 bytes, the word first
my $SLOTS = 1024;

sub ranges_of {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/maps") or return;
    my @r;
    while (my $l = <$fh>) {
        push @r, [hex $1, hex $2] if $l =~ /^([0-9a-f]+)-([0-9a-f]+) /;
    }
    return @r;
}

# The aligned 8-byte words of $bytes inside one of @ranges: their offsets.
sub addresses_in {
    my ($bytes, @ranges) = @_;
    my @w = unpack 'Q<*', $bytes;
    my ($lo, $hi) = (~0, 0);
    for my $r (@ranges) {
        $lo = $r->[0] if $r->[0] < $lo;
        $hi = $r->[1] if $r->[1] > $hi;
    }
    my @hits;
    for my $i (0 .. $#w) {
        my $v = $w[$i];
        next if $v < $lo || $v >= $hi;
        for my $r (@ranges) {
            if ($v >= $r->[0] && $v < $r->[1]) {
                push @hits, sprintf('%d (0x%x)', 8 * $i, $v);
                last;
            }
        }
    }
    return @hits;
}

# The file's slots whose word is taken.
sub held_slots {
    my ($bytes) = @_;
    return scalar grep { unpack('V', substr($bytes, $SLOTS_OFF + 64 * $_, 4)) & 0x3fffffff } 0 .. $SLOTS - 1;
}

my @cases = (
    [standard        => 100_000, 0.01, {}],
    [blocked         => 100_000, 0.01, { layout => 'blocked' }],
    ['blocked, 1e-6' => 100_000, 1e-6, { layout => 'blocked' }],
    [windowed        => 10_000,  0.01, { window => 60, generations => 4 }],
);

for my $case (@cases) {
    my ($name, $cap, $fp, $opt) = @$case;
    my $path = "$dir/f.bf";
    unlink $path, "$dir/stop";
    $C->new($path, $cap, $fp, $opt);
    my @kids;
    for my $w (1 .. $WRITERS) {
        pipe(my $r, my $wr) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            alarm 60;
            my $f = $C->new($path, $cap, $fp, $opt);
            $f->add("w$w-0");
            syswrite $wr, "ready\n";
            my $i = 0;
            until (-e "$dir/stop") {
                $f->add("w$w-" . ++$i);
                $f->clear if $w == 1 && $i % 500 == 0;
                select(undef, undef, undef, 0.001) if $i % 50 == 0;    # leave the scanner a core
            }
            _exit(0);
        }
        close $wr;
        my $line = <$r>;
        is($line, "ready\n", "$name: writer $w holds its slot");
        push @kids, $pid;
    }
    my @ranges = map { ranges_of($_) } $$, @kids;
    cmp_ok(scalar @ranges, '>', 10, "$name: the writers' address ranges read");
    my @found;
    my $held = 0;
    for my $scan (1 .. 10) {
        my $bytes = slurp($path);
        my $h = held_slots($bytes);
        $held = $h if $h > $held;
        push @found, addresses_in($bytes, @ranges);
    }
    cmp_ok($held, '>=', $WRITERS, "$name: the scanned file had the writers' slots held");
    is_deeply(\@found, [], "$name: no word of the file is an address of a writer or of this process");
    open(my $t, '>', "$dir/stop") or die "stop: $!";
    close $t;
    for my $pid (@kids) {
        waitpid($pid, 0);
        is($?, 0, "$name: writer $pid ended normally");
    }
}

# The scan finds an address when there is one: a heap and a stack address
# of this process, planted in a copy of a file's bytes.
{
    my $bytes = slurp("$dir/f.bf");
    my @ranges = ranges_of($$);
    my ($stack) = grep { $_->[1] - $_->[0] > 4096 } @ranges;
    my $planted = $bytes;
    substr($planted, $SLOTS_OFF + 8, 8) = pack('Q<', $stack->[0] + 24);
    is_deeply([addresses_in($bytes, @ranges)], [], 'the file as written: no address');
    is(scalar(() = addresses_in($planted, @ranges)), 1, 'one planted address: found');
}

done_testing;
