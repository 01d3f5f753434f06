# What the manual says of membarrier(2) (LAYOUTS, "One locked instruction
# per add"): a blocked filter's adds mark their process's slot with a plain
# store where the process can register for membarrier, and exclusive
# operations fence them with it. A process that cannot call membarrier (a
# real seccomp filter that refuses it, installed here in children) adds
# with a locked mark instead, and its clear, invert, intersect, merge
# (through the journal, as a file's) and freeze croak, changing nothing,
# while a live process that adds with plain marks has the filter open; once
# that process is gone or has closed it, or for filters whose adds take a
# stripe (standard, windowed), they run.
use strict;
use warnings;
use Test::More;
use Config;
use FindBin;
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child child_status_text reap start_child);
use Data::BloomFilter::Shared;
use File::Temp qw(tempdir);

my $C = 'Data::BloomFilter::Shared';
plan skip_all => 'the seccomp filter below is written for x86_64 Linux'
    unless $^O eq 'linux' && $Config{archname} =~ /^x86_64/;
my ($SYS_membarrier, $SYS_prctl) = (324, 157);
plan skip_all => "this kernel has no membarrier(2): $!" if syscall($SYS_membarrier, 0, 0, 0) < 0;

# Install a seccomp filter in this process that makes membarrier fail with
# EPERM, as a container's or a service's syscall filter may.
sub deny_membarrier {
    my $ins = sub { pack 'S C C L', @_ };    # struct sock_filter
    my $prog = join '',
        $ins->(0x20, 0, 0, 4),                   # load seccomp_data.arch
        $ins->(0x15, 1, 0, 0xc000003e),          # AUDIT_ARCH_X86_64: go on
        $ins->(0x06, 0, 0, 0x7fff0000),          # another arch: allow
        $ins->(0x20, 0, 0, 0),                   # load seccomp_data.nr
        $ins->(0x15, 0, 1, $SYS_membarrier),     # membarrier:
        $ins->(0x06, 0, 0, 0x00050000 | 1),      #   fail with EPERM
        $ins->(0x06, 0, 0, 0x7fff0000);          # anything else: allow
    my $fprog = pack 'S x6 P', length($prog) / 8, $prog;    # struct sock_fprog
    syscall($SYS_prctl, 38, 1, 0, 0, 0) == 0 or die "PR_SET_NO_NEW_PRIVS: $!";
    syscall($SYS_prctl, 22, 2, $fprog, 0, 0) == 0 or die "PR_SET_SECCOMP: $!";
    syscall($SYS_membarrier, 0, 0, 0) < 0 && $!{EPERM} or die "membarrier still works under the filter\n";
}

# Run $code in a child that cannot call membarrier; its result or error.
sub denied {
    my ($code) = @_;
    my $r = in_child(sub { deny_membarrier(); $code->() }, 30);
    die 'child: ' . child_status_text($r) . "\n" if $r->{status} && !$r->{died};
    return $r->{out};
}

# Open a filter file this test made (with the capacity it was made with).
my %CAP;
sub reopen { my ($path) = @_; return $C->new($path, $CAP{$path}{cap}, $CAP{$path}{fp}) }
sub make {
    my ($path, $cap, $fp, $o) = @_;
    $CAP{$path} = { cap => $cap, fp => $fp };
    return $C->new($path, $cap, $fp, $o);
}

# A child that opens $path, adds $item and stays alive, the filter open,
# until killed (a handle dropped gives its process slot back).
sub holder {
    my ($path, $item) = @_;
    my ($pid, $r) = start_child(sub {
        my $f = reopen($path);
        $f->add($item);
        $_[0]->('added');
        alarm 0;    # (start_child's 30 s) alive until killed, or the test ends
        BFTest::die_with_parent();
        sleep 600;
    });
    my $line = <$r>;
    die "holder did not add\n" unless ($line // '') eq "added\n";
    return $pid;
}

my $dir = tempdir(CLEANUP => 1);
my $path = "$dir/blocked.bf";
make($path, 10_000, 0.01, { layout => 'blocked' })->add('first');

is(denied(sub {
    my $f = reopen($path);
    $f->add('by-denied');
    return join ',', $f->contains('first'), $f->contains('by-denied');
}), '1,1', 'a process without membarrier adds to a blocked filter (locked marks)');

# A live process that added with plain marks holds a light slot.
my $pid = holder($path, 'by-holder');
my $out = denied(sub {
    my $f = reopen($path);
    my $other = $C->new(undef, 10_000, 0.01, { layout => 'blocked' });
    my @got;
    for my $op ([clear => sub { $f->clear }], [invert => sub { $f->invert }],
        [intersect => sub { $f->intersect($other) }], [merge => sub { $f->merge($other) }],
        [freeze => sub { $f->freeze }])
    {
        my ($name, $code) = @$op;
        my $ok = eval { $code->(); 1 };
        push @got, $ok ? "$name ran" : $@ =~ /->$name: .*membarrier/ ? "$name refused" : "$name: $@";
    }
    push @got, join '', map { $f->contains($_) } qw(first by-denied by-holder);
    push @got, $f->frozen ? 'frozen' : 'not frozen';
    push @got, $f->add('after') ? 'adds' : 'add said old';
    return join ';', @got;
});
is($out, 'clear refused;invert refused;intersect refused;merge refused;freeze refused;111;not frozen;adds',
    'while it lives, exclusive operations without membarrier croak and change nothing');

my $f = reopen($path);
ok($f->contains('after') && $f->contains('by-holder'), 'the filter is as it was');

# The same process, on a filter whose adds take a stripe: no light slot.
my $std = "$dir/standard.bf";
my $win = "$dir/windowed.bf";
make($std, 10_000, 0.01);
make($win, 10_000, 0.01, { layout => 'blocked', window => undef, generations => 3 });
my @pids = ($pid, holder($std, 'x'), holder($win, 'x'));
is(denied(sub { my $g = reopen($std); $g->clear; $g->contains('x') }),
    '0', 'a standard filter: clear runs while such a process lives');
# A windowed blocked filter's adds are lock-free too (a step fences them):
# clear and rotate croak, adds and queries work.
is(denied(sub {
    my $g = reopen($win);
    my @got = map {
        my ($name, $code) = @$_;
        eval { $code->(); 1 } ? "$name ran" : $@ =~ /->$name: .*membarrier/ ? "$name refused" : "$name: $@";
    } [clear => sub { $g->clear }], [rotate => sub { $g->rotate }];
    push @got, $g->stats->{generation}, $g->add('y') ? 'adds' : 'add said old', $g->contains('x');
    join ';', @got;
}), 'clear refused;rotate refused;0;adds;1', 'a windowed blocked filter: clear and rotate croak, adds work');
{
    my $g = reopen($win);
    $g->rotate;
    is(join(',', $g->stats->{generation}, $g->contains('x'), $g->contains('y')), '1,1,1',
        'a process with membarrier rotates it meanwhile');
}

kill 'KILL', @pids;
reap($_) for @pids;
is(denied(sub {
    my $g = reopen($path);
    $g->clear;
    return join ',', map { $g->contains($_) } qw(first by-holder after);
}), '0,0,0', 'once it is gone (SIGKILL), clear runs');

# A live process that added, then closed the filter, holds no slot of it.
my ($closer, $closed) = start_child(sub {
    { my $g = reopen($path); $g->add('by-closer') }
    $_[0]->('closed');
    sleep 60;
});
is(scalar <$closed>, "closed\n", 'a process adds, then closes the filter, and lives on');
is(denied(sub { my $g = reopen($path); $g->clear; $g->contains('by-closer') }),
    '0', 'once it has closed the filter, clear runs');
kill 'KILL', $closer;
reap($closer);

# And a process that can fence clears what a denied one added.
denied(sub { reopen($path)->add('late'); '' });
$f->clear;
ok(!$f->contains('late'), 'a process with membarrier clears a filter a denied process adds to');

# Adders of both kinds at once: each item is new to exactly one of them
# (in a filter so large for them that a false positive is most unlikely).
my $many = "$dir/many.bf";
make($many, 2_000_000, 1e-6, { layout => 'blocked' });
my $items = 20_000;
my @kids = map {
    my $kind = $_;
    [start_child(sub {
        deny_membarrier() if $kind eq 'denied';
        my $g = reopen($many);
        my $new = 0;
        $new += $g->add("item-$_") for 1 .. $items;
        $_[0]->($new);
    })]
} qw(light denied light denied);
my $told_new = 0;
for (@kids) {
    my ($kid, $r) = @$_;
    $told_new += <$r> // die "an adder died\n";
    reap($kid);
}
is($told_new, $items, 'light and locked marks together: every item is new exactly once');

done_testing;
