# t/40-fork.t on datasketches filters (the same suite, every filter of the datasketches layout).
use strict;
use warnings;
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(run_with_layout);

run_with_layout('datasketches', '40-fork.t');
