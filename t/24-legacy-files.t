# Files of the original C module (0.04, formats 1 and 2), built here byte by
# byte from its layout: recognised by name when opened, and converted in
# place by the upgrade class method and `bloomfilter-shared upgrade`, with the
# same bits, geometry and count; refused when damaged or in use.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Fcntl qw(:flock :mode);
use POSIX ();
use Data::BloomFilter::Shared;
# Opened again with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
my $CLI = -e 'blib/script/bloomfilter-shared' ? 'blib/script/bloomfilter-shared' : 'script/bloomfilter-shared';

# The original's 256-byte header (little-endian), then its bit array at
# bits_off: the same hashing as ours with seed 0, so a filter of ours of the
# same geometry gives the bits (its serialized bytes hold them at offset 56).
sub legacy_file {
    my (%a) = @_;
    my $src = $C->new(undef, $a{capacity}, $a{fp_rate});
    $src->add_many($a{items});
    my $bits = substr($src->serialize, 56, $src->bits / 8);
    my $total = $a{bits_off} + length($bits);
    my $head = pack('V V V x4 Q< x8 Q< d< Q< x8 Q< x16 Q<',
        0x4D4F4F42, $a{version}, $src->hashes, $src->bits,
        $a{capacity}, $a{fp_rate}, $a{total} // $total, $a{bits_off}, 777);
    $head .= "\0" x (256 - length $head);
    my $file = $head . ("\x5a" x ($a{bits_off} - 256)) . $bits;    # slots: junk
    open my $fh, '>:raw', $a{path} or die "$a{path}: $!";
    print $fh $file;
    close $fh or die;
    chmod $a{mode} // 0640, $a{path};
    return $src;
}

sub slurp { open my $fh, '<:raw', $_[0] or die "$_[0]: $!"; local $/; <$fh> }

my @items = map { "item-$_" } 1 .. 700;
my @absent = map { "absent-$_" } 1 .. 2000;

for my $v ([ 1, 4096 ], [ 2, 12288 ]) {
    my ($version, $bits_off) = @$v;
    my $path = "$dir/v$version.bloom";
    my $src = legacy_file(path => $path, version => $version, capacity => 1000,
        fp_rate => 0.01, bits_off => $bits_off, items => \@items, mode => 0640);
    is(length(slurp($path)), $bits_off + $src->bits / 8, "format $version: test file built");

    my $before = slurp($path);
    for my $open ([ new => sub { $C->new($path, 1000, 0.01) } ],
                  [ new_readonly => sub { $C->new_readonly($path) } ]) {
        ok(!eval { $open->[1]->(); 1 }, "format $version: $open->[0] refuses the file");
        like($@, qr/->$open->[0]: \Q$path\E: written by Data::BloomFilter::Shared 0\.04: convert it with `bloomfilter-shared upgrade \Q$path\E`/,
            '... naming the version and the command that converts it');
    }
    open my $fh, '+<', $path or die;
    ok(!eval { $C->new_from_fd($fh); 1 }, "format $version: new_from_fd refuses it");
    like($@, qr/written by Data::BloomFilter::Shared 0\.04: convert it with `bloomfilter-shared upgrade PATH`/,
        '... saying the same');
    close $fh;
    is(slurp($path), $before, '... and nothing changed the file');

    my $ino = (stat $path)[1];
    my $owner = $> == 0 && $version == 2 ? 65534 : $>;    # root: another owner carries over too
    chown $owner, $owner, $path or die "chown: $!" if $owner != $>;
    my $r = eval { $C->upgrade($path) };
    ok($r, "format $version: upgrade") or diag($@);
    is_deeply($r, { from_version => $version, bits => $src->bits, hashes => $src->hashes,
                    capacity => 1000, fp_rate => 0.01, bits_set => $src->bits_set },
        '... reports what it converted');
    my $f = eval { $C->new($path, 5, 0.5) };
    ok($f, '... and the file opens') or diag($@);
    is($f->serialize, $src->serialize, '... with the same bits, geometry and seed 0');
    is($f->count, $src->count, '... the same count');
    is_deeply([ $f->capacity, $f->fp_rate ], [ 1000, 0.01 ], '... capacity and fp_rate carried');
    is(scalar $f->contains_many(\@items), scalar @items, '... every item present');
    is(scalar $f->contains_many(\@absent), scalar $src->contains_many(\@absent),
        '... the same false positives');
    is(S_IMODE((stat $path)[2]), 0640, '... the same mode');
    is_deeply([ (stat $path)[4, 5] ], [ $owner, $owner ], '... the same owner and group');
    is($f->stats->{ops}, 0, '... ops starting again from 0');
    isnt((stat $path)[1], $ino, '... a new file renamed into place');
    is_deeply([ grep { !/\.bloom\z/ } map { s{.*/}{}r } glob("$dir/.* $dir/*") ], [ '.', '..' ],
        '... leaving no temporary file');
    is($f->add('after-upgrade'), 1, '... and it is an ordinary filter');

    ok(!eval { $C->upgrade($path); 1 }, "format $version: a second upgrade refuses");
    like($@, qr/->upgrade: \Q$path\E: already a filter of this version/, '... saying why');
}

# Damaged files are refused, and left as they were.
{
    my %base = (version => 2, capacity => 1000, fp_rate => 0.01, bits_off => 8192, items => [ 'x' ]);
    my @cases = (
        [ 'a total size that is not the file\'s', { total => 9999 }, qr/header says 9999/ ],
        [ 'a bit array past the end', { bits_off => 8192, total => 8192 + 100 }, qr/header says 8292/ ],
        [ 'an unknown version', { version => 3 }, qr/unknown format version 3/ ],
        [ 'bits_off inside the header', { bits_off => 256, total => 128 + 2048 }, qr/header says 2176|does not fit/ ],
    );
    for my $c (@cases) {
        my ($name, $over, $re) = @$c;
        my $path = "$dir/bad.bloom";
        legacy_file(%base, %$over, path => $path);
        my $before = slurp($path);
        ok(!eval { $C->upgrade($path); 1 }, "upgrade refuses $name");
        like($@, qr/->upgrade: \Q$path\E: .*$re/, '... saying why');
        is(slurp($path), $before, '... and leaves the file as it was');
        unlink $path;
    }
    my $path = "$dir/cut.bloom";
    legacy_file(%base, path => $path);
    truncate $path, 200;
    ok(!eval { $C->upgrade($path); 1 }, 'upgrade refuses a file cut inside the header');
    like($@, qr/truncated/, '... as truncated');
    ok(!eval { $C->upgrade(undef); 1 }, 'upgrade(undef) croaks');
    like($@, qr/->upgrade: path required/, '... path required');
    ok(!eval { $C->upgrade("$dir/missing"); 1 }, 'upgrade of a missing file croaks');
    like($@, qr/->upgrade: open .*missing: No such file/, '... saying so');
}

# A file in use by a process of the old version is refused.
{
    my %base = (version => 2, capacity => 1000, fp_rate => 0.01, bits_off => 8192, items => \@items);
    my $path = "$dir/locked.bloom";
    legacy_file(%base, path => $path);
    pipe my $r, my $w or die;
    my $pid = fork // die;
    if (!$pid) {
        close $r;
        open my $fh, '<', $path or POSIX::_exit(1);
        flock $fh, LOCK_SH or POSIX::_exit(1);
        print $w "locked\n";
        close $w;
        sleep 30;
        POSIX::_exit(0);
    }
    close $w;
    is(scalar <$r>, "locked\n", 'a child holds a lock on the file');
    my $before = slurp($path);
    ok(!eval { $C->upgrade($path); 1 }, 'upgrade of a locked file refuses');
    like($@, qr/->upgrade: \Q$path\E: in use \(another process holds a lock on it\); stop the processes of the old version first/,
        '... saying it is in use');
    is(slurp($path), $before, '... unchanged');
    kill 'KILL', $pid;
    waitpid $pid, 0;

  SKIP: {
        skip 'python3 is needed to map a file from another process', 4
            if system('python3 -c 1 2>/dev/null') != 0;
        skip '/proc is needed to see mappings', 4 if !-r "/proc/$$/maps";
        my $py = 'import mmap,sys,time; f=open(sys.argv[1],"rb"); '
            . 'm=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ); f.close(); '
            . 'print("mapped", flush=True); time.sleep(30)';
        my $kid = open(my $out, '-|', 'python3', '-c', $py, $path) or die;
        is(scalar <$out>, "mapped\n", 'another process maps the file (its descriptor closed)');
        ok(!eval { $C->upgrade($path); 1 }, 'upgrade of a mapped file refuses');
        like($@, qr/->upgrade: \Q$path\E: in use \(process $kid has it mapped\)/, '... naming the process');
        is(slurp($path), $before, '... unchanged');
        kill 'KILL', $kid;
        close $out;
    }
    ok(eval { $C->upgrade($path); 1 }, 'once they are gone, the upgrade runs') or diag($@);
}

# The command line.
{
    my $path = "$dir/cli.bloom";
    my $src = legacy_file(path => $path, version => 1, capacity => 5000, fp_rate => 0.001,
        bits_off => 4096, items => \@items);
    my $out = `$^X -Mblib $CLI info $path 2>&1`;
    like($out, qr/\Q$path\E: written by Data::BloomFilter::Shared 0\.04: convert it with `bloomfilter-shared upgrade /, 'info on an old file says how to convert it');
    $out = `$^X -Mblib $CLI upgrade $path 2>&1`;
    is($?, 0, 'bloomfilter-shared upgrade PATH exits 0') or diag($out);
    like($out, qr/\Q$path\E: converted from format 1 of 0\.04: \d+ bits, \d+ hashes, capacity 5000/,
        '... and says what it converted');
    my $f = $C->new($path, 1, 0.5);
    is($f->serialize, $src->serialize, '... the same bits');
    $out = `$^X -Mblib $CLI upgrade $path 2>&1`;
    is($? >> 8, 2, 'upgrading it again exits 2');
    like($out, qr/already a filter of this version/, '... saying why');
}

done_testing;
