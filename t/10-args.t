# Junk arguments against every constructor and method: each call either works
# or croaks naming its method; never a crash. Plus all-or-nothing batches,
# wide characters, bad invocants, destroyed handles and subclassing.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Cwd ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $NOTOBJ = qr/not a Data::BloomFilter::Shared object/;

my @warnings;
$SIG{__WARN__} = sub { push @warnings, $_[0] };

my $dir = tempdir(CLEANUP => 1);
my $cwd = Cwd::getcwd();
chdir $dir or die "chdir $dir: $!";    # junk paths land in the temp dir

sub junk {
    return (
        ['undef', undef], ['empty', ''], ['0', 0], ['-1', -1], ['1.5', 1.5],
        ['abc', 'abc'], ['arrayref', []], ['hashref', {}], ['coderef', sub { 1 }],
        ['scalarref', \1], ['2**64', 2**64], ['1e300', 1e300], ['-1e300', -1e300],
        ['UV max', 18446744073709551615], ['IV min', -9223372036854775807 - 1],
        ['Inf', 'Inf'], ['-Inf', '-Inf'], ['NaN', 'NaN'], ['30 nines', '9' x 30],
        ['1 NUL', "1\0"], ['regexp', qr/x/], ['globref', \*STDERR],
        ['foreign object', bless({}, 'Some::Other::Class')],
    );
}

# Either it worked, or it croaked naming the method (an XS usage message
# names the method too).
sub works_or_names {
    my ($method, $desc, $code) = @_;
    my $ok = eval { $code->(); 1 };
    return pass("$desc: works") if $ok;
    like($@, qr/(->\Q$method\E: |Usage: \S*::\Q$method\E\()/, "$desc: croaks naming $method");
}

sub croaks_naming {
    my ($method, $desc, $code, $re) = @_;
    my $ok = eval { $code->(); 1 };
    ok(!$ok, "$desc: croaks");
    like($@, qr/->\Q$method\E: /, "$desc: croak names ->$method");
    like($@, $re, "$desc: croak says why") if $re;
}

my $n = 0;
# --- constructors ---------------------------------------------------------------
for my $j (junk()) {
    my ($name, $v) = @$j;
    my $num = do { no warnings; ref $v ? undef : $v + 0 };

    works_or_names('new', "new(path=$name)", sub { $C->new($v, 100, 0.01) });

    my $cap_must_fail = !ref $v && $name !~ /^(1\.5|1 NUL)$/;
    if ($cap_must_fail) {
        croaks_naming('new', "new(capacity=$name)", sub { $C->new(undef, $v, 0.01) });
    } else {
        works_or_names('new', "new(capacity=$name)", sub { $C->new(undef, $v, 0.01) });
    }

    my $rate_must_fail = !ref $v && defined $v && $name !~ /^(empty)$/;
    if ($rate_must_fail) {
        croaks_naming('new', "new(fp_rate=$name)", sub { $C->new(undef, 100, $v) }, qr/fp_rate/);
    } else {
        works_or_names('new', "new(fp_rate=$name)", sub { $C->new(undef, 100, $v) });
    }

    $n++;
    works_or_names('new', "new(mode=$name)", sub { $C->new("$dir/mode$n", 100, 0.01, $v) });
    $n++;
    works_or_names('new', "new({mode=>$name})", sub { $C->new("$dir/mode$n", 100, 0.01, { mode => $v }) });
    works_or_names('new', "new({seed=>$name})", sub { $C->new(undef, 100, 0.01, { seed => $v }) });
    works_or_names('new', "new({$name=>1})", sub { $C->new(undef, 100, 0.01, { (defined $v && !ref $v ? $v : 'x') => 1 }) });

    works_or_names('new_memfd', "new_memfd(name=$name)", sub { $C->new_memfd($v, 100, 0.01) });
    if (!ref $v && $name !~ /^(1\.5|1 NUL)$/) {
        croaks_naming('new_memfd', "new_memfd(capacity=$name)", sub { $C->new_memfd('x', $v, 0.01) });
    }
    works_or_names('new_memfd', "new_memfd(opts=$name)", sub { $C->new_memfd('x', 100, 0.01, $v) });

    # fds 0..2 are the test's own stdio; none of them is a filter.
    croaks_naming('new_from_fd', "new_from_fd($name)", sub { $C->new_from_fd($v) });

    croaks_naming('new_readonly', "new_readonly($name)", sub { $C->new_readonly($v) });

    croaks_naming('deserialize', "deserialize($name)", sub { $C->deserialize($v) });
}

# Some junk paths may have created files; they are not ours to judge, only
# that nothing crashed. A valid filter still works afterwards:
my $f = $C->new(undef, 1000, 0.01);
my $other = $C->new(undef, 1000, 0.01);
my $valid = $f->serialize;
ok(length $valid, 'serialize of a fresh filter');

for my $j (junk()) {
    my ($name, $v) = @$j;
    works_or_names('deserialize', "deserialize(valid, opts=$name)", sub { $C->deserialize($valid, $v) });
    works_or_names('deserialize', "deserialize(valid, {path=>$name})", sub { $C->deserialize($valid, { path => $v }) });
}

# --- methods with junk arguments -------------------------------------------------------
my @queries = qw(capacity fp_rate bits hashes seed count bits_set fill_ratio
                 estimated_fpp is_empty frozen readonly path memfd sync stats serialize
                 window generations);
for my $j (junk()) {
    my ($name, $v) = @$j;
    if (defined $v) {
        works_or_names($_, "$_($name)", sub { $f->$_($v) }) for qw(add contains);
    } else {
        croaks_naming($_, "$_(undef)", sub { $f->$_($v) }, qr/undefined item/) for qw(add contains);
    }
    if (ref $v eq 'ARRAY') {
        works_or_names($_, "$_($name)", sub { $f->$_($v) }) for qw(add_many contains_many);
    } else {
        croaks_naming($_, "$_($name)", sub { $f->$_($v) }) for qw(add_many contains_many);
    }
    for my $m (qw(merge intersect)) {
        my $ok = eval { $f->$m($v); 1 };
        ok(!$ok, "$m($name): croaks");
        like($@, qr/(->$m: |$NOTOBJ)/, "$m($name): croak names ->$m or says not an object");
    }
    {
        my $r;
        my $ok = eval { $r = $f->is_compatible($v); 1 };
        if ($ok) {
            ok(!$r, "is_compatible($name): false");
        } else {
            like($@, qr/(->is_compatible: |$NOTOBJ)/, "is_compatible($name): croaks naming it");
        }
    }
    for my $m (@queries) {
        works_or_names($m, "$m($name) (extra argument)", sub { my @r = $f->$m($v) });
    }
    for my $m (qw(clear invert freeze)) {
        my $t = $C->new(undef, 100);
        works_or_names($m, "$m($name) (extra argument)", sub { $t->$m($v) });
    }
    works_or_names('unlink', "Class->unlink($name)", sub { $C->unlink($v) });
    {
        my $w = $C->new(undef, 100, 0.01, { window => undef, generations => 2 });
        works_or_names('rotate', "rotate($name) (extra argument)", sub { $w->rotate($v) });
        works_or_names($_, "$_($name) (windowed, extra argument)", sub { my @r = $w->$_($v) })
            for qw(window generations stats);
        works_or_names('new', "new({window => $name})",
            sub { $C->new(undef, 100, 0.01, { window => $v }) });
        works_or_names('new', "new({window => 60, generations => $name})",
            sub { $C->new(undef, 100, 0.01, { window => 60, generations => $v }) });
        works_or_names('new_memfd', "new_memfd({window => $name})",
            sub { $C->new_memfd('j', 100, 0.01, { window => $v }) });
    }
}
is($f->add('still works'), 1, 'filter works after the junk loop');
is($f->contains('still works'), 1, '... and finds what it added');
ok(eval { $f->merge($other); 1 }, 'merge works after the junk loop') or diag($@);

# --- missing arguments ------------------------------------------------------------------
for my $m (qw(add contains add_many contains_many merge intersect is_compatible)) {
    my $ok = eval { $f->$m(); 1 };
    ok(!$ok, "$m() without its argument croaks");
    like($@, qr/(->\Q$m\E: |Usage: \S*::\Q$m\E\(|$NOTOBJ)/, "... naming $m");
}
{
    my $ok = eval { $C->new(); 1 };
    ok(!$ok, 'new() without capacity croaks');
    like($@, qr/(->new: |Usage: )/, '... naming new');
    $ok = eval { $C->new(undef); 1 };
    ok(!$ok, 'new(undef) without capacity croaks');
    like($@, qr/(->new: |Usage: )/, '... naming new');
}

# --- bad elements make add_many add nothing -------------------------------------------------
{
    my @good = map { "good$_" } 1 .. 20;
    for my $bad (['undef', undef, qr/undefined/], ['wide', "\x{263a}", qr/Wide character/]) {
        my ($bname, $bv, $re) = @$bad;
        for my $pos (0, 10, 20) {
            my $g = $C->new(undef, 1000, 0.01);
            my @items = @good;
            splice @items, $pos, 0, $bv;
            my $ok = eval { $g->add_many(\@items); 1 };
            ok(!$ok, "add_many with $bname at $pos croaks");
            like($@, qr/->add_many: .*$re/, "... naming add_many and the reason");
            like($@, qr/index $pos\b/, "... and the index $pos");
            is($g->bits_set, 0, '... and sets no bit');
            is(scalar $g->contains_many(\@good), 0, '... and adds no item');
            my @r = eval { $g->contains_many(\@items) };
            like($@, qr/->contains_many: .*$re/, "contains_many with $bname at $pos croaks");
        }
    }
}

# --- wide characters ------------------------------------------------------------------------
{
    my $g = $C->new(undef, 1000, 0.01);
    for my $m (qw(add contains)) {
        ok(!eval { $g->$m("\x{263a}"); 1 }, "$m(wide) croaks");
        like($@, qr/->$m: .*Wide character/, "... with ->$m: Wide character");
        ok(!eval { $g->$m("abc\x{100}"); 1 }, "$m(latin then wide) croaks");
        like($@, qr/->$m: .*Wide character/, "... with ->$m: Wide character");
    }
    is($g->bits_set, 0, 'nothing added by refused wide items');
    my $wide_ser = $valid . "\x{100}";
    ok(!eval { $C->deserialize($wide_ser); 1 }, 'deserialize of a wide string croaks');
    like($@, qr/->deserialize: /, '... naming deserialize');
    works_or_names('new', 'new(wide path)', sub { $C->new("$dir/\x{263a}.bf", 100) });
    works_or_names('new_memfd', 'new_memfd(wide name)', sub { $C->new_memfd("\x{263a}", 100) });
    works_or_names('new_memfd', 'new_memfd(name not UTF-8)', sub { $C->new_memfd("\xff", 100) });
}

# --- bad invocants --------------------------------------------------------------------------
{
    my @methods = (
        [add => 'x'], [contains => 'x'], [add_many => ['x']], [contains_many => ['x']],
        [merge => $other], [intersect => $other], [is_compatible => $other],
        [invert => ()], [clear => ()], [freeze => ()], (map { [$_] } @queries),
    );
    my @invocants = (
        ['undef', undef], ['empty string', ''], ['number', 42], ['string', 'abc'],
        ['class name', $C], ['arrayref', []], ['hashref', {}], ['coderef', sub { }],
        ['scalarref', \1], ['foreign object', bless({}, 'Some::Other::Class')],
        ['foreign scalar object', bless(\(my $x = 1), 'Some::Other::Class')],
    );
    for my $mm (@methods) {
        my ($m, @args) = @$mm;
        my $code = $C->can($m);
        for my $inv (@invocants) {
            my ($iname, $iv) = @$inv;
            my $ok = eval { $code->($iv, @args); 1 };
            ok(!$ok, "$m with $iname as invocant croaks");
            like($@, $NOTOBJ, "... not a Data::BloomFilter::Shared object");
        }
    }
    my $ok = eval { $C->add('x'); 1 };
    ok(!$ok, 'Class->add croaks');
    like($@, $NOTOBJ, '... not a Data::BloomFilter::Shared object');
    $ok = eval { $f->merge(bless {}, 'Some::Other::Class'); 1 };
    ok(!$ok, 'merge(foreign object) croaks');
    like($@, $NOTOBJ, '... not a Data::BloomFilter::Shared object');
    $ok = eval { $f->merge($C); 1 };
    ok(!$ok, 'merge(class name) croaks');
    like($@, $NOTOBJ, '... not a Data::BloomFilter::Shared object');
}

# --- destroyed handles ------------------------------------------------------------------------
{
    my $g = $C->new(undef, 1000, 0.01);
    $g->add('x');
    ok(eval { $g->DESTROY; 1 }, 'explicit DESTROY') or diag($@);
    ok(eval { $g->DESTROY; 1 }, 'second explicit DESTROY is harmless') or diag($@);
    for my $mm ([add => 'x'], [contains => 'x'], [add_many => ['x']], [contains_many => ['x']],
                [merge => $other], [intersect => $other], [is_compatible => $other],
                [invert => ()], [clear => ()], [freeze => ()], (map { [$_] } @queries)) {
        my ($m, @args) = @$mm;
        my $ok = eval { $g->$m(@args); 1 };
        ok(!$ok, "$m on a destroyed handle croaks");
        like($@, qr/destroyed handle/, '... destroyed handle');
    }
    for my $m (qw(merge intersect is_compatible)) {
        my $ok = eval { $other->$m($g); 1 };
        ok(!$ok, "$m(destroyed handle) croaks");
        like($@, qr/destroyed handle/, '... destroyed handle');
    }
    undef $g;
    pass('a destroyed handle goes out of scope without trouble');
}

# --- subclass ---------------------------------------------------------------------------------
{
    package My::Bloom;
    our @ISA = ('Data::BloomFilter::Shared');
    sub label { 'mine' }
}
{
    my $s = My::Bloom->new(undef, 1000, 0.01);
    isa_ok($s, 'My::Bloom', 'Subclass->new');
    isa_ok($s, $C);
    is($s->label, 'mine', 'subclass method');
    is($s->add('s1'), 1, 'subclass add');
    is($s->contains('s1'), 1, 'subclass contains');
    ok(eval { $s->merge($other); $other->merge($s); 1 }, 'merge between subclass and base') or diag($@);
    ok($s->is_compatible($other), 'subclass compatible with base');
    my $sm = My::Bloom->new_memfd('sub', 1000, 0.01);
    isa_ok($sm, 'My::Bloom', 'Subclass->new_memfd');
    my $sf = My::Bloom->new_from_fd($sm->memfd);
    isa_ok($sf, 'My::Bloom', 'Subclass->new_from_fd');
    $sm->add('via-memfd');
    is($sf->contains('via-memfd'), 1, 'subclass new_from_fd shares bits');
    my $sd = My::Bloom->deserialize($s->serialize);
    isa_ok($sd, 'My::Bloom', 'Subclass->deserialize');
}

chdir $cwd;
note(scalar(@warnings) . ' warnings from junk arguments');
# Each argument croak names the method, the argument and the value given,
# and hints at the usual cause: the words callers match on come first, as
# they always did, then ", got VALUE" and the hint.
{
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
        qr/\A\Q$C\E->new: layout must be 'standard', 'blocked' or 'datasketches', got 'fast'/, 'layout');
    croaks(sub { $C->new($path, 1000, 0.01, { window => '2s' }) },
        qr/\A\Q$C\E->new: window must be a positive number of seconds \(or undef\), got '2s' \(durations such as 2s are the command line tool's: write 2 here\)/,
        'window "2s"');
    croaks(sub { $C->new($path, 1000, 0.01, { window => '1h' }) },
        qr/, got '1h' \(.*write 3600 here\)/, 'window "1h"');
    croaks(sub { $C->new($path, 1000, 0.01, { colour => 1 }) },
        qr/\A\Q$C\E->new: unknown option 'colour' \(the options are bits, generations, grow, hashes, layout, max_capacity, mode, seed, window\)/,
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
}

done_testing;
