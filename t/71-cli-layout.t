# The command line and layouts: create --layout, info shows the layout,
# merge into a new file keeps the inputs' layout, and a datasketches filter
# exported as DataSketches' image and imported back.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(cli slurp);
use Data::BloomFilter::Shared;
# Reopened with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $dir = tempdir(CLEANUP => 1);
chdir $dir or die "chdir: $!";
$SIG{ALRM} = sub { die "71-cli-layout: global timeout\n" };
alarm 120;

# The command runs in this process (t/lib/BFTest.pm, cli): what it does
# with layouts is the library's, a process of its own adds nothing.

my ($rc, $out, $err) = cli(undef, qw(create b.bf -n 10k -p 0.001 --layout blocked));
is($rc, 0, 'create --layout blocked exits 0') or diag($err);
is($C->new('b.bf', 10, 0.1)->layout, 'blocked', 'the file is blocked');

($rc, $out, $err) = cli(undef, qw(create s.bf -n 10k --layout standard));
is($rc, 0, 'create --layout standard exits 0');
is($C->new('s.bf', 10, 0.1)->layout, 'standard', 'the file is standard');

($rc, $out, $err) = cli(undef, qw(create x.bf -n 10k --layout Blocked));
is($rc, 2, 'create --layout Blocked: a usage error');
like($err, qr/--layout must be 'standard', 'blocked' or 'datasketches', not 'Blocked'/, '... saying what is allowed');
ok(!-e 'x.bf', '... and no file');

($rc, $out) = cli(undef, qw(info b.bf));
like($out, qr/^layout\s+blocked$/m, 'info shows the blocked layout');
($rc, $out) = cli(undef, qw(info s.bf));
like($out, qr/^layout\s+standard$/m, 'info shows the standard layout');
($rc, $out) = cli(undef, qw(info b.bf --json));
like($out, qr/"layout":"blocked"/, 'info --json: layout');

cli(undef, qw(create b2.bf -n 10k -p 0.001 --layout blocked));
$C->new('b.bf', 10, 0.1)->add('one');
$C->new('b2.bf', 10, 0.1)->add('two');
($rc, $out, $err) = cli(undef, qw(merge m.bf b.bf b2.bf));
is($rc, 0, 'merge of blocked files into a new file exits 0') or diag($err);
my $m = $C->new('m.bf', 10, 0.1);
is($m->layout, 'blocked', 'the merged file is blocked');
ok($m->contains('one') && $m->contains('two'), 'and holds both');

($rc, $out, $err) = cli(undef, qw(merge b.bf s.bf));
is($rc, 2, 'merge of a standard file into a blocked one fails');
like($err, qr/s\.bf: not compatible with b\.bf \(layout standard vs blocked\)/, '... naming the layouts');
is($C->new('b.bf', 10, 0.1)->contains('two'), 0, '... and changes nothing');

# --- datasketches: create, export --format datasketches, import ----------------------------
($rc, $out, $err) = cli(undef, qw(create d.bf -n 1000 -p 0.01 --layout datasketches));
is($rc, 0, 'create --layout datasketches exits 0') or diag($err);
my $d = $C->new('d.bf', 10, 0.1);
is($d->layout, 'datasketches', 'the file is datasketches');
is($d->seed, 9001, "no --seed: DataSketches' default seed");
$d->add("d$_") for 1 .. 200;
($rc, $out, $err) = cli(undef, qw(export d.bf --format datasketches -o d.ds));
is($rc, 0, 'export --format datasketches exits 0') or diag($err);
is(slurp('d.ds'), $d->serialize(format => 'datasketches'), '... writing the DataSketches image');
is(substr(slurp('d.ds'), 2, 1), chr 21, '... family 21');
($rc, $out, $err) = cli(undef, qw(import d2.bf -i d.ds));
is($rc, 0, 'import of the image exits 0') or diag($err);
my $d2 = $C->new('d2.bf', 10, 0.1);
is($d2->layout, 'datasketches', '... a datasketches filter');
is(scalar(grep { $d2->contains("d$_") } 1 .. 200), 200, '... with every item');
# Merge into a new file: an imported filter's size (derived capacity and
# rate) and a given size are kept.
$C->new('sized.bf', 100, 0.01, { layout => 'datasketches', bits => 1000, hashes => 3 })->add('s');
$C->new('sized2.bf', 100, 0.01, { layout => 'datasketches', bits => 1000, hashes => 3 })->add('t');
($rc, $out, $err) = cli(undef, qw(merge sm.bf sized.bf sized2.bf));
is($rc, 0, 'merge of datasketches files of a given size into a new file exits 0') or diag($err);
my $sm = $C->new('sm.bf', 10, 0.1);
is($sm->bits . '/' . $sm->hashes, '1024/3', '... keeping their size');
ok($sm->contains('s') && $sm->contains('t'), '... and holding both');
($rc, $out, $err) = cli(undef, qw(merge dm.bf d2.bf d.bf));
is($rc, 0, 'merge of an imported datasketches file into a new file exits 0') or diag($err);
is($C->new('dm.bf', 10, 0.1)->bits, $d->bits, '... keeping its size');

($rc, $out, $err) = cli(undef, qw(info d.ds));
is($rc, 2, 'info of an image fails');
like($err, qr/this is serialized bytes: use import/, '... saying to import it');
($rc, $out, $err) = cli(undef, qw(export s.bf --format datasketches -o s.ds));
isnt($rc, 0, 'export --format datasketches of a standard filter fails');
like($err, qr/create it with --layout datasketches$/m, '... saying which layout to create, as an option of the tool');
ok(!-e 's.ds', '... and writes nothing');
($rc, $out, $err) = cli(undef, qw(export d.bf --format java -o j.ds));
is($rc, 2, 'export --format java: a usage error');
like($err, qr/--format must be 'datasketches'/, '... saying what is allowed');

done_testing;
