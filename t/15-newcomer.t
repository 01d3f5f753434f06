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
    like($out, qr/^NA: Data::BloomFilter::Shared needs Rust 1\.70 or later: cargo is not on PATH \(install it with rustup: https:\/\/rustup\.rs\) \(OS unsupported\)$/m,
        '... at the NA message, which says what to install');
    unlike($out, qr/No targets specified|no makefile found/i, '... and make never runs');
    ok(!-e "$dir/Makefile", '... leaving no Makefile');
}
{
    my ($st, $out) = build(bin_with('old-rust', cargo => 'exit 0', rustc => 'echo "rustc 1.63.0 (4b91a6ea7 2022-08-08)"'));
    isnt($st, 0, 'rustc 1.63: the && chain stops');
    like($out, qr/^NA: .*needs Rust 1\.70 or later, found rustc 1\.63 \(install a current one with rustup/m,
        '... naming the version found and the one needed');
    unlike($out, qr/No targets specified/i, '... and make never runs');
}
{
    my ($st, $out) = build(bin_with('cpan'), PERL5_CPAN_IS_RUNNING => 1);
    like($out, qr/^NA: .*\(OS unsupported\)$/m, 'under a CPAN client: the same NA message');
    # `&&` then runs make, which finds no Makefile: the client grades NA from the message.
  SKIP: {
        skip 'no make on PATH', 1 if !-e "$dir/bin-cpan/make";
        like($out, qr/No targets specified|no makefile found/i, '... and an exit status of 0, as CPAN testers expect');
    }
}

done_testing;
