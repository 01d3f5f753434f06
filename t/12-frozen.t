# freeze: every mutator refused on every handle; read-write opens of a frozen
# file refused; new_readonly only for frozen files, answering as before, even
# from a read-only file or a read-only filesystem.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use File::Copy qw(copy);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib);
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $path = "$dir/frozen.bf";
my $FROZEN = qr/(frozen|read-only|readonly)/i;

my @present = map { "item$_" } 1 .. 300;
my @probe = (@present, map { "absent$_" } 1 .. 3000);

my $f = $C->new($path, 1000, 0.01);
my $g = $C->new($path, 1000, 0.01);    # second handle, opened before the freeze
$f->add_many(\@present);
my @before = $f->contains_many(\@probe);
my %before = (count => $f->count, bits_set => $f->bits_set, ser => $f->serialize);
my $compat = $C->new(undef, 1000, 0.01);
$compat->add('from-compat');

# new_readonly refuses a file that is not frozen.
{
    my $r = eval { $C->new_readonly($path) };
    ok(!$r, 'new_readonly of a non-frozen file croaks');
    like($@, qr/->new_readonly: .*not frozen/, '... not frozen');
}

ok(!$f->frozen, 'not frozen before freeze');
ok(eval { $f->freeze }, 'freeze returns true') or diag($@);
ok($f->frozen, 'frozen after freeze');
ok($g->frozen, 'second handle sees frozen');
is($f->readonly, 1, 'the freezing handle is read-only now');
is($g->readonly, 1, '... and so is every other handle of the frozen filter');

my @mutators = (
    [add => 'new-item'], [add_many => ['new-item', 'other']], [clear => ()],
    [invert => ()], [merge => $compat], [intersect => $compat],
);
for my $h ([first => $f], [second => $g]) {
    my ($hname, $handle) = @$h;
    for my $mm (@mutators) {
        my ($m, @args) = @$mm;
        my $ok = eval { $handle->$m(@args); 1 };
        ok(!$ok, "$m on the $hname handle of a frozen file croaks");
        like($@, qr/->$m: .*$FROZEN/, "... ->$m: frozen/read-only");
    }
}
is($f->serialize, $before{ser}, 'refused mutations changed no bit');
is_deeply([$g->contains_many(\@probe)], \@before, 'queries on the second handle answer as before');
is($f->contains('new-item'), 0, 'refused add added nothing');
{
    my $ok = eval { $f->freeze; 1 };
    ok($ok || $@ =~ /->freeze: /, 'freeze of a frozen filter: no-op or croak naming freeze');
}

# Read-write open of a frozen file.
{
    my $h = eval { $C->new($path, 1000, 0.01) };
    ok(!$h, 'new() of a frozen file croaks');
    like($@, qr/->new: .*frozen/, '... frozen');
}

# new_readonly.
{
    my $r = eval { $C->new_readonly($path) };
    ok($r, 'new_readonly of a frozen file') or diag($@);
    ok($r->readonly, 'readonly accessor');
    ok($r->frozen, 'frozen accessor');
    is($r->path, $path, 'path accessor');
    is($r->$_, $f->$_, "$_ as in the writer") for qw(capacity bits hashes seed);
    is_deeply([$r->contains_many(\@probe)], \@before, 'contains_many identical to before the freeze');
    is(scalar $r->contains_many(\@probe), scalar(grep { $_ } @before), 'contains_many scalar identical');
    is($r->contains('item1'), 1, 'contains');
    is($r->count, $before{count}, 'count identical');
    is($r->bits_set, $before{bits_set}, 'bits_set identical');
    is($r->serialize, $before{ser}, 'serialize identical');
    my $s = $r->stats;
    ok($s->{readonly} && $s->{frozen}, 'stats say readonly and frozen');
    for my $mm (@mutators, [freeze => ()]) {
        my ($m, @args) = @$mm;
        # freeze too: a second freeze croaks through any handle (see freeze
        # in the POD), a read-only one included.
        my $ok = eval { $r->$m(@args); 1 };
        ok(!$ok, "$m on a read-only handle croaks");
        like($@, qr/->$m: .*$FROZEN/, "... ->$m: frozen/read-only");
    }
    is($r->serialize, $before{ser}, 'nothing changed through the read-only handle');

    # A frozen or read-only filter is a fine source.
    my $w = $C->new(undef, 1000, 0.01);
    ok($w->is_compatible($r), 'writable and read-only filters are compatible');
    ok(eval { $w->merge($r); 1 }, 'merge from a read-only handle') or diag($@);
    is(scalar $w->contains_many(\@present), scalar @present, '... brings its items');
    ok(eval { $w->intersect($r); 1 }, 'intersect with a read-only handle') or diag($@);
    ok(eval { $w->merge($f); 1 }, 'merge from a frozen read-write handle') or diag($@);

    my $d = $C->deserialize($r->serialize);
    is_deeply([$d->contains_many(\@probe)], \@before, 'deserialize of a frozen filter answers the same');
}

# A read-only copy (chmod 0444) still opens read-only.
{
    my $copy = "$dir/copy.bf";
    copy($path, $copy) or die "copy: $!";
    chmod 0444, $copy or die "chmod: $!";
    my $r = eval { $C->new_readonly($copy) };
    ok($r, 'new_readonly of a chmod 0444 copy') or diag($@);
    is_deeply([$r ? $r->contains_many(\@probe) : ()], \@before, '... answers as before');
}

# An anonymous filter freezes too.
{
    my $a = $C->new(undef, 1000, 0.01);
    $a->add('anon');
    $a->freeze;
    ok($a->frozen, 'anonymous filter frozen');
    ok(!eval { $a->add('x'); 1 }, 'add to a frozen anonymous filter croaks');
    like($@, qr/->add: .*$FROZEN/, '... frozen');
    is($a->contains('anon'), 1, 'queries still work');
}

# A read-only bind mount (needs root and mount namespaces; skipped otherwise).
SKIP: {
    my $ns = ($> == 0) && system('unshare -m true >/dev/null 2>&1') == 0;
    skip 'no mount namespace available (need root and unshare)', 3 unless $ns;
    my $mnt = tempdir(CLEANUP => 1);
    my $script = <<'PERL';
use strict; use warnings; use Data::BloomFilter::Shared;
my ($file, @probe) = @ARGV;
my $r = eval { Data::BloomFilter::Shared->new_readonly($file) };
if (!$r) { print "OPEN FAILED: $@"; exit 0 }
print join('', $r->contains_many(\@probe)), "\n";
my $w = eval { Data::BloomFilter::Shared->new($file, 1000, 0.01) };
print $w ? "rw-opened\n" : "rw-refused\n";
PERL
    local $ENV{PERL5LIB} = perl5lib();
    local $SIG{ALRM} = sub { die "timeout\n" };
    alarm 30;
    my $out = eval {
        open(my $ph, '-|', 'unshare', '-m', 'sh', '-c',
            'mount --bind -o ro "$1" "$2" || exit 98; if touch "$2/probe" 2>/dev/null; then echo "MOUNT NOT READ-ONLY"; exit 0; fi; shift 2; exec "$@"',
            'sh', $dir, $mnt, $^X, '-e', $script, "$mnt/frozen.bf", @probe[0 .. 99, 300 .. 599])
            or die "unshare: $!";
        local $/;
        my $o = <$ph>;
        close $ph;
        $o;
    };
    alarm 0;
    my $status = $? >> 8;
    skip "bind mount not possible here (status $status)", 3 if $status == 98 || !defined $out;
    skip 'bind mount is not read-only here', 3 if $out =~ /MOUNT NOT READ-ONLY/;
    unlike($out, qr/OPEN FAILED/, 'new_readonly works on a read-only filesystem') or diag($out);
    my $want = join('', @before[0 .. 99, 300 .. 599]);
    is((split /\n/, $out)[0], $want, '... and answers as before');
    like($out, qr/rw-refused/, 'read-write new of the frozen file there is refused');
}

done_testing;
