# Get-magic and overloading on arguments: tied scalars fetched exactly once,
# overloaded objects taken as their string, argument code that destroys the
# handle or rewrites the batch mid-call.
use strict;
use warnings;
use Test::More;
use Data::BloomFilter::Shared;

my $C = 'Data::BloomFilter::Shared';

{
    package Counted;    # tied scalar: counts FETCHes, returns a fixed value
    sub TIESCALAR { my ($c, $v) = @_; bless { v => $v, n => 0 }, $c }
    sub FETCH { my $s = shift; $s->{n}++; $s->{v} }
    sub STORE { $_[0]{v} = $_[1] }
}
{
    package Changing;    # tied scalar: a different value on every FETCH
    sub TIESCALAR { bless { n => 0 }, shift }
    sub FETCH { my $s = shift; $s->{n}++; "changing-$s->{n}" }
    sub STORE { }
}
{
    package Dies;
    sub TIESCALAR { bless {}, shift }
    sub FETCH { die "FETCH died\n" }
    sub STORE { }
}
{
    package Str;    # overloaded stringification, counted
    use overload '""' => sub { $_[0]{n}++; $_[0]{code} ? $_[0]{code}->() : $_[0]{s} }, fallback => 1;
    sub new { my ($c, %a) = @_; bless { n => 0, %a }, $c }
}
{
    package TiedArray;    # counts element FETCHes
    sub TIEARRAY { my ($c, @v) = @_; bless { v => [@v], n => 0, per => {} }, $c }
    sub FETCH { my ($s, $i) = @_; $s->{n}++; $s->{per}{$i}++; $s->{v}[$i] }
    sub FETCHSIZE { scalar @{ $_[0]{v} } }
    sub STORE { $_[0]{v}[$_[1]] = $_[2] }
    sub STORESIZE { $#{ $_[0]{v} } = $_[1] - 1 }
    sub EXISTS { $_[1] < @{ $_[0]{v} } }
    sub EXTEND { }
}

# --- tied scalar items: FETCH exactly once per call ---------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    my $obj = tie my $t, 'Counted', 'tied-item';
    is($f->add($t), 1, 'add(tied) -> new');
    is($obj->{n}, 1, 'add: FETCH ran exactly once');
    $obj->{n} = 0;
    is($f->contains($t), 1, 'contains(tied) -> present');
    is($obj->{n}, 1, 'contains: FETCH ran exactly once');
    is($f->contains('tied-item'), 1, 'the tied value was added');
    $obj->{n} = 0;
    is($f->add($t), 0, 'add(tied) again -> seen');
    is($obj->{n}, 1, 'add again: FETCH ran exactly once');

    my $co = tie my $c, 'Changing';
    is($f->add($c), 1, 'add(value changing per FETCH)');
    is($co->{n}, 1, 'FETCH once');
    is($f->contains('changing-1'), 1, 'the value of the single FETCH was added');
    is($f->contains('changing-2'), 0, 'no second FETCH value was added');

    my $uo = tie my $u, 'Counted', undef;
    ok(!eval { $f->add($u); 1 }, 'tied scalar FETCHing undef croaks');
    like($@, qr/->add: .*undefined item/, '... undefined item');
    is($uo->{n}, 1, '... after exactly one FETCH');

    my $wo = tie my $w, 'Counted', "\x{263a}";
    ok(!eval { $f->contains($w); 1 }, 'tied scalar FETCHing a wide string croaks');
    like($@, qr/->contains: .*Wide character/, '... Wide character');

    tie my $d, 'Dies';
    ok(!eval { $f->add($d); 1 }, 'FETCH that dies: add dies');
    like($@, qr/FETCH died/, "... with FETCH's message");
    is($f->add('after-die'), 1, 'filter works after a dying FETCH (no lock left held)');
}

# --- tied arrayref argument and tied elements ---------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    my $obj = tie my $ar, 'Counted', [qw(ra rb rc)];
    $f->add_many($ar, \my @r);
    is_deeply(\@r, [1, 1, 1], 'add_many(tied scalar holding an arrayref)');
    is($obj->{n}, 1, 'the arrayref scalar was FETCHed exactly once');
    $obj->{n} = 0;
    is(scalar $f->contains_many($ar), 3, 'contains_many(tied scalar holding an arrayref)');
    is($obj->{n}, 1, '... FETCHed exactly once');

    my @items = ('plain', 'x', 'y');
    my $eo = tie $items[1], 'Counted', 'tied-element';
    my $e2 = tie $items[2], 'Changing';
    $f->add_many(\@items, \my @flags);
    is_deeply(\@flags, [1, 1, 1], 'add_many with tied elements');
    is($eo->{n}, 1, 'tied element FETCHed exactly once by add_many');
    is($e2->{n}, 1, 'changing element FETCHed exactly once by add_many');
    is(scalar $f->contains_many(['plain', 'tied-element', 'changing-1']), 3, 'the fetched values were added');
    is($f->contains('changing-2'), 0, 'no second FETCH value was added');

    $eo->{n} = 0;
    my @c = $f->contains_many([$items[1]]);    # copied at construction: 1 FETCH here
    is($eo->{n}, 1, 'sanity: building the list fetched once');
    $eo->{n} = 0;
    @c = $f->contains_many(\@items);
    is($eo->{n}, 1, 'tied element FETCHed exactly once by contains_many');

    my $to = tie my @tied, 'TiedArray', qw(ta tb tc ta);
    $f->add_many(\@tied, \my @tr);
    is_deeply(\@tr, [1, 1, 1, 0], 'add_many(tied array): flags per element');
    is($to->{n}, 4, 'tied array: 4 element FETCHes for 4 elements');
    is_deeply($to->{per}, { 0 => 1, 1 => 1, 2 => 1, 3 => 1 }, 'tied array: each element FETCHed once');
    $to->{n} = 0;
    $to->{per} = {};
    my $present = $f->contains_many(\@tied);
    is($present, 4, 'contains_many(tied array)');
    is_deeply($to->{per}, { 0 => 1, 1 => 1, 2 => 1, 3 => 1 }, 'contains_many: each element FETCHed once');

    my $g = $C->new(undef, 1000, 0.01);
    my @bad = ('ok1', 'ok2', 'x');
    tie $bad[2], 'Dies';
    ok(!eval { $g->add_many(\@bad); 1 }, 'add_many with a dying element dies');
    like($@, qr/FETCH died/, "... with FETCH's message");
    is($g->bits_set, 0, '... and adds nothing');
    is($g->add('ok1'), 1, 'filter works after a dying element');
}

# --- overloaded stringification ------------------------------------------------------------
{
    my $f = $C->new(undef, 1000, 0.01);
    my $o = Str->new(s => 'overloaded');
    is($f->add($o), 1, 'add(overloaded object) -> new');
    is($o->{n}, 1, 'stringified exactly once by add');
    is($f->contains('overloaded'), 1, 'the object was added as its string');
    is($f->add('overloaded'), 0, 'the string is then already seen');
    $o->{n} = 0;
    is($f->contains($o), 1, 'contains(overloaded object)');
    is($o->{n}, 1, 'stringified exactly once by contains');

    $f->add_many([Str->new(s => 'o1'), 'o2', Str->new(s => 'o1')], \my @list);
    is_deeply(\@list, [1, 1, 0], 'add_many with overloaded objects');

    my $wide = Str->new(s => "\x{100}");
    ok(!eval { $f->add($wide); 1 }, 'object stringifying to a wide string croaks');
    like($@, qr/->add: .*Wide character/, '... Wide character');

    my $undef = Str->new(code => sub { undef });
    my $ok = eval { no warnings; local $SIG{__WARN__} = sub { }; $f->add($undef); 1 };
    if ($ok) {
        is($f->contains(''), 1, 'object stringifying to undef is taken as ""');
    } else {
        like($@, qr/->add: /, 'object stringifying to undef croaks naming add');
    }
}

# --- argument code destroys the handle mid-call ----------------------------------------------
for my $m (qw(add contains add_many contains_many)) {
    my $f = $C->new(undef, 1000, 0.01);
    $f->add('before');
    my $killer = Str->new(code => sub { $f->DESTROY; 'killer' });
    my $arg = $m =~ /many/ ? ['a', $killer, 'b'] : $killer;
    my $ok = eval { my @r = $f->$m($arg); 1 };
    ok(!$ok, "$m: item whose stringification DESTROYs the handle croaks");
    like($@, qr/destroyed handle/, '... destroyed handle');
    ok(!eval { $f->contains('before'); 1 }, '... and the handle stays destroyed');
    like($@, qr/destroyed handle/, '... destroyed handle');
}
{
    # The same with a tied item.
    my $f = $C->new(undef, 1000, 0.01);
    {
        package KillerTie;
        sub TIESCALAR { bless { f => $_[1] }, $_[0] }
        sub FETCH { ${ $_[0]{f} }->DESTROY; 'k' }
    }
    tie my $k, 'KillerTie', \$f;
    ok(!eval { $f->add($k); 1 }, 'tied item whose FETCH DESTROYs the handle croaks');
    like($@, qr/destroyed handle/, '... destroyed handle');
}
{
    # Dropping the last reference to the filter from the item's code.
    my $f = $C->new(undef, 1000, 0.01);
    my $fr = \$f;
    my $dropper = Str->new(code => sub { undef $$fr; 'dropper' });
    my $ok = eval { $f->add($dropper); 1 };
    if ($ok) {
        pass('undef of the filter variable during add: completed without a crash');
    } else {
        like($@, qr/(->add: |destroyed handle|not a Data::BloomFilter::Shared object)/,
            'undef of the filter variable during add: croaks cleanly');
    }
}
{
    # merge/intersect where the other handle was DESTROYed before the call.
    my $f = $C->new(undef, 1000, 0.01);
    my $g = $C->new(undef, 1000, 0.01);
    $g->DESTROY;
    ok(!eval { $f->merge($g); 1 }, 'merge(destroyed) croaks');
    like($@, qr/destroyed handle/, '... destroyed handle');
}

# --- an element rewrites or frees the batch mid-call --------------------------------------------
{
    my @cases = (
        ['clears the array', sub { my $a = shift; @$a = () }],
        ['splices out later elements', sub { my $a = shift; splice @$a, 1 }],
        ['overwrites a later element with a wide string', sub { my $a = shift; $a->[2] = "\x{263a}" }],
        ['overwrites a later element with undef', sub { my $a = shift; $a->[2] = undef }],
        ['overwrites a later element', sub { my $a = shift; $a->[2] = 'replaced' }],
        ['grows the array', sub { my $a = shift; push @$a, map { "grown$_" } 1 .. 1000 }],
        ['frees the array itself', sub { my ($a, $ref) = @_; undef $$ref }],
    );
    for my $case (@cases) {
        my ($name, $action) = @$case;
        for my $m (qw(add_many contains_many)) {
            my $f = $C->new(undef, 1000, 0.01);
            my $items;
            my $obj = Str->new(code => sub { $action->($items, \$items); 'mutator' });
            $items = ['first', $obj, 'third', 'fourth', map { "tail$_" } 1 .. 50];
            my @r;
            my $ok = eval { $f->$m($items, \@r); 1 };
            pass("$m: element that $name: no crash");
            if ($ok) {
                ok(@r >= 2 && @r <= 1054, "$m: $name: one result per element seen (" . scalar(@r) . ')');
                ok(!grep({ $_ ne '0' && $_ ne '1' } @r), "$m: $name: results are 0/1");
                if ($m eq 'add_many') {
                    is(scalar $f->contains_many(['first', 'mutator']), 2,
                        "add_many: $name: the first element and the mutator's string were added");
                    ok($f->contains('third') || $f->contains('replaced'),
                        "add_many: $name: the third element was added (old or new value)");
                    is(scalar $f->contains_many(['fourth', 'tail50']), 2,
                        "add_many: $name: the elements after it were added")
                        unless $name =~ /clears|splices|frees/;
                }
            } else {
                like($@, qr/->$m: /, "$m: $name: croaks naming $m");
                is($f->bits_set, 0, "$m: $name: croaked batch added nothing") if $m eq 'add_many';
            }
        }
    }
}

# --- constructor arguments: FETCH exactly once each ----------------------------------------------
{
    use File::Temp qw(tempdir);
    my $dir = tempdir(CLEANUP => 1);
    my $po = tie my $path, 'Counted', "$dir/tied.bf";
    my $co = tie my $cap, 'Counted', 1000;
    my $ro = tie my $rate, 'Counted', 0.01;
    my $mo = tie my $mode, 'Counted', 0640;
    my $f = $C->new($path, $cap, $rate, $mode);
    ok($f, 'new with tied arguments');
    is($po->{n}, 1, 'new: tied path FETCHed once');
    is($co->{n}, 1, 'new: tied capacity FETCHed once');
    is($ro->{n}, 1, 'new: tied fp_rate FETCHed once');
    is($mo->{n}, 1, 'new: tied mode FETCHed once');
    is($f->bits, 16384, 'new: tied values were used');
    is((stat "$dir/tied.bf")[2] & 07777, 0640, 'new: tied mode was used');

    my $bo = tie my $bytes, 'Counted', $f->serialize;
    my $d = $C->deserialize($bytes);
    ok($d, 'deserialize(tied bytes)');
    is($bo->{n}, 1, 'deserialize: tied bytes FETCHed once');

    my $m = $C->new_memfd('tied', 1000, 0.01);
    my $fo = tie my $fd, 'Counted', $m->memfd;
    my $g = $C->new_from_fd($fd);
    ok($g, 'new_from_fd(tied fd)');
    is($fo->{n}, 1, 'new_from_fd: tied fd FETCHed once');

    my $oo = tie my $other, 'Counted', $m;
    my $h = $C->new_memfd('tied2', 1000, 0.01);
    ok(eval { $h->merge($other) }, 'merge(tied other)') or diag($@);
    is($oo->{n}, 1, 'merge: tied other FETCHed once');
}

done_testing;
