# Each argument croak names the method, the argument and the value given,
# and hints at the usual cause: the words callers match on come first, as
# they always did, then ", got VALUE" and the hint.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Data::BloomFilter::Shared;
use Data::BloomFilter::Shared::Redis;

my $C = 'Data::BloomFilter::Shared';
my $R = 'Data::BloomFilter::Shared::Redis';
my $dir = tempdir(CLEANUP => 1);
my $path = "$dir/f.bloom";
my $here = qr/ at \Q${\ __FILE__}\E line \d+\.\n\z/;

sub croaks {
    my ($code, $re, $name) = @_;
    my $ok = eval { $code->(); 1 };
    return fail("$name: no croak") if $ok;
    # The message points at the caller's line, and says what $re says.
    like($@ =~ $here ? $@ : "not at the caller's line: $@", $re, $name);
}

# capacity
croaks(sub { $C->new($path, '10M') },
    qr/\A\Q$C\E->new: capacity must be a positive number, got '10M' \(suffixes such as 10M are the command line tool's: write 10e6 here\)/,
    'new(path, "10M"): the value and that suffixes are the CLI\'s, with the Perl number');
croaks(sub { $C->new(undef, '5k') },
    qr/\A\Q$C\E->new: capacity must be a positive number, got '5k' \(.*write 5e3 here\)/,
    'new(undef, "5k")');
croaks(sub { $C->new_memfd('m', '2G') },
    qr/\A\Q$C\E->new_memfd: capacity must be a positive number, got '2G' \(.*write 2e9 here\)/,
    'new_memfd(name, "2G")');
croaks(sub { $C->new($path, 0) },
    qr/\A\Q$C\E->new: capacity must be a positive number, got 0 \(the number of items the filter is sized for/,
    'capacity 0');
croaks(sub { $C->new($path, -5) },
    qr/\A\Q$C\E->new: capacity must be a positive number, got -5 \(/, 'capacity -5');
croaks(sub { $C->new($path, undef) },
    qr/\A\Q$C\E->new: capacity must be a positive number, got undef \(/, 'capacity undef');
croaks(sub { $C->new($path, 'lots') },
    qr/\A\Q$C\E->new: capacity must be a positive number, got 'lots' \(the number of items .*such as 1000000 or 1e6\)/,
    'capacity that is no number');
croaks(sub { $C->new($path, [1]) },
    qr/\A\Q$C\E->new: capacity must be a positive number, got an ARRAY reference \(/,
    'capacity: a reference is named by its type');
croaks(sub { $C->new($path, '9' x 30) },
    qr/\A\Q$C\E->new: capacity is too large, got 9{30} \(at most 18446744073709551615 items\)/,
    'capacity too large');
croaks(sub { $C->new($path, "x\n\t" . ('y' x 60)) },
    qr/\A\Q$C\E->new: capacity must be a positive number, got 'x\\x\{a\}\\x\{9\}y{34}\.\.\.' \(/,
    'a long string is cut, control characters escaped');

# fp_rate, and swapped arguments
croaks(sub { $C->new($path, 0.01, 1000) },
    qr/\A\Q$C\E->new: fp_rate must be between 0 and 1 \(exclusive\), got 1000 \(the arguments are the capacity, then the fp_rate: capacity 0\.01 and fp_rate 1000 look swapped\)/,
    'new(path, 0.01, 1000): swapped arguments');
croaks(sub { $C->new($path, 1000, 5) },
    qr/\A\Q$C\E->new: fp_rate must be between 0 and 1 \(exclusive\), got 5 \(the arguments are the capacity, then the fp_rate\)/,
    'fp_rate 5: the order, no "swapped" (the capacity is plausible)');
croaks(sub { $C->new($path, 1000, '1%') },
    qr/\A\Q$C\E->new: fp_rate must be between 0 and 1 \(exclusive\), got '1%' \(write 0\.01 for 1%\)/,
    'fp_rate "1%"');
croaks(sub { $C->new($path, 1000, 0) },
    qr/\A\Q$C\E->new: fp_rate must be between 0 and 1 \(exclusive\), got 0 \(a probability, such as 0\.01/,
    'fp_rate 0');
croaks(sub { $R->new('127.0.0.1:1', 'n', 0.01, 1000) },
    qr/\A\Q$R\E->new: fp_rate must be between 0 and 1 \(exclusive\), got 1000 \(.*capacity 0\.01 and fp_rate 1000 look swapped\)/,
    'Redis->new: swapped arguments, before any connection');
croaks(sub { $R->new('127.0.0.1:1', 'n', '10M') },
    qr/\A\Q$R\E->new: capacity must be a number, got '10M' \(.*write 10e6 here\)/,
    'Redis->new: "10M" keeps its words and gets the hint');
croaks(sub { $R->new('127.0.0.1:1', 'n', 0) },
    qr/\A\Q$R\E->new: capacity must be a positive integer, got 0 \(/, 'Redis->new: capacity 0');

# mode
croaks(sub { $C->new($path, 1000, 0.01, '0660') },
    qr/\A\Q$C\E->new: mode must be a number, not the string '0660' \(use oct\('0660'\)\)/,
    'string mode: use oct()');
croaks(sub { $C->new($path, 1000, 0.01, 'rw-rw----') },
    qr/\A\Q$C\E->new: mode must be a number, not the string 'rw-rw----' \(a mode is a number written in octal, such as 0660\)/,
    'symbolic mode: no oct() hint, which would not help');
croaks(sub { $C->new($path, 1000, 0.01, 1.5) },
    qr/\A\Q$C\E->new: mode must be an integer between 0 and 07777, got 1\.5 \(a mode written in octal/,
    'mode 1.5');
croaks(sub { $C->new($path, 1000, 0.01, { mode => 99999999 }) },
    qr/\A\Q$C\E->new: mode must be an integer between 0 and 07777, got 99999999 /, 'mode too large');

# seed: its kind, never its value
my $secret = 'deadbeefcafe';
my $ok = eval { $C->new($path, 1000, 0.01, { seed => $secret }); 1 };
ok(!$ok, 'hex seed croaks');
like($@, qr/\A\Q$C\E->new: seed must be a non-negative integer that fits in 64 bits, got a hexadecimal string \(not shown: a seed is a secret; .*hex\(\$secret\)\)/,
    'hex seed: its kind and a hint');
unlike($@, qr/\Q$secret\E/, 'the seed itself is not in the message');
croaks(sub { $C->new($path, 1000, 0.01, { seed => -3 }) },
    qr/seed must be a non-negative integer that fits in 64 bits, got a negative number /, 'seed -3');

# layout, window, generations, options
croaks(sub { $C->new($path, 1000, 0.01, { layout => 'fast' }) },
    qr/\A\Q$C\E->new: layout must be 'standard' or 'blocked', got 'fast'/, 'layout');
croaks(sub { $C->new($path, 1000, 0.01, { window => '2s' }) },
    qr/\A\Q$C\E->new: window must be a positive number of seconds \(or undef\), got '2s' \(durations such as 2s are the command line tool's: write 2 here\)/,
    'window "2s"');
croaks(sub { $C->new($path, 1000, 0.01, { window => '1h' }) },
    qr/, got '1h' \(.*write 3600 here\)/, 'window "1h"');
croaks(sub { $C->new($path, 1000, 0.01, { colour => 1 }) },
    qr/\A\Q$C\E->new: unknown option 'colour' \(the options are generations, layout, mode, seed, window\)/,
    'unknown option: the known ones listed');
croaks(sub { $C->new_memfd('m', 1000, 0.01, [1]) },
    qr/\A\Q$C\E->new_memfd: options must be a hash reference, got an ARRAY reference/, 'options');
croaks(sub { $C->new($path, 1000, 0.01, \1) },
    qr/\A\Q$C\E->new: last argument must be a file mode or a hash reference of options, got a SCALAR reference/,
    'last argument');
croaks(sub { $C->new([], 1000) },
    qr/\A\Q$C\E->new: path must be a string, got an ARRAY reference/, 'path');
croaks(sub { $C->new_from_fd('three') },
    qr/\A\Q$C\E->new_from_fd: fd must be a non-negative integer or an open file handle, got 'three'/,
    'new_from_fd');
croaks(sub { $R->new('127.0.0.1:1', 'n', 1000, 0.01, { shards => 0 }) },
    qr/\A\Q$R\E->new: shards must be an integer from 1 to 65536, got 0$here/, 'Redis shards');
croaks(sub { $R->new(bless({}, 'Not::A::Client'), 'n', 1000) },
    qr/\A\Q$R\E->new: first argument must be a Redis client object or an address string, got a Not::A::Client object/,
    'Redis client');

# Names and paths.
croaks(sub { $C->new("a\0b", 1000) },
    qr/\A\Q$C\E->new: path contains a NUL byte, got 'a\\x\{0\}b' at /, 'a path with a NUL byte');
croaks(sub { $R->new('127.0.0.1:1', [], 1000) },
    qr/\A\Q$R\E->new: name must be a string, got an ARRAY reference at /, 'Redis name: a reference');
croaks(sub { $R->new('127.0.0.1:1', "caf\x{e9}\x{263a}", 1000) },
    qr/\A\Q$R\E->new: Wide character in name, got 'caf\\x\{e9\}\\x\{263a\}' \(encode first/, 'Redis name: wide');
croaks(sub { $R->new('127.0.0.1:1', 'x{y}', 1000) },
    qr/\A\Q$R\E->new: name must not contain '\{' or '\}' \(it becomes the keys' hash tag\), got 'x\{y\}' at /,
    'Redis name: braces');

# The methods' own arguments, checked in the XS, are shown the same way.
my $f = $C->new(undef, 1000);
croaks(sub { $f->add_many('x') },
    qr/\A\Q$C\E->add_many: argument is not an array reference, got 'x' \(give \\\@items\)/,
    'add_many(string)');
croaks(sub { $f->contains_many({}) },
    qr/\A\Q$C\E->contains_many: argument is not an array reference, got a HASH reference \(give \\\@items\)/,
    'contains_many(hash reference)');
croaks(sub { $f->add_many(undef) },
    qr/\A\Q$C\E->add_many: argument is not an array reference, got undef /, 'add_many(undef)');
croaks(sub { $f->add_many(42) },
    qr/\A\Q$C\E->add_many: argument is not an array reference, got 42 /, 'add_many(42)');
croaks(sub { $f->add_many(qr/x/) },
    qr/\A\Q$C\E->add_many: argument is not an array reference, got a Regexp object /, 'add_many(qr//)');
croaks(sub { $f->add_many([1], 'out') },
    qr/\A\Q$C\E->add_many: second argument is not an array reference, got 'out' \(give \\\@out, an array to fill\)/,
    'add_many: the out array');
# The XS and the Perl side quote alike.
for my $v ("it's a \\ back\tslash", "caf\x{e9} \x{263a}" . ('z' x 45)) {
    my $want = Data::BloomFilter::Shared::Args::shown($v);
    croaks(sub { $f->add_many($v) }, qr/, got \Q$want\E \(/, "the XS shows $want as Perl does");
}
is(Data::BloomFilter::Shared::Args::shown("it's a \\"), q{'it\'s a \\\\'}, 'a quote and a backslash are escaped');
is(Data::BloomFilter::Shared::Args::shown("caf\x{e9} \x{263a}"), q{'caf\x{e9} \x{263a}'}, 'non-ASCII characters as \x{..}');
is(Data::BloomFilter::Shared::Args::shown('z' x 41), "'" . ('z' x 37) . "...'", 'cut at 40 characters');
is(Data::BloomFilter::Shared::Args::shown('z' x 40), "'" . ('z' x 40) . "'", '... not before');

# An overloaded capacity is stringified once, also on the way to a croak.
{
    package Counted;
    our $n = 0;
    use overload '""' => sub { $n++; '10M' }, fallback => 1;
}
$Counted::n = 0;
croaks(sub { $C->new($path, bless({}, 'Counted')) }, qr/got '10M'/, 'overloaded capacity shown');
is($Counted::n, 1, 'its string overload ran once');

ok(!-e $path, 'no croak left a file behind');
done_testing;
