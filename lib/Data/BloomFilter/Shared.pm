package Data::BloomFilter::Shared;

use 5.022;
use strict;
use warnings;

use Carp ();
use overload ();
use warnings::register;    # the category Data::BloomFilter::Shared

our $VERSION = '0.06';

require XSLoader;
XSLoader::load(__PACKAGE__, $VERSION);

# The hot methods (add, contains, add_many, contains_many) and every accessor
# are XSUBs. The constructors are cold: their arguments are parsed here, and
# the XS takes plain values and returns (object) or (undef, message), so that
# Carp can point the message at the caller's line.

# The checks of capacity, fp_rate, mode, seed, layout, the window options and
# options hashes, and their defaults, are shared with the Redis class and
# the command line tool: Data::BloomFilter::Shared::Args.
require Data::BloomFilter::Shared::Args;

sub _croak {
    my ($method, $message) = @_;
    Carp::croak(__PACKAGE__ . "->$method: $message");
}

sub _capacity { return Data::BloomFilter::Shared::Args::capacity(__PACKAGE__, @_) }
sub _fp_rate  { return Data::BloomFilter::Shared::Args::fp_rate(__PACKAGE__, @_) }
sub _mode     { return Data::BloomFilter::Shared::Args::mode(__PACKAGE__, @_) }
sub _seed     { return Data::BloomFilter::Shared::Args::seed(__PACKAGE__, @_) }
sub _layout   { return Data::BloomFilter::Shared::Args::layout(__PACKAGE__, @_) }
sub _window   { return Data::BloomFilter::Shared::Args::window(__PACKAGE__, @_) }
sub _grow     { return Data::BloomFilter::Shared::Args::grow(__PACKAGE__, @_) }
sub _options  { return Data::BloomFilter::Shared::Args::options(__PACKAGE__, @_) }
sub _uint64   { return Data::BloomFilter::Shared::Args::uint64(@_) }

# A path (or memfd name): a copy, never the caller's scalar. Its bytes are
# the scalar's own, UTF-8 flag and all, which is what Perl's open and -e use
# for the same scalar; the XS takes them as they are.
sub _bytes_string {
    my ($method, $what, $value) = @_;
    my $copy = Data::BloomFilter::Shared::Args::string(__PACKAGE__, $method, $what, $value);
    _croak($method, "$what contains a NUL byte, got " . Data::BloomFilter::Shared::Args::shown($value, $copy))
        if index($copy, "\0") >= 0;
    _croak($method, "$what must not be empty") if $copy eq '' && $what ne 'name';
    return $copy;
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

# What new and new_memfd share: the checks, in this order, of the options
# (an options hash from _options: window and generations, grow and
# max_capacity, bits and hashes), of the path or name ($what), capacity,
# fp_rate, mode (undef: the default) and the seed and layout options; each
# message names $method. Returns the XS constructor's arguments after the
# class: (path, capacity, fp_rate, mode, seed, layout, generations,
# window, bits, hashes, grow, max_capacity).
sub _new_args {
    my ($method, $what, $path, $capacity, $fp_rate, $mode, $opts) = @_;
    my ($generations, $window) = _window($method, $opts);
    my ($grow, $max_capacity) = _grow($method, $opts);
    my ($bits, $hashes) = Data::BloomFilter::Shared::Args::size(__PACKAGE__, $method, $opts);
    $path = _bytes_string($method, $what, $path) if defined $path;
    my $capacity_given = $capacity;
    $capacity = _capacity($method, $capacity);
    $fp_rate = _fp_rate($method, $fp_rate, $capacity_given);
    $mode = _mode($method, $mode);
    my $seed = _seed($method, $opts->{seed}, exists $opts->{seed});
    my $layout = _layout($method, $opts->{layout});
    $seed = Data::BloomFilter::Shared::Args::default_seed($layout) if !defined $opts->{seed};
    return ($path, $capacity, $fp_rate, $mode, $seed, $layout,
        $generations, $window, $bits, $hashes, $grow, $max_capacity);
}

sub new {
    my $class = _class('new', $_[0]);
    _croak('new', 'usage: ' . __PACKAGE__
            . '->new($path, $capacity, $fp_rate, $mode_or_options)')
        if @_ < 3 || @_ > 5;
    my (undef, $path, $capacity, $fp_rate, $last) = @_;
    my $fp_rate_given = defined $fp_rate;

    # The last argument: an options hash, or the mode itself.
    my ($opts, $mode) = ({}, undef);
    if (ref $last eq 'HASH') {
        $opts = _options('new', $last,
            qw(mode seed layout window generations bits hashes grow max_capacity));
        $mode = $opts->{mode};
    }
    elsif (ref $last) {
        _croak('new', 'last argument must be a file mode or a hash reference of options, got '
                . Data::BloomFilter::Shared::Args::shown($last));
    }
    else {
        $mode = $last;
    }
    my $mode_given = defined $mode;
    my $explicit_seed = defined $opts->{seed};

    my @args = _new_args('new', 'path', $path, $capacity, $fp_rate, $mode, $opts);
    # The checked values, for the checks and warnings about an existing file.
    ($path, $capacity, $fp_rate, $mode) = @args;
    my ($seed, $bits, $hashes) = @args[4, 8, 9];
    my $self = _made('new', _xs_new($class, @args));
    # An existing file keeps its size; other bits or hashes asked for would
    # otherwise be dropped without a word.
    _croak('new', "the file's bits and hashes differ from the bits and hashes options"
            . ' (a filter keeps its geometry)')
        if $hashes && ($self->hashes != $hashes || $self->bits != 64 * int(($bits + 63) / 64));
    # An existing file keeps its seed; a different one asked for explicitly
    # would otherwise be dropped without a word (and a secret seed with it).
    # The message does not show either seed.
    _croak('new', "the file's seed differs from the seed option"
            . " (a filter's seed cannot change)")
        if $explicit_seed && $self->seed ne $seed;
    _warn_geometry($self, $capacity, $fp_rate_given ? $fp_rate : undef);
    _warn_mode($path, $mode) if $mode_given && defined $path;
    return $self;
}

# An existing file keeps its mode (only a new file gets the one asked for):
# when a mode given explicitly differs, say so, as _warn_geometry does. The
# file's mode is read by its name just after it was opened.
sub _warn_mode {
    my ($path, $mode) = @_;
    my @st = stat $path or return;
    my $has = $st[2] & 07777;
    return if $has == $mode;
    warnings::warnif(__PACKAGE__, sprintf(__PACKAGE__ . "->new: the file's mode %04o is kept, not the mode %04o"
        . ' asked for (an existing file keeps its mode)', $has, $mode));
}

# An existing file keeps its capacity and fp_rate: when those asked for
# differ, say so once, naming both (the file may be sized for far fewer
# items than the caller expects). The category is this module's own, so that
# "no warnings 'Data::BloomFilter::Shared'" silences it and
# "use warnings FATAL => 'Data::BloomFilter::Shared'" makes it fatal.
sub _warn_geometry {
    my ($self, $capacity, $fp_rate) = @_;
    my (@kept, @asked);
    # A filter that grows was made with its first stage's capacity, which
    # its header gives: never stats, whose bits_set reads every stage (an
    # open reads nothing proportional to the filter).
    my $made = $self->grow ? $self->_first_capacity : $self->capacity;
    if ($made ne $capacity) {
        push @kept, "capacity $made";
        push @asked, "capacity $capacity";
    }
    if (defined $fp_rate && $self->fp_rate != $fp_rate) {
        push @kept, sprintf('fp_rate %.15g', $self->fp_rate);
        push @asked, sprintf('fp_rate %.15g', $fp_rate);
    }
    return if !@kept;
    warnings::warnif(__PACKAGE__, __PACKAGE__ . "->new: the file's " . join(' and ', @kept)
        . (@kept > 1 ? ' are' : ' is') . ' kept, not the ' . join(' and ', @asked)
        . ' asked for (an existing filter keeps its geometry)');
}

# A reference given as an item is taken as its address string (as the
# original module took it): the XS calls this, once per call given one, with
# the whole message. The category is this module's own, as _warn_geometry's.
sub _warn_reference_item {
    warnings::warnif(__PACKAGE__, $_[0]);
}

sub new_memfd {
    my $class = _class('new_memfd', $_[0]);
    _croak('new_memfd', 'usage: ' . __PACKAGE__
            . '->new_memfd($name, $capacity, $fp_rate, \%options)')
        if @_ < 3 || @_ > 5;
    my (undef, $name, $capacity, $fp_rate, $opts) = @_;
    $opts = _options('new_memfd', $opts,
        qw(seed layout window generations bits hashes grow max_capacity));
    # new_memfd has always checked bits and hashes before the window and
    # grow options (new after them): so it does still, for the message a
    # call wrong in both gives.
    Data::BloomFilter::Shared::Args::size(__PACKAGE__, 'new_memfd', $opts);
    # No mode option: _new_args gives the default mode.
    return _made('new_memfd',
        _xs_new_memfd($class, _new_args('new_memfd', 'name', $name, $capacity, $fp_rate, undef, $opts)));
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
        _croak('new_from_fd', 'file handle has no file descriptor'
                . ' (closed, or an in-memory file? give an open file or its fileno)')
            if !defined $n || $n < 0;
    }
    else {
        $n = _uint64($fd);
        _croak('new_from_fd', 'fd must be a non-negative integer or an open file handle, got '
                . Data::BloomFilter::Shared::Args::shown($fd))
            if !defined $n || length $n > 10 || $n > 2147483647;
    }
    return _made('new_from_fd', _xs_new_from_fd($class, 0 + $n));
}

sub new_readonly {
    my $class = _class('new_readonly', $_[0]);
    _croak('new_readonly', 'usage: ' . __PACKAGE__ . '->new_readonly($path)')
        if @_ != 2;
    _croak('new_readonly', 'path required') if !defined $_[1];
    my $path = _bytes_string('new_readonly', 'path', $_[1]);
    return _made('new_readonly', _xs_new_readonly($class, $path));
}

sub upgrade {
    my $class = _class('upgrade', $_[0]);
    _croak('upgrade', 'usage: ' . __PACKAGE__ . '->upgrade($path)') if @_ != 2;
    _croak('upgrade', 'path required') if !defined $_[1];
    my $path = _bytes_string('upgrade', 'path', $_[1]);
    return _made('upgrade', _xs_upgrade($class, $path));
}

sub deserialize {
    my $class = _class('deserialize', $_[0]);
    _croak('deserialize', 'usage: ' . __PACKAGE__ . '->deserialize($bytes, \%options)')
        if @_ < 2 || @_ > 3;
    # $_[1] goes to the XS untouched: no copy of a large string, and its get
    # magic runs once, there.
    my $opts = _options('deserialize', $_[2],
        qw(path memfd mode layout window generations grow max_capacity max_bytes));
    _croak('deserialize', 'the path and memfd options exclude each other')
        if defined $opts->{path} && defined $opts->{memfd};
    my ($generations, $window) = _window('deserialize', $opts);
    my $path = defined $opts->{path}
        ? _bytes_string('deserialize', 'path', $opts->{path}) : undef;
    my $to_memfd = defined $opts->{memfd} ? 1 : 0;
    $path = _bytes_string('deserialize', 'name', $opts->{memfd}) if $to_memfd;
    my $mode = _mode('deserialize', $opts->{mode});
    my $layout = _layout('deserialize', $opts->{layout});
    my ($grow, $max_capacity) = _grow('deserialize', $opts);
    my $max_bytes = Data::BloomFilter::Shared::Args::max_bytes(__PACKAGE__, 'deserialize', $opts);
    return _made('deserialize', _xs_deserialize($class, $_[1], $path, $mode, $layout,
            $generations, $window, $to_memfd, $grow, $max_capacity, $max_bytes));
}

# Storable would copy the handle's pointer and free it twice.
sub STORABLE_freeze {
    _croak('STORABLE_freeze', 'cannot be serialized by Storable; use serialize and deserialize');
}

# A handle belongs to the thread that opened it. A new ithread gets a copy
# of each object that holds no filter (the XS's dup hook sees to it), so
# that a call there croaks saying what to do, rather than Perl's "Can't
# call method on unblessed reference".
sub CLONE_SKIP { 0 }

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
    $bf->add_many(\@items, \@was_new);      # ... and one 0/1 per item
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
(C<Wide character: encode first (e.g. Encode::encode_utf8)>); a string of characters up to 0xFF is taken as those
bytes, whatever its internal encoding. An undefined item croaks. An object
with overloaded stringification is taken as its string; any other reference
is taken as Perl stringifies it (C<HASH(0x...)>, its address), as the
original took it, and warns (C<add($event)> for C<add($event-E<gt>{id})>; see
L</DIAGNOSTICS>). Tied and other magical scalars are fetched exactly once per call.

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
    my $bf = Data::BloomFilter::Shared->new($path, $capacity, $fp_rate,
        { layout => 'blocked' });
    my $bf = Data::BloomFilter::Shared->new($path, $capacity, $fp_rate,
        { window => 86400, generations => 4 });
    my $bf = Data::BloomFilter::Shared->new($path, $capacity, $fp_rate,
        { grow => 2, max_capacity => 1e9 });

Opens the filter file at C<$path>, creating it (mode C<$mode>, default C<0600>)
when it does not exist. When C<$path> is undef the filter is an anonymous
shared mapping, which children forked afterwards share.

An anonymous filter lives as long as the processes that have it, and only
processes forked from the one that made it after it was made can have it.
In a preforked server that means: made in a worker, it is that worker's
alone (Starman without C<--preload-app> loads the application in each
worker, so each gets its own filter); made in the master, it dies with the
master, so a Hypnotoad hot deployment (a new master) starts with an empty
one. Where every worker must see one filter whatever the server does, and
where the filter must survive a restart, give it a file (on F</dev/shm> for
memory speed).

C<$path> is taken as the bytes Perl's own C<open> and C<-e> use for the same
scalar: its internal bytes, so a character string with the UTF-8 flag on
names the file its UTF-8 encoding names, exactly as C<open> would.

C<$capacity> is the number of items the filter is sized for: anything Perl
takes as a positive number (C<1000>, C<1e6>, C<"1e6">, C<"1000\n">,
C<" 1000">, C<"1000.0">), rounded up to a whole number (C<1500.5> gives
1501); a non-number, zero or less, infinity and NaN croak, and so does a
capacity above 2**64-1 or one that needs more than 2**38 bits (C<too
large>). The command line tool's suffixes (C<10M>, C<5k>, C<2G>) are not
taken here, on purpose: in Perl code a capacity is a number, the same one
the program's own arithmetic and comparisons see (C<"10M" * 2> is 0, with a
warning), so C<"10M"> croaks, naming the Perl number to write instead
(C<10e6>). Durations such as C<"2s"> for C<window> croak the same way. C<$fp_rate>
is the false positive rate wanted at that many items (strictly between 0 and
1, default 0.01). When an existing file is opened its stored geometry wins;
the arguments are still checked in the same way, and a capacity (or an
C<$fp_rate> given) other than the file's gives one warning naming both, in
the warnings category C<Data::BloomFilter::Shared> (C<no warnings
'Data::BloomFilter::Shared'> silences it, C<use warnings FATAL =E<gt>
'Data::BloomFilter::Shared'> makes it a croak). A frozen file is refused
(see L</new_readonly>). A file written by the original C module (0.04)
croaks, naming the command that converts it (see L</UPGRADING FROM 0.04>).

A new file is built complete where no other process can see it (an
C<O_TMPFILE> file, or a temporary name beside C<$path> where the file
system has no C<O_TMPFILE>), and only then given its name; this needs no
F</proc>. All of its space is reserved then (L<posix_fallocate(3)>): when
the file system has no room for it, C<new> croaks with C<No space left on
device>, and when it is larger than the file size limit (C<ulimit -f>,
C<RLIMIT_FSIZE>) C<new> croaks naming the limit; either way no file is left
behind, and no later access can die of C<SIGBUS> for want of space. Before
that its size is checked against the file system's free space, and, for a
file on a tmpfs (F</dev/shm>), against the memory the process can have as
for L</new_memfd>: a filter larger croaks naming what it needs and what is
available (see L</Memory and space the host cannot hold>). When two
processes create the same file at once, one creates it and the other opens
it.

An existing empty file at C<$path> (made by C<touch> or C<mktemp>, say) is
adopted: only when it is a regular file owned by the process's effective uid
(an empty file of another user croaks, root included), and by renaming a
complete filter, built beside it, over it. The filter keeps the empty file's
mode and group. A failure or a kill while it is built leaves the empty file
as it was. Two processes adopting the same empty file take turns through its
creation lock (an open file description lock for writing, which only a
process that may write the file can hold); one waits for the other at most
C<BLOOMFILTER_SHARED_LOCK_WAIT> seconds (default 30; 0 tries once), then
croaks naming the file and the wait (see L</DIAGNOSTICS>). A file that is
not empty is opened under no lock at all: nothing another process holds
delays it.

Opening an existing file reads its header, its control line, its slot table
and, for a filter that grows, its stage table, never its bits: a filter of
1 GiB opens in about the time of one of 1 KiB (F<bench/open.pl>: 1.24x).
The stages a grown file's header says it has are believed as far as the
file's size covers them (a file too short for them croaks) and are mapped,
not read; so a writer that raises that count and extends the file with
holes makes an opener read no hole (on tmpfs, where a hole read would
become memory the file keeps, nothing is allocated).

The last argument is either a file mode or a hash reference with the keys
C<mode> and C<seed>. The mode is a number such as C<0660>: a string
(C<"0660">, which Perl would read as decimal 660) croaks and says to use
C<oct()>. A mode from L<stat|perlfunc/stat> (C<(stat $file)[2]>, which
carries the file type too) is taken as its permission bits. A mode with
bits outside C<0777> (set-user-ID, set-group-ID or sticky) croaks: it is
nearly always a mode written in decimal (C<660> is C<01224>), and the
message says to write it in octal. The mode is a new file's: an existing
file keeps its own, and an explicit mode that differs from it warns. C<seed> is a
non-negative integer below 2**64 (a decimal string is accepted for values
beyond Perl's integers); a non-zero seed makes probe positions unpredictable
to whoever chooses the items. A C<seed> option that is undef croaks (an
unset C<$secret> would otherwise give seed 0 and protect nothing): leave
the option out for seed 0. Filters with different seeds are not
compatible. An existing file keeps the seed it was created with: an explicit
C<seed> that differs from it croaks (rather than return a filter without the
protection asked for), and an absent one takes the file's. See L</SEEDS>.

The option C<layout> is C<'standard'> (the default: C<bloom.h>'s bits),
C<'blocked'> (all of an item's bits in one word: lock-free adds) or
C<'datasketches'> (Apache DataSketches' Bloom filter, bit for bit; its seed
is 9001 when no C<seed> is given): see L</LAYOUTS>. An existing file keeps
the layout it was created with; an explicit C<layout> that differs from it
croaks with C<layout mismatch (the filter is ..., not ...)>.

With C<< layout => 'datasketches' >>, the options C<bits> and C<hashes>
(both or neither) give the size directly, as DataSketches' builder's
C<with_size> does: C<bits> (1 to 2**37 - 320, rounded up to a multiple of
64) and C<hashes> (1 to 32767); C<$capacity> and C<$fp_rate> are then only
recorded (L</capacity>, L</fp_rate>, the saturated L</count>). An existing
file's size wins, and different C<bits> or C<hashes> croak. L</new_memfd>
takes them too.

The options C<window> (seconds) and C<generations> (2 to 16, default 4)
make a I<windowed> filter, which forgets items after the window: see
L</WINDOWED FILTERS>. C<window =E<gt> undef> with C<generations> makes one
that steps only when told (L</rotate>). An existing file keeps its window;
an explicit C<window> or C<generations> that differs from it croaks with
C<window mismatch (the filter has ..., not ...)>. A C<window> given without
C<generations> opens a windowed file of any number of generations.

The options C<grow> (an integer from 2 to 16) and C<max_capacity> (the most
items it may take; optional) make a filter that I<grows>: past
C<$capacity> new items it adds a stage C<grow> times larger instead of
losing its rate; see L</FILTERS THAT GROW>. Not with C<window>, nor with
the C<datasketches> layout. An existing file keeps its growth, and an
explicit C<grow> (or C<max_capacity>) that differs from it croaks with
C<growth mismatch (the filter ..., not ...)>.

=head3 new_memfd

    my $bf = Data::BloomFilter::Shared->new_memfd($name, $capacity, $fp_rate, \%options);

A new filter in a memfd (an anonymous file, see L<memfd_create(2)>). C<$name>
is only a label: any string without a NUL byte (undef or C<""> for a
default one; the kernel keeps its first 249 bytes). C<$fp_rate> defaults to
0.01; the options are C<seed>, C<layout>, C<window>, C<generations>, C<grow> and C<max_capacity> (as for L</new>). Its file descriptor is L</memfd>: pass it
to another process (over a UNIX socket, or to an C<exec>ed child) to share
the filter. Its memory is reserved at once, as for a file (see L</new>),
and so is an anonymous filter's: one larger than C<RLIMIT_FSIZE> croaks
naming the limit. Before anything is created, its size is checked against
the memory the process can have: the room its memory cgroup (a container's
memory limit) leaves, the system's C<MemAvailable>, and the address space
C<RLIMIT_AS> leaves. A filter larger than the tightest of them croaks
naming what it needs and what is available (C<the filter needs 2149580800
bytes (2 GiB), but the memory cgroup allows 507.8 MiB more (532422656
bytes); nothing was created>), where the kernel's OOM killer would
otherwise end this process, or another, while the memory is reserved. See
L</Memory and space the host cannot hold>.

The descriptor is close-on-exec, like every descriptor this module opens, so
an C<exec>ed program does not inherit it by itself. To hand it to a child
you C<exec>, clear the flag in the child between C<fork> and C<exec>:

    use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC);
    my $fd = $bf->memfd;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open my $fh, '<&=', $fd or die "fdopen: $!";
        fcntl($fh, F_SETFD, fcntl($fh, F_GETFD, 0) & ~FD_CLOEXEC) or die "fcntl: $!";
        exec 'worker', "--filter-fd=$fd" or die "exec: $!";
    }

and in the C<exec>ed program, C<< Data::BloomFilter::Shared->new_from_fd($fd) >>.
Or let Perl clear the flag: it does so for a descriptor it opens that is not
above C<$^F>, and opening this one anew (C<< open my $fh, '<&=', $fd >>)
counts, so in the child C<$^F = $fd;> before that C<open> does the same.

=head3 new_from_fd

    my $bf = Data::BloomFilter::Shared->new_from_fd($fd);
    my $bf = Data::BloomFilter::Shared->new_from_fd($fh);

Attaches to the filter behind an open file descriptor (a number, or a file
handle whose C<fileno> is taken): a memfd received from another process, or a
filter file. The descriptor is duplicated (close-on-exec); the caller keeps
and closes its own, and the handle's duplicate is its L</memfd>, which can be
passed on in turn.

A descriptor opened read-only (C<O_RDONLY>) gives a query-only handle, also
of a live filter that other processes still change: this is how a process
that may only read a filter file (a monitor running as another user, say)
queries it. The mapping is C<PROT_READ> and the handle takes no process slot
and no lock: L</contains>, L</contains_many>, L</count>, L</bits_set>,
L</stats> and the other accessors work and see other processes' adds as
they happen, while every mutator (L</add>, L</add_many>, L</merge>,
L</intersect>, L</invert>, L</clear>, L</freeze>) croaks with
C<filter handle is read-only>. A frozen filter gives a query-only handle
whatever the descriptor's access mode.

=head3 new_readonly

    my $bf = Data::BloomFilter::Shared->new_readonly($path);

Opens a L<frozen|/freeze> filter file read-only: the mapping is C<PROT_READ>,
no lock is ever taken, and it works on a read-only file system. Only queries
and accessors work; mutations croak. C<$path> is required (undef croaks with
C<path required>); a filter that is not frozen croaks (C<not frozen>). To
query a live filter without write access, give L</new_from_fd> a descriptor
opened read-only.

=head3 deserialize

    my $bf = Data::BloomFilter::Shared->deserialize($bytes);
    my $bf = Data::BloomFilter::Shared->deserialize($bytes,
        { path => $path, mode => 0600, layout => 'blocked' });
    my $bf = Data::BloomFilter::Shared->deserialize($bytes, { memfd => $name });
    my $bf = Data::BloomFilter::Shared->deserialize($bytes,
        { window => 86400, generations => 4 });
    my $bf = Data::BloomFilter::Shared->deserialize($datasketches_image);

A new filter from the output of L</serialize>, or from an Apache
DataSketches Bloom filter's serialized image (told by its family byte, no
option needed; it gives a filter of L<layout datasketches|/The datasketches
layout>, and takes no C<window>): anonymous, at C<path>
(created with C<mode>, default C<0600>, built and reserved as by L</new>,
so that a full file system or C<RLIMIT_FSIZE> croaks and leaves no file),
or in a new memfd named C<memfd> (as L</new_memfd>; C<path> and C<memfd>
exclude each other).
The bytes are treated as hostile:
every length and field is checked. The seed is taken from the bytes, so
C<seed> is not an option here; so is the layout, and an explicit C<layout>
that differs from the bytes' croaks with C<layout mismatch (the bytes are of
a ... filter, not ...)>. An existing C<path> is refused, never
replaced. The bytes of a L<windowed|/WINDOWED FILTERS> filter give a
windowed filter with the same window, generations and items; the options
C<window> and C<generations> must then be the bytes' own. Given to plain
bytes, they make a windowed filter whose current generation holds the
bytes' items; see L</Windowed filters as bytes>. The bytes of a filter
that grows give one with the same stages and items; an explicit C<grow> (or
C<max_capacity>) must then be the bytes' own, and croaks with C<growth
mismatch> on plain bytes. The result is an ordinary
read-write filter; see L</PORTABLE FILTERS>.

The filter the bytes describe may need at most 64 times their length in
memory, and at least 16 MiB is always allowed: bytes that ask for more
croak before anything is allocated (C<the bytes ask for a filter of ...
bytes, more than the ... bytes that N bytes of input may ask for ...>).
Our own bytes carry their bits, so their filter is about their size; an
empty DataSketches image declares its size without its words, 2 GiB in 24
bytes, and is the case this bounds. The option C<max_bytes>, a positive
integer, sets that ceiling instead, higher or lower:

    my $bf = Data::BloomFilter::Shared->deserialize($image, { max_bytes => 1 << 30 });

Whatever the ceiling, the filter must also fit the memory or the file
system it goes to, as for L</new>.

=head2 Adding and testing

=head3 add

    my $new = $bf->add($item);

Adds C<$item>. Returns 1 when it was probably new (at least one of its bits was
0), 0 when it was probably seen. Among processes adding the same item at the
same moment, at most one is told 1.

=head3 add_many

    my $new_count = $bf->add_many(\@items);
    my $new_count = $bf->add_many(\@items, \@was_new);

Adds every item of the array and returns how many were new, in every context
(list assignment, C<return>, C<sprintf '%d'> all see that one number, as
with the original). With a second argument, an array reference, that array is
emptied and then gets one 0/1 per item: 1 where the item was probably new.
Every item (and the out array) is validated before any is added: a bad one
croaks naming its index, and then nothing was added.

    my @new = @ids[ grep { $was_new[$_] } 0 .. $#ids ];    # the new ones

An array of many items is read as it goes: a tied array is asked for its
elements one by one, and memory grows with the elements it really gives, not
with the size its C<FETCHSIZE> claims.

=head3 contains

    my $present = $bf->contains($item);

1 when C<$item> is probably in the filter, 0 when it certainly is not.

=head3 contains_many

    my $present_count = $bf->contains_many(\@items);
    my @present       = $bf->contains_many(\@items);
    $bf->contains_many(\@items, \@present);

Tests every item of the array: in scalar context how many are present; in list
context one 0/1 per item. It takes the same optional out array as
L</add_many>, filled with one 0/1 per item; the return value stays as above.

These four methods are made for tight loops. The first time one of them is
called from a given place in your code, it replaces Perl's generic sub-call
step at that place with a direct call, which saves about a fifth of the cost
of a call (the technique of L<Class::XSAccessor>). The place goes back to the
generic step for good as soon as it calls anything else, such as another
class's method or a Perl override in a subclass. Nothing else changes that you
can observe, with one exception: a profiler loaded after the first call does
not see calls from such places. Under the debugger (C<perl -d>) nothing is
replaced. In a preforked server, a place first called in a child is changed
in that child only, so the memory page of compiled code holding it stops
being shared with the parent; a place the parent called before forking is
changed once, in the parent, for all.

=head2 Combining and changing

=head3 merge

    $bf->merge($other);

Union: ORs C<$other>'s bits into this filter. Both must be L</is_compatible>.
Merging a filter into itself does nothing. "Itself" means the same mapped
object: the same file (by device and inode, through any path, handle or
descriptor), the same memfd, the same anonymous filter. A copy of a filter
file (C<cp>) is another filter, and merging it brings in what was added to
the copy.

A merge is crash-atomic: a process killed in the middle of one leaves the
filter as before or as after it, once any other process touches it (see
L</CONCURRENCY AND CRASH SAFETY>). For that it first copies C<$other>'s bits
into a I<journal> beside this filter, then ORs them in with the filter held
exclusively (adds wait for that pass over the bits). The journal takes one
bit array's bytes (L</bits> / 8) more: a file, a memfd (and an anonymous
filter, a memfd inside) grows by that much at the first merge or intersect
and keeps that space, which the next one reuses. It is never given back: who
uses it is known only from a word in the file, which any writer of the file
can forge, and giving it back under a process still using it would take its
memory away (see L</"Lost pages and $SIG{BUS}">). To reach the journal from
any process, a process keeps one
descriptor of a filter file open while it has handles of it (one, however
many handles: close-on-exec), and each anonymous filter keeps its memfd's.
Where that space is missing (a full file system, a quota, the
file size limit, or memory: checked first, see L</Memory and space the
host cannot hold>) the merge croaks naming the reason (C<ENOSPC>, ...) and
changes nothing. A memfd sealed against growing (made by an earlier
version, or by another program) cannot hold a journal: there the merge ORs
in place, one word at a time, as earlier versions did, and a process killed
in it leaves part of C<$other> merged.

=head3 intersect

    $bf->intersect($other);

Intersection: ANDs C<$other>'s bits into this filter. Both must be compatible.
Items in only one of the two may then be reported absent. With itself (in
the sense of L</merge>) it does nothing; with a copy it takes effect. It is
crash-atomic, through a journal, as L</merge> is, and needs the same space;
the same exception for a memfd sealed against growing (there it ANDs in
place, exclusively).

On L<filters that grow|/FILTERS THAT GROW> both filters must grow alike
(the same C<grow>, C<max_capacity>, capacity, C<fp_rate>, layout and
seed: then stage I<i> of one has the geometry of stage I<i> of the other);
a filter that grows with one that does not, or that grows otherwise,
croaks C<growth mismatch (grows by 2 vs does not grow)> and the like. A
B<merge> first adds empty stages to this filter until it has as many as
C<$other> (each reserved as an C<add> would reserve it; where the space is
missing it croaks naming the reason, and the stages already added stay,
empty), then ORs each stage of C<$other> into the same stage of this one,
all stages in one crash-atomic pass: its journal is as large as all of this
filter's stages together, and lies past them (its space is kept, as a
plain filter's journal is). Every item of either filter is then in. A
merged stage can hold more than its capacity (as a plain merge can
overfill a filter): each stage's fill count (L</stats>' C<stage_info>)
becomes at least the items its bits hold, so a newest stage merged past
its capacity makes the next new item add a stage. An B<intersect> takes a
C<$other> of one stage only: it ANDs it into this filter's stage 0 and
keeps this filter's later stages as they are (an item both hold that this
filter keeps in a later stage stays; an item only this filter holds there
stays too). With a C<$other> grown to more stages it croaks C<the other
filter has grown to N stages; an item both filters hold can sit in
different stages, so no stage can be intersected without losing it> and
changes nothing: an item is in the stage that was newest when it was
added, which differs between the two filters, and a stage's bits mean
nothing in another stage's geometry. A memfd sealed against growing has
no room for the journal of a filter that grows (nor for its stages): both
croak there.

=head3 invert

    $bf->invert;

Flips every bit. Croaks on a L<filter that grows|/FILTERS THAT GROW> (the
complement of its stages together is no stage's complement).

=head3 rotate

    $bf->rotate;

Takes a generation step of a L<windowed|/WINDOWED FILTERS> filter now, due
or not: the oldest generation is forgotten. Croaks on a plain filter.

=head3 is_compatible

    if ($bf->is_compatible($other)) { ... }

1 when the two filters have the same layout, geometry (bits, hashes) and
seed, so that L</merge> and L</intersect> are meaningful; 0 otherwise.

=head3 clear

    $bf->clear;

Sets every bit to 0, for every process sharing the filter. A L<filter that
grows|/FILTERS THAT GROW> goes back to its first stage (the later ones are
added again as it fills).

=head3 freeze

    $bf->freeze;

Marks the filter frozen, for good: every later mutation, through any handle,
croaks (C<filter is frozen (read-only)>; a second C<freeze> too), every
handle of it reports L</readonly> 1, the freezing one included, and the file
can be opened with L</new_readonly>.

=head3 sync

    $bf->sync;

Flushes a file-backed filter to disk (L<msync(2)>).

=head3 unlink

    $bf->unlink;
    Data::BloomFilter::Shared->unlink($path);

Removes the filter's file, or the file at C<$path>, and returns 1; returns 0
when there is nothing to remove (a filter without a path, or a file already
gone), so a second call is harmless. It croaks only on a real error
(permissions, a directory...). Processes that have the file open keep using
it. C<$path> is taken as Perl's own C<unlink> takes it.

=head2 Accessors

=head3 capacity

The capacity the filter was sized for; of a L<filter that grows|/FILTERS
THAT GROW>, the capacities of its stages so far together.

=head3 fp_rate

The false positive rate it was sized for.

=head3 bits

The number of bits, I<m> (a power of two, at least 64, in the standard
layout); of a filter that grows, its stages' bits together.

=head3 hashes

The number of probes per item, I<k> (1 to 32); of a filter that grows, its
first stage's (each stage has its own: L</stats>).

=head3 seed

The hash seed (0 for C<bloom.h> compatibility), exactly, even above 2**63.
See L</SEEDS>.

=head3 count

An estimate of how many distinct items were added, from the number of bits set
(with the estimator of the filter's layout: see L</LAYOUTS>).

=head3 bits_set

How many bits are 1.

=head3 fill_ratio

C<bits_set / bits>.

=head3 estimated_fpp

The false positive probability now: C<fill_ratio ** hashes> for the standard
layout; for the blocked one, the layout's exact rate at the load L</count>
estimates (see L</LAYOUTS>).

=head3 is_empty

1 when no bit is set, else 0. For a L<windowed|/WINDOWED FILTERS> filter, 1
when no generation visible now holds a bit (those the clock has expired
count as empty, as for L</contains>): then C<contains> is 0 for every item.
See L</An idle windowed filter's numbers>.

=head3 frozen

1 when the filter is frozen, else 0.

=head3 readonly

1 when nothing can change the filter through this handle: a handle from
L</new_readonly>, one from L</new_from_fd> of a read-only descriptor, or any
handle of a L<frozen|/freeze> filter; else 0.

=head3 path

The backing file's path, or undef for an anonymous, memfd or fd filter.

=head3 memfd

The handle's own descriptor: the memfd of a filter from L</new_memfd>, or
the duplicate a handle from L</new_from_fd> made of the descriptor it was
given; else -1. It belongs to the handle: do not close it (pass it on, or
L<dup|POSIX/dup> it).

=head3 layout

C<'standard'>, C<'blocked'> or C<'datasketches'>: the layout the filter was
created with (see L</LAYOUTS>).

=head3 window

The window of a L<windowed|/WINDOWED FILTERS> filter in seconds, as it
was given (to 0.1 microsecond); undef for a plain filter and for one that
steps only when rotated. The steps use it rounded up to whole nanoseconds
that divide by C<generations - 1> (C<window =E<gt> 2> with 4 generations
steps every 666,666,667 ns).

=head3 generations

The number of generations of a windowed filter; undef for a plain filter.

=head3 grow

The factor a L<filter that grows|/FILTERS THAT GROW> grows by (2 to 16);
undef for one that does not.

=head3 stages

How many stages the filter has now: 1 for one that does not grow.

=head3 max_capacity

The most items a filter that grows may take, as given; undef when none was
given (and for a filter that does not grow).

=head3 serialize

    my $bytes = $bf->serialize;
    my $image = $bf->serialize(format => 'datasketches');

The filter as portable bytes (versioned, little-endian, with a checksum),
for L</deserialize>: C<bits / 8 + 64> bytes, the same for the same items,
geometry and seed on any host. Works on frozen and read-only handles too.
The format is in L</PORTABLE FILTERS>. A windowed filter's bytes are
C<g * (bits / 8 + 8) + 88> bytes (I<g> generations, without the spare) and
carry its window and time state: see L</Windowed filters as bytes>. A
filter that grows gives C<72 + 8 * stages + bits / 8 + 8> bytes, every
stage in them (L</Filters that grow as bytes>).

With C<< format => 'datasketches' >>, a plain filter of layout
C<datasketches> gives Apache DataSketches' serialized image instead, which
DataSketches' Java, C++ and Rust versions read: see L</The datasketches
layout>. A filter of another layout croaks, saying to create it with
C<< layout => 'datasketches' >>; a windowed one croaks too (the image holds
one bit array).

=head3 stats

    my $stats = $bf->stats;

A hash reference with the keys C<capacity fp_rate bits hashes seed bits_set
count fill_ratio estimated_fpp ops mmap_size frozen readonly overfull layout>: the
accessors above, plus C<ops>, C<mmap_size> (bytes mapped; for a filter
that grows, its later stages included as published) and C<overfull>.
A windowed filter adds C<window> and C<generations> (as the accessors),
C<generation> (the current generation's number: the period since creation
it started in, or the number of rotations of a filter without a window) and
C<generation_start> (when that period started, in seconds since the epoch;
undef without a window). A filter that grows adds C<grow>, C<stages>,
C<max_capacity> (as the accessors) and C<stage_info>: an array reference
with a hash reference per stage, oldest first, with its C<capacity>,
C<bits>, C<hashes> and C<fill> (the new items counted into it: each writer
adds its own count every few items, at the latest when its handle goes
away). For a windowed filter C<bits_set>, C<count>,
C<fill_ratio> and C<estimated_fpp> describe the current generation. All of
them follow the clock on an idle filter: see L</An idle windowed filter's
numbers>.

C<ops> counts write calls, summed over every process, as the original
documents: each C<add>, C<add_many> (however many items, none too),
C<merge> (a self-merge too), C<intersect>, C<invert>, C<clear>,
C<freeze> and C<rotate> is one; queries are not counted (nor the steps
a windowed filter's writers take as time passes).

C<overfull> is 1 when the filter holds more than it was sized for: C<count>
has passed C<capacity>, or every bit is set (C<count> then stays at
C<capacity>). Past capacity the false-positive rate climbs fast (see
L</CHOOSING CAPACITY AND FP_RATE>): watch this flag and build a larger
filter, or make one that grows (L</FILTERS THAT GROW>), which is never
overfull.

=head2 Files of the original

=head3 upgrade

    my $done = Data::BloomFilter::Shared->upgrade($path);

Converts the filter file at C<$path>, written by the original C module
(Data::BloomFilter::Shared 0.04 or earlier, either of its two formats), into
a filter file of this version, in place, and returns a hash reference of
what it converted: C<from_version> (the old format, 1 or 2), C<bits>,
C<hashes>, C<capacity>, C<fp_rate> and C<bits_set>. A filter file of an
earlier release of this module whose format is 2 (process slots holding C
library mutexes) is converted too, by rewriting its slot table in place
(bits, geometry and operation counts stay; refused while a slot is held):
the hash then also has C<earlier_release> set to 1. The bits are copied
word for word, so the same items are present, with the same C<count>; the
geometry, mode and owner carry over (C<ops> starts again from 0). The new
file is built complete beside the old one and renamed over it, so C<$path>
names the old file or the new one at every moment, never a mix; on any error
nothing changed. The command C<bloomfilter-shared upgrade PATH> does the
same.

Stop every process of the old version first. A file that another process has
locked (C<flock>) or mapped is refused (C<in use>), but that can only be
told of processes this one can see in F</proc>: not of those in another PID
namespace (another container) or hidden by a C<hidepid> mount. A damaged
file is refused with what is wrong, a file of this version with C<already a
filter of this version>. See L</UPGRADING FROM 0.04>.

=head2 Lifetime

=head3 DESTROY

Releases the handle (the shared filter itself lives on in its file or in the
other processes). Calling it explicitly is allowed: any later call on that
object croaks with C<destroyed handle>, and never touches freed memory.

=head3 CLONE_SKIP

Returns 0: a new ithread gets a copy of each handle, which holds no filter
(see L</THREADS>). Processes created with C<fork> share the filter and may
use inherited handles.

=head2 THREADS

A handle belongs to the thread that opened it. A thread started later
gets a copy of each object, still of its class, that refers to no filter:
any call on it croaks

    Data::BloomFilter::Shared->add: this handle was opened in another
    thread; open the filter in each thread (new with the path,
    new_from_fd, ...)

and the copy never touches the first thread's handle, nor frees it when
the thread ends. Open the filter in each thread: by its path, or with
L</new_from_fd> and the descriptor number of a memfd read before the
thread starts (C<my $fd = $bf-E<gt>memfd>). Handles opened so are one
filter, as in separate processes. An anonymous filter (C<new(undef, ...)>)
cannot be opened again: give threads a file or a memfd.

    my $bf = Data::BloomFilter::Shared->new('/dev/shm/seen.bloom', 1e6);
    threads->create(sub {
        my $mine = Data::BloomFilter::Shared->new('/dev/shm/seen.bloom', 1e6);
        $mine->add($_) for @ids;
    });

Before 0.06 the copy was not an object at all, and a call on it died with
Perl's C<Can't call method "add" on unblessed reference>.

=head1 UPGRADING FROM 0.04

This module replaces the original C-only Data::BloomFilter::Shared (0.04,
and 0.05 which added C<freeze>). Its version, 0.06, is above both, so
C<use Data::BloomFilter::Shared 0.05> keeps working, and code written for the
original runs unchanged: C<add_many> returns the count of new items in every
context, C<stats-E<gt>{ops}> counts write calls, the croaks keep the
original's key words (C<too large>, C<read-only>, C<path required>, C<not
frozen>), C<unlink> is idempotent, handles can be re-blessed into
subclasses, and the same items, capacity and rate set the same bits.

=head2 Steps

=over 4

=item 1. Stop every process that uses the old module's filter files.

=item 2. Install this version.

=item 3. Convert each file: C<bloomfilter-shared upgrade PATH> (or
L</upgrade>). Opening an unconverted file with L</new> croaks with
C<written by Data::BloomFilter::Shared 0.04: convert it with
`bloomfilter-shared upgrade PATH`>; nothing is changed until you do.
Anonymous filters need nothing: they live as long as their processes.

=item 4. Start the processes again.

=back

=head2 What is deliberately different, and why

=over 4

=item * B<An undefined item croaks> (C<undefined item>, with its index in a
batch). Taking it as C<""> would make every missing id the same item, and
the second one "seen": a silent loss of data.

=item * B<Stricter argument checks.> A capacity that is not a number (or is
zero, negative, infinite or NaN), a mode given as a string (C<"0660"> reads
as decimal 660, a mode readable by all and not by the owner), an unknown
option, a seed other than an existing file's, a path with a NUL byte: each
croaks, where the original went on with a surprising result. Numbers are
still anything Perl takes as a number (C<"1e6">, C<"1000\n">, C<1500.5>).

=item * B<Croak wording.> Every message starts with
C<Data::BloomFilter::Shared-E<gt>METHOD: > and says what was wrong (see
L</DIAGNOSTICS>). The original's key words are kept inside the messages:
match on those (C<qr/too large/>), not on whole messages.

=item * B<Memory per filter.> Before the bits, a file or mapping has a
control area of 72 to 324 KiB (a header page, 1 024 process slots and 64 to
4 096 lock stripes, one stripe per 1 024 bits, each on its own cache line, so
that no two processes write the same line on the hot path; 2 MiB when the bit
array is 4 MiB or more, so that the bits start on a huge page). A 1 000-item
filter therefore maps 74 KiB where the original's took 18 KiB; for large
filters the difference is negligible.
C<stats-E<gt>{mmap_size}> is the exact size.

=item * B<Batches are linearizable per item, not one lock per batch.> An
C<add_many> never holds a lock across its items: adds of other processes
can come between two items of a batch. Each item's add is still
linearizable (among processes adding the same item at once, at most one is
told "new"), and a batch is all or nothing with respect to validation; what
is not promised is that a batch appears to others all at once.

=item * B<Items and paths are bytes.> A character above 0xFF in an item
croaks (C<Wide character: encode first (e.g. Encode::encode_utf8)>); paths
are the bytes Perl's own C<open> uses for the same scalar.

=item * B<New methods and options:> C<seed>, L</new_memfd>,
L</new_from_fd>, L</serialize> and L</deserialize>, L</intersect>,
L</invert>, L</is_compatible>, L</upgrade>, the out arrays of L</add_many>
and L</contains_many>, and C<overfull> in L</stats>.

=item * B<The file format> is this module's own (header, process slots,
lock stripes, then the page-aligned bits); files of the original are
converted once with L</upgrade>. C<ops> starts again from 0 in a converted
file.

=back

=head1 PORTABLE FILTERS

L</serialize> turns a filter into bytes that mean the same on every host,
whatever its byte order or word size; L</deserialize> turns them back into a
filter (anonymous, or a new file). Use them to ship a filter over the
network, to store it in a database, or to merge filters built on many hosts.

=head2 The byte format

All integers are little-endian; the size is exactly C<bits / 8 + 64> bytes.

    offset     size   field            value
    ---------  -----  ---------------  -------------------------------------------
    0          8      magic            the ASCII bytes "BLOOMSER"
    8          4      version          1 (u32)
    12         4      hash scheme      (u32) 1: standard layout (below);
                                       2: blocked, 64-bit words; 3: blocked,
                                       128-bit blocks (see LAYOUTS)
    16         4      k                probes per item, 1 to 32 (u32)
    20         4      reserved         0 (u32)
    24         8      m                bits, 64 to 2**38 (u64): a power of two
                                       (scheme 1), a multiple of 64 or 128
    32         8      capacity         the capacity it was sized for, >= 1 (u64)
    40         8      fp_rate          IEEE-754 double, 0 < fp_rate < 1
    48         8      seed             the hash seed (u64)
    56         m / 8  bit array        m / 64 words (u64); bit i is bit i % 64
                                       of word i / 64, so bit i % 8 of byte
                                       56 + i / 8 (Perl: vec($array, $i, 1))
    56 + m/8   8      checksum         XXH3-64 (seed 0) of every byte before it

With hash scheme 1, an item's bits are those of the original C<bloom.h>:
C<h = XXH3-128(item, seed)>, C<h1> its low 64 bits, C<h2> its high 64 bits
with the lowest bit set, and probe C<i> (0 to k-1) is bit
C<(h1 + i * h2) mod m> in wrapping 64-bit arithmetic.

A L<windowed|/WINDOWED FILTERS> filter's bytes are version 2: the same
first 56 bytes but for the version (2) and the word at 20, which holds the
number of generations I<g>, then:

    offset     size   field            value
    ---------  -----  ---------------  -------------------------------------------
    20         4      generations      g, 2 to 16 (u32)
    24         8      m                bits of one generation (u64)
    32         8      capacity         distinct items per window (u64)
    56         8      window           ns (u64), a multiple of g - 1; 0 for a
                                       filter stepped only by rotate
    64         8      epoch0           ns since the Unix epoch (u64): periods
                                       of window / (g - 1) count from here
    72         8      generation       the current generation's number (u64):
                                       the period it started in, or the steps
                                       taken by rotate; below 2**59
    80         8 * g  last words       (u64 each) current generation first:
                                       one more than the period of its latest
                                       add, 0 for none; at most 2**59
    80 + 8g    g*m/8  bit arrays       the g generations, current first, each
                                       as the bit array above
    end - 8    8      checksum         XXH3-64 (seed 0) of every byte before it

The generations are in age order, not in the ring order of the source's
memory, and its spare generation (see L</WINDOWED FILTERS>) does not
travel: the copy starts with a clean one. The checks are those of version 1
and, before the length, the generations, the window (in range, a whole
number of periods) and the generation number; after the checksum, each
last word.

The format is documented in F<src/shm/serial.rs> too. A reader of version 1
accepts version 1 only, and this one versions 1 and 2; a change of layout
or hashing gets a new version or hash scheme number, which older readers
refuse by name. Plain filters still serialize as version 1, byte for byte
as before.

The input of L</deserialize> is treated as hostile. It checks, in this order:
the magic, a length of at least 64 bytes, the version, the hash scheme, the
reserved word, the geometry (k, m, capacity and fp_rate in range), that the
length is exactly what m asks for, and the checksum. Only then does it
create the filter, so a few bytes that claim 2**38 bits are refused as
C<truncated input> without allocating anything; the largest allocation an
input can cause is the filter it really contains. Each failure croaks with
its reason (see L</DIAGNOSTICS>).

The bytes depend only on the geometry, the seed and the set bits: not on the
host, the process, the backing (file, anonymous, memfd) or the order the
items were added in. Two filters of the same items, capacity, fp_rate and
seed serialize to identical bytes, so the bytes can be compared or hashed.

=head2 Compatibility

L</merge> and L</intersect> combine filters with the same bits (I<m>),
hashes (I<k>) and seed; L</is_compatible> tells. Since I<m> and I<k> follow
from capacity and fp_rate, filters meant to be combined are built with the
same capacity, fp_rate and seed. Anything else croaks, naming the method,
with C<geometry mismatch (...)> or C<seed mismatch (...)>, and changes
neither filter. Size them for the union: the total number of items of all
parts, not one part's, or the merged filter is over capacity.

A filter deserialized from bytes is an ordinary read-write filter: it keeps
the seed and geometry of the bytes and can be merged with filters built
locally with the same parameters. It is not frozen even when its source was
(L</serialize> works on frozen and L</new_readonly> handles).

=head2 Many hosts, one filter

    # On every host: the same capacity, fp_rate and secret seed.
    my $part = Data::BloomFilter::Shared->new(undef, $total, 0.01,
        { seed => $secret });
    $part->add_many(\@my_items);
    ship($part->serialize);                      # a file, HTTP, a queue...

    # On the collector:
    my $all = Data::BloomFilter::Shared->new(undef, $total, 0.01,
        { seed => $secret });
    $all->merge(Data::BloomFilter::Shared->deserialize($_)) for @received;

    # Publish the union for readers on this host:
    my $file = Data::BloomFilter::Shared->deserialize($all->serialize,
        { path => '/srv/seen.bloom', mode => 0644 });
    $file->freeze;
    # ... and in any reader:
    my $seen = Data::BloomFilter::Shared->new_readonly('/srv/seen.bloom');

F<eg/merge_hosts.pl> runs this recipe with forked processes standing in for
the hosts (C<perl -Mblib eg/merge_hosts.pl> after building).

=head2 A frozen file or bytes?

A L<frozen|/freeze> filter file can be copied to another host and opened
there with L</new_readonly>: it is mapped in place, so opening costs nothing
however large the filter is, pages are read only when queried, and many
processes share one copy in the page cache. But the file is the shared
mapping's own layout: a header, the process slots and lock stripes (72 to
324 KiB; 2 MiB for bit arrays of 4 MiB or more), then the page-aligned bit array;
it is in the writing host's byte order (a file from a host of the other
byte order is refused), and its checksum covers the header only.

Serialized bytes are compact (C<bits / 8 + 64>), independent of byte order,
and checksummed in full, bits included; but L</deserialize> reads and copies
all of them into a new filter. Ship bytes across the network, between
architectures, or into storage; ship a frozen file (or deserialize once on
arrival with C<path> and L</freeze> it, as above) when many readers on
hosts like the writer should map it without copying.

=head1 SEEDS

With the default seed of 0 the bits an item sets are a public function of
the item: anyone can compute them, offline, for any item. Where an attacker
chooses items that you add or look up (user names, URLs, message ids,
anything that arrives from outside), that knowledge allows two attacks:

=over 4

=item * Crafted false positives. To make the filter say "seen" for an item
that was never added (a target's id, so that a deduplicator drops its
event, or a name check reports it taken), the attacker searches offline for
a few items whose bits together cover all of the target's bits, and gets
them added. Knowing some items that were added, the attacker can as well
find items whose bits are all among theirs, which pass as present without
ever having been added.

=item * Pollution. The attacker picks items that each set I<k> bits no
earlier item set. The filter fills far faster than with ordinary items, and
its false-positive rate rises for everyone long before it holds its
capacity.

=back

A secret seed answers both: the positions are then computed with XXH3-128
keyed by the seed, and whoever does not know the seed cannot predict them,
so the items it chooses are no worse than random ones.

=over 4

=item * Choose the seed at random (64 bits, e.g.
C<unpack 'QE<lt>', $eight_bytes_from_dev_urandom>) and keep it like any other
secret. It is an integer from 0 to 2**64-1 (a number or a decimal string);
L</seed> and C<stats-E<gt>{seed}> give it back exactly.

=item * The seed is stored in the filter: in its file's header and in its
serialized bytes. Whoever can read those knows it, so keep filter files
private (the default mode is C<0600>) and ship bytes over channels you
trust.

=item * Use the same seed for every filter you mean to merge or intersect:
filters of different seeds set different bits for the same item, are not
compatible, and combining them croaks (C<seed mismatch>).

=item * A filter's seed cannot change: its bits only mean anything with the
seed they were set with. To change the seed, build a new filter from the
items.

=item * Seed 0 is the original hashing, bit for bit compatible with
C<bloom.h>. Keep it where that compatibility matters and nobody hostile
chooses the items.

=item * The seed is not a cryptographic key: XXH3 is a fast hash, not a
MAC. The seed stops offline precomputation; an attacker who can make very
many adaptive queries and see the answers can still learn about the filter.
Where that matters, pass items through a keyed MAC (such as HMAC-SHA-256)
before adding and testing them.

=back

=head1 CHOOSING CAPACITY AND FP_RATE

The geometry follows from the two numbers exactly as in C<bloom.h>:

    k = lround(-log2(fp_rate)), clamped to 1 .. 32         probes per item
    m = next_pow2(ceil(capacity * k / ln 2)), at least 64   bits

C<k / ln 2> bits per item is the best size for C<k> probes: when the filter
holds C<capacity> items about half of its bits are set, and a false positive
needs all C<k> of an item's bits set, so the rate is about C<2**-k>, the
power of two nearest to C<fp_rate> (which may be a little above it: 0.125
for 0.1). C<m> is then rounded up to a power of two, so that a probe's
position is a mask rather than a division. That gives between 1 and 2 times
the bits, and a false-positive rate at C<capacity> lower than the one asked
for; how much lower depends on where C<capacity> falls between two powers of
two. Computed with the module's own formulas (C<bits> and C<hashes> of real
filters), the rate at capacity being C<(1 - exp(-k * n / m)) ** k>, and
C<2**-k> before rounding:

                 before rounding    |  1e6 items, after rounding  |  1e8 items, after rounding
    fp_rate   k  bits/item  fp at n | bits/item  memory   fp at n | bits/item  memory   fp at n
    0.1       3       4.33     0.12 |      8.39   1 MiB     0.027 |      5.37  64 MiB     0.078
    0.05      4       5.77    0.062 |      8.39   1 MiB     0.021 |     10.74 128 MiB    0.0094
    0.01      7      10.10   0.0078 |     16.78   2 MiB   0.00054 |     10.74 128 MiB    0.0058
    0.001    10      14.43  0.00098 |     16.78   2 MiB   0.00033 |     21.47 256 MiB    5.1e-5
    0.0001   13      18.76  0.00012 |     33.55   4 MiB    3.9e-7 |     21.47 256 MiB    3.5e-5
    1e-6     20      28.85   9.5e-7 |     33.55   4 MiB    1.1e-7 |     42.95 512 MiB    2.6e-9

Memory is the bit array, C<m / 8> bytes. The mapping adds a control area
(process slots and lock stripes) of 72 to 324 KiB before the bits (68 KiB,
plus 64 bytes per 1 024 bits, at least 4 and at most 256 KiB of them), or
2 MiB when the bit array is 4 MiB or more, so that it starts on a huge-page boundary;
C<< $bf->stats->{mmap_size} >> is the exact total.

What follows from this:

=over 4

=item * The rounding is free capacity: a filter of C<m> bits and C<k> probes
serves C<m * ln 2 / k> items at the rate asked for. 1e6 items at 0.01 get
2**24 bits, enough for 1.66e6 items; ask for that capacity and pay nothing
more.

=item * C<capacity> is the number of I<distinct> items over the filter's
life. Past it the rate climbs fast: at twice the capacity, the 0.01 filters
above answer "present" wrongly for 1.9 % (1e6) and 11 % (1e8) of new items.
Watch C<count> and C<estimated_fpp>, and size generously: memory grows only
linearly with C<capacity>.

=item * Each halving of C<fp_rate> costs one more probe (about 1.44 bits per
item before rounding, and one more memory access per C<add> and C<contains>:
on a filter larger than the CPU caches each probe is a likely cache miss).

=item * The largest filter has 2**38 bits (32 GiB): at 0.01 that is 2.7e10
items. Beyond it C<new> croaks rather than build a weaker filter; use a
larger C<fp_rate> or several filters.

=back

B<Huge pages.> A new filter in shared memory (C<new> without a path,
C<new_memfd>, C<deserialize> into a memfd) with 4 MiB of bits or more asks
for transparent huge pages for them, and gets them where the kernel gives
shared memory huge pages on request
(C</sys/kernel/mm/transparent_hugepage/shmem_enabled> set to C<advise>; the
default on most distributions is C<never>). Each probe of a large filter
then costs fewer address translations: 11-15% less per call and 14-21% less
per batched item on a 256 MiB filter here (C<bench/layouts.pl> under each
setting). Its memory is then allocated at
creation through the mapping; the kernel may first have to assemble 2 MiB
pages, so that creating the first large filter after a while can take
seconds (2.7-3.5 s for 256 MiB here, later ones 0.07-0.2 s, against 0.03 s
on small pages). A file's filter is not asked: its pages are the file
system's.

=head1 LAYOUTS

A filter has one of three layouts, chosen when it is created (C<layout> of
L</new>, L</new_memfd>, L</deserialize>) and kept for good; L</layout>
tells which.

=over 4

=item standard

The default, and C<bloom.h>'s: an item's I<k> bits are spread over the whole
bit array, so testing an item reads I<k> words, and adding a new one sets
up to I<k> words while it holds a lock stripe keyed by the item (adders of
other items almost never meet). Bit-compatible with C<bloom.h>.

=item blocked

All of an item's bits lie in one aligned 64-bit word (or, for low rates, one
aligned 128-bit block): testing an item reads one word, and adding it is
one atomic C<fetch_or> on that word (or one 16-byte compare-and-swap on its
block, retried only when another adder changed the same block). The item was
new exactly when the word lacked one of its bits, so among processes adding
the same item at once only the first update can see a bit missing: at most
one is told "new", with no lock at all. Not compatible with C<bloom.h>.

=item datasketches

Apache DataSketches' Bloom filter, bit for bit: its hashing, its sizing and
its serialized image, so that Java, C++ and Rust programs using DataSketches
read what Perl processes built (see L</The datasketches layout>). It works
as the standard layout does: I<k> bits over the whole array, an add under a
lock stripe keyed by the item. Not compatible with C<bloom.h>.

=back

=head2 What a blocked add does, and what waits for it

An add of a blocked filter is that one atomic update plus writes to the
calling process's own slot (a cache line no other process writes): a mark
set before the update and cleared after, and its operation count. It takes
no stripe and no lock, so no adder and no query ever waits for another
adder, running, stopped (C<SIGSTOP>, a debugger, a frozen cgroup) or
killed. The mark is for L</clear>, L</intersect>, L</invert> and
L</freeze>: each announces itself, then waits until no add is between its
mark and its update, so that they stay linearizable (and crash-safe, as in
the standard layout) against lock-free adds, and a frozen filter never
changes after L</freeze> returns. The limit this sets: an adder stopped
inside an add (a window of a few instructions) holds those four operations
off until it runs again, as a stopped holder of their own lock would; an
adder killed there delays them by at most the crash bound (well under a
second), never more.

=head2 One locked instruction per add: membarrier

The mark must be visible before the add looks whether one of those
operations has begun: between the two, a fence. Where the kernel lets a
process register for C<membarrier(2)> (C<MEMBARRIER_CMD_GLOBAL_EXPEDITED>,
Linux 4.16 and later), the process does so at its first write to a blocked
filter, and its mark is a plain store: the exclusive operation runs the
fence on every CPU instead, with one C<membarrier> call, between announcing
itself and waiting. The add's only locked instruction is then its update of
the item's word. A process that cannot register (a seccomp filter that
refuses the call, an older kernel) marks with a locked store (two locked
instructions per add), and the two kinds mix freely on one filter.

The limit this sets: a process that cannot call C<membarrier> cannot fence
the others' marks, so while a live process with plain marks has written to
the same blocked filter and still has it open, its L</clear>, L</invert>,
L</intersect>, L</freeze> and journaled L</merge> croak ("another process
adds to this filter with membarrier(2) fences, which this process cannot use
...") and change nothing. Run them in a process that can, or once those
processes have closed the filter or exited. Its adds and queries work as
anywhere. A windowed blocked filter's adds mark their slot the same way,
and its generation steps fence the marks as those operations do: such a
process leaves the steps to the others while that process lives (its
L</rotate> croaks as they do; its adds go on, and step once it is gone).
Standard filters, whose adds take a stripe, are not concerned.

=head2 Sizing

A blocked filter is sized with the exact false positive rate of its layout,
not the standard formula: the load of an absent item's word is Poisson
distributed around C<capacity / words>, the I<k> bits each of those items
sets are uniform in the word, and the rate is the chance that all the
absent item's own bits are among them. The word width (64-bit words unless
they need more than 1.15 times the bits of 128-bit blocks), I<k> and the
number of words are the smallest that meet C<fp_rate> at C<capacity>. The
number of words need not be a power of two (an item's word is
C<(h1 * words) E<gt>E<gt> 64>), so a blocked filter never pays the standard
layout's rounding to a power of two. Measured over 10**6 absent items at
capacity, the false positive rate is the requested one (a test checks it is
at most that, within 3 standard errors). For 10**6 items:

    fp_rate  standard: k  bits/item  (optimum)   blocked: width  k  bits/item
    0.05               4       8.39       5.77             64    4       6.84
    0.01               7      16.78      10.10             64    5      12.14
    0.001             10      16.78      14.43            128    8      19.01
    0.0001            13      33.55      18.76            128   10      30.94

The standard layout's bits per item depend on where the power of two falls
(its optimum, C<k / ln 2>, is what it would need without the rounding); a
blocked filter needs 18-32% more than that optimum at 0.05-0.001 and 65%
more at 0.0001 — the price of one memory access per item. L</count>
inverts the blocked layout's expected fill: with I<b> words of I<B> bits,
C<count = -(b / (1 - (1 - 1/B)**k)) * ln(1 - bits_set / bits)>.

128-bit blocks need a 16-byte compare-and-swap (C<cmpxchg16b>, every
x86-64 machine of this century): elsewhere a filter that needs them croaks
when created or opened. The choice of width does not depend on the machine,
so the same arguments give the same filter everywhere.

=head2 Everything else

Every constructor, file, memfd, descriptor and read-only handle, L</freeze>,
L</serialize> (the format records the layout in its hash scheme field),
L</count>, L</stats> (key C<layout>) and seeds work on blocked filters as on
standard ones. L</merge> and L</intersect> combine filters of the same
layout only: another layout croaks with C<layout mismatch (standard vs
blocked)> and L</is_compatible> is 0.

=head2 The datasketches layout

    my $bf = Data::BloomFilter::Shared->new('/dev/shm/seen.bloom', 1_000_000, 0.01,
        { layout => 'datasketches' });
    $bf->add($bytes);                                  # a byte string
    $bf->add(pack 'Q<', $id);                          # a 64-bit number
    my $image = $bf->serialize(format => 'datasketches');   # for Java, C++, Rust

A filter of this layout sets exactly the bits Apache DataSketches' Bloom
filter (family 21) sets for the same items, seed and size:

=over 4

=item *

I<h0> = XXH64(item, seed), I<h1> = XXH64(item, I<h0>); for I<i> = 1 to
I<k>, bit C<((h0 + i*h1) E<gt>E<gt> 1) mod m> (64-bit wrapping
arithmetic), that is bit C<b % 64> of little-endian 64-bit word C<b / 64>.

=item *

An item is its bytes, as DataSketches hashes a byte array (Java's
C<update(byte[])>): nothing is added to them. A DataSketches C<long> (Java
C<update(long)>, Rust C<insert(u64)>) is its 8 little-endian bytes: in Perl
C<pack 'QE<lt>', $n>. In Rust, hash bytes with a type whose C<Hash> writes the
bytes alone: the standard C<Hash> of C<[u8]>, C<< Vec<u8> >> and C<str> adds a
length or a terminator to them.

=item *

Sizing is DataSketches' builder's (C<with_accuracy>): I<m> = C<ceil(-capacity
* ln(fp_rate) / ln(2)**2)> rounded up to a multiple of 64 (not a power of
two), I<k> = C<ceil(m' / capacity * ln 2)> with the I<m'> before rounding.
The largest filter has 2**31 - 5 words (about 16 GiB), the image format's
limit. The options C<bits> and C<hashes> give I<m> and I<k> directly
instead (the builder's C<with_size>; see L</new>).

=item *

The seed defaults to DataSketches' default update seed, B<9001>, when no
C<seed> option is given (for this layout only; C<< seed => 0 >> is seed
0). Filters combine (L</merge>, L</intersect>) only with the same layout,
bits, hashes and seed, as DataSketches' own.

=back

L</count> and L</estimated_fpp> use the standard layout's formulas.
Everything else works as on the standard layout: exactly-once adds across
processes, crash recovery, L</freeze>, read-only handles, L</invert>,
windows (L</WINDOWED FILTERS>; a windowed filter has no DataSketches image)
and the Redis mode (L<Data::BloomFilter::Shared::Redis>: its bit string is
this layout's array too).

B<The image.> C<< serialize(format => 'datasketches') >> writes
DataSketches' serialized Bloom filter, all integers little-endian:

    offset  size  field
    0       1     preamble longs: 3 when no bit is set, else 4
    1       1     serial version: 1
    2       1     family: 21
    3       1     flags: 4 (empty) when no bit is set, else 0
    4       2     num_hashes (k), 1 to 32767
    6       2     0
    8       8     seed
    16      4     num_longs: m / 64, a signed 32-bit integer
    20      4     0
    24      8     num_bits_set (absent when empty)
    32      m/8   the words (absent when empty)

L</deserialize> takes such bytes from any DataSketches implementation
without an option and checks every field: a bad one croaks naming it, as
C<bad num_hashes 0 in DataSketches image (1 to 32767)>. A C<num_bits_set>
of 2**64 - 1 (not counted) is accepted, as DataSketches does. The image
stores no capacity nor rate: the filter gets the capacity at which its I<k>
is optimal (C<floor(m * ln 2 / k)>, at least 1) and the rate expected
there. An empty image of many words is 24 bytes that make a filter of that
many words (untouched pages cost no memory).

B<Checked against.> A Rust test (F<xt/datasketches/tests/datasketches.rs>) checks this
layout against the Rust C<datasketches> crate, version 0.6.0 (feature
C<bloom>), for several seeds, capacities and rates, with items as raw bytes
and as C<u64>: the same geometry, the same image byte for byte, each side's
image read by the other with every query answered alike, and unions and
intersections across the two alike. The Java and C++ versions were not run
by a test; they document the same format and hashing.

B<From Java or C++.> Export the image (C<< $bf->serialize(format =>
'datasketches') >>, or C<bloomfilter-shared export FILE --format
datasketches>) and read it with C<BloomFilter.heapify> (Java,
C<org.apache.datasketches.filters.bloomfilter>) or
C<bloom_filter::deserialize> (C++). To read one of our files in place
instead: the words of its bit array are at the byte offset stored as a
64-bit integer at offset 88 of the file, C<m / 64> of them in the
machine's byte order (little-endian on x86-64 and AArch64), with I<k> a
32-bit integer at offset 20, I<m> a 64-bit integer at offset 24 and the
seed a 64-bit integer at offset 48; a reader builds the 32-byte preamble
above in front of a copy of the words (the file itself has no room for it
before them). A live filter's words change while they are read; L</freeze>
it first for a consistent copy.

=head1 WINDOWED FILTERS

    # Seen in the last 24 hours? 1 000 000 distinct items a day.
    my $seen = Data::BloomFilter::Shared->new('/dev/shm/webhooks.bloom',
        1_000_000, 0.001, { window => 24 * 3600 });
    process($id) if $seen->add($id);

A filter sized for a day fills up after a week and then calls everything
seen. A windowed filter forgets instead, and its memory stays bounded
forever. It keeps I<g> generations (C<generations>, 2 to 16, default 4),
each a full filter of the chosen layout sized for C<capacity>, which is the
number of distinct items per window. A I<step> every C<window / (g - 1)>
seconds (the I<period>) makes a new generation current and forgets the
oldest. L</add> puts the item in the current generation and returns 1
unless some live generation holds it; L</contains> looks in all live ones.

=over 4

=item Retention

An item added (or added again) at time I<t> is reported seen until at least
I<t> + window, and forgotten by I<t> + window * g / (g - 1), both to within
one tick of the clock (see L</The clock>): with the default 4 generations,
a 24 hour window keeps items between 24 and 32 hours.
Time is counted in whole periods from the filter's creation, so an item
added late in a period lives up to one period less than the upper bound.
Adding an item again extends its life, counted from the new add. More
generations bring the upper bound closer to the window, for more memory.

=item Memory

I<g> + 1 generations: the extra one is cleared ahead of time, so that a
step never clears anything while someone waits. A 24 hour filter of
1 000 000 items at 0.001 with 4 generations maps 5 times the 2 MiB of a
plain filter.

=item False positives

A query looks in up to I<g> generations, each holding up to C<capacity>
items: the rate at capacity is up to I<g> times C<fp_rate> (when every
generation is full). Size C<fp_rate> for that. Items spread evenly over
the window fill each generation only to C<capacity / (g - 1)>, and the rate
is then far lower; F<bench/RESULTS.md> ("Windowed filters: memory, false
positives and cost per call") gives both, measured, for 2, 4 and 8
generations.

=item The clock

Wall-clock time, shared by every process of a host, read as
C<CLOCK_REALTIME_COARSE> (the last timer tick, a few milliseconds old) plus
one tick, so that it is never behind the true time: an item is never taken
to have been added earlier than it was. It can be up to one tick ahead
(C<clock_getres> of that clock gives the tick, 1 to 10 ms), so a step, and
the forgetting of an item added in the last tick of a period, can come up
to one tick early. A clock set back steps nothing and brings back nothing already
forgotten (items live longer by the jump); a clock set forward forgets
early, as if that time had passed.

=item Steps and crashes

Steps are taken by writers (L</add>, L</add_many>, L</rotate>): a filter
nobody writes steps at the next write, and queries forget on time without
one. A step is one compare-and-swap. The generation to be reused next is
cleared afterwards, while nobody reads or writes it, by the writing calls
that follow: each clears at most 64 KiB of it (a few microseconds), so no
add pays for a whole generation (a 256 MiB one is clear after 4096 writing
calls, usually long before the next step is due). A filter written less
often than that (fewer writing calls per C<window / (g - 1)> than its
generation has 64 KiB slices) has the rest cleared by the write that finds
the next step due, before that write adds: that one call takes as long as
clearing the rest, up to a whole generation as L</rotate> does, and items
are forgotten on time however few the writes, a whole window without any
included. (Another process clearing it or stepping meanwhile is waited
for while it advances; one stopped there for 80 ms, or an adder stopped
inside an add, makes the write go on without the step: the current
generation's items, expired ones too, are then seen until the next step.)
L</rotate> clears all of it at once. Queries never wait. An add of an item
the current generation already holds takes no lock and sets no bit; other
adds take their item's lock stripe in the standard layout, and in the
blocked layout are lock-free as in a plain filter (one atomic update, and
the mark of L</What a blocked add does, and what waits for it>) except
while a step is under way. A blocked filter's step closes the filter to
lock-free adds, waits for those in flight and for striped ones (each a few
hundred nanoseconds), takes the step, waits for the striped adds begun
before it, and opens the filter again; adds meanwhile take their stripe,
and nobody but the stepper waits. A process killed mid-step or mid-clear
leaves the filter usable: the next writer goes on with the clear where it
stopped, or finishes the step. A writer clearing or stepping waits up to
20 ms for adds in flight to finish; a stopped adder (C<SIGSTOP>, a
debugger) inside an add makes writers leave the clear (and, in the blocked
layout, the step) for later, and a L</rotate> that cannot go on waits until
the adder runs again. Concurrent adders of an item not seen within the
window: exactly one is told new, across steps too.

=item An idle windowed filter's numbers

Steps are taken by writers, but what a filter reports does not wait for
one. C<generation>, C<generation_start>, C<bits_set>, C<count>,
C<fill_ratio>, C<estimated_fpp> and L</is_empty> (and L</stats>, on any
handle, a read-only one too) say what the filter would hold had the steps
due by the clock been taken: once a step is due, the current generation
is the fresh one it would start (its number and start as the clock says,
no bit set, C<count> 0), and generations the clock has expired count as
empty. Nothing is written to do so (readers never write): with a window
of 1 s and 4 generations, 2 s after the last add C<count> is 0,
C<is_empty> 1 and C<contains> 0 for every item, and the next write takes
the step they described. Right after a step, on a busy filter as on an
idle one, C<count> starts again from 0 while older generations still
answer C<contains>; C<is_empty> is 1 only when none of them does.

=item Cost per call

A query looks at the newest generation first, so an item the current
generation holds costs little more than on a plain filter (1.0x to 1.4x
in the tables of F<bench/RESULTS.md>), and so does an add of it. An absent item, an item
only an older generation holds, and an add of a new item look in every
live generation: I<g> arrays instead of one, each another cache line to
fetch (two in the standard layout). On
the machines measured, with generations in the second-level cache, such
a call costs up to about 1.6x a plain filter's of the same layout at
I<g> = 2, up to about 1.9x at I<g> = 4 (2x for batches, L</add_many> and
L</contains_many> of new or absent items), and up to about 2.3x at
I<g> = 8 (2.8x for batches); generations larger than the caches cost the
most, batches up to 4.6x at I<g> = 8. Fewer generations cost less per
call but keep items longer past the window. F<bench/RESULTS.md>, "Windowed
filters: memory, false positives and cost per call", has the tables and
how to measure a machine of one's own.

=item Stepping by hand

C<< window => undef, generations => $g >> makes a filter that steps only on
L</rotate>: an item added between two rotations is seen through I<g> - 1 more
and forgotten at the I<g>th.

=item What a windowed filter has

Everything a plain filter has (L</add>, L</add_many>, L</contains>,
L</contains_many>, L</clear>, L</freeze>, L</serialize> and
L</deserialize>, the accessors and L</stats>) and L</rotate>, but
L</merge>, L</intersect> and L</invert>, which croak (C<... is not
supported on a windowed filter>): the union or intersection of two
windows has no single retention to keep. L</clear> forgets every
generation. A frozen windowed filter still forgets with time.

=item Limits

The window is from 0.001 seconds to 3653 days.

=back

The command line tool creates one with C<--window 24h>.

=head2 Windowed filters as bytes

    # On one host:
    my $bytes = $seen->serialize;
    # On another (or later), as a file, a memfd or anonymous memory:
    my $copy = Data::BloomFilter::Shared->deserialize($bytes,
        { path => '/dev/shm/webhooks.bloom' });

L</serialize> of a windowed filter writes its window, generations, the
instant its periods are counted from, the current generation's number, and
every generation's bits and time of last add (format version 2, see
L</The byte format>). L</deserialize> turns them into a windowed filter
with the same window, generations and generation number (L</stats> shows
the same C<generation> and C<generation_start>), whose generations hold the
same items. Since time is wall-clock time shared by the hosts, an item
added at I<t> on the source is seen on the copy until the same
I<t> + window and forgotten by the same bound; stepped by L</rotate>
alike, the copy forgets each item after exactly the same number of steps.
A host whose clock is ahead forgets early, as it would the original.

The copy is of one moment: the generations and the generation number
belong together even while other processes add and step. A writable handle
holds the next clear back during the copy, so that at most one step lands
meanwhile and the copy accounts for it (steps are deferred for the copy's
time: items then live longer by that time at most, never shorter); a
process killed during the copy holds up no step (the next writer takes
over, as from a killed clear). A read-only handle copies again when two or
more steps land, up to 16 times (then it croaks, see L</DIAGNOSTICS>).

Options: C<window> and C<generations> may be given; when they differ from
the bytes' they croak (C<window mismatch (the bytes have ..., not ...)>,
the words L</new> uses for a file). C<< window => undef, generations => $g >>
matches the bytes of a filter stepped only by L</rotate>.

Plain bytes (of a filter without a window) with C<window> (and
C<generations>) make a new windowed filter of the bytes' geometry and seed,
whose current generation holds their bits: every item in them counts as
added at the moment of the L</deserialize>, so it is seen for one window
from then (C<window> and C<generations> then work as for L</new>, the
window starting now). Without those options plain bytes make a plain filter,
as always.

The command line tool does the same: C<export> of a windowed filter, then
C<import> (with C<--window>, C<--generations> for plain bytes), and C<info>
of the new file shows the window.

=head1 FILTERS THAT GROW

A filter sized by a guess keeps answering past its capacity, but its
false-positive rate climbs: a deduplicating filter then calls new items
"seen", and drops them without a word. A filter made with C<grow> adds a
I<stage> instead:

    my $seen = Data::BloomFilter::Shared->new('/dev/shm/seen.bloom', 1e6, 0.001,
        { grow => 2, max_capacity => 1e9 });

The first stage holds C<$capacity> new items; when it has taken them, the
next stage is added, C<grow> times larger, and so on. Stage I<i> is sized
for the rate C<fp_rate * 0.2 * 0.8**i>, so that the rates of all the stages
together stay below C<fp_rate> however far the filter grows (scalable Bloom
filters, Almeida et al. 2007; why 0.8 is in F<doc/DESIGN.md>). A query asks
every stage, newest first; a new item goes into the newest.

=over 4

=item *

B<Bounds.> With C<max_capacity> the stages together take at most that many
items: past it, an C<add> of a new item croaks C<the filter is full: it
holds its max_capacity of N items; nothing was added>, and every item
already in it stays (adds of those still return 0). Without it the filter
stops at 32 stages, or where a stage would pass the largest bit array or
32 probes, and the croak names that bound (C<the filter is full: its N
stages hold M items, the most it can grow to; nothing was added>). C<max_capacity> below
C<$capacity>, or beyond what 32 stages can hold, croaks at creation. An
C<add_many> that meets the bound adds the batch's items before the one
that met it and says how many (C<the first N items of this batch were
added, none after>).

=item *

B<Processes.> Every way of sharing a filter works on one that grows: a
file, a memfd passed to other processes, an anonymous filter shared with
children, L</new_from_fd>, L</new_readonly> after L</freeze>. A process
sees the stages another added at its next call. Among processes adding
one item at once at most one is told it was new, also while a stage is
added; a process killed at any moment of adding a stage leaves the filter
with its old stages or its new ones, and the next writer that needs the
stage adds it. No completed add is lost.

=item *

B<Space.> A stage's storage is reserved when it is added, after checking
that the memory (its memory cgroup, C<MemAvailable>) or the file system
has room for it (see L</Memory and space the host cannot hold>). Where
there is none, the file system is full, a quota or C<RLIMIT_FSIZE> stops
the file, or a memfd is sealed against growing, the C<add> that needed the
stage croaks naming the reason (C<the filter is full and its next stage needs the file to grow to
N bytes: ENOSPC: ...; nothing was added>); the filter goes on in its
stages, and grows when there is room.

=item *

B<Memory and speed.> Each stage is tighter than a plain filter's, so a
filter that grew to 1000 times its first capacity takes about 1.3 to 2.7
times the bits of a plain filter sized for all those items (the table is
in F<README.pod> and F<bench/RESULTS.md>); right after a stage is added the
ratio is higher (about 5 times at 100x with C<< grow => 4 >>: the new stage
is mostly empty). A query that finds nothing looks at every stage, some
5 to 10 ns more per stage on the machine of F<bench/RESULTS.md>;
C<bench/grow.pl> measures it. Batches on a filter that grows are hashed
once and each item looked for in every stage in turn, the larger stages'
words fetched ahead; single calls walk the stages the same way. Grown 100
times with C<< grow => 4 >>, against a plain filter of the same final
size (as many bits, or for the standard layout the power of two below),
which outgrows the processor's caches as the stages do, four runs on
that machine measured queries and adds of present items, single or in
batches, at 0.7 to 1.35 times its time, and queries that find nothing
and adds of new items at 1.0 to 1.85 times. A plain filter sized for
just the items added has fewer bits and stays in the caches: against it
the same runs measured present items at 0.9 to 1.8 times, absent and new
ones at 1.5 to 2.3 times (the blocked batch of new items once 2.6), and
the standard layout's batches of new items at 2.5 to 3.2 times: its
newest stage has more bits an item (11 against 7 at 0.01), each an
atomic update (F<bench/RESULTS.md>).

=item *

B<Merge and intersect.> L</merge> takes a filter that grows alike, and
grows this one to its stages first; L</intersect> takes one of a single
stage (see there why no more).

=item *

B<What it does not do.> C<invert> croaks. C<grow> does not go with
C<window> (a windowed filter forgets old items instead), nor with the
C<datasketches> layout (whose other implementations read one bit array).
In Redis (L<Data::BloomFilter::Shared::Redis/GROWTH>) it grows stage for
stage as here, but is not sharded or merged. A filter that grows is never
bit-compatible with the original module, whatever its layout.

=item *

B<Low rates.> Both layouts keep C<fp_rate> at low rates from a small
first capacity too. A standard filter's stages do not use the original's
probes C<h1 + i * h2> (whose I<mE<sup2>/2> patterns over a table of I<m>
bits put a floor under a small stage's rate, whatever the number of
probes): its probes after the first two are mixed one by one, and each
stage's differ from the others'. From a first capacity of 100 grown 1000
times, at C<fp_rate> 1e-4, 1e-5 and 1e-6, at most 2 false positives in 4
million absent items were found (F<bench/RESULTS.md>; the original's
probes gave 0.6e-4 to 1.2e-4 there). A plain standard filter
keeps the original's probes, floor included: bit-compatible, it cannot
change (capacity 1000 at 1e-6 measured 1.0e-5).

=back

=head2 Filters that grow as bytes

L</serialize> writes every stage (version 3 of the byte format: stage 0's
geometry, the number of stages, the growth factor, C<max_capacity>, each
stage's fill count, then the stages' bits, and the checksum); L</deserialize>
builds a filter with the same stages and items, every stage written before
the filter can be seen. A stage added while C<serialize> copies makes it
start again.

=head1 CONCURRENCY AND CRASH SAFETY

An add sets bits with atomic OR while holding only the lock of its item's
stripe (one of 4096); C<clear>, C<intersect>, C<invert>, C<freeze> and the
second half of C<merge> take the filter exclusively and wait for in-flight
adds. Every lock word names its
owner's process slot, and each slot holds a robust futex word that a thread
of the owning process (started on its first write, with every signal
blocked) keeps taken while the process uses the filter. When a process dies,
however it dies, the kernel marks its words "owner died"; a waiter that finds
the mark takes the lock over, within about 20 ms. Nothing depends on seeing the
other process: it works the same across PID namespaces (containers sharing
F</dev/shm> or a memfd), with F</proc> mounted C<hidepid=2> or not mounted,
between users, and in a process whose main thread has exited.

What waits on what: an adder waits only for another adder of the same stripe
(a few hundred nanoseconds), or for an exclusive operation to end; an
exclusive operation waits for adds in flight. A C<merge> or an C<intersect>
first copies the other filter into the journal holding only the journal
(no lock of the other filter, and nothing an adder waits for), then applies
it exclusively: adds wait for that one pass over the bits. Mergers and
intersecters of one filter take turns at the journal: each waits for those
before it to finish both passes. A process that is stopped (SIGSTOP, a
debugger, a frozen cgroup) is alive: whoever needs what it holds waits until
it runs again or dies, for at most 10 s (60 s in all; below). Queries never wait.

Every wait for another process has that bound: a write that has waited
10 s for one holder of a lock word (a stripe, the exclusive word, the
journal, another process's mark, the shared last slot) croaks, naming the
word, the holder's slot, its thread id and whether that thread exists
here, and holds nothing after; the forged or stopped holder's word is left
as it was. A holder that moves on (another holder, each chunk of a
C<clear> or of a C<merge>'s application) starts the 10 s again, up to 60 s
in all (six times the bound) for a run of waits: the waits of one call, and
of the calls that follow it with less than the bound between them (a batch's
items, a loop of single adds), so that holders taking turns, or one forged
word after another, as a writer of the file could make them, end there too;
an operation that holds a word longer without moving (the copy of a merge's
operand of many GiB) makes its waiters croak: set
C<BLOOMFILTER_SHARED_WAIT_LIMIT> to a number of seconds (above 0, at most
86400; read once per process, when a wait first needs it) to wait longer
or shorter. Two forgeries
are recognised at once and taken over as a dead process's words: a slot
word naming a thread id no thread can have (2^22 or more, past the
kernel's C<PID_MAX_LIMIT>), and a process's own token copied into a word
it waits for.

A C<clear> or C<invert> interrupted by a crash is finished by the next
process that writes (an add, a merge, any exclusive operation): before each
chunk of 64 words changes, the operation saves the chunk and records where it
is, so the next process puts back the chunk it was changing and does only the
rest. That process waits for the death to be noticed (at most 20 ms) plus the
rest of the operation, at most one pass over the bits (about 5 ms per 32 MiB
of bits on the machine of F<bench/RESULTS.md>;
F<t/51-crash-exclusive.t> prints both). C<freeze> sets one flag, so it is done or not.

A C<merge> or an C<intersect> interrupted by a crash is finished the same
way, from the journal: the other filter may be gone with the process that
was reading it, so it is copied beside this filter first (the file, or the
memfd, grows by one bit array's bytes while the operation runs; see
L</merge>). Killed while copying, the operation has changed nothing (the
filter is as before); killed while applying, the next process that writes
ORs or ANDs the rest of the journal in, from the chunk it was at: it waits
for the death to be noticed (at most 20 ms) plus at most one pass over the
bits (F<t/51-crash-exclusive.t> checks and prints the wait for a 64 MiB bit
array, and how long one whole operation takes). The journal's space
stays (see L</merge>): a file longer by the journal is accepted and its tail
ignored by every opener. A file whose control words claim an operation with no
journal behind it (damaged) has the claim dropped and no bit changed.

Limits: a killed C<add_many> has added a prefix of its items; a C<merge>
or C<intersect> on a memfd sealed against growing (see L</merge>) is not
crash-atomic. Nothing another process completed is lost.

Liveness needs a kernel with robust futexes (every Linux since 2.6.17, but
not some emulators and sandboxes): where they are missing, writes croak
saying so and queries work. So they do where the keeper thread (below)
cannot be started, with the system's reason (a process at its
C<RLIMIT_NPROC>, say). The kernel follows at most 2048 entries of a
process's list of held words when it dies, so a process holds the slots of
at most 2047 filters (over all its threads) at once; a write that would need
one more croaks.

The keeper thread is started by a process's first write and lives as long
as the process (a forked child starts its own): that first write costs
about 0.2 ms more, a later slot claim about 0.05 ms (F<bench/RESULTS.md>),
and no call after a claim talks to it. The process is then multi-threaded
to the C library, which makes its own locking no longer free.

A process takes one slot per filter on its first write, however many handles
of the filter it has open (a threaded program: one per thread that writes);
the table has 1023. Processes past the table still write, through one shared
overflow slot that they take in turns: one keeps it across its calls until
another asks for it, and gives it up between two calls (within about 20 ms);
they wait for one another, never for the processes that have slots.

=head1 SECURITY

=head2 What others can do, at most

=over 4

=item A process that can write the filter file (or a memfd)

can make your answers false (set or clear bits), make your writes croak (a
damaged header, a frozen flag), and make a write wait on a lock word it
forged: at most 10 s for one holder and 60 s for a call (or calls in a row),
then the write croaks naming the word and holds nothing (C<BLOOMFILTER_SHARED_WAIT_LIMIT>
changes the 10 s; L</CONCURRENCY AND CRASH SAFETY>). If it truncates the
file or punches a hole in it, the call that touches a lost page croaks, and
so does every later call on that handle; the process lives
(L</"Lost pages and $SIG{BUS}">). It cannot end your process, make it wait
longer, make it read or write memory of its choosing, or make opening the
filter cost more than opening a small one.

=item A process that can only read it

learns the filter: its bits, geometry, seed, counts, and the thread ids of
its writers. Its locks delay no L</new> of a filter, and the adoption of an
empty file by at most C<BLOOMFILTER_SHARED_LOCK_WAIT> seconds (30)
(L</"Locks an opener waits for">).

=item Bytes or a file given to the module

(L</deserialize>, the command line's C<import>, a file to open) are checked
before anything is made; bytes may ask for at most 64 times their length
(at least 16 MiB) unless C<max_bytes> allows more; anything malformed croaks.

=item A size

(any constructor, a new stage, a merge's copy) that the memory cgroup,
C<MemAvailable>, the file system or C<RLIMIT_AS> cannot hold croaks naming
both figures and makes nothing (L</"Memory and space the host cannot hold">).

=back

Each of these is checked by a test with real processes of other uids and
real memory cgroups: F<t/39-forged-waits.t>, F<t/39-word-fuzz.t>,
F<t/39-sigbus.t>, F<t/39-open-lock.t>, F<t/39-memory-room.t>,
F<t/29-open-cost.t>.

=head2 Files

A filter file is untrusted input. It is opened without following a final
symbolic link (C<O_NOFOLLOW>), without blocking (a FIFO is refused, not
waited on), without becoming the controlling terminal (C<O_NOCTTY>: a
terminal device given as the path is refused and never acquired), and its
type is checked first: only a regular file is accepted; directories, FIFOs,
sockets and devices croak, and so do descriptors of them given to
L</new_from_fd>. Every field of the header is checked against what this
module would have written for the stored geometry, with a checksum over the
immutable ones, and the file's size must be the size the header implies,
or longer by at most one bit array from the next page boundary (the journal
of a merge or an intersect, kept once made; the mapping never covers it): a truncated, grown, corrupted or foreign file
croaks and is left as it was. The geometry is read once, when the handle is made, and kept in
the process: a peer that rewrites the header later cannot make this process
read or write outside its mapping.

=head2 Locks an opener waits for

No lock on a filter file can be held against its opener by a process that
may only read it. L</new> of an existing filter takes no lock: a reader
holding L<flock(2)> or L<fcntl(2)> locks on the file (any process that can
open it may) does not delay it. Only an empty file is opened under a lock,
its creation lock, an open file description lock for writing that only a
descriptor open for writing can take, so that two processes adopting the
file take turns (see L</new>). A process with a lock of its own on an empty
file (a writer holding the creation lock, or a reader holding a read lock,
which a read-only descriptor can take) delays its adoption by at most
C<BLOOMFILTER_SHARED_LOCK_WAIT> seconds (default 30): then L</new> croaks
naming the file and the wait, and the file is as it was.
L</new_readonly>, L</new_from_fd> and L</new_memfd> take no lock at all.

=head2 Other users' files

Ownership of a filter file is not checked: the kernel's permission check on
L<open(2)> is the policy. L</new> opens the file read-write, L</new_readonly>
read-only, so a file of another owner opens when its mode lets us, and
croaks with C<Permission denied> when it does not (a C<0600> file of another
user, say). Sharing a filter between users through a group and mode C<0660>
is a feature; a frozen file of mode C<0644> or C<0640> can be queried by
others with L</new_readonly>, and a live one through L</new_from_fd> of a
descriptor they open read-only. Root opens any filter file, whoever owns it.

An I<empty> file is different: it is adopted (turned into a filter) only
when the process's effective uid owns it, so that nobody can plant an empty
C<0666> file where a privileged process will create its filter and then
share it. See L</new>.

Whoever can write a filter file can change its bits, freeze it, hold its
locks, or truncate it. Truncation takes the pages from under every process
that maps the file: their calls on it croak from then on, and the processes
live (L</"Lost pages and $SIG{BUS}">).

What a writer can do to other processes is what it can do through the
filter's contents (L</"What others can do, at most">). It cannot make
another process write to or read from memory of its choosing: the shared
file holds no address, and every word another process reads from it is
compared or bounded before use, never followed (a slot's word holds a
thread id only; the list the kernel walks when a process dies lives in that
process's private memory). What a reader can learn is the filter: its bits,
its geometry, its seed, its counts, and the thread ids of the processes
writing it, never where they keep anything in memory.

Writing to a filter is still a trust relation for its answers and its
availability: a truncation no longer kills, but it fails every handle of the
file, in every process (open it again once it is whole). So give write
access only to processes you trust, and keep the filters of privileged processes in
directories that only trusted users can write (not in F</tmp>). Memfds are
sealed against shrinking, so a receiver of one cannot truncate it (not
against growing, which harms no mapping: a merge's journal grows them).

=head2 Lost pages and $SIG{BUS}

A page of a filter's mapping is lost when another process truncates the
file, or punches a hole in it on a full file system (a full tmpfs, say).
Touching a lost page raises C<SIGBUS>, whose default action ends the process.
The module installs a handler for C<SIGBUS> when it maps its first filter. A
fault in one of its own mappings (a filter, a later stage of a filter that
grows, a merge's journal) maps zeros over that page, in this process only,
and the call that touched it croaks "the filter file was truncated or its
pages were removed by another process", naming the file; every later call on
that handle croaks the same (destroying it is fine). Nothing else of the
process changes: its other handles, of other filters or opened anew, work.
Any other C<SIGBUS> (a fault elsewhere, one sent with C<kill>) goes to the
handler that was in place before the module's, or ends the process as it
would have. The module itself never shrinks a filter file nor punches a hole
in it: a merge's journal keeps its space (L</merge>), so a forged word in the
file cannot make one process take pages another still uses.

C<$SIG{BUS}> is Perl's own handler, installed in the module's place:

=over 4

=item *

Set before the module maps its first filter, it stays: the module's handler
hands it every C<SIGBUS> that is not a filter's (C<kill BUS =E<gt> $$>
included).

=item *

Set after, it replaces the module's: a lost page of a filter goes to your
handler, which Perl runs at once, inside the call (as for C<SIGSEGV>, not
deferred as most signals). When it returns, the access faults again and it
runs again, so it must end the process (C<POSIX::_exit>); C<'DEFAULT'> and
C<'IGNORE'> end the process with C<SIGBUS>.

=item *

The module installs its handler again, in front of yours, whenever it maps a
filter's memory (a constructor, a new stage of a filter that grows, a
merge's journal): make a filter (any) after setting C<$SIG{BUS}> to have the
croak back, with yours still called for the rest.

=back

The handler needs no alternate signal stack (it uses a few hundred bytes),
and works in every thread. F<t/39-sigbus.t> checks each case with real
processes: a truncated file, a hole on a full tmpfs, a forged journal word.

=head2 Memory and space the host cannot hold

Every filter's memory is checked before it is created or mapped: by
L</new>, L</new_memfd>, L</deserialize>, L</upgrade>, the next stage of
a L<filter that grows|/FILTERS THAT GROW>, and the copy of the other filter
L</merge> and L</intersect> make first. The rule is simple, with no
headroom beyond it: a size larger than what is available croaks, naming
both figures and which limit said so, and creates nothing. What is
available is the least of:

=over 4

=item * for memory (an anonymous filter, a memfd, a file on tmpfs): the
room the process's memory cgroup leaves (v1 or v2; its limit less its
usage, the inactive file cache counted as free, over the cgroup and each
of its ancestors), and C<MemAvailable> of F</proc/meminfo>;

=item * for a file: the free space of its file system (C<statvfs>:
C<f_bavail> times C<f_frsize>; a tmpfs counts against memory too);

=item * for any mapping: the address space C<RLIMIT_AS> (C<ulimit -v>)
leaves above the process's C<VmSize>.

=back

A source that cannot be read (no F</proc>, no F</sys/fs/cgroup>) is
skipped: the module works without them, and then only the kernel's own
checks remain. The check is made once, just before the memory is
reserved: it is not a reservation, and memory other processes take in
between is not counted. A grown filter's next stage that does not fit croaks on the
add that needs it, which adds nothing; the filter goes on in its stages.
Bytes given to L</deserialize> may ask for at most 64 times their length
(at least 16 MiB) unless C<max_bytes> says otherwise.

=head2 Crafted items

With the default seed 0 the probe positions are public (those of
C<bloom.h>), and whoever chooses the items can pick ones that fill the filter
or collide with a given item. Give filters that see untrusted items a secret
C<seed>: the positions then depend on it.

=head1 DIAGNOSTICS

Every message starts with C<Data::BloomFilter::Shared-E<gt>METHOD: >, naming
the method called, and ends with the caller's file and line.

A croak about an argument goes on after the words below with C<, got
VALUE> (C<undef>; a number as written; a string in quotes, cut at 40
characters, control characters as C<\x{..}>; a reference by its type, never
stringified) and, where there is a usual cause, a hint in parentheses.
Match on the leading words: they are those of every earlier release. A
seed is never shown (it is a secret): its kind is.

=over 4

=item window must be a positive number of seconds (or undef), got %s

=item window must be a positive number of seconds (or undef), got '2s' (durations such as 2s are the command line tool's: write 2 here)

=item window of %s seconds is shorter than the shortest, 0.001

=item window of %s seconds is longer than the longest, 315619200 (3653 days)

=item generations must be an integer from 2 to 16, got %s

=item the generations option needs the window option (window => undef for a filter stepped only by rotate)

The C<window> and C<generations> options of L</new>, L</new_memfd> and
L</deserialize>; see L</WINDOWED FILTERS>.

=item window mismatch (the filter has %s, not %s)

An existing file's window or generations differ from the options given.

=item window mismatch (the bytes have %s, not %s)

L</deserialize> of a windowed filter's bytes with C<window> or
C<generations> options other than the bytes' own; see
L</Windowed filters as bytes>.

=item the path and memfd options exclude each other

L</deserialize> makes a filter file or a memfd, not both.

=item the filter stepped during each of 16 attempts to copy it

L</serialize> of a windowed filter through a read-only handle (which
cannot hold steps back) saw two or more generation steps land during each
of 16 copies: a window far shorter than copying the filter takes. Copy
through a writable handle, or with a longer window.

=item the generation number is at its limit (corrupted file)

L</rotate> found the filter's shared step words holding what no step
writes.

=item rotate needs a windowed filter

=item cannot reserve %d bytes for the journal (a copy of the other filter, %s): LIMIT; nothing was changed

L</merge> or L</intersect>: the copy of the other filter they make first
(see L</merge>) is larger than the memory or free space available, which
LIMIT names as in C<the filter needs %d bytes ...> (see L</Memory and space
the host cannot hold>). Both filters are unchanged.

=item cannot reserve %d bytes for the journal (a copy of the other filter): %s: %s; nothing was changed

A L</merge> or L</intersect> found no room for its journal: the errno's name
(C<ENOSPC>, C<EDQUOT>, ...) and text follow. The filter is as it was; free
some space (one bit array's bytes) and call again.

=item the journal needs the file to grow to %d bytes, more than the file size limit (RLIMIT_FSIZE, %d bytes); nothing was changed

The same, for the process's file size limit (C<ulimit -f>).

=item mmap of the journal: %s

=item fstat journal: %s

The journal's storage could not be mapped or examined; nothing was changed.

=item merge is not supported on a windowed filter

=item intersect is not supported on a windowed filter

=item invert is not supported on a windowed filter

What a windowed filter does not have; see L</WINDOWED FILTERS>.

=item grow must be an integer from 2 to 16 (the factor each new stage is larger by), got %s

=item max_capacity must be a positive integer (the most items the filter may take), got %s

=item the max_capacity option needs the grow option (a filter that does not grow is bounded by its capacity)

=item max_capacity %d is below the capacity %d

=item max_capacity %d is out of reach: %d stages hold at most %d items at this capacity, fp_rate and grow

=item grow and window do not go together: a windowed filter forgets old items instead of growing

=item grow and window do not go together: the bytes are of a filter that grows

=item the datasketches layout does not grow

Options of a L<filter that grows|/FILTERS THAT GROW> that cannot be.

=item growth mismatch (the filter %s, not %s)

=item growth mismatch (the bytes are of a filter that %s, not one that grows by %d)

An existing file, or the bytes, keep their growth (or none), as they keep
their layout and window.

=item the filter is full: it holds its max_capacity of %d items; nothing was added

=item the filter is full: its %d stages hold %d items, the most it can grow to; nothing was added

A new item for a filter that grows, at its bound. Every item in it stays;
adds of those still return 0.

=item the filter is full and its next stage needs the file to grow to %d bytes: %s: %s; nothing was added

=item the filter is full and its next stage needs the file to grow to %d bytes: the stage is %d bytes (%s), but LIMIT; nothing was added

The stage a new item needs has no storage: C<ENOSPC> (a full file system),
C<EDQUOT> (a quota), the file size limit (C<RLIMIT_FSIZE>), or C<EPERM> (a
memfd sealed against growing); or, checked first, it is larger than the
memory or free space available, which LIMIT names as in C<the filter needs
%d bytes ...> below (see L</Memory and space the host cannot hold>). The
filter goes on in its stages.

=item ...; the first %d items of this batch were added, none after

C<add_many> met one of the two above at an item of the batch: the items
before it are in the filter, it and the rest are not.

=item file is shorter than its stages (%d bytes, the published stages need %d)

A file of a filter that grows is shorter than the stages its header says
it has: it was truncated or damaged.

=item invert is not supported on a filter that grows

What a filter that grows does not have; see L</FILTERS THAT GROW>.

=item growth mismatch (%s vs %s)

C<merge> or C<intersect> of a filter that grows with one that does not, or
that grows by another factor or up to another C<max_capacity>; C<growth
mismatch (the stages after the first differ: ...)> when they were made
with another capacity or C<fp_rate> whose first stages happen to agree.

=item the other filter has grown to %d stages; an item both filters hold can sit in different stages, so no stage can be intersected without losing it; nothing was changed

C<intersect> of filters that grow takes a C<$other> of one stage only; see
L</intersect>.

=item the filter must grow to the other filter's %d stages, and its next stage needs the file to grow to %d bytes: %s: %s; nothing was merged (stages added before stay, empty)

A C<merge> of filters that grow could not add the stages it needs
(C<ENOSPC>, C<EDQUOT>, C<RLIMIT_FSIZE>, C<EPERM> for a memfd sealed against
growing). Nothing of C<$other> is in; the stages added before the failure
stay, empty, and take items as any stage does.

=item the filter's memfd is sealed against growing, so it has no room for the journal that makes a %s of filters that grow crash-safe; nothing was changed

A C<merge> or C<intersect> of filters that grow on a memfd sealed against
growing (by another program): see L</merge>.

=item not a Data::BloomFilter::Shared object

The invocant is not an object of this class (or of a subclass).

=item other filter is not a Data::BloomFilter::Shared object

The argument of L</merge>, L</intersect> or L</is_compatible> is not a filter.

=item %s: the filter file was truncated or its pages were removed by another process

=item the filter file was truncated or its pages were removed by another process

Another process truncated the filter's file (or punched a hole in it on a
full file system) while this handle mapped it, and this call touched a lost
page, or an earlier one did: the handle croaks on every call from then on
(the file's path first; a handle from L</new_from_fd> has none). For
L</merge> and L</intersect> it may be the other filter's. The process and
its other handles are unharmed; open the filter again once its file is
whole. See L</"Lost pages and $SIG{BUS}">.

=item destroyed handle

=item destroyed handle (other filter)

The object was L</DESTROY>ed, possibly by Perl code that ran while the
arguments were being read (a tied C<FETCH>, an overloaded method).

=item this handle was opened in another thread; open the filter in each thread (new with the path, new_from_fd, ...)

=item this handle (other filter) was opened in another thread; open the filter in each thread (new with the path, new_from_fd, ...)

A handle used in an ithread started after it was opened; see L</THREADS>.

=item usage: ...

=item takes no arguments

Wrong number of arguments.

=item undefined item

=item undefined item at index %d

An item (or an element of the array given to L</add_many> or
L</contains_many>) is undef, or the array has a hole there.

=item Wide character: encode first (e.g. Encode::encode_utf8)

=item Wide character at index %d: encode first (e.g. Encode::encode_utf8)

An item has a character above 0xFF, so is not a byte string. Encode it first
(for instance with C<Encode::encode_utf8> or C<utf8::encode>).

=item item is %s, taken as its address string (give a string, such as one of its fields)

=item item at index %d is %s, taken as its address string (give a string, such as one of its fields)

=item item at index %d is %s, taken as its address string (give a string, such as one of its fields; %d items of this batch are references)

A warning, not a croak: an item was a reference (C<a HASH reference>, C<a
Foo object>) that Perl stringifies as its address, C<HASH(0x...)>, a
different item in every process: usually a mistake such as C<add($event)>
for C<add($event-E<gt>{id})>. The item is taken as that string, as the
original and earlier releases took it. One warning per call, naming the
first such item of a batch. An object whose overloading gives a string
(C<"">, or C<0+> or C<bool> failing that) is taken as that string and does
not warn. The warning is in the category C<Data::BloomFilter::Shared>:
C<no warnings 'Data::BloomFilter::Shared'> silences it, and with
C<use warnings FATAL =E<gt> 'Data::BloomFilter::Shared'> the call croaks
before anything of it is added.

=item argument is not an array reference, got %s (give \@items)

L</add_many> and L</contains_many> take an array reference of items.

=item second argument is not an array reference, got %s (give \@out, an array to fill)

=item second argument is a read-only array

The out array of L</add_many> or L</contains_many> must be an array
reference that can be written; nothing was added.

=item capacity must be a positive number, got %s (the number of items the filter is sized for, such as 1000000 or 1e6)

=item capacity must be a positive number, got '10M' (suffixes such as 10M are the command line tool's: write 10e6 here)

=item capacity is too large, got %s (at most 18446744073709551615 items)

=item capacity is too large: capacity and fp_rate need more than 2^38 bits (32 GiB); use a larger fp_rate or several filters

=item fp_rate must be between 0 and 1 (exclusive), got %s (a probability, such as 0.01 for 1%)

=item fp_rate must be between 0 and 1 (exclusive), got '1%' (write 0.01 for 1%)

=item fp_rate must be between 0 and 1 (exclusive), got %s (the arguments are the capacity, then the fp_rate: capacity %s and fp_rate %s look swapped)

An fp_rate of 1 or more is most often a capacity: C<new($path, 0.01,
1000)> has the two swapped. The part after the colon is there when the
capacity given is between 0 and 1 (which would otherwise be taken, rounded
up to 1).

=item seed must be a non-negative integer that fits in 64 bits, got %s (not shown: a seed is a secret; ...)

The value's kind (a negative number, a hexadecimal string, ...), not the
value. A hexadecimal secret of up to 16 digits: C<hex($secret)>.

=item mode must be an integer between 0 and 07777, got %s (a mode written in octal, such as 0660)

=item mode must be a number, not the string '%s' (use oct('%s'))

=item mode must be a number, not the string %s (a mode is a number written in octal, such as 0660)

=item mode %d has bits outside 0777 (%s in octal): write a mode in octal, ...

A mode such as C<660> (no leading 0) is decimal 660, octal C<01224>: a
sticky, write-only file. A mode with the set-user-ID, set-group-ID or
sticky bit croaks (the message shows the mode in octal and, for three
digits, the octal mode probably meant); write it as C<0660>. L</new> and
L</deserialize>; before 0.06 such a mode was taken as it was.

A mode given as a string, such as C<"0660">, would be read as a decimal
number: convert it with C<oct>.

=item the file's capacity %d is kept, not the capacity %d asked for (an existing filter keeps its geometry)

=item the file's fp_rate %g is kept, not the fp_rate %g asked for (an existing filter keeps its geometry)

=item the file's capacity %d and fp_rate %g are kept, not the capacity %d and fp_rate %g asked for (an existing filter keeps its geometry)

A warning, not a croak: L</new> opened an existing file sized for another
capacity or rate than the arguments (a file for 1 000 items opened as
one for 5 000 000 would soon be overfull). The filter is the file's, as
before 0.06, which said nothing. The warning is in the category
C<Data::BloomFilter::Shared>, so that it can be silenced or made fatal
(C<use warnings FATAL =E<gt> 'Data::BloomFilter::Shared'>); C<$fp_rate>
is compared only when given.

=item the file's mode %04o is kept, not the mode %04o asked for (an existing file keeps its mode)

A warning, as the one above: L</new> opened an existing file whose
permissions differ from the mode given explicitly (as the last argument or
the C<mode> option; a mode left out says nothing). Only a new file gets the
mode asked for; change an existing one's with C<chmod>. In the category
C<Data::BloomFilter::Shared>, as above.

=item the file's seed differs from the seed option (a filter's seed cannot change)

L</new> of an existing file with an explicit C<seed> other than the one the
file was created with (neither is shown). Nothing was changed.

=item seed must be a non-negative integer that fits in 64 bits

=item the seed option is undef (a secret that was not set?): give a seed, or leave the option out for seed 0

L</new> or L</new_memfd> with C<< seed => undef >>, usually a secret
variable that was never set. Before 0.06 it gave seed 0 without a word.

=item unknown option '%s' (the options are ...)

=item options must be a hash reference, got %s

=item last argument must be a file mode or a hash reference of options, got %s

Constructor arguments out of range.

=item undefined path

=item path required

=item path must be a string, got %s

=item path must not be empty

=item path contains a NUL byte, got %s

=item path contains a NUL byte

A path that cannot be a file name (L</new_readonly> and L</upgrade> say
C<path required> for undef). L</new_memfd> reports the same problems with
its C<$name> (C<name must be a string>, ...), but takes an empty one; so
does L</deserialize> with its C<memfd> option.

=item fd must be a non-negative integer or an open file handle, got %s

=item file handle has no file descriptor (closed, or an in-memory file? give an open file or its fileno)

L</new_from_fd> was given something that has no file descriptor (an in-memory
or closed file handle, say).

=item undefined bytes

=item bytes must be a string, not a reference

=item Wide character in bytes

L</deserialize> takes a byte string (an object with overloaded
stringification is taken as its string).

=item truncated input (%d bytes, need %d)

=item extended input (%d bytes, expected %d)

=item bad magic (not a serialized Data::BloomFilter::Shared filter)

=item unsupported serialization version %d

=item unknown hash scheme %d

=item reserved field is not zero

=item impossible geometry

=item bad checksum (corrupted input)

=item windowed bytes with %d generations (2 to 16)

=item impossible window in windowed bytes

=item generation number %d out of range in windowed bytes

=item last word %d of generation %d out of range in windowed bytes

L</deserialize> was given bytes that are not the output of L</serialize>,
or were cut, extended or damaged on the way. The checks and their order are
in L</The byte format>.

=item truncated DataSketches image (%d bytes, need %d)

=item extended DataSketches image (%d bytes, expected %d)

=item bad %s %d in DataSketches image (%s)

L</deserialize> was given bytes whose third byte says "DataSketches Bloom
filter" (family 21) but that are not a well-formed image: the field named
(C<family>, C<serial_version>, C<flags>, C<preamble_longs>, C<num_hashes>,
C<unused bytes 6-7>, C<num_longs>, C<unused bytes 20-23>, C<num_bits_set>)
is out of range, with what it must be in parentheses, or the length is not
the one the fields give. The format is in L</The datasketches layout>.

=item the bits and hashes options go together

=item bits must be a positive integer, got %s

=item hashes must be a positive integer, got %s

=item bits must be between 1 and %d, got %d

=item hashes must be between 1 and 32767, got %d

=item bits and hashes are options of layout 'datasketches' only

=item the file's bits and hashes differ from the bits and hashes options (a filter keeps its geometry)

The C<bits> and C<hashes> options of L</new> and L</new_memfd> (see
L</The datasketches layout>).

=item a DataSketches image makes a plain filter: the window options do not apply to it

L</deserialize> of a DataSketches image was given C<window> or
C<generations>.

=item format must be 'datasketches', got %s

=item unknown option '%s' (the one option is format)

=item usage: $filter->serialize or $filter->serialize(format => 'datasketches')

L</serialize> takes no argument, or C<< format => 'datasketches' >>.

=item format 'datasketches' needs a filter of layout 'datasketches' (this one is %s): create it with layout => 'datasketches'

L</serialize> in DataSketches' format of a filter of another layout, whose
bits DataSketches would not find: create the filter with C<< layout =>
'datasketches' >> (the bits of a filter cannot be moved to another layout).

=item format 'datasketches' holds one bit array, not a windowed filter's generations

L</serialize> in DataSketches' format of a windowed filter.

=item capacity is too large: capacity and fp_rate need more bits than a DataSketches image holds (2^31 - 5 words); use a larger fp_rate or several filters

A C<datasketches> filter of that capacity and rate would not fit
DataSketches' image format.

=item %s: file exists

L</deserialize> with a C<path> never replaces an existing file.

=item layout must be 'standard', 'blocked' or 'datasketches', got %s

The C<layout> option of L</new>, L</new_memfd> or L</deserialize> is
something else.

=item layout mismatch (the filter is %s, not %s)

L</new> of an existing file asked for another layout than the file's.

=item layout mismatch (the bytes are of a %s filter, not %s)

L</deserialize> asked for another layout than the bytes'.

=item layout mismatch (%s vs %s)

L</merge> or L</intersect> of filters of different layouts.

=item this fp_rate needs 128-bit blocks, which need a 16-byte compare-and-swap this machine lacks

=item this filter's 128-bit blocks need a 16-byte compare-and-swap, which this machine lacks

=item the bytes' 128-bit blocks need a 16-byte compare-and-swap, which this machine lacks

A blocked filter of 128-bit blocks on a machine without C<cmpxchg16b> (see
L</LAYOUTS>).

=item geometry mismatch (bits %d vs %d, hashes %d vs %d, seeds %s)

=item seed mismatch (the filters hash with different seeds)

L</merge> or L</intersect> of filters that are not L</is_compatible>; neither
filter was changed. See L</Compatibility>.

=item serialized size %d is too large

=item cannot allocate %d bytes for the serialized filter

The filter does not fit in a Perl string on this machine, or the memory for
it cannot be had now (a C<ulimit -v>, say). The process goes on.

=item must be called as a class method

A constructor was called without a class.

=item cannot be serialized by Storable; use serialize and deserialize

A handle cannot be copied by L<Storable>.

=item error (status %d)

=item cannot create the filter

=item cannot open the filter

=item cannot deserialize the filter

=item cannot upgrade the file

The core failed without saying why. This should not happen: please report it
with the code that triggers it.

=back

The messages below come from the Rust core. Those about a file start with its
path (C<PATH: >); those about a system call name the call and end with the
system's own words, as Perl's C<$!> reads them (no error number), as in
C<open /srv/x.bloom: Permission denied>.

=over 4

=item capacity is too large: capacity and fp_rate need more than 2^38 bits (32 GiB); use a larger fp_rate or several filters

The filter would be larger than the largest supported; see
L</CHOOSING CAPACITY AND FP_RATE>.

=item PATH: is a symbolic link (refused)

=item PATH: is a directory, not a regular file

=item PATH: is a FIFO, not a regular file

=item PATH: is a character device, not a regular file

=item PATH: is a block device, not a regular file

=item PATH: is a socket, not a regular file

=item fd N: is ..., not a regular file

Filters live in regular files only, and symbolic links are never followed
(so that nobody can point your filter at another file). Open the link's
target yourself if you trust it.

=item open PATH: ...

=item create PATH: ...

=item chmod PATH: ...

=item chown PATH: ...

=item link PATH: ...

=item rename PATH: ...

=item unlink PATH: ...

=item fstat PATH: ...

=item flock: ...

=item mmap: ...

=item msync: ...

=item memfd_create: ...

=item dup fd N: ...

A system call failed; its message says why (permissions, a missing
directory, too many open files, a bad descriptor...).

=item the filter needs %d bytes (%s), but the memory cgroup allows %s more (%d bytes); nothing was created

=item the filter needs %d bytes (%s), but the system has %s available (MemAvailable, %d bytes); nothing was created

=item the filter needs %d bytes (%s), but the address space limit leaves %s (RLIMIT_AS less VmSize, %d bytes); nothing was created

=item PATH: the filter needs %d bytes (%s), but the file system has %s free (free space on the file system, %d bytes; ENOSPC: No space left on device); nothing was created

The filter is larger than what the host can hold for it (see L</Memory and
space the host cannot hold>): the room the process's memory cgroup leaves,
the system's available memory, the address space C<RLIMIT_AS> leaves, or
the free space of the file system (a file on tmpfs is memory too and may
name any of them). Nothing was created. Make the filter smaller, or give
the process (its container) more memory or the file system more room.

=item the bytes ask for a filter of %d bytes (%s), more than the %d bytes (%s) that %d bytes of input may ask for (64 times their length, at least 16 MiB): pass max_bytes to allow more; nothing was created

=item the bytes ask for a filter of %d bytes (%s), more than max_bytes allows (%d bytes); nothing was created

L</deserialize>: the bytes declare a filter larger than the ceiling
(typically an empty DataSketches image of a large filter). Nothing was
allocated. Pass a C<max_bytes> that allows it if the bytes are trusted.

=item max_bytes must be a positive integer (the most bytes of memory the new filter may need), got %s

L</deserialize>'s option, when given, is an integer of at least 1.

=item PATH: cannot reserve %d bytes: No space left on device

=item memfd: cannot reserve %d bytes: ...

The file system (or, for a memfd or anonymous filter, shared memory) has no
room for the filter. Nothing was created. Free some space, use a larger
file system (Docker's F</dev/shm> is 64 MiB by default), or make the filter
smaller.

=item PATH: the filter needs %d bytes, more than the file size limit (RLIMIT_FSIZE, %d bytes)

=item memfd: the filter needs %d bytes, more than the file size limit (RLIMIT_FSIZE, %d bytes)

The filter is larger than the process may make a file (C<ulimit -f>).
Nothing was created.

=item PATH: is an empty file of uid %d, not of this process's uid %d: not adopted (remove it, or let its owner create the filter)

An empty file is turned into a filter only by its owner (see L</new>):
someone else may have put it there.

=item PATH: the empty file's creation lock is still held after %s s (another process holds a lock on the file; BLOOMFILTER_SHARED_LOCK_WAIT sets the wait)

L</new> found an empty file to adopt, and another process held a lock on
it for longer than C<BLOOMFILTER_SHARED_LOCK_WAIT> seconds (default 30):
another process adopting it (which takes that long only for the largest
filters, or when stopped), or a process that opened the file and locked it
for its own reasons. Nothing was created; the file is as it was. See
L</Locks an opener waits for>.

=item lock PATH: ...

Taking an empty file's creation lock failed for a reason the system gives.

=item PATH: file exists

L</deserialize> with a C<path> creates a new file and never replaces one:
remove it first or choose another path.

=item PATH: file keeps disappearing while being opened

=item PATH: removed while being created

Another process kept removing the file while this one opened or created it.

=item PATH: filter is frozen; open it with new_readonly

A frozen filter can only be queried: use L</new_readonly>.

=item PATH: filter is not frozen (freeze it before opening read-only)

L</new_readonly> maps a filter that can no longer change; L</freeze> it
first, or open it with L</new>.

=item filter is frozen (read-only)

A mutation (L</add>, L</add_many>, L</merge>, L</intersect>, L</invert>,
L</clear>, L</freeze>) of a frozen filter.

=item filter handle is read-only

A mutation through a handle from L</new_readonly>, or from L</new_from_fd>
of a read-only descriptor.

=item this system has no robust futexes (the kernel's robust list is needed to write)

A write on a system whose kernel refuses a robust futex list (see
L</CONCURRENCY AND CRASH SAFETY>); queries still work.

=item cannot start the filter's keeper thread: %s

=item cannot start the filter's keeper thread: Resource temporarily unavailable (RLIMIT_NPROC, %d processes)

A process's first write could not start the thread that holds its slot
words (see L</CONCURRENCY AND CRASH SAFETY>), for the system's reason
given; a process (not root) of a user at its C<RLIMIT_NPROC> is told the
limit. Queries still work; raise the limit, or write from a process that
can start a thread.

=item waited %s s for stripe %d, held by slot %d (word %#x) of thread %d, which does not answer; another process may have forged it, or its holder is stopped

=item waited %s s for the exclusive word, held by ...

=item waited %s s for the journal word, held by ...

=item waited %s s for the mark of slot %d, held by ...

=item waited %s s for the cleaner word, held by ...

=item waited %s s for a lock-free add's mark to clear; ...

=item waited %s s for a slot: every one is held, the last, shared one by slot 1023 (word %#x) of thread %d, which ...

A write waited the bound (10 s, or C<BLOOMFILTER_SHARED_WAIT_LIMIT>) for
one holder of a lock word, and changed nothing (see L</CONCURRENCY AND
CRASH SAFETY>). The holder is named by its slot, that slot's word and the
thread id in it, which "does not answer" (no such thread in this PID
namespace: a forged word, or a process of another namespace) or "is alive
but does not let go" (a stopped process, or a forged word naming a thread
that exists). Another process that can write the file may have forged the
word; or a process sharing the filter is stopped. Trying again waits as
long again while the word stays.

=item this process holds slots of too many filters at once (at most 2047)

A write needed a slot of one more filter than the kernel can release for
the process when it dies (see L</CONCURRENCY AND CRASH SAFETY>): let go of
handles of other filters first.

=item the slot table is corrupt: no slot can be taken

A write found neither a usable slot nor a usable overflow slot: the
filter's slot table was damaged while it was open.

=item PATH: the process slot table is corrupt (slot %d)

The file's slot table holds bytes this module never writes there: the file
was damaged or written by something else.

=item PATH: file too small to be a filter (%d bytes; truncated or not a filter file)

=item PATH: bad magic (not a Data::BloomFilter::Shared file)

=item PATH: unsupported format version %d

=item PATH: byte order mismatch (file written on a machine of different endianness)

=item PATH: unknown hash scheme %d

=item PATH: invalid geometry in header (corrupted file)

=item PATH: invalid layout in header (corrupted file)

=item PATH: header checksum mismatch (corrupted file)

=item PATH: file is truncated: %d bytes, header says %d

=item PATH: file is grown: %d bytes, header says %d

Longer than the filter plus a journal (see L</SECURITY>).

=item file too large to map

=item PATH: written by Data::BloomFilter::Shared 0.04: convert it with `bloomfilter-shared upgrade PATH`

A file of the original C module: convert it once (see L</UPGRADING FROM
0.04>). Through L</new_from_fd> the message says C<PATH> literally.

=item PATH: format version 2 of an earlier release (its slot table holds addresses): convert it with `bloomfilter-shared upgrade PATH`

A file of an earlier release of this module, whose process slots held C
library mutexes (and so addresses of the processes using it): stop those
processes, then convert it once with L</upgrade>, which rewrites the slot
table in place (the bits, geometry and counts stay). Through
L</new_from_fd> the message says C<PATH> literally.

=item PATH: in use (process slot %d is held by a process that has not ended); stop the processes of the old version first

L</upgrade> of a file of format 2 found a slot still held.

The file is not a filter, was written by another version or on a machine of
another byte order, or was damaged. Use
L</serialize> and L</deserialize> to move filters between machines; restore
a damaged file from a copy (or rebuild the filter).

=item PATH: in use (another process holds a lock on it); stop the processes of the old version first

=item PATH: in use (process %d has it mapped); stop the processes of the old version first

=item PATH: already a filter of this version (nothing to upgrade)

=item PATH: file of the original module is truncated (%d bytes, header needs 256)

=item PATH: not a file of Data::BloomFilter::Shared 0.04 (bad magic)

=item PATH: unknown format version %d of the original module

=item PATH: invalid hash count %d in header (corrupted file)

=item PATH: invalid bit count %d in header (corrupted file)

=item PATH: invalid capacity in header (corrupted file)

=item PATH: invalid fp_rate in header (corrupted file)

=item PATH: file is %d bytes, header says %d (truncated or grown)

=item PATH: bit array of %d bytes at offset %d does not fit in %d bytes after the header (corrupted file)

=item PATH: replaced by another file during the upgrade (nothing changed)

=item read PATH: ...

=item rename PATH: ...

=item stat PATH: ...

=item chown PATH: ...

L</upgrade> refused the file, or a system call failed while converting it;
in every case the file was left as it was.

=item mode %o is not a file mode

=item path is empty

=item path is required

=item null handle

=item null output pointer

=item serialize buffer has the wrong size

Arguments the Perl layer checks before the core sees them; from Perl they
mean a bug in this module: please report it.

=item internal error (a bug): please report it

The core caught a panic (an internal error) instead of letting it crash
your process. Please report it.

=back

=head1 SEE ALSO

F<README.pod> for installing, a first try and the one setting each prefork
server needs; F<bench/RESULTS.md> for every measurement and how to repeat
it; F<doc/DESIGN.md> for the design, the shared file byte by byte and the
concurrency and crash contract;
L<bloomfilter-shared> for the command-line tool.

Other tools for neighbouring jobs, and when to prefer them:

=over 4

=item * B<RedisBloom> (the C<BF.*> commands of a Redis module), when the
processes sharing a filter run on several hosts: every query is a network
round trip, but one server holds the filter for all of them. This module
shares between processes of one host, at memory speed; across hosts, ship
C<serialize>d filters and L</merge> them.

=item * A B<counting Bloom filter> or a B<cuckoo filter>, when items must be
deleted: a Bloom filter can only add (L</clear> empties it entirely). A
counting filter keeps a small counter instead of each bit (typically four
times the memory); a cuckoo filter stores short fingerprints, needs less
memory than a Bloom filter below about 3 % false positives and reads two
buckets per query, but an insertion can fail when it is nearly full.

=item * L<Bloom::Filter> or L<Algorithm::BloomFilter> on CPAN, for a filter
used by a single process: no shared mapping, no locking, no files or
processes to manage.

=item * A hash (or L<Hash::SharedMem> between processes), when false
positives are not acceptable and the items fit in memory.

=back

=head1 LICENSE

This library is free software; you can redistribute it and/or modify it under
the same terms as Perl itself.

=cut
