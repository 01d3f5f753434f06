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

done_testing;
