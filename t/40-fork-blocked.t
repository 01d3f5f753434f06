# t/40-fork.t on blocked filters (the same suite, every filter blocked).
use strict;
use warnings;
use FindBin ();
use lib "$FindBin::Bin/lib";
use BFTest qw(run_with_layout);

run_with_layout('blocked', '40-fork.t');
