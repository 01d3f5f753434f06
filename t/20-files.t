# File-backed filters: modes, unusable paths, adopting an empty file,
# path/unlink/sync, reopening, several handles, and racing creators.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(in_child reap child_status_text);
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
umask 022;

sub mode_of { (stat $_[0])[2] & 07777 }

# --- modes ------------------------------------------------------------------------------
{
    my $f = $C->new("$dir/default.bf", 1000, 0.01);
    ok(-f "$dir/default.bf", 'file created');
    is(sprintf('%04o', mode_of("$dir/default.bf")), '0600', 'default mode 0600');
    is($f->path, "$dir/default.bf", 'path accessor');
    is($f->memfd, -1, 'memfd -1 for a file filter');
    cmp_ok(-s "$dir/default.bf", '>=', $f->bits / 8, 'file holds the bit array');

    $C->new("$dir/m0640.bf", 1000, 0.01, 0640);
    is(sprintf('%04o', mode_of("$dir/m0640.bf")), '0640', 'octal mode argument 0640');
    $C->new("$dir/h0640.bf", 1000, 0.01, { mode => 0640 });
    is(sprintf('%04o', mode_of("$dir/h0640.bf")), '0640', '{mode => 0640}');
    {
        my $old = umask 0;
        $C->new("$dir/h0660.bf", 1000, 0.01, { mode => 0660, seed => 5 });
        umask $old;
    }
    is(sprintf('%04o', mode_of("$dir/h0660.bf")), '0660', '{mode => 0660, seed => 5} (umask 0)');
    $C->new("$dir/hseed.bf", 1000, 0.01, { seed => 5 });
    is(sprintf('%04o', mode_of("$dir/hseed.bf")), '0600', '{seed => 5} alone keeps mode 0600');

    chmod 0644, "$dir/default.bf";
    $C->new("$dir/default.bf", 1000, 0.01, 0600);
    is(sprintf('%04o', mode_of("$dir/default.bf")), '0644', 'reopen does not change the mode');

    opendir(my $dh, $dir) or die;
    my @left = grep { !/^\.\.?$/ && !/\.bf$/ } readdir $dh;
    is_deeply(\@left, [], 'no temporary files left in the directory') or diag("@left");
}

# --- paths that cannot be used (non-regular files, symlinks and other users'
# files are t/31-hostile.t's) -----------------------------------------------------------------
{
    my $f;
    $f = eval { $C->new("$dir/no/such/dir/x.bf", 1000, 0.01) };
    ok(!$f, 'path in a missing directory is refused');
    like($@, qr/->new: /, '... croak names ->new');

    $f = eval { $C->new("$dir/nul\0byte.bf", 1000, 0.01) };
    ok(!$f, 'path with a NUL byte is refused');
    like($@, qr/->new: /, '... croak names ->new');
    ok(!-e "$dir/nul", '... and no truncated path was created');

    $f = eval { $C->new('', 1000, 0.01) };
    ok(!$f, 'empty path is refused');
    like($@, qr/->new: /, '... croak names ->new');

    $f = eval { $C->new_readonly("$dir/missing.bf") };
    ok(!$f, 'new_readonly of a missing file is refused');
    like($@, qr/->new_readonly: /, '... croak names ->new_readonly');
}

# --- adopting an empty file ------------------------------------------------------------------
{
    my $empty = "$dir/empty.bf";
    open(my $fh, '>', $empty) or die;
    close $fh;
    chmod 0600, $empty;
    my $f = eval { $C->new($empty, 1000, 0.01) };
    ok($f, 'an empty pre-existing file is adopted as a new filter') or diag($@);
    if ($f) {
        is($f->bits, 16384, '... with the requested geometry');
        is($f->add('adopted'), 1, '... and works');
        cmp_ok(-s $empty, '>=', 2048, '... and the file now holds the filter');
        undef $f;
        my $g = $C->new($empty, 5, 0.5);
        is($g->contains('adopted'), 1, 'reopening the adopted file sees its items');
        is($g->bits, 16384, '... and its geometry');
    }
}

# --- reopen, several handles, sync ---------------------------------------------------------------
{
    my $p = "$dir/shared.bf";
    my @items = map { "r$_" } 1 .. 500;
    {
        my $f = $C->new($p, 1000, 0.01);
        $f->add_many(\@items);
        ok(eval { $f->sync; 1 }, 'sync works') or diag($@);
    }
    my $g = $C->new($p, 1000, 0.01);
    is(scalar $g->contains_many(\@items), scalar @items, 'reopen sees every earlier add');
    is($g->add('r1'), 0, 'reopen: earlier item is not new');

    my $h = $C->new($p, 1000, 0.01);
    is($g->add('one-handle'), 1, 'add through one handle');
    is($h->contains('one-handle'), 1, 'a second handle in the same process sees it');
    is($h->add('one-handle'), 0, '... and does not report it new');
    is($h->add('other-handle'), 1, 'add through the second handle');
    is($g->contains('other-handle'), 1, 'the first handle sees it');
    is($g->bits_set, $h->bits_set, 'both handles count the same bits');
    $h->clear;
    ok($g->is_empty, 'clear through one handle empties the other');
    ok(eval { $g->sync; 1 }, 'sync on a second handle works') or diag($@);

    my $ro = $C->new($p, 1000, 0.01);
    undef $ro;
    is($g->add('after-other-closed'), 1, 'closing one handle leaves the other working');
}

# --- unlink ----------------------------------------------------------------------------------------
{
    my $p = "$dir/unlink-me.bf";
    my $f = $C->new($p, 1000, 0.01);
    $f->add('survives');
    ok(eval { $f->unlink; 1 }, '$filter->unlink') or diag($@);
    ok(!-e $p, '... removes the file');
    is($f->contains('survives'), 1, 'the handle still works after unlink');
    is($f->add('after-unlink'), 1, '... for adds too');

    my $p2 = "$dir/unlink-class.bf";
    $C->new($p2, 1000, 0.01);
    ok(-e $p2, 'file exists');
    ok(eval { $C->unlink($p2); 1 }, 'Class->unlink($path)') or diag($@);
    ok(!-e $p2, '... removes the file');

    my $anon = $C->new(undef, 100);
    is($anon->unlink, 0, 'unlink of an anonymous filter: 0, nothing to remove');
    is($C->unlink("$dir/never-existed.bf"), 0, 'unlink of a missing file: 0');

    open(my $fh, '>', "$dir/not-a-filter") or die;
    print $fh "hello\n";
    close $fh;
    my $ok = eval { $C->unlink("$dir/not-a-filter"); 1 };
    ok($ok || $@ =~ /->unlink: /, 'unlink of a non-filter file: works or croaks naming unlink');
}

# --- racing creators -------------------------------------------------------------------------------
{
    my $p = "$dir/race.bf";
    my $n = 4;
    pipe(my $gate_r, my $gate_w) or die;
    my @pids;
    for my $i (1 .. $n) {
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if (!$pid) {
            close $gate_w;
            alarm 20;
            my $x = <$gate_r>;    # returns when the parent closes the gate
            my $f = eval { $C->new($p, 1000, 0.01) };
            POSIX::_exit(2) unless $f;
            $f->add("racer$i");
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    close $gate_r;
    close $gate_w;    # open the gate
    my @status = map { [reap($_, 30)] } @pids;
    is_deeply([map { $_->[0] } @status], [(0) x $n], "$n processes creating one file at once all succeed");
    my $f = $C->new($p, 1000, 0.01);
    is(scalar $f->contains_many([map { "racer$_" } 1 .. $n]), $n, 'they all used the same filter');
    is($f->bits, 16384, 'the winner built the right geometry');
}

# --- the descriptor a file filter keeps (for a merge's journal) ------------------------------
# One per file per process, whatever the number of handles, and close-on-exec.
{
    my $path = "$dir/kept.bf";
    my $free = POSIX::open('/dev/null', POSIX::O_RDONLY()) // die "open: $!";
    POSIX::close($free);
    my @h = map { $C->new($path, 1000, 0.01) } 1 .. 3;
    my $dup = POSIX::dup($free);
    ok(defined $dup, "the filter keeps a descriptor (fd $free)");
    POSIX::close($dup) if defined $dup;
    my $next = POSIX::open('/dev/null', POSIX::O_RDONLY()) // die "open: $!";
    POSIX::close($next);
    is($next, $free + 1, 'one for three handles of the file');
    is(system($^X, '-MPOSIX', '-e', "exit(defined POSIX::dup($free) ? 1 : 0)"), 0,
        '... and it is close-on-exec: an exec\'d program does not have it');
}

done_testing;
