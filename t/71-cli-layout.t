# The command line and layouts: create --layout, info shows the layout, and
# merge into a new file keeps the inputs' layout.
use strict;
use warnings;
use Test::More;
use Cwd ();
use File::Temp qw(tempdir);
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(perl5lib slurp);
use Data::BloomFilter::Shared;
# Reopened with other arguments on purpose: the stored geometry wins (the
# warning itself is t/19-no-silent-mistake.t's).
no warnings 'Data::BloomFilter::Shared';

my $C = 'Data::BloomFilter::Shared';
my $script = Cwd::abs_path("$FindBin::Bin/../script/bloomfilter-shared");
my $dir = tempdir(CLEANUP => 1);
chdir $dir or die "chdir: $!";
$ENV{PERL5LIB} = perl5lib();
$SIG{ALRM} = sub { die "71-cli-layout: global timeout\n" };
alarm 120;

# (exit code, stdout, stderr) of the command with @args.
sub run {
    my (@args) = @_;
    my $cmd = join ' ', map { "'$_'" } $^X, $script, @args;
    system('sh', '-c', "$cmd >out.txt 2>err.txt </dev/null");
    die "sh: $!" if $? == -1;
    return ($? >> 8, slurp('out.txt'), slurp('err.txt'));
}

my ($rc, $out, $err) = run(qw(create b.bf -n 10k -p 0.001 --layout blocked));
is($rc, 0, 'create --layout blocked exits 0') or diag($err);
is($C->new('b.bf', 10, 0.1)->layout, 'blocked', 'the file is blocked');

($rc, $out, $err) = run(qw(create s.bf -n 10k --layout standard));
is($rc, 0, 'create --layout standard exits 0');
is($C->new('s.bf', 10, 0.1)->layout, 'standard', 'the file is standard');

($rc, $out, $err) = run(qw(create x.bf -n 10k --layout Blocked));
is($rc, 2, 'create --layout Blocked: a usage error');
like($err, qr/--layout must be 'standard', 'blocked' or 'datasketches', not 'Blocked'/, '... saying what is allowed');
ok(!-e 'x.bf', '... and no file');

($rc, $out) = run(qw(info b.bf));
like($out, qr/^layout\s+blocked$/m, 'info shows the blocked layout');
($rc, $out) = run(qw(info s.bf));
like($out, qr/^layout\s+standard$/m, 'info shows the standard layout');
($rc, $out) = run(qw(info b.bf --json));
like($out, qr/"layout":"blocked"/, 'info --json: layout');

run(qw(create b2.bf -n 10k -p 0.001 --layout blocked));
$C->new('b.bf', 10, 0.1)->add('one');
$C->new('b2.bf', 10, 0.1)->add('two');
($rc, $out, $err) = run(qw(merge m.bf b.bf b2.bf));
is($rc, 0, 'merge of blocked files into a new file exits 0') or diag($err);
my $m = $C->new('m.bf', 10, 0.1);
is($m->layout, 'blocked', 'the merged file is blocked');
ok($m->contains('one') && $m->contains('two'), 'and holds both');

($rc, $out, $err) = run(qw(merge b.bf s.bf));
is($rc, 2, 'merge of a standard file into a blocked one fails');
like($err, qr/s\.bf: not compatible with b\.bf \(layout standard vs blocked\)/, '... naming the layouts');
is($C->new('b.bf', 10, 0.1)->contains('two'), 0, '... and changes nothing');

done_testing;
