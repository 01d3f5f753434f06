# A first build from a checkout: when something needed is missing,
# `perl Makefile.PL && make` stops at Makefile.PL's NA message (which says
# what to install) instead of going on to make's "No targets specified".
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use File::Copy qw(copy);
use Cwd qw(getcwd);

my $dir = tempdir(CLEANUP => 1);
copy('Makefile.PL', "$dir/Makefile.PL") or die "copy: $!";
my $perl_dir = $^X =~ m{^(.*)/[^/]+$} ? $1 : '/usr/bin';

# A bin directory with a perl and make, plus whatever fakes a case wants.
sub bin_with {
    my ($name, %fakes) = @_;
    my $bin = "$dir/bin-$name";
    mkdir $bin or die;
    for my $tool ('perl', 'make', 'sh') {
        my ($real) = grep { -x } map { "$_/$tool" } $perl_dir, split /:/, $ENV{PATH};
        symlink $real, "$bin/$tool" or die "symlink $tool: $!" if $real;
    }
    for my $fake (keys %fakes) {
        open my $fh, '>', "$bin/$fake" or die;
        print $fh "#!/bin/sh\n$fakes{$fake}\n";
        close $fh;
        chmod 0755, "$bin/$fake";
    }
    return $bin;
}

sub build {
    my ($bin, %env) = @_;
    local %ENV = (%ENV, PATH => $bin, %env);
    delete @ENV{qw(PERL5_CPAN_IS_RUNNING PERL5_CPANPLUS_IS_RUNNING PERL5_CPANM_IS_RUNNING AUTOMATED_TESTING)}
        if !%env;
    my $cwd = getcwd();
    chdir $dir or die;
    my $out = `sh -c 'perl Makefile.PL && make' 2>&1`;
    my $status = $?;
    chdir $cwd or die;
    return ($status, $out);
}

{
    my ($st, $out) = build(bin_with('no-cargo'));
    isnt($st, 0, 'no cargo: the && chain stops');
    like($out, qr/^NA: Data::BloomFilter::Shared cannot be built here: Rust is missing \(cargo is not on PATH; Rust 1\.70 or later is needed: install it with rustup, https:\/\/rustup\.rs, then open a new shell or run \. "\$HOME\/\.cargo\/env"\)$/m,
        '... at the NA message, which says what is missing and how to install it');
    unlike($out, qr/OS unsupported/, '... and does not blame the OS');
    unlike($out, qr/No targets specified|no makefile found/i, '... and make never runs');
    ok(!-e "$dir/Makefile", '... leaving no Makefile');
}
{
    my ($st, $out) = build(bin_with('old-rust', cargo => 'exit 0', rustc => 'echo "rustc 1.63.0 (4b91a6ea7 2022-08-08)"'));
    isnt($st, 0, 'rustc 1.63: the && chain stops');
    like($out, qr/^NA: Data::BloomFilter::Shared cannot be built here: Rust is too old \(rustc 1\.63; Rust 1\.70 or later is needed: install a current one with rustup/m,
        '... naming the version found and the one needed');
    unlike($out, qr/OS unsupported/, '... and does not blame the OS');
    unlike($out, qr/No targets specified/i, '... and make never runs');
}
{
    my ($st, $out) = build(bin_with('cpan'), PERL5_CPAN_IS_RUNNING => 1);
    like($out, qr/^NA: Data::BloomFilter::Shared cannot be built here: Rust is missing /m, 'under a CPAN client: the same NA message');
    # `&&` then runs make, which finds no Makefile. A missing Rust does not say
    # "OS unsupported" (the words CPAN testers grade NA on): the report is
    # discarded, as for any missing prerequisite.
  SKIP: {
        skip 'no make on PATH', 1 if !-e "$dir/bin-cpan/make";
        like($out, qr/No targets specified|no makefile found/i, '... and an exit status of 0, as CPAN testers expect');
    }
}

# INSTALL's perl Makefile.PL INSTALL_BASE=..., then another perl Makefile.PL
# without it (TRY IT's, in README.pod): the new Makefile would send a make
# install into Perl's own directories, and Makefile.PL says so. In a copy of
# the distribution's files, with a cargo that does nothing (nothing is built).
SKIP: {
    my $top = Cwd::abs_path('.');
    skip 'no MANIFEST to copy the distribution by', 4 if !-f "$top/MANIFEST";
    my $tree = "$dir/tree";
    open(my $m, '<', "$top/MANIFEST") or die "MANIFEST: $!";
    for my $file (map { /\A(\S+)/ ? $1 : () } <$m>) {
        next if $file =~ m{\A(?:vendor|\.cargo)/} || !-f "$top/$file";
        my ($sub) = "$tree/$file" =~ m{\A(.*)/};
        system('mkdir', '-p', $sub) == 0 or die "mkdir $sub";
        copy("$top/$file", "$tree/$file") or die "copy $file: $!";
    }
    my $bin = bin_with('note', cargo => 'exit 0');
    local %ENV = (%ENV, PATH => $bin);
    delete @ENV{qw(PERL_MM_OPT PERL5_CPAN_IS_RUNNING PERL5_CPANPLUS_IS_RUNNING PERL5_CPANM_IS_RUNNING AUTOMATED_TESTING)};
    my $cwd = getcwd();
    chdir $tree or die;
    my $first = `perl Makefile.PL INSTALL_BASE=$dir/perl5 2>&1`;
    my $st = $?;
    my $again = `perl Makefile.PL 2>&1`;
    my $same = `perl Makefile.PL 2>&1`;
    my $back = `perl Makefile.PL INSTALL_BASE=$dir/perl5 2>&1`;
    chdir $cwd or die;
    is($st, 0, 'perl Makefile.PL INSTALL_BASE=... writes a Makefile') or diag($first);
    like($again, qr{^Note: the Makefile this replaces installed into INSTALL_BASE=\Q$dir\E/perl5; this one installs into Perl's own directories: for a make install into \Q$dir\E/perl5, run perl Makefile.PL INSTALL_BASE=\Q$dir\E/perl5$}m,
        'perl Makefile.PL after it says that make install no longer goes there');
    unlike($same, qr/^Note:/m, '... once: a Makefile without INSTALL_BASE replaced by another says nothing');
    unlike($back . $first, qr/^Note:/m, '... nor does one given INSTALL_BASE');
}

done_testing;
