# Arguments that are almost always a mistake croak (or warn) instead of
# doing something else than was meant.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $n = 0;

# A numeric mode with bits outside 0777: a mode written in decimal.
for my $case ([660, qr/mode 660 has bits outside 0777 \(01224 in octal\): write a mode in octal, as 0660 \(not 660\)/],
              [644, qr/mode 644 has bits outside 0777 \(01204 in octal\): write a mode in octal, as 0644 \(not 644\)/],
              [01777, qr/mode 1023 has bits outside 0777 \(01777 in octal\): write a mode in octal, such as 0660/],
              [04600, qr/mode 2432 has bits outside 0777 \(04600 in octal\): write a mode in octal, such as 0660/]) {
    my ($mode, $re) = @$case;
    my $path = "$dir/mode" . $n++ . '.bf';
    ok(!eval { $C->new($path, 100, 0.01, $mode); 1 }, "new with mode $mode croaks");
    like($@, qr/\A\Q$C\E->new: $re at /, '... saying to write it in octal');
    ok(!-e $path, '... and makes no file');
    ok(!eval { $C->new($path, 100, 0.01, { mode => $mode }); 1 }, "new with { mode => $mode } croaks");
    like($@, qr/\A\Q$C\E->new: $re/, '... the same way');
    my $bytes = $C->new(undef, 100)->serialize;
    ok(!eval { $C->deserialize($bytes, { path => $path, mode => $mode }); 1 }, "deserialize with mode $mode croaks");
    like($@, qr/\A\Q$C\E->deserialize: $re/, '... the same way');
    ok(!-e $path, '... and makes no file');
}
for my $mode (0660, 0600, 0777, 0, 0400) {
    my $path = "$dir/mode" . $n++ . '.bf';
    ok(eval { $C->new($path, 100, 0.01, $mode); 1 }, sprintf('mode 0%o is taken', $mode)) or diag($@);
    is((stat $path)[2] & 07777, $mode, '... as it is');
}

# An explicit seed that is undef: a secret that was never set.
{
    my $secret;    # never set
    my $path = "$dir/seed.bf";
    my $undef_seed = qr/the seed option is undef \(a secret that was not set\?\): give a seed, or leave the option out for seed 0/;
    ok(!eval { $C->new($path, 100, 0.01, { seed => $secret }); 1 }, 'new with seed => undef croaks');
    like($@, qr/\A\Q$C\E->new: $undef_seed at /, '... saying so');
    ok(!-e $path, '... and makes no file');
    ok(!eval { $C->new(undef, 100, 0.01, { mode => 0600, seed => undef }); 1 }, 'so does an anonymous one');
    like($@, qr/\A\Q$C\E->new: $undef_seed/, '... the same way');
    ok(!eval { $C->new_memfd('s', 100, 0.01, { seed => $secret }); 1 }, 'new_memfd with seed => undef croaks');
    like($@, qr/\A\Q$C\E->new_memfd: $undef_seed/, '... the same way');
    is($C->new(undef, 100, 0.01, { mode => 0600 })->seed, 0, 'no seed option: seed 0');
    is($C->new(undef, 100, 0.01, { seed => 0 })->seed, 0, 'seed => 0: seed 0');
    is($C->new_memfd('s', 100, 0.01, { seed => 7 })->seed, 7, 'a seed is taken');
}

# Reopening a file with another capacity or fp_rate: the file's win, and
# one warning in the module's own category names both.
{
    my $path = "$dir/reopen.bf";
    $C->new($path, 1000, 0.01)->add('x');
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    my $line = __LINE__ + 1;
    my $f = $C->new($path, 5_000_000, 0.01);
    is($f->capacity, 1000, "another capacity: the file's is kept");
    is(scalar @w, 1, '... with one warning');
    like($w[0] // '', qr/\A\Q$C\E->new: the file's capacity 1000 is kept, not the capacity 5000000 asked for \(an existing filter keeps its geometry\) at \Q${\ __FILE__}\E line $line\.$/,
        "... naming both and the caller's line");

    @w = ();
    $f = $C->new($path, 1000, 0.001);
    is(scalar @w, 1, 'another fp_rate: one warning');
    like($w[0] // '', qr/->new: the file's fp_rate 0\.01 is kept, not the fp_rate 0\.001 asked for/, '... naming both');

    @w = ();
    $f = $C->new($path, '5e6', 0.2);
    is(scalar @w, 1, 'both: one warning');
    like($w[0] // '', qr/->new: the file's capacity 1000 and fp_rate 0\.01 are kept, not the capacity 5000000 and fp_rate 0\.2 asked for/,
        '... naming all four');

    @w = ();
    $C->new($path, 1000, 0.01);
    $C->new($path, "1e3\n", '0.01');
    $C->new($path, 999.5);
    $C->new($path, 1000, 0.01, { mode => 0600 });
    is(scalar @w, 0, 'the same capacity and fp_rate, however written, or no fp_rate: no warning')
        or diag(@w);

    {
        no warnings 'Data::BloomFilter::Shared';
        $C->new($path, 5, 0.5);
    }
    is(scalar @w, 0, "no warnings 'Data::BloomFilter::Shared' silences it");

    my $ok = eval {
        use warnings FATAL => 'Data::BloomFilter::Shared';
        $C->new($path, 5, 0.5);
        1;
    };
    ok(!$ok, "use warnings FATAL => 'Data::BloomFilter::Shared' makes it fatal");
    like($@, qr/->new: the file's capacity 1000 and fp_rate 0\.01 are kept/, '... with the same message');
    ok($C->new($path, 1000)->contains('x'), 'the file is as it was');
}

# Reopening a file with another mode, given explicitly: the file's is kept,
# and one warning in the module's own category says so, as for capacity.
{
    my $path = "$dir/mode-reopen.bf";
    $C->new($path, 1000, 0.01, 0640)->add('x');
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    my $line = __LINE__ + 1;
    my $f = $C->new($path, 1000, 0.01, 0660);
    is((stat $path)[2] & 07777, 0640, "another mode: the file's is kept");
    is(scalar @w, 1, '... with one warning');
    like($w[0] // '', qr/\A\Q$C\E->new: the file's mode 0640 is kept, not the mode 0660 asked for \(an existing file keeps its mode\) at \Q${\ __FILE__}\E line $line\.$/,
        "... naming both and the caller's line");
    @w = ();
    $C->new($path, 1000, 0.01, { mode => 0600 });
    is(scalar @w, 1, 'a mode in the options: the same warning');
    like($w[0] // '', qr/->new: the file's mode 0640 is kept, not the mode 0600 asked for/, '... naming both');
    @w = ();
    $C->new($path, 1000, 0.01);
    $C->new($path, 1000, 0.01, undef);
    $C->new($path, 1000, 0.01, { seed => 0 });
    $C->new($path, 1000, 0.01, 0640);
    $C->new($path, 1000, 0.01, { mode => 0640 });
    is(scalar @w, 0, 'no mode given, or the same one: no warning') or diag(@w);
    {
        no warnings 'Data::BloomFilter::Shared';
        $C->new($path, 1000, 0.01, 0600);
    }
    is(scalar @w, 0, "no warnings 'Data::BloomFilter::Shared' silences it");
    ok(!eval { use warnings FATAL => 'Data::BloomFilter::Shared'; $C->new($path, 1000, 0.01, 0600); 1 },
        "use warnings FATAL => 'Data::BloomFilter::Shared' makes it fatal");
    like($@, qr/->new: the file's mode 0640 is kept/, '... with the same message');
    is((stat $path)[2] & 07777, 0640, 'the mode is as it was');
}

# A reference given as an item is taken as its address string (as the
# original took it), which is almost never meant: add($event) for
# add($event->{id}). One warning per call, in the module's category; an
# object whose overloading gives a string is taken as that string, quietly.
{
    package Local::Str { use overload '""' => sub { $_[0]{id} }, fallback => 1 }
    package Local::Num { use overload '0+' => sub { 42 }, fallback => 1 }
    package Local::Bool { use overload 'bool' => sub { 1 }, fallback => 1 }
    package Local::Plain { }
    my $f = $C->new(undef, 1000, 0.01);
    my @w;
    local $SIG{__WARN__} = sub { push @w, $_[0] };
    my $h = { id => 'event-1' };
    my $line = __LINE__ + 1;
    is($f->add($h), 1, 'add of a hash reference adds');
    is(scalar @w, 1, '... with one warning');
    like($w[0] // '', qr/\A\Q$C\E->add: item is a HASH reference, taken as its address string \(give a string, such as one of its fields\) at \Q${\ __FILE__}\E line $line\.$/,
        "... naming the method, the reference's kind and the caller's line");
    ok($f->contains("$h") && !$f->contains('event-1'), '... as its address string, as before');
    for my $call (
        [contains => sub { $f->contains([1]) }, qr/->contains: item is an ARRAY reference, taken as its address string/],
        [add_many => sub { $f->add_many(['a', { id => 2 }, 'b', [3], bless({}, 'Local::Plain')]) },
            qr/->add_many: item at index 1 is a HASH reference, taken as its address string \(give a string, such as one of its fields; 3 items of this batch are references\)/],
        [contains_many => sub { $f->contains_many(['a', \'b']) },
            qr/->contains_many: item at index 1 is a SCALAR reference, taken as its address string \(give a string, such as one of its fields\)/],
        ['an object without overloading' => sub { $f->add(bless {}, 'Local::Plain') },
            qr/->add: item is a Local::Plain object, taken as its address string/],
        ['a tied scalar that gives a reference' => sub { tie my $t, 'Local::TiedRef'; $f->add($t) },
            qr/->add: item is a HASH reference, taken as its address string/],
      )
    {
        my ($name, $code, $re) = @$call;
        @w = ();
        $code->();
        is(scalar @w, 1, "$name: one warning");
        like($w[0] // '', $re, '... saying what the item is');
    }
    @w = ();
    $f->add(bless { id => 'event-2' }, 'Local::Str');
    $f->add_many([bless({ id => 'event-3' }, 'Local::Str'), bless({}, 'Local::Num')]);
    $f->add(bless {}, 'Local::Bool');
    $f->add('plain');
    $f->add(17);
    $f->add_many(['a', 1, 2.5]);
    $f->contains_many(['event-2', 'event-3']);
    is(scalar @w, 0, 'objects that stringify by overloading, strings and numbers: no warning') or diag(@w);
    ok($f->contains('event-2') && $f->contains('event-3') && $f->contains('42'),
        '... and they are taken as their strings (0+ when "" is not overloaded)');
    {
        no warnings 'Data::BloomFilter::Shared';
        $f->add({});
        $f->add_many([[]]);
    }
    is(scalar @w, 0, "no warnings 'Data::BloomFilter::Shared' silences it");
    my $before = $f->count;
    ok(!eval { use warnings FATAL => 'Data::BloomFilter::Shared'; $f->add_many(['new-1', 'new-2', []]); 1 },
        "use warnings FATAL => 'Data::BloomFilter::Shared' makes it a croak");
    like($@, qr/\A\Q$C\E->add_many: item at index 2 is an ARRAY reference/, '... with the same message');
    ok(!$f->contains('new-1') && !$f->contains('new-2'), '... before anything of the batch is added');
    ok(!eval { use warnings FATAL => 'Data::BloomFilter::Shared'; $f->add([]); 1 }, '... and of a single add');
    is($f->count, $before, '... which adds nothing');
    # A handler that drops the filter: the call croaks, as when an item's
    # own code does that.
    my $g = $C->new(undef, 1000, 0.01);
    local $SIG{__WARN__} = sub { undef $g };
    my $ok = eval { $g->add({}); 1 };
    like($ok ? '' : $@, qr/->add: destroyed handle/, 'a warning handler that drops the filter: a croak, not a crash');
}

{
    package Local::TiedRef;
    sub TIESCALAR { bless {}, shift }
    sub FETCH { { fetched => 1 } }
}

done_testing;
