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

done_testing;
