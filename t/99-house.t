use strict;
use warnings;
use Test::More;

# The shape of the code, kept: the Rust core's top-level modules use each
# other one way only (in the order of LAYERS: a module uses only modules
# before it), no file or module of any level uses another that uses it
# back (through `crate::` and `super::` paths), no source file grows past
# MAX_LINES, the C header holds only the C API's names, the library Perl
# loads carries no test hook (doc/DESIGN.md, G3), and every libc call is
# made in src/sys/ (but the few of ALLOWED_LIBC).

use File::Find ();
use File::Spec;

my $src = 'src';
my $header = 'include/bloomfilter_shared.h';
plan skip_all => 'needs the Rust sources (src/) and the C header'
    if !-d $src || !-f $header;

my $MAX_LINES = 1200;

# The layers, bottom first; modules of one rank (in one []) may not use each
# other either.
my @LAYERS = ('error', 'sys', 'math', 'probe', 'shm', 'sync', 'filter', ['codec', 'remote'], 'ffi');

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "$path: $!";
    local $/;
    return scalar <$fh>;
}

my @rs;
File::Find::find({ no_chdir => 1, wanted => sub { push @rs, $File::Find::name if /\.rs\z/ && -f } }, $src);
@rs = sort @rs;
ok(@rs > 10, 'the Rust sources are found') or diag("found: @rs");

# ---------------------------------------------------------------- file size

for my $f (@rs) {
    my $n = () = slurp($f) =~ /\n/g;
    cmp_ok($n, '<=', $MAX_LINES, "$f has at most $MAX_LINES lines") if $n > $MAX_LINES;
    ok(1, "$f: $n lines") if $n <= $MAX_LINES;
}

# ---------------------------------------------------------------- module graph

# The top-level module a file belongs to: src/x.rs and src/x/** are `x`.
sub top_of {
    my ($f) = @_;
    my ($first) = File::Spec->abs2rel($f, $src) =~ m{^([^/]+)};
    $first =~ s/\.rs\z//;
    return $first;
}

# A piece of code without its comments (doc comments included), string
# and character literals, dropped in one left-to-right pass, so that prose
# and quoted text do not count.
sub code_only {
    my ($code) = @_;
    $code =~ s{
        ( //[^\n]* | /\*.*?\*/ )
      | ( b?r(\#*)".*?"\3 | b?"(?:\\.|[^"\\])*" )
      | ( b?'(?:\\.|[^'\\])' )
    }{ defined $1 ? ' ' : defined $2 ? '""' : "' '" }gsex;
    return $code;
}

# The top-level modules a piece of code names: `crate::x`, `$crate::x` and
# the names of `crate::{x, y::z}`.
sub uses {
    my $code = code_only(@_);
    my %to;
    $to{$1} = 1 while $code =~ /(?<![\w:])\$?crate::(\w+)/g;
    while ($code =~ /(?<![\w:])crate::\{([^}]*)\}/g) {
        my $list = $1;
        $to{$1} = 1 while $list =~ /(?:^|,)\s*(\w+)/g;
    }
    return keys %to;
}

my %edges;    # from => { to => file naming it }
for my $f (@rs) {
    my $from = top_of($f);
    next if $from eq 'lib';
    for my $to (uses(slurp($f))) {
        next if $to eq $from || $to eq 'self';
        $edges{$from}{$to} //= $f;
    }
}
my %tops = map { (top_of($_) => 1) } grep { top_of($_) ne 'lib' } @rs;
diag(join "\n", 'module graph:', map {
        my $m = $_;
        map {"  $m -> $_"} sort keys %{ $edges{$m} || {} }
    } sort keys %tops) if $ENV{HOUSE_VERBOSE};

# A cycle, as a list of modules, or none.
sub find_cycle {
    my %state;    # 1: on the path, 2: done
    my @path;
    my $visit;
    $visit = sub {
        my ($m) = @_;
        $state{$m} = 1;
        push @path, $m;
        for my $n (sort keys %{ $edges{$m} || {} }) {
            if (($state{$n} // 0) == 1) {
                my ($i) = grep { $path[$_] eq $n } 0 .. $#path;
                return [@path[$i .. $#path], $n];
            }
            next if $state{$n};
            my $c = $visit->($n);
            return $c if $c;
        }
        pop @path;
        $state{$m} = 2;
        return;
    };
    for my $m (sort keys %tops) {
        next if $state{$m};
        my $c = $visit->($m);
        return $c if $c;
    }
    return;
}
my $cycle = find_cycle();
ok(!$cycle, 'no cycle among the top-level modules of src/')
    or diag('cycle: ' . join(' -> ', @$cycle) . "\n" . join("\n",
        map { "  $cycle->[$_] -> $cycle->[$_ + 1] in $edges{$cycle->[$_]}{$cycle->[$_ + 1]}" } 0 .. $#$cycle - 1));

my %rank;
for my $i (0 .. $#LAYERS) {
    $rank{$_} = $i for ref $LAYERS[$i] ? @{ $LAYERS[$i] } : $LAYERS[$i];
}
is_deeply([grep { !exists $rank{$_} } sort keys %tops], [], 'every top-level module has its layer');
my @against;
for my $from (sort keys %edges) {
    for my $to (sort keys %{ $edges{$from} }) {
        next if !exists $rank{$from} || !exists $rank{$to};
        push @against, "$from -> $to (in $edges{$from}{$to})" if $rank{$to} >= $rank{$from};
    }
}
is_deeply(\@against, [], 'every top-level module uses only the layers below it');

# ---------------------------------------------------------------- file graph

# Which file uses which, through the paths that name another file's
# module: `crate::a::b::Item` (the longest prefix that is a file's module,
# src/a/b.rs or src/a/b/mod.rs, else src/a.rs ...) and `super::...`
# (relative to the file's module, or to the inline `mod x { }` it is in);
# the groups of `use` (`crate::{a, b::{c, d}}`) expanded. A parent naming
# its child (`grown::Stages` in filter/mod.rs) is the declaration's own
# arrow and not counted, so that a child may `use super::*`.

# The module path of a file: src/lib.rs is (), src/a/mod.rs (a), src/a/b.rs (a, b).
sub module_of {
    my ($f) = @_;
    my @p = split m{/}, File::Spec->abs2rel($f, $src);
    $p[-1] =~ s/\.rs\z//;
    pop @p if $p[-1] eq 'mod' || (@p == 1 && $p[0] eq 'lib');
    return @p;
}
my %file_of = map { (join('::', module_of($_)) => $_) } @rs;

# The file that holds the item at module path @p.
sub file_for {
    my @p = @_;
    while (1) {
        my $f = $file_of{ join '::', @p };
        return $f if defined $f;
        return if !@p;
        pop @p;
    }
}

# The paths of a `use` tree: "a::{b, c::{d, e}}" gives a::b, a::c::d, a::c::e.
sub expand_use {
    my ($tree) = @_;
    $tree =~ s/\s+//g;
    my ($head, $group) = $tree =~ /\A(.*?)\{(.*)\}\z/s or return ($tree =~ s/\bas\w+\z//r);
    my (@parts, $depth, $cur);
    ($depth, $cur) = (0, '');
    for my $c (split //, $group) {
        $depth++ if $c eq '{';
        $depth-- if $c eq '}';
        if ($c eq ',' && $depth == 0) { push @parts, $cur; $cur = ''; next }
        $cur .= $c;
    }
    push @parts, $cur;
    return map { my $p = $_; $p eq 'self' ? ($head =~ s/::\z//r) : expand_use("$head$p") } grep { length } @parts;
}

# The files one file uses.
sub file_uses {
    my ($f) = @_;
    my $code = code_only(slurp($f));
    # A visibility (`pub(in crate::filter)`) names no item.
    $code =~ s/\bpub\s*\(\s*in\s+[\w:\s]+\)/pub/g;
    my @mine = module_of($f);
    # Each path, with the inline modules it is in: a scan of `mod x {` and braces.
    my (@paths, @inline, $depth);
    $depth = 0;
    while ($code =~ /\G(?:
        (?<mod> \bmod\s+(?<name>\w+)\s*\{ )
      | (?<use> \b(?:pub(?:\([^)]*\))?\s+)?use\s+(?<tree>[^;]+); )
      | (?<path> (?<![\w:])\$?(?:crate|super)(?:\s*::\s*\w+)+ )
      | (?<open> \{ ) | (?<close> \} )
      | . )/gsx)
    {
        if (defined $+{mod}) { $depth++; push @inline, [$+{name}, $depth] }
        elsif (defined $+{open}) { $depth++ }
        elsif (defined $+{close}) { pop @inline if @inline && $inline[-1][1] == $depth; $depth-- }
        else {
            my @found = defined $+{use} ? expand_use($+{tree}) : defined $+{path} ? ($+{path} =~ s/\s+//gr) : ();
            push @paths, map { [$_, [map { $_->[0] } @inline]] } @found;
        }
    }
    my %to;
    for (@paths) {
        my ($path, $in) = @$_;
        my @seg = split /::/, $path;
        my @base;
        if ($seg[0] =~ /\A\$?crate\z/) { shift @seg }
        elsif ($seg[0] eq 'super') {
            @base = (@mine, @$in);
            while (@seg && $seg[0] eq 'super') { shift @seg; pop @base }
        }
        else { next }
        my $to = file_for(@base, @seg);
        $to{$to} = 1 if defined $to && $to ne $f;
    }
    return sort keys %to;
}

my %file_edges = map { my $f = $_; ($f => { map { ($_ => 1) } file_uses($f) }) } @rs;
diag(join "\n", 'file graph:', map { my $f = $_; map {"  $f -> $_"} sort keys %{ $file_edges{$f} } } @rs)
    if $ENV{HOUSE_VERBOSE};

# The cycles of a graph { from => { to => 1 } }: one per strongly connected
# component of more than one node, as a shortest way round through its
# first node, then the component's other nodes (on other cycles) if any.
sub cycles {
    my ($g) = @_;
    my (%index, %low, %on, @stack, @found);
    my $n = 0;
    my $strong;
    $strong = sub {
        my ($v) = @_;
        $index{$v} = $low{$v} = $n++;
        push @stack, $v;
        $on{$v} = 1;
        for my $w (sort keys %{ $g->{$v} || {} }) {
            if (!exists $index{$w}) { $strong->($w); $low{$v} = $low{$w} if $low{$w} < $low{$v} }
            elsif ($on{$w}) { $low{$v} = $index{$w} if $index{$w} < $low{$v} }
        }
        return if $low{$v} != $index{$v};
        my %comp;
        while (1) { my $w = pop @stack; $on{$w} = 0; $comp{$w} = 1; last if $w eq $v }
        return if keys %comp < 2;
        # A shortest way back to $v within the component.
        my %prev = ($v => undef);
        my @queue = ($v);
        my $end;
        while (defined(my $x = shift @queue)) {
            for my $y (sort keys %{ $g->{$x} || {} }) {
                next if !$comp{$y};
                if ($y eq $v) { $end = $x; last }
                next if exists $prev{$y};
                $prev{$y} = $x;
                push @queue, $y;
            }
            last if defined $end;
        }
        my @path = ($v);
        for (my $x = $end; $x ne $v; $x = $prev{$x}) { unshift @path, $x }
        unshift @path, $v;
        my %on_path = map { ($_ => 1) } @path;
        my @rest = grep { !$on_path{$_} } sort keys %comp;
        push @found, [\@path, \@rest];
    };
    for my $v (sort keys %$g) { $strong->($v) if !exists $index{$v} }
    return @found;
}

sub show_cycle {
    my ($path, $rest) = @{ $_[0] };
    return '  ' . join(' -> ', @$path) . (@$rest ? ' (its other members: ' . join(', ', @$rest) . ')' : '');
}

my @file_cycles = cycles(\%file_edges);
ok(!@file_cycles, 'no cycle among the files of src/ (crate:: and super:: paths)')
    or diag(join "\n", 'cycles:', map { show_cycle($_) } @file_cycles);

# The same between the modules of each level: an arrow between two files
# is one between the two sibling modules (files or folders) that hold them.
my %module_edges;
for my $f (@rs) {
    my @a = module_of($f);
    for my $t (keys %{ $file_edges{$f} }) {
        my @b = module_of($t);
        my $i = 0;
        $i++ while $i < @a && $i < @b && $a[$i] eq $b[$i];
        next if $i == @a || $i == @b;    # a module and one of its ancestors
        my $at = join '::', @a[0 .. $i - 1];
        $module_edges{$at}{ $a[$i] }{ $b[$i] } = 1;
    }
}
my @module_cycles = map {
    my $at = $_;
    my $name = sub { map { $at eq '' ? $_ : "${at}::$_" } @_ };
    map { [[$name->(@{ $_->[0] })], [$name->(@{ $_->[1] })]] } cycles($module_edges{$at})
} sort keys %module_edges;
ok(!@module_cycles, 'no cycle among the modules of any level of src/')
    or diag(join "\n", 'cycles:', map { show_cycle($_) } @module_cycles);

# ---------------------------------------------------------------- syscalls

# Every libc function (or macro) is called in src/sys/, behind a small safe
# function there, but these: the memfd's size and the naming of an
# O_TMPFILE file, steps of creating a region that belong with it. libc's
# constants and types may be named anywhere.
my %ALLOWED_LIBC = map { ($_ => 1) } 'src/shm/region.rs ftruncate', 'src/shm/region.rs linkat';

my (@calls, %allowed_seen);
for my $f (grep { !m{^\Q$src\E/sys/} } @rs) {
    my $code = code_only(slurp($f));
    while ($code =~ /(?<![\w:])(?:::)?libc::(\w+)\s*(?:::\s*<[^>]*>\s*)?\(/g) {
        my $pair = "$f $1";
        if ($ALLOWED_LIBC{$pair}) { $allowed_seen{$pair} = 1 }
        else { push @calls, $pair }
    }
    # An import would hide the calls from the pattern above.
    push @calls, "$f: use libc" if $code =~ /\buse\s+(?:::)?libc\b/;
}
ok(!@calls, 'no libc call outside src/sys/ but the allowed ones')
    or diag(join "\n", 'libc called (move it into src/sys/):', map {"  $_"} @calls);
is_deeply([sort keys %allowed_seen], [sort keys %ALLOWED_LIBC], 'every allowed libc call is still made (or leaves the list)');

# ---------------------------------------------------------------- header

{
    my $h = slurp($header);
    # C++'s extern "C" { ... } around the declarations.
    $h =~ s/^\s*#\s*ifdef\s+__cplusplus\b.*?^\s*#\s*endif\b//msg;
    $h =~ s{/\*.*?\*/}{}gs;
    $h =~ s{//[^\n]*}{}g;
    my %names;
    $names{$1} = 1 while $h =~ /^\s*#\s*define\s+(\w+)/mg;
    $names{$1} = 1 while $h =~ /\b(?:struct|enum|union)\s+(\w+)/g;
    $names{$1} = 1 while $h =~ /\}\s*(\w+)\s*;/g;
    $names{$1} = 1 while $h =~ /^\s*typedef\s+[^;{]*?\b(\w+)\s*;/mg;
    # Functions: a name before "(" in a declaration at file scope (struct
    # bodies and preprocessor lines dropped first).
    (my $decls = $h) =~ s/^\s*#.*$//mg;
    1 while $decls =~ s/\{[^{}]*\}/;/g;
    for my $d (split /;/, $decls) {
        $names{$1} = 1 if $d =~ /\b(\w+)\s*\(/;
    }
    ok(scalar(grep {/^bfs_/} keys %names) > 20, 'the header is parsed (its bfs_ functions are found)');
    my @outside = grep { !/^(?:bfs_|Bfs|BFS_)/ && $_ ne 'BLOOMFILTER_SHARED_H' } sort keys %names;
    is_deeply(\@outside, [], "$header names only bfs_/Bfs/BFS_ items");
}

# ---------------------------------------------------------------- layout names

# Every layout's name and numbers are one row of math::scheme::layout_table!:
# each name is a string literal there and nowhere else in the code (the
# tests and comments aside), neither in src/ nor in the XS, which asks the
# C API for the table (bfs_layout_at).
{
    # Code without comments, its string literals kept; a Rust file without
    # its test module (at the end of a file, by the house's custom).
    my $code_with_strings = sub {
        my ($text) = @_;
        $text =~ s{
            ( //[^\n]* | /\*.*?\*/ )
          | ( b?r(\#*)".*?"\3 | b?"(?:\\.|[^"\\])*" | '(?:\\.|[^'\\])' )
        }{ defined $1 ? ' ' : $2 }gsex;
        return $text;
    };
    my @files = ((grep { !m{/tests/} } @rs), grep { -f } 'Shared.xs', 'Redis.xsh', 'redis_xs.h');
    my %where;
    for my $f (@files) {
        my $text = slurp($f);
        $text =~ s/^\s*#\[cfg\(test\)\]\s*\n\s*mod\s+tests\b.*//ms if $f =~ /\.rs\z/;
        my $code = $code_with_strings->($text);
        for my $name (qw(standard blocked datasketches)) {
            my $n = () = $code =~ /"\Q$name\E"/g;
            push @{ $where{$name} }, ($f) x $n;
        }
    }
    for my $name (qw(standard blocked datasketches)) {
        is_deeply($where{$name} || [], ['src/math/scheme.rs'], "the name \"$name\" is written once, in the layouts' table")
            or diag("written in: @{ $where{$name} || [] }");
    }
}

# ---------------------------------------------------------------- test hooks

SKIP: {
    require Data::BloomFilter::Shared;
    my ($so) = grep {m{Data/BloomFilter/Shared/Shared\.so\z}} @DynaLoader::dl_shared_objects;
    skip 'the loaded library is not found', 2 if !$so;
    my @syms = `nm $so 2>/dev/null`;
    skip 'nm is not available', 2 if $? != 0 || !@syms;
    ok(scalar(grep {/\bbfs_add\b/} @syms), "nm lists the symbols of $so");
    my @hooks = grep {/bloomfilter_shared.*(?:testing|resumed_chunks|RESUMED_CHUNKS|_partly)/} @syms;
    is_deeply(\@hooks, [], 'the library Perl loads carries no test hook');
}

done_testing;
