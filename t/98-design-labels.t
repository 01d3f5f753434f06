use strict;
use warnings;
use Test::More;

# What cites doc/DESIGN.md finds what it cites: every label a comment
# names ("doc/DESIGN.md, C2", "DESIGN C3-C5", "§4", "(C4)") is defined in
# the document, every label the document and HACKING.md name is defined,
# and every src/ path the two documents name exists (and every other path
# of the tree they name as code). And the other way: every label the
# document defines is in its own list of labels and is cited by the code
# or its tests (src/, tests/, t/, lib/), or is in @UNCITED below with the
# reason; the document's table of files names every file of src/.

use File::Find ();

my $design = 'doc/DESIGN.md';
my $hacking = 'HACKING.md';
plan skip_all => "needs $design and the sources" if !-f $design || !-d 'src';

sub slurp {
    my ($path) = @_;
    open my $fh, '<:raw', $path or die "$path: $!";
    local $/;
    return scalar <$fh>;
}

# Files are read as bytes: the section sign and the en dash in UTF-8.
my $SECTION = "\xC2\xA7";
my $DASH = "\xE2\x80\x93";
my $LABEL = qr/(?:$SECTION\d+|[CGSAXMWN]\d+)/;
# A list of labels: "C3-C5", "C1".."C9", "S1, S2", "§8 A7–A10", "C3 and C5".
my $SEP = qr/(?:\s*(?:,|\band\b|-|$DASH|\.\.)\s*|\s+)/;
my $LIST = qr/$LABEL(?:$SEP$LABEL)*/;

# The labels a list stands for, ranges spelled out.
sub labels_of {
    my ($list) = @_;
    my @out;
    my @parts = split /($SEP)/, $list;
    for (my $i = 0; $i < @parts; $i += 2) {
        my $l = $parts[$i];
        my $sep = $i + 1 < @parts ? $parts[$i + 1] : '';
        my $next = $i + 2 < @parts ? $parts[$i + 2] : undef;
        push @out, $l;
        next if !defined $next || $sep !~ /-|$DASH|\.\./;
        my ($p1, $n1) = $l =~ /\A(\D+)(\d+)\z/;
        my ($p2, $n2) = $next =~ /\A(\D+)(\d+)\z/;
        push @out, map {"$p1$_"} $n1 + 1 .. $n2 - 1 if $p1 eq $p2 && $n2 > $n1;
    }
    return @out;
}

# ---------------------------------------------------------------- defined

my $doc = slurp($design);
my %defined;
$defined{"$SECTION$1"} = 1 while $doc =~ /^##\s+$SECTION(\d+)\b/mg;
$defined{$1} = 1 while $doc =~ /\*\*([CGSAXMWN]\d+)\b/g;
cmp_ok(scalar(keys %defined), '>', 40, "$design: its labels are found")
    or diag('found: ' . join ' ', sort keys %defined);

# The document's own list of its labels ("Labels: §1–§10 ...; C1–C9 ..."),
# which names every label it defines and no other.
{
    my ($para) = $doc =~ /^Labels:(.*?)\n\n/ms;
    ok(defined $para, "$design has its list of labels") or $para = '';
    my @listed;
    push @listed, labels_of($1) while $para =~ /($LIST)/g;
    cmp_ok(scalar(@listed), '>', 40, "$design: its list of labels is read");
    my @missing = grep { !$defined{$_} } @listed;
    ok(!@missing, "$design defines every label its list names") or diag("not defined: @missing");
    my %listed = map { $_ => 1 } @listed;
    my @unlisted = sort grep { !$listed{$_} } keys %defined;
    ok(!@unlisted, "$design lists every label it defines") or diag("not in its list: @unlisted");
}

# ---------------------------------------------------------------- cited in code

# The comment (and documentation) text of a file, by its kind.
sub comments_of {
    my ($path, $text) = @_;
    return $text if $path =~ /\.md\z/;
    my @out;
    if ($path =~ /\.(?:rs|c|h|xs|xsh)\z/) {
        push @out, $1 while $text =~ m{/\*(.*?)\*/}gs;
        push @out, $1 while $text =~ m{//([^\n]*)}g;
    }
    if ($path !~ /\.(?:rs|c|h)\z/) {
        push @out, $1 while $text =~ /(?:^|\s)#([^\n]*)/g;
        push @out, $1 while $text =~ /^(=[a-z].*?)(?:^=cut\b|\z)/msg;
    }
    return join "\n", @out;
}

my @files;
File::Find::find(
    {
        no_chdir => 1,
        wanted => sub {
            if (-d) {
                $File::Find::prune = 1 if m{(?:^|/)(?:target|corpus|out|\.git)\z};
                return;
            }
            push @files, $File::Find::name if /\.(?:rs|t|pm|pl|sh|c|h|xs|xsh|md)\z/;
        },
    },
    grep { -d } qw(src tests t bench lib script xt fuzz eg));
push @files, grep { -f } qw(Shared.xs Redis.xsh redis_xs.h script/bloomfilter-shared);
@files = sort @files;
ok(scalar(grep {m{^src/}} @files) > 10, 'the sources are found');

my (@cites, @bad);
for my $f (@files) {
    my $c = comments_of($f, slurp($f));
    my @here;
    # "doc/DESIGN.md, C2", "DESIGN C3-C5", "DESIGN §5, C6"
    push @here, labels_of($1) while $c =~ /\bDESIGN(?:\.md)?[\s,:]*($LIST)/g;
    # "§4", "§8 A7–A10"
    push @here, labels_of($1) while $c =~ /($SECTION\d+(?:$SEP$LABEL)*)/g;
    # "(C4)", "(C2, C5)"
    push @here, labels_of($1) while $c =~ /\(\s*($LIST)\s*[),;]/g;
    push @cites, map {"$f: $_"} @here;
    push @bad, map {"$f cites $_"} grep { !$defined{$_} } @here;
}
cmp_ok(scalar(@cites), '>', 10, 'citations of the design document are found in the sources')
    or diag(join "\n", @cites);
diag(join "\n", 'cited:', @cites) if $ENV{LABELS_VERBOSE};
ok(!@bad, "every label cited in a comment is defined in $design") or diag(join "\n", @bad);

# ---------------------------------------------------------------- defined and cited

# The labels no code or test cites, on purpose, and why. A label that the
# code comes to cite leaves this list (the test says so).
my %UNCITED = (
    G1 => 'a closed gap: the pointers it was about are gone from the file',
    G4 => "the kernel's limit, kept by keeper.rs; no test holds 2047 slots",
);
my %cited;
for my $c (@cites) {
    my ($f, $l) = $c =~ /\A(.*): (\S+)\z/ or next;
    $cited{$l} = 1 if $f =~ m{\A(?:src|tests|t|lib)/};
}
my @uncited = sort grep { !$cited{$_} && !$UNCITED{$_} } keys %defined;
ok(!@uncited, "every label $design defines is cited in src/, tests/, t/ or lib/, or listed as uncited")
    or diag("cited nowhere: @uncited");
my @stale = sort grep { $cited{$_} || !$defined{$_} } keys %UNCITED;
ok(!@stale, 'the labels listed as uncited are defined and uncited') or diag("cited or undefined: @stale");

# ---------------------------------------------------------------- the table of files

# The table of where the layers live names every file of src/: by its
# path under its layer's folder (`src/filter/`: `window/add.rs`), as a
# folder it is in (`tests/`), or as its folder's `mod.rs` when the folder
# has its row; src/lib.rs, the crate's root, by its own path.
{
    my (%named, %rows);
    while ($doc =~ m{^\|[^\n]*?`(src/[\w/]+/)`:([^\n]*)}mg) {
        my ($dir, $rest) = ($1, $2);
        $rows{$dir} = 1;
        $named{"$dir$_"} = 1 for $rest =~ m{`([\w/]+\.rs|\w+/)`}g;
    }
    $named{$1} = 1 while $doc =~ m{^\|[^\n]*?`(src/\w+\.rs)`}mg;
    cmp_ok(scalar(keys %rows), '>=', 9, "$design: its table of files is read") or diag(join ' ', sort keys %rows);
    my @src = grep { m{^src/.*\.rs\z} } @files;
    my @absent = grep {
        my $f = $_;
        my ($dir) = $f =~ m{\A(.*/)mod\.rs\z};
        !$named{$f}
            && !($dir && ($rows{$dir} || $named{$dir}))
            && !grep { m{/\z} && index($f, $_) == 0 } keys %named
    } grep { $_ ne 'src/lib.rs' || $doc !~ m{`src/lib\.rs`} } @src;
    ok(!@absent, "$design: its table of files names every file of src/") or diag("not in the table: @absent");
}

# ---------------------------------------------------------------- the documents

for my $path ($design, $hacking) {
    next if !-f $path;
    my $text = slurp($path);
    # Code (fenced blocks and `spans`) names other things, not labels.
    (my $prose = $text) =~ s/^```.*?^```//msg;
    $prose =~ s/`[^`\n]*`//g;
    my @named = $prose =~ /(?<![\w\/])($LABEL)(?!\w)/g;
    cmp_ok(scalar(@named), '>', 0, "$path: its labels are found");
    my @missing = grep { !$defined{$_} } @named;
    ok(!@missing, "every label $path names is defined in $design") or diag("not defined: @missing");

    # Paths: "src/shm/format.rs", "src/sys/"; and in the table of files,
    # "`src/filter/`: `mod.rs`, `window/add.rs`" names files under it.
    my @paths = $text =~ m{(?<![\w./-])(src/[\w./-]*)}g;
    s/[.,]+\z// for @paths;
    while ($text =~ m{^\|[^\n]*?`(src/[\w/]+/)`:([^\n]*)}mg) {
        my ($dir, $rest) = ($1, $2);
        push @paths, map {"$dir$_"} $rest =~ m{`([\w/]+\.rs|\w+/)`}g;
    }
    cmp_ok(scalar(@paths), '>', 0, "$path: its src/ paths are found");
    my @gone = grep { !-e $_ } @paths;
    ok(!@gone, "every src/ path $path names exists") or diag("no such path: @gone");

    # The other files of the tree it names as code: `t/26-same-filter.t`,
    # `tests/hardening/`, `bench/callgrind.pl` (not patterns like `t/40-*`,
    # nor numbers like `t/60`).
    my @other = grep { !/\*/ && m{(?:\.\w+|/)\z} }
        $text =~ m{`((?:t|tests|bench|xt|eg|lib|include|fuzz|script|doc)/[\w./*-]*)`}g;
    cmp_ok(scalar(@other), '>', 0, "$path: its other paths are found");
    @gone = grep { !-e $_ } @other;
    ok(!@gone, "every other path $path names as code exists") or diag("no such path: @gone");
}

done_testing;
