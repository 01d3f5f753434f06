package Data::BloomFilter::Shared::Args;

# The checks of the arguments that Data::BloomFilter::Shared, its Redis
# class and the command line tool have in common: capacity, fp_rate, seed,
# mode, layout, the window options and options hashes, each written once,
# with the defaults. Internal: not an API.

use 5.022;
use strict;
use warnings;

use B ();
use Carp ();
use POSIX ();
use Scalar::Util ();
use overload ();

use Data::BloomFilter::Shared ();    # the XS: the C API's constants

our $VERSION = $Data::BloomFilter::Shared::VERSION;

# A croak from here names the caller of the class that called us.
our @CARP_NOT = qw(Data::BloomFilter::Shared Data::BloomFilter::Shared::Redis
    Data::BloomFilter::Shared::CLI);

# The defaults, for every entry point.
our $DEFAULT_FP_RATE = 0.01;
our $DEFAULT_MODE = 0600;

# The C API's constants (LAYOUT_BLOCKED, GENERATIONS_DEFAULT, ...) and the
# layouts' names and codes, the default first, as the XS gives them.
our %CONSTANT = Data::BloomFilter::Shared::_constants();
my @LAYOUT_PAIRS = Data::BloomFilter::Shared::_layouts();
my %LAYOUT_CODE = @LAYOUT_PAIRS;
my @LAYOUT_NAMES = @LAYOUT_PAIRS[grep { $_ % 2 == 0 } 0 .. $#LAYOUT_PAIRS];

sub layout_names { return @LAYOUT_NAMES }

# "'standard', 'blocked' or 'datasketches'"
sub layout_choice {
    my @q = map { "'$_'" } @LAYOUT_NAMES;
    return @q > 1 ? join(', ', @q[0 .. $#q - 1]) . " or $q[-1]" : $q[0];
}

# $who->$method: $message, from the caller's line.
sub fail {
    my ($who, $method, $message) = @_;
    Carp::croak("$who->$method: $message");
}

my $UV_MAX = '18446744073709551615';

# How a message shows the value given: undef; a number as written; a string
# quoted (a quote or backslash in it after a backslash), control and
# non-ASCII characters as \x{..}, cut at 40
# characters; a reference by its type (never stringified: a croak must not
# run the caller's code again). $text is the value's string form when the
# caller already has it (an overloaded object's, taken once).
sub shown {
    my ($v, $text) = @_;
    return 'undef' if !defined $v;
    if (!defined $text) {
        if (ref $v && !overload::Method($v, '""')) {
            my $class = Scalar::Util::blessed($v);
            return defined $class ? "a $class object"
                : 'a' . (Scalar::Util::reftype($v) =~ /\A[AEIOU]/ ? 'n ' : ' ')
                . Scalar::Util::reftype($v) . ' reference';
        }
        $text = "$v";
    }
    return $text if $text =~ /\A[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\z/;
    my $cut = length $text > 40 ? substr($text, 0, 37) : $text;
    $cut =~ s/([\\'])/\\$1/g;
    $cut =~ s/([^\x20-\x7e])/sprintf '\\x{%x}', ord $1/ge;
    return "'$cut" . (length $text > 40 ? "...'" : "'");
}

# A string the command line tool takes as a count (10M, 5k, 2G): the same
# number as Perl reads it, 10e6, for a hint; else undef.
sub suffix_hint {
    my ($text) = @_;
    return undef if !defined $text || $text !~ /\A\s*([0-9]+(?:\.[0-9]+)?)\s*([kmg])\s*\z/i;
    return $1 . 'e' . { k => 3, m => 6, g => 9 }->{lc $2};
}

# Canonical decimal string of a non-negative integer that fits in 64 bits, or
# undef. Taking the string form accepts 1000, "1000", 1e6 and Math::BigInt
# alike, and refuses -1, 1.5, "12abc", " 12", references and anything > 2**64-1.
sub uint64 {
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

# What each class has always said for a capacity that is no number, and for
# one that is not above 0 (or infinite). Their tests and users match on
# these words, so each keeps its own; the value given and a hint follow.
my %CAPACITY_SAYS = (
    'Data::BloomFilter::Shared' => {
        not_number => 'capacity must be a positive number',
        not_positive => 'capacity must be a positive number',
    },
    'Data::BloomFilter::Shared::Redis' => {
        not_number => 'capacity must be a number',
        not_positive => 'capacity must be a positive integer',
    },
);

# Capacity: whatever Perl takes as a number ("1e6", "1000\n", " 1000",
# "1000.0", 1500.5), rounded up to a whole number of items, as a decimal
# string. Integers written out in full stay exact up to 2**64-1; others go
# through a double.
sub capacity {
    my ($who, $method, $capacity) = @_;
    my $says = $CAPACITY_SAYS{$who} // $CAPACITY_SAYS{'Data::BloomFilter::Shared'};
    my $items = ' (the number of items the filter is sized for, such as 1000000 or 1e6)';
    fail($who, $method, "$says->{not_number}, got undef$items")
        if !defined $capacity;
    fail($who, $method, "$says->{not_number}, got " . shown($capacity) . $items)
        if ref $capacity && !overload::Method($capacity, '""')
        && !overload::Method($capacity, '0+');
    my $s = "$capacity";
    my $got = ', got ' . shown($capacity, $s);
    my $too_large = "capacity is too large$got (at most $UV_MAX items)";
    if ($s =~ /\A\s*\+?([0-9]+)\s*\z/) {
        my $c = uint64($1);
        fail($who, $method, $too_large) if !defined $c;
        fail($who, $method, "$says->{not_positive}$got$items") if $c eq '0';
        return $c;
    }
    if (!Scalar::Util::looks_like_number($s)) {
        # Suffixes stay the command line tool's: in Perl code a capacity is
        # a number, the same one the caller's own arithmetic sees.
        my $perl = suffix_hint($s);
        fail($who, $method, "$says->{not_number}$got"
                . (defined $perl
                    ? " (suffixes such as 10M are the command line tool's: write $perl here)"
                    : $items));
    }
    my $n = 0 + $s;
    fail($who, $method, "$says->{not_positive}$got$items")
        if !($n > 0) || $n == 9**9**9;    # also refuses NaN and inf
    $n = POSIX::ceil($n);
    fail($who, $method, $too_large) if $n >= 18446744073709551616;
    return sprintf '%.0f', $n;
}

# fp_rate: strictly between 0 and 1; undef for the default. $capacity is
# the capacity as the caller gave it, for the hint when the two look
# swapped (new($path, 0.01, 1000)).
sub fp_rate {
    my ($who, $method, $fp_rate, $capacity) = @_;
    return $DEFAULT_FP_RATE if !defined $fp_rate;
    my $says = 'fp_rate must be between 0 and 1 (exclusive)';
    my $what = ' (a probability, such as 0.01 for 1%)';
    fail($who, $method, "$says, got " . shown($fp_rate) . $what)
        if ref $fp_rate && !overload::Method($fp_rate, '0+')
        && !overload::Method($fp_rate, '""');
    my $s = "$fp_rate";
    my $got = ", got " . shown($fp_rate, $s);
    if (!Scalar::Util::looks_like_number($s)) {
        fail($who, $method, "$says$got (write " . ($1 / 100) . " for $1%)")
            if $s =~ /\A\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*\z/;
        fail($who, $method, "$says$got$what");
    }
    if ($s >= 1) {
        my $swapped = '';
        {
            no warnings 'numeric';
            $swapped = ': capacity ' . shown($capacity) . " and fp_rate $s look swapped"
                if defined $capacity && !ref $capacity
                && Scalar::Util::looks_like_number($capacity)
                && $capacity > 0 && $capacity < 1;
        }
        fail($who, $method, "$says$got (the arguments are the capacity, then the fp_rate$swapped)");
    }
    fail($who, $method, "$says$got$what") if !($s > 0);    # also refuses NaN
    return 0 + $s;
}

# The file-type bits (S_IFMT) of a mode from stat, and the types they name.
my $S_IFMT = 0170000;
my %FILE_TYPE = map { $_ << 12 => 1 } 001, 002, 004, 006, 010, 012, 014;

# A file mode given as a number; undef for the default.
sub mode {
    my ($who, $method, $mode) = @_;
    return $DEFAULT_MODE if !defined $mode;
    # A string such as "0660" would be read as decimal 660 (mode 01224):
    # refuse strings outright, and let the caller say oct().
    if (!ref $mode) {
        my $flags = B::svref_2object(\$mode)->FLAGS;
        if ($flags & B::SVf_POK && !($flags & (B::SVf_IOK | B::SVf_NOK))) {
            fail($who, $method, "mode must be a number, not the string '$mode' (use oct('$mode'))")
                if $mode =~ /\A[0-7]{1,6}\z/;
            fail($who, $method, 'mode must be a number, not the string ' . shown($mode)
                    . ' (a mode is a number written in octal, such as 0660)');
        }
    }
    my $m = uint64($mode);
    my $range = 'mode must be an integer between 0 and 07777, got ' . shown($mode)
        . ' (a mode written in octal, such as 0660)';
    fail($who, $method, $range)
        if !defined $m || length $m > 7;
    $m = 0 + $m;
    # (stat $file)[2] carries the file type too: keep the permission bits.
    $m &= 07777 if $m > 07777 && $m <= 0177777 && $FILE_TYPE{$m & $S_IFMT};
    fail($who, $method, $range) if $m > 07777;
    permission_bits($who, $method, $m);
    return $m;
}

# A mode with bits outside 0777 (set-user-ID, set-group-ID, sticky) is a
# mode written in decimal far more often than one meant: 660 is 01224.
sub permission_bits {
    my ($who, $method, $m) = @_;
    return if !($m & ~0777);
    fail($who, $method, sprintf('mode %d has bits outside 0777 (0%o in octal): write a mode in octal, %s',
            $m, $m, $m =~ /\A[0-7]{3}\z/ ? "as 0$m (not $m)" : 'such as 0660'));
}

# A seed: a decimal string (exact beyond Perl's integers); 0 for undef,
# unless $given says the caller wrote a seed option: an undef one is a
# secret that was never set (seed => $secret), which would protect nothing.
sub seed {
    my ($who, $method, $seed, $given) = @_;
    if (!defined $seed) {
        fail($who, $method, 'the seed option is undef (a secret that was not set?):'
                . ' give a seed, or leave the option out for seed 0')
            if $given;
        return 0;
    }
    my $s = uint64($seed);
    # The value is a secret: the message says what kind of value it was, not
    # the value.
    if (!defined $s) {
        my $kind = ref $seed && !overload::Method($seed, '""') ? 'a reference'
            : "$seed" =~ /\A[0-9]+\z/ ? 'a number above 2**64-1'
            : "$seed" =~ /\A-[0-9]+\z/ ? 'a negative number'
            : "$seed" =~ /\A\s*\z/ ? 'an empty string'
            : "$seed" =~ /\A(?:0x)?[0-9a-f]+\z/i ? 'a hexadecimal string'
            : 'a value that is not decimal digits';
        fail($who, $method, 'seed must be a non-negative integer that fits in 64 bits,'
                . " got $kind (not shown: a seed is a secret;"
                . ' a hexadecimal secret of up to 16 digits: hex($secret))');
    }
    return $s;
}

# The seed of a new filter of layout code $layout given no seed option: 0,
# or for the datasketches layout DataSketches' default update seed (9001),
# so that its bits are those DataSketches sets by default.
sub default_seed {
    my ($layout) = @_;
    return $layout == $CONSTANT{LAYOUT_DATASKETCHES} ? $CONSTANT{DATASKETCHES_SEED} : 0;
}

# The seed of a new filter of layout $name given no seed option, as
# default_seed gives it (0 for a name that is no layout: the layout's own
# check refuses it).
sub default_seed_named {
    my ($name) = @_;
    my $code = defined $name ? $LAYOUT_CODE{$name} : undef;
    return defined $code ? default_seed($code) : 0;
}

# A layout named in the Redis class's options: undef, or a name of word
# characters (which layout it is, the library says).
sub layout_name {
    my ($who, $method, $layout) = @_;
    fail($who, $method, 'layout must be a string, got ' . shown($layout) . ' (' . layout_choice() . ')')
        if defined $layout && (ref $layout || $layout !~ /\A\w+\z/);
    return $layout;
}

# A string argument ($what: "path", "name", ...): a copy, never the
# caller's scalar, its bytes the scalar's own; undef and a reference
# without string overloading refused. What else each argument needs, its
# caller checks.
sub string {
    my ($who, $method, $what, $value) = @_;
    fail($who, $method, "undefined $what") if !defined $value;
    fail($who, $method, "$what must be a string, got " . shown($value))
        if ref $value && !overload::Method($value, '""');
    return "$value";
}

# The bits and hashes options (a datasketches filter's size, given rather
# than sized): (0, 0) when neither is given; both, as non-negative integers,
# otherwise. Their ranges are the library's to check.
sub size {
    my ($who, $method, $opts) = @_;
    my ($bits, $hashes) = @$opts{qw(bits hashes)};
    return (0, 0) if !exists $opts->{bits} && !exists $opts->{hashes};
    fail($who, $method, 'the bits and hashes options go together')
        if !exists $opts->{bits} || !exists $opts->{hashes};
    my %v;
    for my $k (qw(bits hashes)) {
        $v{$k} = uint64($opts->{$k});
        fail($who, $method, "$k must be a positive integer, got " . shown($opts->{$k}))
            if !defined $v{$k} || $v{$k} eq '0';
    }
    return @v{qw(bits hashes)};
}

# The C API's layout code of a layout name: BFS_LAYOUT_DEFAULT when none was
# asked for (standard for a new filter; the stored one wins on an existing
# file or bytes).
sub layout {
    my ($who, $method, $layout) = @_;
    return $CONSTANT{LAYOUT_DEFAULT} if !defined $layout;
    my $code = ref $layout ? undef : $LAYOUT_CODE{$layout};
    fail($who, $method, 'layout must be ' . layout_choice() . ', got ' . shown($layout))
        if !defined $code;
    return $code;
}

# The C API's window options from an options hash: (generations, window in
# seconds), (0, 0) for a plain filter; a window of 0 seconds with
# generations is a filter stepped only by rotate. The window's range is
# checked by the library. Generations not given: the C API's
# BFS_GENERATIONS_DEFAULT (4 for a new filter, an existing one's own).
sub window {
    my ($who, $method, $opts) = @_;
    my $has_window = exists $opts->{window};
    return (0, 0) if !$has_window && !exists $opts->{generations};
    fail($who, $method, 'the generations option needs the window option'
            . ' (window => undef for a filter stepped only by rotate)')
        if !$has_window;
    my $g = $opts->{generations};
    if (defined $g || exists $opts->{generations}) {
        my $n = uint64($g);
        fail($who, $method, 'generations must be an integer from 2 to 16, got ' . shown($g))
            if !defined $n || length $n > 2 || $n < 2 || $n > 16;
        $g = 0 + $n;
    }
    else {
        $g = $CONSTANT{GENERATIONS_DEFAULT};
    }
    my $w = $opts->{window};
    return ($g, 0) if !defined $w;
    my $says = 'window must be a positive number of seconds (or undef)';
    fail($who, $method, "$says, got " . shown($w))
        if ref $w && !overload::Method($w, '0+') && !overload::Method($w, '""');
    my $s = "$w";
    if (!Scalar::Util::looks_like_number($s)) {
        # Durations such as "2s" and "90m" stay the command line tool's,
        # as suffixes of a count do.
        my ($secs) = $s =~ /\A[0-9][0-9a-z.]*\z/ ? duration($s) : ();
        fail($who, $method, "$says, got " . shown($w, $s)
                . " (durations such as 2s are the command line tool's: write "
                . duration_text($secs) . ' here)')
            if defined $secs;
        fail($who, $method, "$says, got " . shown($w, $s));
    }
    # also refuses NaN and inf
    fail($who, $method, "$says, got " . shown($w, $s)) if !($s > 0) || $s == 9**9**9;
    return ($g, 0 + $s);
}

# The C API's growth options from an options hash: (grow, max_capacity),
# (0, 0) for a filter that does not grow and 0 for no bound. Whether
# max_capacity reaches the capacity, and grow goes with the rest, the
# library says.
sub grow {
    my ($who, $method, $opts) = @_;
    if (!exists $opts->{grow}) {
        fail($who, $method, 'the max_capacity option needs the grow option'
                . ' (a filter that does not grow is bounded by its capacity)')
            if exists $opts->{max_capacity};
        return (0, 0);
    }
    my $f = $opts->{grow};
    my $n = uint64($f);
    fail($who, $method, 'grow must be an integer from 2 to 16 (the factor each new stage is larger by), got '
            . shown($f))
        if !defined $n || length $n > 2 || $n < 2 || $n > 16;
    my $max = $opts->{max_capacity};
    return (0 + $n, 0) if !defined $max;
    my $m = uint64($max);
    fail($who, $method, 'max_capacity must be a positive integer (the most items the filter may take), got '
            . shown($max))
        if !defined $m || $m eq '0';
    return (0 + $n, $m);
}

# deserialize's max_bytes: the most memory the new filter may need, a
# positive integer; 0 (the XS's "not given") when absent.
sub max_bytes {
    my ($who, $method, $opts) = @_;
    my $v = $opts->{max_bytes};
    return 0 if !defined $v;
    my $n = uint64($v);
    fail($who, $method, 'max_bytes must be a positive integer (the most bytes of memory the new filter may need), got '
            . shown($v))
        if !defined $n || $n eq '0';
    return $n;
}

# A count as the command line tool takes it: 1000, 1_000_000, 1e6, 10k, 5M,
# 2G (k, M, G: powers of 1000). The number, or undef for anything else.
sub count_text {
    my ($v) = @_;
    my %mult = (k => 1e3, m => 1e6, g => 1e9);
    (my $s = $v) =~ s/_//g;
    return $1 if $s =~ /\A([0-9]+)\z/;
    return $1 * $mult{lc $2} if $s =~ /\A([0-9]+(?:\.[0-9]+)?)([kmg])\z/i;
    return $1 * 10**$2 if $s =~ /\A([0-9]+(?:\.[0-9]+)?)e([0-9]+)\z/i;
    return undef;
}

# An fp_rate as the command line tool takes it: digits with a decimal point
# or an exponent (0.01, .01, 1e-3), strictly between 0 and 1; or undef.
sub fp_rate_text {
    my ($v) = @_;
    return undef if $v !~ /\A(?:[0-9]*\.?[0-9]+(?:[eE]-?[0-9]+)?)\z/ || !($v > 0 && $v < 1);
    return 0 + $v;
}

# A duration as the command line tool takes it ("90", "2s", "1h30m", ...):
# (seconds) or (undef, why not), in the library's words.
sub duration {
    my ($text) = @_;
    return Data::BloomFilter::Shared::_xs_parse_duration($text);
}

# Seconds as the shortest decimal (2, 0.5, 90, 0.001) that reads back as
# the same double. A filter's window comes from the library as it was
# given (Window::given_ns), so this shows it as given.
sub duration_text {
    my ($secs) = @_;
    for my $digits (1 .. 17) {
        my $text = sprintf '%.*g', $digits, $secs;
        return '' . (0 + $text) if $text == $secs;
    }
    return '' . (0 + $secs);
}

# An options hash: only the keys in @allowed; returns a plain copy ({} for
# undef).
sub options {
    my ($who, $method, $opts, @allowed) = @_;
    return {} if !defined $opts;
    fail($who, $method, 'options must be a hash reference, got ' . shown($opts))
        if ref $opts ne 'HASH';
    my %allowed = map { $_ => 1 } @allowed;
    for my $key (sort keys %$opts) {
        fail($who, $method, "unknown option '$key' (the options are "
                . join(', ', sort @allowed) . ')')
            if !$allowed{$key};
    }
    return {%$opts};
}

1;

__END__

=head1 NAME

Data::BloomFilter::Shared::Args - argument checks shared by Data::BloomFilter::Shared, its Redis class and bloomfilter-shared (internal)

=head1 DESCRIPTION

Internal to the distribution: no part of it is an API, and it may change
or go away in any release. See L<Data::BloomFilter::Shared>.

=cut
