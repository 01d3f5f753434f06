#!/usr/bin/perl
# A Mojolicious::Lite app under the prefork server: every worker process
# answers "is this id new?" from one filter, created before the fork.
#
#   perl -Mblib eg/mojo_prefork.pl prefork -l http://127.0.0.1:8080 -w 4
#   curl http://127.0.0.1:8080/seen/order-17              # new order-17 (worker 1234)
#   curl http://127.0.0.1:8080/seen/order-17              # seen order-17 (worker 1236)
#   curl -H 'Accept: application/json' http://127.0.0.1:8080/seen/order-17
#   curl 'http://127.0.0.1:8080/seen/order-17?_format=json'
#       {"id":"order-17","new":false,"pid":1235}
#
# Whichever worker gets the request, an id is reported new exactly once.
# Hypnotoad (hypnotoad eg/mojo_prefork.pl) works the same way.
use strict;
use warnings;
use Mojolicious::Lite;
use Mojo::Util qw(encode);
use Data::BloomFilter::Shared;

# Loading the app happens in the manager process, before it forks the
# workers: this anonymous mapping is inherited by every one of them (and by
# the workers it forks later to replace them).
my $capacity = $ENV{SEEN_CAPACITY} // 1_000_000;
my $seen = Data::BloomFilter::Shared->new(undef, $capacity, 0.001);

# "#id": any characters but "/", dots included.
get '/seen/#id' => sub {
    my ($c) = @_;
    my $id = $c->param('id');
    my $new = $seen->add(encode('UTF-8', $id));    # items are bytes
    $c->respond_to(
        json => { json => { id => $id, new => $new ? \1 : \0, pid => $$ } },
        any  => { text => ($new ? 'new' : 'seen') . " $id (worker $$)\n" },
    );
};

get '/stats' => sub { $_[0]->render(json => $seen->stats) };

app->start;
