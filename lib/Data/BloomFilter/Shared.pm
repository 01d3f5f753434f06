package Data::BloomFilter::Shared;

use 5.022;
use strict;
use warnings;

use Carp ();
use Scalar::Util ();
use overload ();

our $VERSION = '0.01';

require XSLoader;
XSLoader::load(__PACKAGE__, $VERSION);

# The hot methods (add, contains, add_many, contains_many) and every accessor
# are XSUBs. The constructors are cold: their arguments are parsed here, and
# the XS takes plain values and returns (object) or (undef, message), so that
# Carp can point the message at the caller's line.

my $UV_MAX = '18446744073709551615';
my $DEFAULT_FP_RATE = 0.01;
my $DEFAULT_MODE = 0600;

sub _croak {
    my ($method, $message) = @_;
    Carp::croak(__PACKAGE__ . "->$method: $message");
}

# Canonical decimal string of a non-negative integer that fits in 64 bits, or
# undef. Taking the string form accepts 1000, "1000", 1e6 and Math::BigInt
# alike, and refuses -1, 1.5, "12abc", " 12", references and anything > 2**64-1.
sub _uint64 {
    my ($v) = @_;
    return undef if !defined $v;
    return undef if ref $v && !overload::Method($v, '""');
    my $s = "$v";
    return undef if $s !~ /\A[0-9]+\z/;
    $s =~ s/\A0+(?=[0-9])//;
    return undef if length $s > length $UV_MAX
        || (length $s == length $UV_MAX && $s gt $UV_MAX);
    return $s;
}

sub _capacity {
    my ($method, $capacity) = @_;
    my $c = _uint64($capacity);
    if (!defined $c || $c eq '0') {
        _croak($method, 'capacity is too large')
            if defined $capacity && !ref $capacity && $capacity =~ /\A0*[1-9][0-9]*\z/;
        _croak($method, 'capacity must be a positive integer');
    }
    return $c;
}

sub _fp_rate {
    my ($method, $fp_rate) = @_;
    return $DEFAULT_FP_RATE if !defined $fp_rate;
    _croak($method, 'fp_rate must be between 0 and 1 (exclusive)')
        if (ref $fp_rate && !overload::Method($fp_rate, '0+')
                && !overload::Method($fp_rate, '""'))
        || !Scalar::Util::looks_like_number($fp_rate)
        || !($fp_rate > 0 && $fp_rate < 1);    # also refuses NaN
    return 0 + $fp_rate;
}

sub _mode {
    my ($method, $mode) = @_;
    return $DEFAULT_MODE if !defined $mode;
    my $m = _uint64($mode);
    _croak($method, 'mode must be an integer between 0 and 07777')
        if !defined $m || length $m > 4 || $m > 07777;
    return 0 + $m;
}

sub _seed {
    my ($method, $seed) = @_;
    return 0 if !defined $seed;
    my $s = _uint64($seed);
    _croak($method, 'seed must be a non-negative integer that fits in 64 bits')
        if !defined $s;
    return $s;    # a decimal string: the XS converts it exactly
}

# A path (or memfd name) as bytes: a copy, never the caller's scalar.
sub _bytes_string {
    my ($method, $what, $value) = @_;
    _croak($method, "undefined $what") if !defined $value;
    _croak($method, "$what must be a string")
        if ref $value && !overload::Method($value, '""');
    my $copy = "$value";
    utf8::downgrade($copy, 1) or _croak($method, "Wide character in $what");
    _croak($method, "$what contains a NUL byte") if index($copy, "\0") >= 0;
    _croak($method, "$what must not be empty") if $copy eq '';
    return $copy;
}

# Options hash: only the keys in @allowed; returns a plain copy.
sub _options {
    my ($method, $opts, @allowed) = @_;
    return {} if !defined $opts;
    _croak($method, 'options must be a hash reference')
        if ref $opts ne 'HASH';
    my %allowed = map { $_ => 1 } @allowed;
    for my $key (sort keys %$opts) {
        _croak($method, "unknown option '$key'") if !$allowed{$key};
    }
    return {%$opts};
}

sub _class {
    my ($method, $class) = @_;
    $class = ref $class || $class;
    _croak($method, 'must be called as a class method')
        if !defined $class || $class eq '';
    return $class;
}

sub _made {
    my ($method, $self, $error) = @_;
    _croak($method, $error) if !defined $self;
    return $self;
}

sub new {
    my $class = _class('new', $_[0]);
    _croak('new', 'usage: ' . __PACKAGE__
            . '->new($path, $capacity, $fp_rate, $mode_or_options)')
        if @_ < 3 || @_ > 5;
    my (undef, $path, $capacity, $fp_rate, $last) = @_;

    my ($mode, $seed);
    if (ref $last eq 'HASH') {
        my $opts = _options('new', $last, qw(mode seed));
        ($mode, $seed) = @$opts{qw(mode seed)};
    }
    elsif (ref $last) {
        _croak('new', 'last argument must be a file mode or a hash reference of options');
    }
    else {
        $mode = $last;
    }

    $path = _bytes_string('new', 'path', $path) if defined $path;
    $capacity = _capacity('new', $capacity);
    $fp_rate = _fp_rate('new', $fp_rate);
    $mode = _mode('new', $mode);
    $seed = _seed('new', $seed);
    return _made('new', _xs_new($class, $path, $capacity, $fp_rate, $mode, $seed));
}

sub new_memfd {
    my $class = _class('new_memfd', $_[0]);
    _croak('new_memfd', 'usage: ' . __PACKAGE__
            . '->new_memfd($name, $capacity, $fp_rate, \%options)')
        if @_ < 3 || @_ > 5;
    my (undef, $name, $capacity, $fp_rate, $opts) = @_;
    $opts = _options('new_memfd', $opts, qw(seed));
    $name = _bytes_string('new_memfd', 'name', $name) if defined $name;
    $capacity = _capacity('new_memfd', $capacity);
    $fp_rate = _fp_rate('new_memfd', $fp_rate);
    my $seed = _seed('new_memfd', $opts->{seed});
    return _made('new_memfd',
        _xs_new_memfd($class, $name, $capacity, $fp_rate, $DEFAULT_MODE, $seed));
}

sub new_from_fd {
    my $class = _class('new_from_fd', $_[0]);
    _croak('new_from_fd', 'usage: ' . __PACKAGE__ . '->new_from_fd($fd_or_handle)')
        if @_ != 2;
    my (undef, $fd) = @_;
    my $n;
    if (ref $fd || ref \$fd eq 'GLOB') {
        local $@;
        $n = eval { fileno $fd };
        _croak('new_from_fd', 'file handle has no file descriptor')
            if !defined $n || $n < 0;
    }
    else {
        $n = _uint64($fd);
        _croak('new_from_fd', 'fd must be a non-negative integer or an open file handle')
            if !defined $n || length $n > 10 || $n > 2147483647;
    }
    return _made('new_from_fd', _xs_new_from_fd($class, 0 + $n));
}

sub new_readonly {
    my $class = _class('new_readonly', $_[0]);
    _croak('new_readonly', 'usage: ' . __PACKAGE__ . '->new_readonly($path)')
        if @_ != 2;
    my $path = _bytes_string('new_readonly', 'path', $_[1]);
    return _made('new_readonly', _xs_new_readonly($class, $path));
}

sub deserialize {
    my $class = _class('deserialize', $_[0]);
    _croak('deserialize', 'usage: ' . __PACKAGE__ . '->deserialize($bytes, \%options)')
        if @_ < 2 || @_ > 3;
    # $_[1] goes to the XS untouched: no copy of a large string, and its get
    # magic runs once, there.
    my $opts = _options('deserialize', $_[2], qw(path mode));
    my $path = defined $opts->{path}
        ? _bytes_string('deserialize', 'path', $opts->{path}) : undef;
    my $mode = _mode('deserialize', $opts->{mode});
    return _made('deserialize', _xs_deserialize($class, $_[1], $path, $mode));
}

# Storable would copy the handle's pointer and free it twice.
sub STORABLE_freeze {
    _croak('STORABLE_freeze', 'cannot be serialized by Storable; use serialize and deserialize');
}

# A handle belongs to one interpreter: new threads get undef instead.
sub CLONE_SKIP { 1 }

1;

__END__

=encoding utf8

=head1 NAME

Data::BloomFilter::Shared - a Bloom filter in shared memory for many processes

=head1 SYNOPSIS

    use Data::BloomFilter::Shared;

    # A file-backed filter for a million items at a 1% false positive rate,
    # shared by every process that opens the same path.
    my $bf = Data::BloomFilter::Shared->new('/var/tmp/seen.bloom', 1_000_000, 0.01);

    $bf->add('alice');                      # 1: probably new
    $bf->add('alice');                      # 0: probably seen
    $bf->contains('bob');                   # 0: certainly absent

    my $new = $bf->add_many(\@items);       # how many were new
    my @hit = $bf->contains_many(\@items);  # one 0/1 per item

    # Anonymous: shared with the children forked after this point.
    my $anon = Data::BloomFilter::Shared->new(undef, 100_000);

    # A secret seed against crafted false positives.
    my $keyed = Data::BloomFilter::Shared->new($path, 1e6, 0.001,
        { mode => 0660, seed => $secret });

    # A memfd, to hand to an unrelated process over a UNIX socket.
    my $m = Data::BloomFilter::Shared->new_memfd('seen', 1e6, 0.01);
    my $fd = $m->memfd;
    my $there = Data::BloomFilter::Shared->new_from_fd($fd);

    # Portable bytes.
    my $bytes = $bf->serialize;
    my $copy  = Data::BloomFilter::Shared->deserialize($bytes);

=head1 DESCRIPTION

A Bloom filter whose bit array lives in a shared mapping (a file, an anonymous
mapping inherited over C<fork>, or a memfd), so that many processes add to and
test against one filter at full speed. Queries take no lock and write no shared
memory; adds set bits with atomic OR and never wait for adders of other items.
A process killed at any instruction delays the others by at most a second and
never corrupts the filter.

The core is a Rust library; this module is a thin XS layer over its C API. It
needs Linux and a 64-bit Perl 5.22 or later.

With the default seed of 0 the bit array is bit-compatible with C<bloom.h>:
the same items, capacity and rate give the same bits.

Items are byte strings. A string with characters above 0xFF croaks
(C<Wide character>); a string of characters up to 0xFF is taken as those
bytes, whatever its internal encoding. An undefined item croaks. An object
with overloaded stringification is taken as its string; any other reference
is taken as Perl stringifies it (C<HASH(0x...)>), which is rarely what you
want. Tied and other magical scalars are fetched exactly once per call.

=head1 METHODS

Every method croaks on error; see L</DIAGNOSTICS>. Methods that change the
filter return true.

=head2 Constructors

=head3 new

    my $bf = Data::BloomFilter::Shared->new($path, $capacity);
    my $bf = Data::BloomFilter::Shared->new($path, $capacity, $fp_rate);
    my $bf = Data::BloomFilter::Shared->new($path, $capacity, $fp_rate, $mode);
    my $bf = Data::BloomFilter::Shared->new($path, $capacity, $fp_rate,
        { mode => $mode, seed => $seed });

Opens the filter file at C<$path>, creating it (mode C<$mode>, default C<0600>)
when it does not exist. When C<$path> is undef the filter is an anonymous
shared mapping, which children forked afterwards share.

C<$capacity> is the number of items the filter is sized for (a positive
integer); C<$fp_rate> the false positive rate wanted at that many items
(strictly between 0 and 1, default 0.01). When an existing file is opened its
stored geometry wins; the arguments are still range-checked. A frozen file is
refused (see L</new_readonly>).

The last argument is either a file mode (a number such as C<0660>, not the
string C<"0660">) or a hash reference with the keys C<mode> and C<seed>.
C<seed> is a non-negative integer below 2**64 (a decimal string is accepted
for values beyond Perl's integers); a non-zero seed makes probe positions
unpredictable to whoever chooses the items. Filters with different seeds are
not compatible.

=head3 new_memfd

    my $bf = Data::BloomFilter::Shared->new_memfd($name, $capacity, $fp_rate, \%options);

A new filter in a memfd (an anonymous file, see L<memfd_create(2)>). C<$name>
is only a label (undef for a default one); C<$fp_rate> defaults to 0.01; the
only option is C<seed>. Its file descriptor is L</memfd>: pass it to another
process (over a UNIX socket, or to an C<exec>ed child) to share the filter.

=head3 new_from_fd

    my $bf = Data::BloomFilter::Shared->new_from_fd($fd);
    my $bf = Data::BloomFilter::Shared->new_from_fd($fh);

Attaches to the filter behind an open file descriptor (a number, or a file
handle whose C<fileno> is taken): a memfd received from another process, or a
filter file. The descriptor is duplicated (close-on-exec); the caller keeps
and closes its own.

=head3 new_readonly

    my $bf = Data::BloomFilter::Shared->new_readonly($path);

Opens a L<frozen|/freeze> filter file read-only: the mapping is C<PROT_READ>,
no lock is ever taken, and it works on a read-only file system. Only queries
and accessors work; mutations croak.

=head3 deserialize

    my $bf = Data::BloomFilter::Shared->deserialize($bytes);
    my $bf = Data::BloomFilter::Shared->deserialize($bytes,
        { path => $path, mode => 0600 });

A new filter from the output of L</serialize>: anonymous, or at C<path>
(created with C<mode>, default C<0600>). The bytes are treated as hostile:
every length and field is checked. The seed is taken from the bytes, so
C<seed> is not an option here.

=head2 Adding and testing

=head3 add

    my $new = $bf->add($item);

Adds C<$item>. Returns 1 when it was probably new (at least one of its bits was
0), 0 when it was probably seen. Among processes adding the same item at the
same moment, at most one is told 1.

=head3 add_many

    my $new_count = $bf->add_many(\@items);
    my @new       = $bf->add_many(\@items);

Adds every item of the array. In scalar context returns how many were new; in
list context one 0/1 per item. Every item is validated before any is added: a
bad one croaks naming its index, and then nothing was added.

=head3 contains

    my $present = $bf->contains($item);

1 when C<$item> is probably in the filter, 0 when it certainly is not.

=head3 contains_many

    my $present_count = $bf->contains_many(\@items);
    my @present       = $bf->contains_many(\@items);

Tests every item of the array: in scalar context how many are present; in list
context one 0/1 per item.

=head2 Combining and changing

=head3 merge

    $bf->merge($other);

Union: ORs C<$other>'s bits into this filter. Both must be L</is_compatible>.
Merging a filter into itself does nothing.

=head3 intersect

    $bf->intersect($other);

Intersection: ANDs C<$other>'s bits into this filter. Both must be compatible.
Items in only one of the two may then be reported absent.

=head3 invert

    $bf->invert;

Flips every bit.

=head3 is_compatible

    if ($bf->is_compatible($other)) { ... }

1 when the two filters have the same geometry (bits, hashes) and seed, so that
L</merge> and L</intersect> are meaningful; 0 otherwise.

=head3 clear

    $bf->clear;

Sets every bit to 0, for every process sharing the filter.

=head3 freeze

    $bf->freeze;

Marks the filter frozen, for good: every later mutation, through any handle,
croaks, and the file can be opened with L</new_readonly>.

=head3 sync

    $bf->sync;

Flushes a file-backed filter to disk (L<msync(2)>).

=head3 unlink

    $bf->unlink;
    Data::BloomFilter::Shared->unlink($path);

Removes the filter's file (croaks when the filter has none), or the file at
C<$path>. Processes that have it open keep using it.

=head2 Accessors

=head3 capacity

The capacity the filter was sized for.

=head3 fp_rate

The false positive rate it was sized for.

=head3 bits

The number of bits, I<m> (a power of two, at least 64).

=head3 hashes

The number of probes per item, I<k> (1 to 32).

=head3 seed

The hash seed (0 for C<bloom.h> compatibility).

=head3 count

An estimate of how many distinct items were added, from the number of bits set.

=head3 bits_set

How many bits are 1.

=head3 fill_ratio

C<bits_set / bits>.

=head3 estimated_fpp

The false positive probability now: C<fill_ratio ** hashes>.

=head3 is_empty

1 when no bit is set, else 0.

=head3 frozen

1 when the filter is frozen, else 0.

=head3 readonly

1 for a handle from L</new_readonly>, else 0.

=head3 path

The backing file's path, or undef for an anonymous, memfd or fd filter.

=head3 memfd

The memfd's file descriptor for a filter from L</new_memfd>, else -1. It
belongs to the handle: do not close it.

=head3 serialize

    my $bytes = $bf->serialize;

The filter as portable bytes (versioned, little-endian, with a checksum),
for L</deserialize>.

=head3 stats

    my $stats = $bf->stats;

A hash reference with the keys C<capacity fp_rate bits hashes seed bits_set
count fill_ratio estimated_fpp ops mmap_size frozen readonly>: the accessors
above, plus C<ops> (operations so far, summed over every process) and
C<mmap_size> (bytes mapped).

=head2 Lifetime

=head3 DESTROY

Releases the handle (the shared filter itself lives on in its file or in the
other processes). Calling it explicitly is allowed: any later call on that
object croaks with C<destroyed handle>, and never touches freed memory.

=head3 CLONE_SKIP

Returns 1: handles are not cloned into new ithreads (there they are undef).
Processes created with C<fork> share the filter and may use inherited handles.

=head1 SECURITY

=head2 Files

A filter file is untrusted input. It is opened without following a final
symbolic link (C<O_NOFOLLOW>), without blocking (a FIFO is refused, not
waited on), and only a regular file is accepted: directories, FIFOs,
sockets and devices croak, and so do descriptors of them given to
L</new_from_fd>. Every field of the header is checked against what this
module would have written for the stored geometry, with a checksum over the
immutable ones, and the file's size must be exactly the size the header
implies: a truncated, grown, corrupted or foreign file croaks and is left
as it was. The geometry is read once, when the handle is made, and kept in
the process: a peer that rewrites the header later cannot make this process
read or write outside its mapping.

=head2 Other users' files

Ownership is not checked: the kernel's permission check on L<open(2)> is the
policy. L</new> opens the file read-write, L</new_readonly> read-only, so a
file of another owner opens when its mode lets us, and croaks with
C<Permission denied> when it does not (a C<0600> file of another user, say).
Sharing a filter between users through a group and mode C<0660> is a feature;
a frozen file of mode C<0644> or C<0640> can be queried by others with
L</new_readonly>. Root opens any filter file, whoever owns it.

Whoever can write a filter file can change its bits, freeze it, or hold its
locks, and truncating a file while it is mapped makes every process that
touches the lost pages die with C<SIGBUS>. So give write access only to
processes you trust, and keep the filters of privileged processes in
directories that only trusted users can write (not in F</tmp>). Memfds are
sealed against resizing, so a receiver of one cannot truncate it.

=head2 Crafted items

With the default seed 0 the probe positions are public (those of
C<bloom.h>), and whoever chooses the items can pick ones that fill the filter
or collide with a given item. Give filters that see untrusted items a secret
C<seed>: the positions then depend on it.

=head1 DIAGNOSTICS

Every message starts with C<Data::BloomFilter::Shared-E<gt>METHOD: >, naming
the method called, and ends with the caller's file and line.

=over 4

=item not a Data::BloomFilter::Shared object

The invocant is not an object of this class (or of a subclass).

=item other filter is not a Data::BloomFilter::Shared object

The argument of L</merge>, L</intersect> or L</is_compatible> is not a filter.

=item destroyed handle

=item destroyed handle (other filter)

The object was L</DESTROY>ed, possibly by Perl code that ran while the
arguments were being read (a tied C<FETCH>, an overloaded method).

=item usage: ...

=item takes no arguments

Wrong number of arguments.

=item undefined item

=item undefined item at index %d

An item (or an element of the array given to L</add_many> or
L</contains_many>) is undef, or the array has a hole there.

=item Wide character

=item Wide character at index %d

An item has a character above 0xFF, so is not a byte string. Encode it first
(for instance with C<utf8::encode>).

=item argument is not an array reference

L</add_many> and L</contains_many> take one array reference.

=item capacity must be a positive integer

=item capacity is too large

=item fp_rate must be between 0 and 1 (exclusive)

=item mode must be an integer between 0 and 07777

=item seed must be a non-negative integer that fits in 64 bits

=item unknown option '%s'

=item options must be a hash reference

=item last argument must be a file mode or a hash reference of options

Constructor arguments out of range.

=item undefined path

=item path must be a string

=item path must not be empty

=item path contains a NUL byte

=item Wide character in path

A path that cannot be a file name. L</new_memfd> reports the same problems
with its C<$name> (C<name must be a string>, ...).

=item fd must be a non-negative integer or an open file handle

=item file handle has no file descriptor

L</new_from_fd> was given something that has no file descriptor (an in-memory
or closed file handle, say).

=item undefined bytes

=item Wide character in bytes

L</deserialize> takes a byte string.

=item serialized size %d is too large

The filter does not fit in a Perl string on this machine.

=item filter has no path

L</unlink> was called on an anonymous, memfd or fd filter.

=item must be called as a class method

A constructor was called without a class.

=item cannot be serialized by Storable; use serialize and deserialize

A handle cannot be copied by L<Storable>.

=item Any other message

Comes from the Rust core, and says what failed: a system call (with its
C<strerror>), a file or byte string that is not a valid filter (and which
field is wrong), a mutation of a frozen filter or through a read-only handle,
a geometry or seed mismatch in L</merge> or L</intersect>, a filter too large
(more than 2**38 bits), or too many processes attached.

=back

=head1 SEE ALSO

F<README.pod> for sharing recipes (fork, file, memfd over a UNIX socket,
prefork servers), frozen mode, security, crash safety and performance.

=head1 LICENSE

This library is free software; you can redistribute it and/or modify it under
the same terms as Perl itself.

=cut
