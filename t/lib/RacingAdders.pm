package RacingAdders;

# Several processes adding the same items to one Redis-backed filter at
# once, each on a connection of its own and in its own order, singles and
# batches mixed. The test then checks what they were told: no item new
# twice, none lost.

use strict;
use warnings;
use Exporter 'import';
use POSIX ();
use Test::More ();

our @EXPORT_OK = qw(race_adders);

# race_adders(%args): forks one adder per process number, waits for them
# all (a test each: "$name $pid exited cleanly") and returns a hash:
# item => how many adders were told it was new.
#   procs    the process numbers, e.g. [1 .. 4]
#   open     sub ($p): the filter process $p adds to (called in the child)
#   items    array ref of the items every process adds
#   reverse  sub ($p): true when process $p adds them last to first
#   batch    batches of 1 .. batch items (at random) go to add_many
#   singles  a batch shorter than this is added one add at a time (0: never)
#   name     the start of each exit test's name
sub race_adders {
    my (%a) = @_;
    my @kids;
    for my $p (@{ $a{procs} }) {
        pipe my $rd, my $wr or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $rd;
            my $f = $a{open}->($p);
            my @mine = $a{reverse}->($p) ? reverse @{ $a{items} } : @{ $a{items} };
            my @new;
            while (@mine) {
                my @batch = splice @mine, 0, 1 + int rand $a{batch};
                if (@batch < $a{singles}) { push @new, grep { $f->add($_) } @batch; next }
                $f->add_many(\@batch, \my @w);
                push @new, @batch[grep { $w[$_] } 0 .. $#batch];
            }
            print {$wr} "$_\n" for @new;
            close $wr;
            POSIX::_exit(0);
        }
        close $wr;
        push @kids, [$pid, $rd];
    }
    my %told;
    for (@kids) {
        my ($pid, $rd) = @$_;
        while (my $l = <$rd>) { chomp $l; $told{$l}++ }
        waitpid $pid, 0;
        Test::More::is($?, 0, "$a{name} $pid exited cleanly");
    }
    return %told;
}

1;
