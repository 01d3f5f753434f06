# Hostile files: what an attacker or an accident can put where a filter file
# is expected. Every byte of the first 1 KiB flipped, every short size, grown
# files, things that are not regular files, files of other users, and a
# peer rewriting the shared header of a filter we are attached to (DESIGN C6).
# Each open either croaks naming its method or gives a handle that works;
# the process doing it never dies by a signal and never hangs.
#
# Opens run in children (so that a crash is seen as a signal, not as the end
# of this test), many cases per child to keep the runtime down; each child
# notes the case it is on in a file, so a crash names its case.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Fcntl qw(O_RDONLY O_RDWR);
use POSIX ();
use Socket qw(AF_UNIX SOCK_STREAM PF_UNSPEC);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child child_status_text slurp spew);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);

# Header layout (src/shm/format.rs): immutable fields and their checksum in bytes
# 0..120, the control line (flags, epoch, exclusive word, pending) in
# 128..192, process slots from 4096, stripes from 69632, bits from 73728
# (in a 1 000-item filter: 64 stripes).
my %OFF = (k => 20, m => 24, capacity => 32, total => 56, slots_off => 64,
    stripes_off => 80, bits_off => 88);
my $CONTROL_END = 73728;    # of a 1 000-item filter: 64 stripes
my $FLIP_BYTES = 1024;

# Overwrite in place (no truncation: the size of the file stays the same).
sub poke {
    my ($path, $off, $bytes) = @_;
    sysopen(my $fh, $path, O_RDWR) or die "$path: $!";
    defined sysseek($fh, $off, 0) or die "seek: $!";
    syswrite($fh, $bytes) == length $bytes or die "write: $!";
    close $fh;
}
sub first_line { my ($s) = @_; $s =~ s/\n.*//s; $s }
sub show { my @l = @_; splice(@l, 10, @l - 10, '...') if @l > 10; join "\n", @l }

# The reference files: a filter with items, and a frozen copy of it.
my @items = map { "g$_" } 1 .. 200;
my $good_path = "$dir/good.bf";
{
    my $f = $C->new($good_path, 1000, 0.01);
    $f->add_many(\@items);
    my $z = $C->new("$dir/frozen.bf", 1000, 0.01);
    $z->add_many(\@items);
    $z->freeze;
}
my $good = slurp($good_path);
my $frozen = slurp("$dir/frozen.bf");
my $total = length $good;
is($total, $CONTROL_END + 16384 / 8, "reference filter file: $total bytes, as the layout says");

# Open $path with $ctor: a handle, or undef with $@ set.
sub open_with {
    my ($ctor, $path) = @_;
    return $C->new($path, 1000, 0.01) if $ctor eq 'new';
    return $C->new_readonly($path) if $ctor eq 'new_readonly';
    sysopen(my $fh, $path, $ctor eq 'new_from_fd' ? O_RDWR : O_RDONLY) or die "open: $!";
    return $C->new_from_fd(fileno $fh);    # $ctor 'new_from_fd_ro': a read-only fd
}

# Open with $ctor and use what opens. Returns a verdict: 'opened', 'refused:
# <message>', or 'BAD: <what went wrong>' (a croak not naming its method, or a
# handle that opened but does not work).
my $compat = $C->new(undef, 1000, 0.01);
$compat->add('from-compat');
sub exercise {
    my ($ctor, $path) = @_;
    my $method = $ctor =~ /^new_from_fd/ ? 'new_from_fd' : $ctor;
    my $f = eval { open_with($ctor, $path) };
    if (!$f) {
        return 'refused: ' . first_line($@) if $@ =~ /^\Q$C\E->$method: /;
        return 'BAD: croak does not name ' . $method . ': ' . first_line($@);
    }
    my @bad;
    my $call = sub {    # a method that must work
        my ($m, @args) = @_;
        my @r = eval { $f->$m(@args) };
        push @bad, "$m: " . first_line($@) if $@;
        return wantarray ? @r : $r[0];
    };
    my $refused = sub {    # a mutator of a read-only handle: must croak naming itself
        my ($m, @args) = @_;
        push @bad, "$m did not croak" if eval { $f->$m(@args); 1 };
        push @bad, "$m: croak does not name it: " . first_line($@)
            if $@ && $@ !~ /->$m: .*(read-only|frozen)/;
    };
    if ($f->readonly) {
        push @bad, 'an item of the filter is missing' unless $call->('contains', 'g1');
        push @bad, 'count is 0' unless $call->('count') > 0;
        $refused->($_) for qw(clear invert);
        $refused->(add => 'x');
        $refused->(add_many => ['x']);
        $refused->(merge => $compat);
    }
    else {
        $call->(add => 'probe');
        push @bad, 'an added item is missing' unless $call->(contains => 'probe');
        push @bad, 'count is 0 after an add' unless $call->('count') > 0;
        $call->('clear');
        push @bad, 'not empty after clear' unless $call->('is_empty');
        $call->(merge => $compat);
        push @bad, 'a merged item is missing' unless $call->(contains => 'from-compat');
    }
    my $ser = $call->('serialize') // '';
    my $back = eval { $C->deserialize($ser) };
    push @bad, 'serialize gives bytes deserialize refuses: ' . first_line($@) unless $back;
    push @bad, 'geometry changed' if $call->('bits') != 16384 || $call->('hashes') != 7;
    return @bad ? 'BAD: ' . join('; ', @bad) : 'opened';
}

# Run $case->($x) for each $x in children, $per at a time. Returns a hash of
# verdicts by $x and a list of children that crashed, hung or failed, each
# naming the case it was on. Verdicts go through a file, one line per case
# as it ends, so that a child that dies keeps the verdicts it reached.
sub in_batches {
    my ($per, $case, @xs) = @_;
    my $timeout = ref $xs[-1] eq 'HASH' ? pop(@xs)->{timeout} : 120;
    my (%verdict, @crashed);
    my $log = "$dir/verdicts";
    while (my @batch = splice(@xs, 0, $per)) {
        spew($log, '');
        my $res = in_child(sub {
            open(my $fh, '>>', $log) or die "$log: $!";
            $fh->autoflush(1);
            print $fh "$_\t", $case->($_), "\n" for @batch;
            close $fh;
            return 'done';
        }, $timeout);
        for my $line (split /\n/, slurp($log)) {
            my ($x, $v) = split /\t/, $line, 2;
            $verdict{$x} = $v if defined $v;
        }
        if ($res->{signal} || $res->{timed_out} || $res->{out} ne 'done') {
            my ($at) = grep { !exists $verdict{$_} } @batch;
            push @crashed, 'case ' . ($at // '(after the last)') . ': ' . child_status_text($res);
        }
    }
    return (\%verdict, \@crashed);
}

# --- every byte of the first 1 KiB, flipped ------------------------------------------------------
for my $variant (['new', $good], ['new_readonly', $frozen]) {
    my ($ctor, $image) = @$variant;
    my $path = "$dir/flip-$ctor.bf";
    spew($path, $image);
    my ($v, $crashed) = in_batches(64, sub {
        my ($off) = @_;
        poke($path, $off, chr(ord(substr($image, $off, 1)) ^ 0xFF));
        my $verdict = exercise($ctor, $path);
        poke($path, 0, $image);    # the handle may have changed bits and slots
        # and its merge left a journal's space, which the file keeps: the
        # handle is gone, nothing maps it.
        truncate($path, length $image) or die "truncate: $!";
        return $verdict;
    }, 0 .. $FLIP_BYTES - 1);
    is(scalar @$crashed, 0, "$ctor, a byte flipped: no opener crashed or hung")
        or diag(show(@$crashed));
    my @bad = map { "byte $_: " . ($v->{$_} // 'no verdict') }
        grep { ($v->{$_} // 'BAD') =~ /^BAD/ } 0 .. $FLIP_BYTES - 1;
    is(scalar @bad, 0, "$ctor, a byte flipped: each open croaks naming $ctor or works")
        or diag(show(@bad));
    my @accepted = grep { ($v->{$_} // '') eq 'opened' } 0 .. 119;
    is(scalar @accepted, 0, "$ctor: a flip anywhere in the immutable header is refused")
        or diag("accepted: @accepted");
    like($v->{128} // '', qr/^refused: .*frozen/,
        "$ctor: the flipped frozen flag is noticed") or diag($v->{128});
    is(slurp($path), $image, "$ctor: the file is intact after the sweep");
    note(sprintf '%s: %d of %d flipped files opened', $ctor,
        scalar(grep { $_ eq 'opened' } values %$v), $FLIP_BYTES);
}

# --- truncated and grown -----------------------------------------------------------------------------
# Every size up to a page and a cache line, the sizes around each layout
# boundary, and grown files (zeros appended, as a stray write would). A file
# may be longer than its filter by up to a merge's journal (a copy of one bit
# array, from the next page boundary on: left by a merger killed part-way):
# that opens; a byte more is refused as grown.
my $max = int(($total + 4095) / 4096) * 4096 + 16384 / 8;
{
    my @sizes = (0 .. 4096 + 64);
    push @sizes, map { ($_ - 1, $_, $_ + 1) } 8192, 4096 + 65536, $CONTROL_END;
    push @sizes, $total - 2048 + 8, $total - 8, $total - 1, $total + 1, $total + 8,
        $total + 4096, $max - 1, $max, $max + 1, $max + 4096, 2 * $total;
    # Largest first, so that truncate(2) alone makes each case: cutting keeps
    # a prefix of the image, growing appends zeros (and rewriting small files
    # over and over is slow on some filesystems).
    my %seen;
    @sizes = sort { $b <=> $a } grep { !$seen{$_}++ } @sizes;
    my $path = "$dir/size.bf";
    for my $ctor (qw(new new_readonly new_from_fd)) {
        spew($path, $ctor eq 'new_readonly' ? $frozen : $good);
        my ($v, $crashed) = in_batches(512, sub {
            my ($size) = @_;
            truncate($path, $size) or die "truncate: $!";
            return exercise($ctor, $path);
        }, @sizes);
        is(scalar @$crashed, 0, "$ctor, wrong sizes: no opener crashed or hung")
            or diag(show(@$crashed));
        # new adopts an empty file as a new filter; a journal's tail opens;
        # everything else is refused.
        my @wrong = grep {
            my $want = ($ctor eq 'new' && $_ == 0) || ($_ > $total && $_ <= $max)
                ? qr/^opened$/ : qr/^refused: .*(too small|truncated|grown)/;
            ($v->{$_} // '') !~ $want
        } @sizes;
        is(scalar @wrong, 0, "$ctor: every wrong size is refused as too small, truncated or grown; "
            . "longer by up to a journal opens") or diag(show(map { "size $_: " . ($v->{$_} // 'no verdict') } @wrong));
    }
    # A sparse file claiming a terabyte: refused without reading it.
    spew($path, $good);
    truncate($path, 1 << 40) or die "truncate: $!";
    my ($v, $crashed) = in_batches(1, sub { exercise('new', $path) }, 'sparse');
    is(scalar @$crashed, 0, 'a sparse 1 TiB file: the opener exited normally') or diag(show(@$crashed));
    like($v->{sparse} // '', qr/^refused: .*grown/, '... and refused it as grown');
    is(-s $path, 1 << 40, '... without changing its size');
}

# --- things that are not regular files -----------------------------------------------------
{
    mkdir "$dir/subdir" or die;
    POSIX::mkfifo("$dir/fifo", 0600) or die "mkfifo: $!";
    symlink($good_path, "$dir/link.bf") or die "symlink: $!";
    symlink("$dir/frozen.bf", "$dir/link-frozen.bf") or die "symlink: $!";
    symlink("$dir/nowhere.bf", "$dir/dangling.bf") or die "symlink: $!";
    my @cases = (
        [new => "$dir/subdir", qr/directory/],
        [new_readonly => "$dir/subdir", qr/directory/],
        [new => "$dir/fifo", qr/FIFO/],    # O_NONBLOCK: must not wait for a writer
        [new_readonly => "$dir/fifo", qr/FIFO/],
        [new => '/dev/zero', qr/character device/],
        [new_readonly => '/dev/zero', qr/character device/],
        [new => '/dev/null', qr/character device/],
        [new => "$dir/link.bf", qr/symbolic link/],
        [new_readonly => "$dir/link-frozen.bf", qr/symbolic link/],
        [new => "$dir/dangling.bf", qr/symbolic link/],
    );
    my ($v, $crashed) = in_batches(64, sub {
        my ($i) = @_;
        return exercise(@{ $cases[$i] }[0, 1]);
    }, 0 .. $#cases, { timeout => 20 });
    is(scalar @$crashed, 0, 'non-regular files: no opener crashed or hung') or diag(show(@$crashed));
    for my $i (0 .. $#cases) {
        my ($ctor, $what, $why) = @{ $cases[$i] };
        like($v->{$i} // '', qr/^refused: .*$why/, "$ctor($what) is refused: $why");
    }
    ok(-d "$dir/subdir" && -p "$dir/fifo" && -l "$dir/link.bf", 'and each was left as it was');
    ok(!-e "$dir/nowhere.bf", 'the dangling symlink\'s target was not created');

    # The same through descriptors: whatever the fd is, only a regular file goes.
    my $fd_case = sub {
        my ($what) = @_;
        my $fh;
        if ($what eq 'directory') { sysopen($fh, $dir, O_RDONLY) or die "$dir: $!" }
        elsif ($what eq 'FIFO')   { sysopen($fh, "$dir/fifo", O_RDWR) or die "fifo: $!" }
        elsif ($what eq 'pipe')   { pipe($fh, my $w) or die "pipe: $!" }
        elsif ($what eq 'socket') { socketpair($fh, my $o, AF_UNIX, SOCK_STREAM, PF_UNSPEC) or die $! }
        else                      { sysopen($fh, '/dev/zero', O_RDWR) or die "zero: $!" }
        my $f = eval { $C->new_from_fd(fileno $fh) };
        return 'opened' if $f;
        return 'refused: ' . first_line($@) if $@ =~ /->new_from_fd: /;
        return 'BAD: ' . first_line($@);
    };
    my @fds = ('directory', 'FIFO', 'pipe', 'socket', 'character device');
    ($v, $crashed) = in_batches(64, $fd_case, @fds, { timeout => 20 });
    is(scalar @$crashed, 0, 'non-regular descriptors: no opener crashed or hung') or diag(show(@$crashed));
    for my $what (@fds) {
        my $kind = $what eq 'pipe' ? 'FIFO' : $what;
        like($v->{$what} // '', qr/^refused: .*is a \Q$kind\E/, "new_from_fd(a $what) is refused");
    }
}

# --- files of other users ---------------------------------------------------------------------
# The policy (POD SECURITY): ownership is not checked; the kernel's permission
# check on open(2) decides. new opens read-write, new_readonly read-only.
SKIP: {
    my ($uid, $gid) = (getpwnam('nobody'))[2, 3];
    skip 'needs root (to make files of another user) and a "nobody" user', 9
        if $> != 0 || !defined $uid;
    my $shared = "$dir/users";
    mkdir $shared or die;
    chmod 0711, $dir, $shared;    # others may reach the files, not list or create
    my $make = sub {
        my ($name, $mode, $owner, $group, $freeze) = @_;
        my $p = "$shared/$name";
        my $f = $C->new($p, 1000, 0.01);
        $f->add_many(\@items);
        $f->freeze if $freeze;
        chown $owner, $group, $p or die "chown: $!";
        chmod $mode, $p or die "chmod: $!";
        return $p;
    };
    my $root0600 = $make->('root-0600.bf', 0600, 0, 0);
    my $group0660 = $make->('group-0660.bf', 0660, 0, $gid);
    my $group0640 = $make->('group-0640.bf', 0640, 0, $gid, 1);
    my $nobody0600 = $make->('nobody-0600.bf', 0600, $uid, $gid);

    # As "nobody", in a child that gave up root.
    my $as_nobody = sub {
        my ($code) = @_;
        return in_child(sub {
            POSIX::setgid($gid) or die "setgid: $!";
            $) = "$gid $gid";
            POSIX::setuid($uid) or die "setuid: $!";
            die "still root\n" if $> == 0 || $< == 0;
            return $code->();
        }, 30);
    };
    my $res = $as_nobody->(sub { exercise('new', $root0600) });
    like($res->{out}, qr/^refused: .*->new: .*Permission denied/,
        'another user\'s 0600 file: new croaks with a permission error') or diag(child_status_text($res));
    $res = $as_nobody->(sub { exercise('new_readonly', $root0600) });
    like($res->{out}, qr/^refused: .*->new_readonly: .*Permission denied/,
        '... and so does new_readonly') or diag(child_status_text($res));
    $res = $as_nobody->(sub { exercise('new', "$shared/mine.bf") });
    like($res->{out}, qr/^refused: .*->new: .*Permission denied/,
        'creating a filter in a directory we may not write: a permission error')
        or diag(child_status_text($res));
    $res = $as_nobody->(sub {
        my $f = $C->new($group0660, 1000, 0.01);
        my $seen = $f->contains('g1') . $f->add('from-nobody');
        return exercise('new', $group0660) . " $seen";
    });
    is($res->{out}, 'opened 11', 'a 0660 file of our group (another owner) opens and works')
        or diag(child_status_text($res));
    $res = $as_nobody->(sub { exercise('new', $group0640) });
    like($res->{out}, qr/^refused: .*->new: .*Permission denied/,
        'a 0640 file of our group: new (read-write) gets a permission error')
        or diag(child_status_text($res));
    $res = $as_nobody->(sub { exercise('new_readonly', $group0640) });
    is($res->{out}, 'opened', '... while new_readonly of it (frozen) works')
        or diag(child_status_text($res));

    # As root: every file opens; ownership is not a reason to refuse.
    $res = in_child(sub { exercise('new', $nobody0600) }, 30);
    is($res->{out}, 'opened', 'root opens a 0600 file owned by nobody') or diag(child_status_text($res));
    is((stat $nobody0600)[4], $uid, '... and it stays nobody\'s');
    is(sprintf('%04o', (stat $group0660)[2] & 07777), '0660', 'opening never changes a mode');
}
SKIP: {
    skip 'a permission error of our own file needs a non-root user', 1 if $> == 0;
    my $p = "$dir/mode0000.bf";
    $C->new($p, 1000, 0.01);
    chmod 0000, $p;
    my $res = in_child(sub { exercise('new', $p) }, 30);
    like($res->{out}, qr/^refused: .*->new: .*Permission denied/, 'a 0000 file: a permission error');
}

# --- a peer rewrites the header after we attached (DESIGN C6) -----------------------------------
# Our handle keeps the geometry it validated; what the header says later must
# not move a single access outside our mapping.
{
    my $big = "$dir/big.bf";
    $C->new($big, 1_000_000, 0.001);    # a valid header (checksum and all) of another geometry
    my $forged = substr(slurp($big), 0, 120);
    my $u64 = sub { pack 'Q', $_[0] };
    my %attacks = (
        'a valid header of a larger filter' => [[0, $forged]],
        'huge geometry fields' => [
            [$OFF{m}, $u64->(1 << 62)], [$OFF{k}, pack('L', 0xFFFFFFFF)],
            [$OFF{capacity}, $u64->(~0)], [$OFF{total}, $u64->(1 << 50)],
            [$OFF{bits_off}, $u64->(1 << 40)], [$OFF{slots_off}, $u64->(1 << 45)],
            [$OFF{stripes_off}, $u64->(~0)],
        ],
        'zero geometry fields' => [map { [$OFF{$_}, $u64->(0)] } qw(m capacity total bits_off)],
        'the whole header page zeroed' => [[0, "\0" x 4096]],
    );
    for my $name (sort keys %attacks) {
        my $path = "$dir/c6.bf";
        spew($path, $good);
        my $res = in_child(sub {
            my $f = $C->new($path, 1000, 0.01);
            my $before = $f->serialize;
            # The peer: another process writing through the file.
            my $peer = in_child(sub { poke($path, @$_) for @{ $attacks{$name} }; 'done' }, 10);
            die "peer failed\n" unless $peer->{out} eq 'done';
            my @bad;
            push @bad, 'a new opener accepted the rewritten file'
                if eval { $C->new($path, 1000, 0.01) };
            push @bad, 'geometry changed' unless $f->bits == 16384 && $f->hashes == 7
                && $f->capacity == 1000 && $f->stats->{mmap_size} == $total;
            push @bad, 'items lost' unless $f->contains_many(\@items) == @items;
            push @bad, 'serialize changed' unless $f->serialize eq $before;
            push @bad, 'new item not new' unless $f->add('after-rewrite') == 1;
            push @bad, 'batch add' unless $f->add_many([map { "b$_" } 1 .. 100]) > 90;
            push @bad, 'count' unless $f->count > 250;
            $f->merge($compat);
            push @bad, 'merge' unless $f->contains('from-compat');
            my $copy = $C->deserialize($f->serialize);
            push @bad, 'serialized copy' unless $copy->contains('after-rewrite') && $copy->bits == 16384;
            $f->clear;
            push @bad, 'clear' unless $f->is_empty && $f->bits_set == 0;
            $f->invert;
            push @bad, 'invert' unless $f->bits_set == 16384;
            return @bad ? join('; ', @bad) : 'ok';
        }, 30);
        ok(!$res->{signal} && !$res->{timed_out}, "C6, $name: the attached process survives")
            or diag(child_status_text($res));
        is($res->{out}, 'ok', "C6, $name: every operation works on the geometry we attached with")
            or diag($res->{out});
    }
}

done_testing;
