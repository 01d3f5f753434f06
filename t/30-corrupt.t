# Damaged contents and bytes: every open croaks naming its method, in a child
# that must exit normally (never by a signal, never hang); a refused file is
# left as it was. deserialize treats its input as hostile. (Single flipped
# bytes, wrong sizes, non-regular files and other users' files are
# t/31-hostile.t's.)
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child child_status_text slurp spew);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
srand(20240601);

# Header layout (src/shm/format.rs): the format version (u32) at byte 8; a
# control line at 128..192.
my $VERSION_OFF = 8;

my $good_path = "$dir/good.bf";
{
    my $f = $C->new($good_path, 1000, 0.01);
    $f->add_many([map { "g$_" } 1 .. 200]);
}
my $good = slurp($good_path);
my $total = length $good;
cmp_ok($total, '>', 4096, "a valid filter file ($total bytes)");


# Open $path with $ctor in a child. Returns (result hash, what happened).
sub try_open {
    my ($ctor, $path, $timeout) = @_;
    return in_child(sub {
        my $f = eval {
            $ctor eq 'new'          ? $C->new($path, 1000, 0.01)
          : $ctor eq 'new_readonly' ? $C->new_readonly($path)
          : do {
                open(my $fh, '+<', $path) or die "open: $!";
                $C->new_from_fd(fileno $fh);
            };
        };
        return "CROAKED $@" unless $f;
        # It opened: it must also work.
        $f->add('probe-after-open') unless $f->readonly;
        my $c = $f->contains('probe-after-open');
        return "OPENED contains=$c";
    }, $timeout // 10);
}

sub must_croak {
    my ($name, $bytes, @ctors) = @_;
    @ctors = qw(new new_readonly new_from_fd) unless @ctors;
    my $path = "$dir/case.bf";
    spew($path, $bytes);
    for my $ctor (@ctors) {
        my $res = try_open($ctor, $path);
        ok(!$res->{signal} && !$res->{timed_out} && $res->{exit} == 0,
            "$name: $ctor child exited normally") or diag(child_status_text($res));
        like($res->{out}, qr/^CROAKED .*->$ctor: /s, "$name: $ctor croaks naming $ctor")
            or diag($res->{out});
    }
    is(slurp($path), $bytes, "$name: the refused file was not modified");
}

# Files of the right size whose contents are not a filter's.
must_croak('a page of zeros (header-only, never initialised)', "\0" x 4096);
must_croak('full size of zeros', "\0" x $total);

# --- contents ---------------------------------------------------------------------------------
{
    for my $v (0, 1, 2, 4, 5, 255) {
        my $c = $good;
        substr($c, $VERSION_OFF, 4) = pack('V', $v);
        must_croak("version $v", $c);
    }
    my $garbage = join '', map { chr int rand 256 } 1 .. $total;
    must_croak('random garbage of a filter\'s size', $garbage);
    must_croak('random garbage of one page', substr($garbage, 0, 4096));
    must_croak('a text file', "hello, world\n" x 1000);
    my $shifted = "\0" . substr($good, 0, $total - 1);
    must_croak('valid bytes shifted by one', $shifted);
}

# Junk in the mutable parts (control line, process slots, stripes): opening
# and adding must neither crash nor hang, whatever the verdict.
{
    my $path = "$dir/mutable.bf";
    my @cases;
    {
        my $b = $good;
        substr($b, 128, 64) = "\xFF" x 64;
        push @cases, ['control line all ones', $b];
    }
    for my $fill ("\xFF", "\x7F", "\x01") {
        my $b = $good;
        my $end = $total - 2048;    # the bit array of this filter is its last 2048 bytes
        substr($b, 4096, $end - 4096) = $fill x ($end - 4096);
        push @cases, [sprintf('slots and stripes filled with 0x%02X', ord $fill), $b];
    }
    for my $case (@cases) {
        my ($name, $bytes) = @$case;
        spew($path, $bytes);
        my $res = try_open('new', $path, 15);
        ok(!$res->{signal} && !$res->{timed_out} && $res->{exit} == 0, "$name: opener exited normally")
            or diag(child_status_text($res));
        like($res->{out}, qr/^(OPENED contains=1|CROAKED .*->new: )/s, "$name: opened and worked, or croaked naming new")
            or diag($res->{out});
    }
}

# --- deserialize of hostile bytes ----------------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    $f->add_many([map { "s$_" } 1 .. 300]);
    my $ser = $f->serialize;
    my $len = length $ser;
    ok($C->deserialize($ser), 'valid bytes deserialize');

    my @fail;
    my $check = sub {
        my ($name, $bytes) = @_;
        my $d = eval { $C->deserialize($bytes) };
        push @fail, "$name: accepted" if $d;
        push @fail, "$name: $@" if !$d && $@ !~ /->deserialize: /;
    };
    $check->("truncated to $_", substr($ser, 0, $_)) for 0 .. ($len < 200 ? $len - 1 : 199);
    $check->("truncated to $_", substr($ser, 0, $_)) for $len - 9 .. $len - 1, int($len / 2);
    $check->('one byte appended', $ser . "\0");
    $check->('a page appended', $ser . ("\0" x 4096));
    my $hdr = $len - 2048 > 0 ? $len - 2048 : 64;    # bytes before the bit array
    $hdr = 256 if $hdr > 256;
    for my $off (0 .. $hdr - 1) {
        my $b = $ser;
        substr($b, $off, 1) = chr(ord(substr($b, $off, 1)) ^ 0xFF);
        $check->("header byte $off flipped", $b);
    }
    for my $i (1 .. 50) {
        my $off = int rand $len;
        my $b = $ser;
        substr($b, $off, 1) = chr(ord(substr($b, $off, 1)) ^ (1 << int rand 8));
        $check->("byte $off bit-flipped (checksum)", $b);
    }
    for my $i (1 .. 50) {
        my $b = join '', map { chr int rand 256 } 1 .. (int rand(2 * $len));
        $check->("random garbage $i", $b);
    }
    is(scalar @fail, 0, 'every damaged serialization croaks naming ->deserialize')
        or diag(join "\n", @fail[0 .. ($#fail < 9 ? $#fail : 9)]);
    is($C->deserialize($ser)->serialize, $ser, 'the intact bytes still round-trip');
}

done_testing;
