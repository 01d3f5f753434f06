# What code written for the original C module (0.04, 0.05) relies on, and
# gets here: add_many's count in every context, ops counting write calls,
# the original's croak wording, numbers taken as Perl takes them, idempotent
# unlink, re-blessable handles, paths as Perl names them, modes and seeds.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Fcntl qw(:mode F_GETFD F_SETFD FD_CLOEXEC);
use POSIX ();
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);

# Each part runs to its end or fails, so that one croak does not hide the rest.
sub part {
    my ($name, $code) = @_;
    subtest $name => sub {
        my $ok = eval { $code->(); 1 };
        ok($ok, 'ran to its end') or diag($@);
    };
}

part('version above every released original', sub {
    ok(eval "use Data::BloomFilter::Shared 0.05; 1", 'use ... 0.05 works') or diag($@);
    ok(eval "use Data::BloomFilter::Shared 0.04; 1", 'use ... 0.04 works') or diag($@);
    cmp_ok($C->VERSION, '>', 0.05, 'VERSION > 0.05');
});

part('add_many: the count of new items in every context', sub {
    my $f = $C->new(undef, 1000, 0.01);
    my ($n) = $f->add_many([qw(a b c a)]);
    is($n, 3, 'list assignment: the count');
    is(sprintf('%d', $f->add_many([qw(c d)])), 1, 'sprintf %d: the count');
    my $sub = sub { return $f->add_many([qw(e f g)]) };
    is_deeply([ $sub->() ], [3], 'return from a sub in list context: the count');
    is(scalar $f->add_many([qw(e h)]), 1, 'scalar context: the count');
    my @new = (7, 7, 7, 7, 7);
    is($f->add_many([qw(i a j i)], \@new), 2, 'with an out array: the count');
    is_deeply(\@new, [1, 0, 1, 0], 'the out array is emptied, then one 0/1 per item');
    $f->add_many([], \@new);
    is_deeply(\@new, [], 'an empty batch empties the out array');

    my @present = ('x');
    my @list = $f->contains_many([qw(a zz j)], \@present);
    is_deeply(\@present, [1, 0, 1], 'contains_many fills the same out array');
    is_deeply(\@list, [1, 0, 1], '... and keeps its list context answer');
    is(scalar $f->contains_many([qw(a zz j)], \@present), 2, '... and its scalar context answer');

    my $before = $f->bits_set;
    my @ro;
    Internals::SvREADONLY(@ro, 1);
    for my $bad ([ 'a string', 'x' ], [ 'a hash ref', {} ], [ 'a read-only array', \@ro ]) {
        my ($what, $out) = @$bad;
        ok(!eval { $f->add_many(['new-item'], $out); 1 }, "out array that is $what croaks");
        like($@, qr/->add_many: second argument is/, '... naming add_many and the argument');
    }
    is($f->bits_set, $before, 'a bad out array croaks before anything is added');
});

part('stats ops counts write calls, not items', sub {
    my $f = $C->new(undef, 1000, 0.01);
    my $g = $C->new(undef, 1000, 0.01);
    my @calls = (
        [ 'add',                 sub { $f->add('x') } ],
        [ 'add_many of 100',     sub { $f->add_many([ map { "i$_" } 1 .. 100 ]) } ],
        [ 'empty add_many',      sub { $f->add_many([]) } ],
        [ 'merge',               sub { $f->merge($g) } ],
        [ 'self-merge',          sub { $f->merge($f) } ],
        [ 'intersect',           sub { $f->intersect($f) } ],
        [ 'invert',              sub { $f->invert } ],
        [ 'clear',               sub { $f->clear } ],
    );
    my $ops = $f->stats->{ops};
    for my $c (@calls) {
        $c->[1]->();
        is($f->stats->{ops}, $ops + 1, "$c->[0]: one operation");
        $ops = $f->stats->{ops};
    }
    $f->contains_many([qw(a b)]);
    $f->contains('a');
    is($f->stats->{ops}, $ops, 'queries are not counted');
    $f->freeze;
    is($f->stats->{ops}, $ops + 1, 'freeze: one operation');
});

part("the original's wording and handles", sub {
    ok(!eval { $C->new(undef, 1e15, 0.0001); 1 }, 'over-capacity filter refused');
    like($@, qr/->new: .*too large/, '... "too large"');

    my $m = $C->new_memfd('own', 1000, 0.01);
    $m->add('shared');
    my $g = $C->new_from_fd($m->memfd);
    my $fd = $g->memfd;
    cmp_ok($fd, '>=', 0, 'memfd of a new_from_fd handle is a descriptor');
    isnt($fd, $m->memfd, '... its own duplicate, not the one it was given');
    undef $m;
    my $h = $C->new_from_fd($fd);
    ok($h->contains('shared'), '... and can be passed on');

    my $path = "$dir/frozen.bf";
    my $f = $C->new($path, 1000, 0.01);
    is($f->readonly, 0, 'a live handle is not read-only');
    $f->freeze;
    is($f->readonly, 1, 'the freezing handle is read-only after freeze');
    is($f->stats->{readonly}, 1, '... in stats too');
    ok(!eval { $f->freeze; 1 }, 'a second freeze croaks');
    like($@, qr/->freeze: .*read-only/, '... saying read-only');

    ok(!eval { $C->new_readonly(undef); 1 }, 'new_readonly(undef) croaks');
    like($@, qr/->new_readonly: path required/, '... "path required"');
    $C->new("$dir/live.bf", 1000, 0.01);
    ok(!eval { $C->new_readonly("$dir/live.bf"); 1 }, 'new_readonly of a live file croaks');
    like($@, qr/->new_readonly: .*not frozen/, '... "not frozen"');
});

part('capacity is any Perl number', sub {
    for my $case ([ '1e6', 1_000_000 ], [ "1000\n", 1000 ], [ ' 1000', 1000 ], [ '1000.0', 1000 ],
                  [ 1500.5, 1501 ], [ '+20', 20 ], [ 0.3, 1 ], [ '18446744073709551615', undef ]) {
        my ($v, $want) = @$case;
        (my $shown = $v) =~ s/\n/\\n/;
        my $f = eval { $C->new(undef, $v, 0.5) };
        if (defined $want) {
            ok($f, "capacity '$shown' accepted") or diag($@);
            is($f && $f->capacity, $want, "... as $want");
        }
        else {
            like($@, qr/->new: capacity is too large/, "capacity '$shown': too large, not malformed");
        }
    }
    for my $bad ('abc', '', '12abc', 0, '0.0', -1, '-5', 'inf', 'nan', 9**9**9, -9**9**9, [], {}) {
        ok(!eval { $C->new(undef, $bad, 0.01); 1 }, "capacity '$bad' croaks");
        like($@, qr/->new: capacity must be a positive number/, '... saying why');
    }
    ok(!eval { $C->new(undef, '1e30', 0.01); 1 }, 'capacity 1e30 croaks');
    like($@, qr/->new: capacity is too large/, '... too large');
    my $path = "$dir/reopen.bf";
    $C->new($path, 1000, 0.01)->add('kept');
    my $again = eval { $C->new($path, "1e3\n", "0.01") };
    ok($again && $again->contains('kept'), 'reopening takes numeric strings too') or diag($@);
    ok(!eval { $C->new($path, 'lots', 0.01); 1 }, 'reopening still checks the capacity');
});

part('unlink is idempotent', sub {
    my $path = "$dir/unlink.bf";
    my $f = $C->new($path, 1000, 0.01);
    is($f->unlink, 1, '1 when it removed the file');
    ok(!-e $path, '... which is gone');
    is($f->unlink, 0, '0 when it is already gone');
    is($C->new(undef, 10)->unlink, 0, '0 for a filter without a path');
    $C->new($path, 1000, 0.01);
    is($C->unlink($path), 1, 'Class->unlink: 1 when it removed the file');
    is($C->unlink($path), 0, 'Class->unlink: 0 when there is none');
    mkdir "$dir/a-directory";
    ok(!eval { $C->unlink("$dir/a-directory"); 1 }, 'a real error still croaks');
    like($@, qr/->unlink: unlink .*a-directory: /, '... naming unlink and the path');
});

{
    package My::Filter;
    our @ISA = ('Data::BloomFilter::Shared');
    sub tagged { 'mine' }
}

part('re-blessing, and handles that cannot be forged', sub {
    my $f = $C->new(undef, 1000, 0.01);
    $f->add('a');
    ok(eval { bless $f, 'My::Filter'; 1 }, 're-blessing into a subclass works') or diag($@);
    is(ref $f, 'My::Filter', '... it is of the subclass');
    is($f->tagged, 'mine', '... with its methods');
    ok($f->contains('a') && $f->add('b'), '... and the filter\'s');
    ok(eval { bless $f, $C; 1 } && $f->contains('b'), 'and back');

    my $copy = bless \(my $x = ${$f}), $C;
    ok(!eval { $copy->contains('a'); 1 }, 'a copy of the scalar is not a handle');
    like($@, qr/->contains: not a Data::BloomFilter::Shared object/, '... "not a ... object"');
    my $num = bless \(my $y = 0 + $f), $C;
    ok(!eval { $num->add('a'); 1 }, 'nor is a scalar holding its address');
    ${$f} = 12345;
    ok($f->contains('a'), 'the scalar\'s value is not what the handle is');
});

part('paths are the bytes Perl uses for the same scalar', sub {
    my $chars = "$dir/caf\x{e9}.bf";
    utf8::upgrade($chars);
    my $f = $C->new($chars, 100, 0.01);
    ok(-e $chars, 'a UTF-8 flagged "café" names the file Perl\'s -e sees');
    is($f->path, do { my $b = $chars; utf8::encode($b); $b }, '... its bytes are the scalar\'s');
    open my $fh, '<', $chars or die "open: $!";
    is((stat $fh)[1], (stat $f->path)[1], '... the file Perl opens for it');
    my $wide = "$dir/\x{263a}.bf";
    ok(eval { $C->new($wide, 100, 0.01); 1 }, 'a wide character in a path works') or diag($@);
    ok(-e $wide, '... naming the file Perl sees');
    is($C->unlink($wide), 1, 'Class->unlink takes the same bytes');
    ok(!-e $wide, '... and removed it');

    for my $name ("caf\x{e9}", "\x{263a}", "\xff\xfe", '', 'n' x 300) {
        my $m = eval { $C->new_memfd($name, 100, 0.01) };
        ok($m && $m->memfd >= 0, 'new_memfd takes the name ' . length($name) . ' chars long') or diag($@);
    }
    my $m = $C->new_memfd('', 100, 0.01);
    like(readlink('/proc/self/fd/' . $m->memfd), qr{^/memfd:bloomfilter-shared },
        'an empty name gets the default');

    my $g = $C->new(undef, 100, 0.01);
    for my $call ([ add => sub { $g->add("\x{263a}") } ],
                  [ add_many => sub { $g->add_many(['a', "\x{263a}"]) } ]) {
        ok(!eval { $call->[1]->(); 1 }, "$call->[0] of a wide character croaks");
        like($@, qr/->$call->[0]: Wide character.*encode first \(e\.g\. Encode::encode_utf8\)/,
            '... saying to encode first');
    }
});

part('modes and seeds', sub {
    my $model = "$dir/model";
    open my $fh, '>', $model or die;
    close $fh;
    chmod 0640, $model;
    my $mode = (stat $model)[2];
    ok(S_ISREG($mode) && $mode > 07777, 'test setup: a stat mode carries the file type');
    my $path = "$dir/stat-mode.bf";
    ok(eval { $C->new($path, 100, 0.01, $mode); 1 }, 'a mode from stat is taken') or diag($@);
    is(S_IMODE((stat $path)[2]), 0640, '... as its permission bits');

    for my $s ('0660', '660') {
        ok(!eval { $C->new("$dir/string-mode.bf", 100, 0.01, $s); 1 }, "mode given as the string '$s' croaks");
        like($@, qr/->new: mode must be a number.*oct\(/, '... naming oct()');
        ok(!-e "$dir/string-mode.bf", '... and creates nothing');
    }
    ok(!eval { $C->new("$dir/dir-mode.bf", 100, 0.01, 040755 | 0170000); 1 }, 'mode bits that are no file type croak');

    my $seeded = "$dir/seeded.bf";
    $C->new($seeded, 1000, 0.01, { seed => 42 })->add('x');
    ok(eval { $C->new($seeded, 1000, 0.01, { seed => 42 }); 1 }, 'reopening with the same seed works') or diag($@);
    ok(eval { $C->new($seeded, 1000, 0.01); 1 }, 'reopening without a seed works');
    ok(!eval { $C->new($seeded, 1000, 0.01, { seed => 43 }); 1 }, 'an explicit seed that differs croaks');
    like($@, qr/->new: the file's seed differs from the seed option/, '... saying so');
    unlike($@, qr/42|43/, '... without showing either seed');
    ok(!eval { $C->new($seeded, 1000, 0.01, { seed => 0 }); 1 }, 'an explicit seed 0 that differs croaks too');
    ok($C->new($seeded, 1000, 0.01)->contains('x'), 'the file is unchanged');
});

part('an overfull filter says so in stats', sub {
    my $f = $C->new(undef, 1000, 0.01);
    is($f->stats->{overfull}, 0, 'empty: not overfull');
    $f->add_many([ 1 .. 1000 ]);
    is($f->stats->{overfull}, 0, 'at its capacity: not overfull');
    $f->add_many([ 1 .. 3000 ]);
    cmp_ok($f->count, '>', $f->capacity, 'test setup: count passed capacity');
    is($f->stats->{overfull}, 1, 'past it: overfull');
    my $full = $C->new(undef, 10, 0.01);
    $full->add_many([ 1 .. 1000 ]);
    is($full->bits_set, $full->bits, 'test setup: every bit set (count is then capacity)');
    is($full->stats->{overfull}, 1, 'saturated: overfull');
});

part('a memfd handed to an exec\'ed child, as documented', sub {
    my $m = $C->new_memfd('exec', 1000, 0.01);
    my $fd = $m->memfd;
    my @cmd = ($^X, (map { "-I$_" } grep { !ref } @INC), '-MData::BloomFilter::Shared', '-e',
        'Data::BloomFilter::Shared->new_from_fd($ARGV[0])->add("from-child")', $fd);
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDERR, '>', '/dev/null';
        exec @cmd or POSIX::_exit(9);
    }
    waitpid $pid, 0;
    isnt($?, 0, 'the descriptor is close-on-exec: an exec\'ed child does not get it by itself');
    $pid = fork // die "fork: $!";
    if (!$pid) {
        open my $fh, '<&=', $fd or POSIX::_exit(8);
        fcntl($fh, F_SETFD, fcntl($fh, F_GETFD, 0) & ~FD_CLOEXEC) or POSIX::_exit(7);
        exec @cmd or POSIX::_exit(9);
    }
    waitpid $pid, 0;
    is($?, 0, 'with FD_CLOEXEC cleared in the child, it does');
    ok($m->contains('from-child'), '... and adds to the same filter');
    $m->clear;
    $pid = fork // die "fork: $!";
    if (!$pid) {
        $^F = $fd;
        open my $fh, '<&=', $fd or POSIX::_exit(8);
        exec @cmd or POSIX::_exit(9);
    }
    waitpid $pid, 0;
    is($?, 0, 'with $^F raised to it before opening it anew in the child, too');
    ok($m->contains('from-child'), '... and adds to the same filter');
});

done_testing;
