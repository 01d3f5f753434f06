package Data::BloomFilter::Shared::CLI;

# The command line tool bloomfilter-shared: script/bloomfilter-shared calls
# run(@ARGV) and exits with what it returns. Internal: its manual is the
# command's own (bloomfilter-shared --help).

use 5.022;
use strict;
use warnings;

use Data::BloomFilter::Shared;
use Data::BloomFilter::Shared::Args ();
use Errno ();
use Fcntl qw(O_RDONLY O_RDWR O_WRONLY O_CREAT O_EXCL O_NOFOLLOW O_NONBLOCK O_NOCTTY);
use Getopt::Long ();
use IO::Handle ();
use Time::HiRes ();

our $VERSION = $Data::BloomFilter::Shared::VERSION;

my $ME = 'bloomfilter-shared';
my $C = 'Data::BloomFilter::Shared';
my $BATCH = 1000;            # lines per add_many / contains_many call (add --batch)
my $MAX_BATCH = 1_000_000;
my $CHUNK = 1 << 18;         # bytes per read of the input
my $PROGRESS_EVERY = 0.5;    # seconds between progress updates
# While add runs, the overfull check (a count of every bit of the filter)
# runs at most this often, and at most every 20 times as long as it took.
my $OVERFULL_EVERY = 5;

# Exit codes (see EXIT STATUS in the manual).
my $EXIT_OK = 0;
my $EXIT_NONE = 1;
my $EXIT_ERROR = 2;

# --- messages ------------------------------------------------------------------------------

my %ESCAPE = ("\n" => '\n', "\t" => '\t', "\r" => '\r', '\\' => '\\\\');

# A file name as printable text on one line. A control character, an
# invisible formatting character (such as a right-to-left override), a line
# or paragraph separator, a space other than the plain one, and a byte of a
# name that is not UTF-8 are written as \n, \t, \r or \x{..}; a backslash as
# \\. So a name can neither start a line of its own nor pass for another.
sub show {
    my ($name) = @_;
    my $bytes = "$name";
    utf8::encode($bytes) if utf8::is_utf8($bytes);
    require Encode;
    my $text = eval { Encode::decode('UTF-8', $bytes, Encode::FB_CROAK() | Encode::LEAVE_SRC()) };
    if (defined $text) {
        $text =~ s{([\\\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}]|[^\x20\P{Zs}])}
                  {$ESCAPE{$1} // sprintf('\x{%02x}', ord $1)}ge;
        utf8::encode($text);
        return $text;
    }
    $bytes =~ s{([^\x20-\x5b\x5d-\x7e])}{$ESCAPE{$1} // sprintf('\x{%02x}', ord $1)}ge;
    return $bytes;
}

# What goes to stderr is one line, whatever a message quotes raw (an option
# name in Getopt's complaint, a path in a system error).
sub one_line {
    my ($msg) = @_;
    $msg =~ s/\s+\z//;
    $msg =~ s{([\x00-\x1f\x7f])}{$ESCAPE{$1} // sprintf('\x{%02x}', ord $1)}ge;
    return $msg;
}

# A line on stderr (a summary, a note, a warning).
sub say_err {
    my ($msg) = @_;
    progress_done();
    print STDERR "$ME: ", one_line($msg), "\n";
}

# "1 line", "2 lines".
sub plural {
    my ($n, $word) = @_;
    return "$n $word" . ($n == 1 ? '' : 's');
}

# An error: one line on stderr, exit 2.
sub fail {
    my ($msg) = @_;
    $msg =~ s/\s+\z//;
    die { message => $msg };
}

# The library's croak without its "Class->method: " prefix and " at X line N."
sub library_message {
    my ($err) = @_;
    my $msg = ref $err eq 'HASH' ? $err->{message} : "$err";
    $msg =~ s/\A\Q$C\E->\w+: //;
    $msg =~ s/ at \S+ line \d+\.?\n?\z//;
    $msg =~ s/\s+\z//;
    return cli_words($msg);
}

# The library's words that name its Perl API (an option as `layout =>
# 'datasketches'`, an argument as fp_rate, a method), and what the tool
# says instead: its own options. Every message of the library that a
# command can pass on and that speaks Perl is here; t/72-cli-inprocess.t
# makes each one (but a copy that races a stage being added: serialize it
# again) and checks that no Perl is left.
my @CLI_WORDS = (
    [qr/\bcreate it with layout => '(\w+)'/,           sub {"create it with --layout $1"}],
    [qr/\bformat '(\w+)' needs a filter of layout '(\w+)'/, sub {"--format $1 needs a filter of layout $2"}],
    [qr/\bformat '(\w+)'/,                              sub {"--format $1"}],
    [qr/\bcapacity and fp_rate need\b/,                 sub {'--capacity and --fp-rate need'}],
    [qr/\buse a larger fp_rate\b/,                      sub {'use a larger --fp-rate'}],
    [qr/\bmax_capacity (\d+) is below the capacity (\d+)/, sub {"--max-capacity $1 is below --capacity $2"}],
    [qr/\bmax_capacity (\d+) is out of reach\b/,        sub {"--max-capacity $1 is out of reach"}],
    [qr/\bat this capacity, fp_rate and grow\b/,        sub {'at this --capacity, --fp-rate and --grow'}],
    [qr/\bits max_capacity of\b/,                       sub {'its --max-capacity of'}],
    [qr/\bgrow and window do not go together: the bytes/, sub {'--window does not go with these bytes: they'}],
    [qr/\bgrow and window do not go together\b/,        sub {'--grow and --window do not go together'}],
    [qr/\bthe window options do not apply to it\b/,     sub {'--window and --generations do not apply to it'}],
    [qr/\bserialize it again\b/,                        sub {'export it again'}],
    [qr/\bseed must be a non-negative integer that fits in 64 bits, got (.*?) \(not shown: .*\)\z/s,
        sub {"--seed must be an integer between 0 and 2**64-1, got $1 (not shown: a seed is a secret)"}],
);

sub cli_words {
    my ($msg) = @_;
    for my $w (@CLI_WORDS) {
        my ($re, $words) = @$w;
        $msg =~ s/$re/$words->()/e;
    }
    return $msg;
}

# The library's message $msg about the file $path, starting with its name
# (shown escaped). $as: the name to show instead of $path (a temporary file
# is shown as the file it is to become).
sub about {
    my ($path, $msg, $as) = @_;
    if (defined $as) {
        $msg =~ s/\Q$path\E/$as/g;    # a temporary name is unique: no false match
        $path = $as;
    }
    my $name = show($path);
    # The library names the file first ("PATH: ...") or after a verb
    # ("open PATH: ..."): do not repeat it.
    return "$name: $1" if $msg =~ /\A\Q$path\E: (.*)\z/s;
    return "$name: $1: $2" if $msg =~ /\A(\w+) \Q$path\E: (.*)\z/s;
    return "$name: $msg";
}

# Run $code; a croak of the library becomes fail("$path: $message"), the
# library's message about $path (see about()).
sub try_library {
    my ($path, $code, $as) = @_;
    my @r = eval { $code->() };
    return wantarray ? @r : $r[0] if !$@;
    die $@ if ref $@ eq 'HASH';
    fail(about($path, library_message($@), $as));
}

# --- progress line (only on a terminal) --------------------------------------------------

my $progress_on = 0;
my $progress_shown = 0;    # length of the line on screen
my $progress_last = 0;

sub progress {
    my ($text, $final) = @_;
    return if !$progress_on;
    my $now = Time::HiRes::time();
    return if !$final && $now - $progress_last < $PROGRESS_EVERY;
    $progress_last = $now;
    my $line = "$ME: $text";
    my $pad = $progress_shown > length $line ? $progress_shown - length $line : 0;
    print STDERR "\r", $line, ' ' x $pad;
    $progress_shown = length $line;
}

# Erase the progress line before anything else goes to stderr.
sub progress_done {
    return if !$progress_shown;
    print STDERR "\r", ' ' x $progress_shown, "\r";
    $progress_shown = 0;
}

# --- arguments -----------------------------------------------------------------------------

sub usage_error {
    my ($msg) = @_;
    fail("$msg (see $ME --help)");
}

# Options of one command; a problem is a usage error.
sub options {
    my ($args, @spec) = @_;
    my %o;
    my @warnings;
    my $ok = do {
        local $SIG{__WARN__} = sub { push @warnings, $_[0] };
        Getopt::Long::GetOptionsFromArray($args, \%o, @spec, 'help|h', 'quiet|q');
    };
    if (!$ok) {
        my $w = $warnings[0] // 'bad options';
        $w =~ s/\s+\z//;
        $w = lcfirst $w;
        usage_error($w);
    }
    help() if $o{help};
    return \%o;
}

# The manual: the POD of the command ($0), which run() is called by.
sub help {
    require Pod::Usage;    # only here: it takes longer to load than the rest
    Pod::Usage::pod2usage(-verbose => 2, -exitval => 'NOEXIT', -output => \*STDOUT,
        -noperldoc => 1);
    die { status => $EXIT_OK };
}

sub want_args {
    my ($cmd, $args, $min, $max, $names) = @_;
    usage_error("$cmd: missing $names") if @$args < $min;
    usage_error("$cmd: unexpected argument '$args->[$max]'")
        if defined $max && @$args > $max;
}

# 1000, 1_000_000, 1e6, 10k, 5M, 2G; at most $max ($why says why).
sub count_arg {
    my ($name, $v, $max, $why) = @_;
    my $n = Data::BloomFilter::Shared::Args::count_text($v);
    usage_error("--$name must be a positive integer (like 1000000, 1e6 or 1M), not '$v'")
        if !defined $n || $n < 1 || $n != int $n;
    usage_error("--$name $v is too large ($why)") if $n > $max;
    return $n =~ /\A[0-9]+\z/ ? $n : sprintf('%.0f', $n);
}

sub mode_arg {
    my ($v) = @_;
    usage_error("--mode must be an octal file mode like 0640, not '$v'")
        if $v !~ /\A0?[0-7]{1,4}\z/;
    # What the library refuses (bits outside 0777), in the tool's words.
    usage_error("--mode $v has bits outside 0777 (set-user-ID, set-group-ID or sticky),"
            . ' which a filter file does not take')
        if oct($v) & ~0777;
    return oct $v;
}

# --- opening filters -----------------------------------------------------------------------

# True when the file behind $fh starts as the output of `export`
# (Data::BloomFilter::Shared's serialize) does: our magic, or a DataSketches
# Bloom filter image (family 21 in its third byte).
sub is_serialized {
    my ($fh) = @_;
    sysseek($fh, 0, 0) or return 0;
    my $n = sysread($fh, my $magic, 8);
    return defined $n && $n == 8 && ($magic eq 'BLOOMSER' || substr($magic, 2, 1) eq chr 21);
}

# Attach to the existing filter FILE; never creates one. $need_write: the
# command changes the filter, so the file must be opened read-write. Queries
# fall back to a read-only descriptor when the file is not writable, for what
# new_from_fd allows such a descriptor. A frozen filter is mapped read-only
# whatever the descriptor's access (as new_readonly does).
sub open_filter {
    my ($file, $need_write) = @_;
    my $shown = show($file);
    my $fh;
    my $flags = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;    # never block opening a FIFO
    my $rw_error;
    if (!sysopen($fh, $file, O_RDWR | $flags)) {
        $rw_error = $!;
        if ($need_write || !($!{EACCES} || $!{EROFS} || $!{EPERM})
            || !sysopen($fh, $file, O_RDONLY | $flags))
        {
            $! = $rw_error;
            fail("$shown: is a symbolic link (refused)") if $!{ELOOP};
            fail("$shown: $!");
        }
    }
    my $f = eval { $C->new_from_fd($fh) };
    my $err = $@;
    if (!$f && is_serialized($fh)) {
        close $fh;
        fail("$shown: this is serialized bytes: use import "
            . "($ME import NEWFILE -i $shown makes a filter of them)");
    }
    close $fh;    # the filter holds its own duplicate
    return $f if $f;
    my $msg = library_message($err);
    $msg .= " (read-write open: $rw_error)" if defined $rw_error;
    fail(about($file, $msg));
}

sub open_writable {
    my ($file) = @_;
    my $f = open_filter($file, 1);
    fail(show($file) . ': filter is frozen (read-only)') if $f->frozen;
    return $f;
}

# --- writing outputs -----------------------------------------------------------------------
#
# Nothing is ever written under an output's own name. The new file is made
# beside it under a temporary name, finished and synced, then linked to its
# name (which fails if the name appeared meanwhile) or, with --force, renamed
# over it. Whatever fails, or kills the command, the name keeps what it had,
# and a process that has the old file open or mapped keeps it whole.

my %TEMPS;    # temporary files not yet in place: removed when we stop

sub remove_temps {
    for my $tmp (keys %TEMPS) {
        unlink $tmp;
        delete $TEMPS{$tmp};
    }
}

END { remove_temps() }

# While a command runs, a signal that ends it removes its temporary files
# first, then ends it as the signal would have.
sub signal_handlers {
    return map {
        my $sig = $_;
        $sig => sub {
            remove_temps();
            $SIG{$sig} = 'DEFAULT';
            kill $sig, $$;
        };
    } qw(HUP INT TERM);
}

# Why the existing file at $path must not be replaced, even with --force; ''
# when it may be. A filter file that is not frozen may be in use: processes
# that have it mapped would go on adding to a file no name leads to any more,
# and their adds would be lost. It is told by its header: the magic of a
# filter ("BLOOMSHM", or "BOOM" for the 0.04 format), and new_readonly, which
# opens frozen filters only.
sub in_use_why {
    my ($path) = @_;
    sysopen(my $fh, $path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        or return "cannot be read to tell whether it is a filter in use ($!)";
    my $n = sysread($fh, my $magic, 8);
    close $fh;
    return "cannot be read to tell whether it is a filter in use ($!)" if !defined $n;
    return 'is a filter file in the 0.04 format, which may be in use'
        if substr($magic, 0, 4) eq 'BOOM';
    return '' if $magic ne 'BLOOMSHM';
    return '' if eval { $C->new_readonly($path) };    # frozen: nobody changes it
    return 'is a filter that is not frozen, which processes may be using';
}

# Refuse an output path that must not be written: a symbolic link (never
# followed), anything but a regular file, an existing file without --force,
# and a filter that may be in use even with it.
sub check_output {
    my ($path, $force) = @_;
    my $shown = show($path);
    if (!lstat $path) {
        return if $!{ENOENT};
        fail("$shown: $!");
    }
    fail("$shown: is a symbolic link (refused)") if -l _;
    fail("$shown: is a directory, not a regular file") if -d _;
    fail("$shown: is not a regular file (refused)") if !-f _;
    fail("$shown: file exists (use --force to replace it)") if !$force;
    my $why = in_use_why($path);
    fail("$shown: $why: not replaced, even with --force") if $why;
}

sub split_path {
    my ($path) = @_;
    $path =~ m{\A(.*/)?([^/]+)\z}s && $2 ne '.' && $2 ne '..'
        or fail(show($path) . ': not a file name');
    return ($1 // '', $2);
}

sub random_tag {
    my $bytes = '';
    if (open(my $r, '<:raw', '/dev/urandom')) { read($r, $bytes, 9) }
    $bytes = pack('N3', map { int rand 2**32 } 1 .. 3) if length $bytes < 9;
    return unpack('H18', $bytes);
}

# A temporary name beside $path that nothing has now: .NAME.RANDOM.tmp
# (NAME cut to stay within a file name's 255 bytes).
sub temp_name {
    my ($path) = @_;
    my ($dir, $base) = split_path($path);
    for (1 .. 10) {
        my $tmp = $dir . '.' . substr($base, 0, 200) . '.' . random_tag() . '.tmp';
        return $tmp if !lstat $tmp && $!{ENOENT};
    }
    fail(show($path) . ': cannot find a free temporary name beside it');
}

# Give the finished temporary file $tmp the name $path (see above).
sub install {
    my ($tmp, $path, $force) = @_;
    my $shown = show($path);
    if ($force) {
        check_output($path, 1);    # again: the name may have changed meanwhile
        rename($tmp, $path) or fail("$shown: rename: $!");
    }
    elsif (link($tmp, $path)) {
        unlink $tmp;
    }
    elsif ($!{EEXIST}) {
        fail("$shown: file exists (use --force to replace it)");
    }
    elsif ($!{EPERM} || $!{EOPNOTSUPP} || $!{ENOSYS}) {
        # A file system without hard links: check, then rename.
        check_output($path, 0);
        rename($tmp, $path) or fail("$shown: rename: $!");
    }
    else {
        fail("$shown: link: $!");
    }
    delete $TEMPS{$tmp};
    # The new name itself survives a crash once its directory is synced.
    my ($dir) = split_path($path);
    if (sysopen(my $dh, $dir eq '' ? '.' : $dir, O_RDONLY)) {
        $dh->sync;
        close $dh;
    }
}

# Write $bytes to the new file $path (mode $mode), never in place.
sub write_bytes_file {
    my ($path, $force, $mode, $bytes) = @_;
    my $shown = show($path);
    my $tmp = temp_name($path);
    sysopen(my $fh, $tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, 0600)
        or fail("$shown: cannot create a file beside it: $!");
    $TEMPS{$tmp} = 1;
    chmod($mode, $fh) or fail("$shown: chmod: $!");    # exactly, whatever the umask
    my $done = 0;
    while ($done < length $bytes) {
        my $n = syswrite($fh, $bytes, 1 << 20, $done);
        next if !defined $n && $!{EINTR};
        fail("$shown: write error: $!") if !defined $n;
        $done += $n;
    }
    $fh->sync && close($fh) or fail("$shown: write error: $!");
    install($tmp, $path, $force);
}

# A new filter file at $path made by $make->($tmp), a library call that
# creates the file $tmp; $then->($f) may fill it before it gets its name.
# The library's complaints that name no file are about $subject (shown as
# is; default: $path).
sub make_filter_file {
    my ($path, $force, $make, $then, $subject) = @_;
    my $tmp = temp_name($path);
    $TEMPS{$tmp} = 1;
    my $f = eval { $make->($tmp) };
    if (!$f) {
        my $err = $@;
        die $err if ref $err eq 'HASH';
        my $msg = library_message($err);
        # Whatever the library's words for a filter beyond its largest
        # size, say "too large".
        $msg = "too large: $msg" if $msg =~ /2\^38/ && $msg !~ /too large/;
        $msg =~ s/\bpass max_bytes\b/pass --max-bytes/;    # deserialize's option, import's words
        fail(index($msg, $tmp) >= 0 || !defined $subject
            ? about($tmp, $msg, $path) : "$subject: $msg");
    }
    $then->($f) if $then;
    try_library($tmp, sub { $f->sync }, $path);
    install($tmp, $path, $force);
    return $f;
}

# --- reading lines in batches ----------------------------------------------------------

# Calls $code->(\@lines) with batches of at most $size lines, each without
# its newline; every batch is handled as soon as its bytes have been read, so
# a slow producer's lines come out without waiting for a full batch.
sub each_batch {
    my ($fh, $size, $code) = @_;
    binmode $fh;
    my $buf = '';
    while (1) {
        my $n = sysread($fh, $buf, $CHUNK, length $buf);
        fail("read error: $!") if !defined $n && !$!{EINTR};
        next if !defined $n;
        my @lines;
        if ($n == 0) {
            last if $buf eq '';
            @lines = ($buf);    # the last line, without a newline
            $buf = '';
        }
        else {
            my $end = rindex($buf, "\n");
            next if $end < 0;
            my $head = substr($buf, 0, $end + 1, '');
            chop $head;
            @lines = length $head ? split(/\n/, $head, -1) : ('');
        }
        while (@lines) {
            $code->([splice @lines, 0, $size]);
        }
        last if $n == 0;
    }
}

sub write_out {
    my ($fh, @data) = @_;
    print {$fh} @data or fail("write error: $!");
}

sub close_stdout {
    close STDOUT or fail("write error: $!");
}

# --- overfull filters ------------------------------------------------------------------------

# The warning for a filter holding more items than its capacity, or undef;
# $s: its stats.
sub overfull_warning {
    my ($s, $file) = @_;
    my $name = show($file);
    my $fpp = sprintf('%.3g', $s->{estimated_fpp});
    return "warning: $name has every bit set: it holds more than its capacity $s->{capacity}"
        . " and every query now answers present"
        if $s->{bits_set} >= $s->{bits};
    return if !$s->{overfull};
    return "warning: $name holds about $s->{count} items, more than its capacity"
        . " $s->{capacity}: false positives now estimated at $fpp (sized for $s->{fp_rate})";
}

# A check to call after each batch and, with $final, at the end: warns once
# when the filter is overfull. Counting the bits costs a pass over the whole
# filter, so between batches it runs only now and then (see $OVERFULL_EVERY).
sub overfull_watch {
    my ($f, $file) = @_;
    my ($warned, $last, $took) = (0, Time::HiRes::time(), 0);
    return sub {
        my ($final) = @_;
        return if $warned;
        my $start = Time::HiRes::time();
        return if !$final
            && ($start - $last < $OVERFULL_EVERY || $start - $last < 20 * $took);
        my $warning = overfull_warning(try_library($file, sub { $f->stats }), $file);
        $last = Time::HiRes::time();
        $took = $last - $start;
        return if !defined $warning;
        say_err($warning);
        $warned = 1;
    };
}

# --- commands --------------------------------------------------------------------------------

# The module's window options from --window D and --generations G.
sub window_opts {
    my ($o) = @_;
    my %opts;
    if (defined $o->{window}) {
        my ($secs, $error) = Data::BloomFilter::Shared::Args::duration($o->{window});
        usage_error("--window: $error") if !defined $secs;
        $opts{window} = $secs;
    }
    if (defined $o->{generations}) {
        usage_error('--generations needs --window') if !defined $o->{window};
        usage_error("--generations must be an integer from 2 to 16, not '$o->{generations}'")
            if $o->{generations} !~ /\A[0-9]{1,2}\z/
            || $o->{generations} < 2 || $o->{generations} > 16;
        $opts{generations} = 0 + $o->{generations};
    }
    return %opts;
}

sub cmd_create {
    my ($args) = @_;
    my $o = options($args, 'capacity|n=s', 'fp-rate|p=s', 'mode=s', 'seed=s', 'force|f', 'layout=s',
        'window=s', 'generations=s', 'grow=s', 'max-capacity=s');
    want_args('create', $args, 1, 1, 'FILE');
    my ($file) = @$args;
    usage_error('create: --capacity is required') if !defined $o->{capacity};
    my $capacity = count_arg('capacity', $o->{capacity}, 2**63,
        'a filter has at most 2^38 bits, 32 GiB');
    my $fp_rate = $o->{'fp-rate'} // $Data::BloomFilter::Shared::Args::DEFAULT_FP_RATE;
    usage_error("--fp-rate must be a number between 0 and 1 (exclusive), not '$fp_rate'")
        if !defined Data::BloomFilter::Shared::Args::fp_rate_text($fp_rate);
    my %opts = (mode => defined $o->{mode} ? mode_arg($o->{mode}) : $Data::BloomFilter::Shared::Args::DEFAULT_MODE);
    if (defined $o->{seed}) {
        usage_error("--seed must be an integer between 0 and 2**64-1, not '$o->{seed}'")
            if $o->{seed} !~ /\A[0-9]+\z/;
        $opts{seed} = $o->{seed};
    }
    if (defined $o->{layout}) {
        usage_error('--layout must be ' . Data::BloomFilter::Shared::Args::layout_choice()
            . ", not '$o->{layout}'")
            if !grep { $o->{layout} eq $_ } Data::BloomFilter::Shared::Args::layout_names();
        $opts{layout} = $o->{layout};
    }
    %opts = (%opts, window_opts($o));
    if (defined $o->{grow}) {
        usage_error("--grow must be an integer from 2 to 16, not '$o->{grow}'")
            if $o->{grow} !~ /\A[0-9]{1,2}\z/ || $o->{grow} < 2 || $o->{grow} > 16;
        $opts{grow} = 0 + $o->{grow};
    }
    if (defined $o->{'max-capacity'}) {
        usage_error('--max-capacity needs --grow') if !defined $o->{grow};
        $opts{max_capacity} = count_arg('max-capacity', $o->{'max-capacity'}, 2**63,
            'the most items the filter may take');
    }
    check_output($file, $o->{force});
    make_filter_file($file, $o->{force}, sub { $C->new($_[0], $capacity, 0 + $fp_rate, \%opts) });
    return $EXIT_OK;
}

# add_many with one 0/1 per item.
sub add_each {
    my ($f, $batch) = @_;
    my @was_new;
    $f->add_many($batch, \@was_new);
    return @was_new;
}

sub cmd_add {
    my ($args) = @_;
    my $o = options($args, 'print-new', 'batch=s');
    want_args('add', $args, 1, 1, 'FILE');
    my ($file) = @$args;
    my $size = defined $o->{batch} ? count_arg('batch', $o->{batch}, $MAX_BATCH, "at most $MAX_BATCH") : $BATCH;
    my $f = open_writable($file);
    my $overfull = overfull_watch($f, $file);
    binmode STDOUT;
    my ($lines, $new) = (0, 0);
    each_batch(\*STDIN, $size, sub {
        my ($batch) = @_;
        if ($o->{'print-new'}) {
            my @was_new = try_library($file, sub { add_each($f, $batch) });
            my @out = map { $was_new[$_] ? "$batch->[$_]\n" : () } 0 .. $#$batch;
            $new += @out;
            write_out(\*STDOUT, @out) if @out;
            STDOUT->flush or fail("write error: $!");
        }
        else {
            $new += try_library($file, sub { scalar $f->add_many($batch) });
        }
        $lines += @$batch;
        progress('add: ' . plural($lines, 'line') . ", $new new");
        $overfull->(0);
    });
    progress_done();
    close_stdout();
    say_err(sprintf('%s: %s, %d new, %d probably seen before',
        show($file), plural($lines, 'line'), $new, $lines - $new))
        if !$o->{'print-new'} && !$o->{quiet};
    $overfull->(1);
    return $EXIT_OK;
}

sub cmd_check {
    my ($args) = @_;
    my $o = options($args, 'present', 'absent');
    want_args('check', $args, 1, 1, 'FILE');
    usage_error('check: --present and --absent exclude each other')
        if $o->{present} && $o->{absent};
    my ($file) = @$args;
    my $f = open_filter($file, 0);
    binmode STDOUT;
    my ($lines, $printed, $present) = (0, 0, 0);
    each_batch(\*STDIN, $BATCH, sub {
        my ($batch) = @_;
        my @hit = try_library($file, sub { $f->contains_many($batch) });
        my @out;
        for my $i (0 .. $#$batch) {
            $present++ if $hit[$i];
            if ($o->{present} || $o->{absent}) {
                push @out, "$batch->[$i]\n" if $o->{present} ? $hit[$i] : !$hit[$i];
            }
            else {
                push @out, "$batch->[$i]\t" . ($hit[$i] ? 'present' : 'absent') . "\n";
            }
        }
        $lines += @$batch;
        $printed += @out;
        write_out(\*STDOUT, @out) if @out;
        STDOUT->flush or fail("write error: $!");
        progress('check: ' . plural($lines, 'line') . ", $present present");
    });
    progress_done();
    close_stdout();
    return $printed ? $EXIT_OK : $EXIT_NONE;
}

sub human_bytes {
    my ($n) = @_;
    my @units = qw(bytes KiB MiB GiB TiB);
    my $u = 0;
    while ($n >= 1024 && $u < $#units) { $n /= 1024; $u++ }
    return $u ? sprintf('%.1f %s', $n, $units[$u]) : plural($n, 'byte');
}

sub cmd_info {
    my ($args) = @_;
    my $o = options($args, 'json');
    want_args('info', $args, 1, 1, 'FILE');
    my ($file) = @$args;
    my $f = open_filter($file, 0);
    my $s = try_library($file, sub { $f->stats });
    my @keys = qw(capacity fp_rate bits hashes seed bits_set count fill_ratio
        estimated_fpp ops mmap_size frozen readonly layout);
    push @keys, qw(window generations generation generation_start) if $s->{generations};
    push @keys, qw(grow stages max_capacity) if $s->{grow};
    if ($o->{json}) {
        require JSON::PP;
        my %out = (file => $file);
        for my $k (@keys) {
            my $v = $s->{$k};
            $out{$k} = $k eq 'frozen' || $k eq 'readonly'
                ? ($v ? JSON::PP::true() : JSON::PP::false())
                : $k eq 'seed' ? "$v" =~ /\A[0-9]+\z/ && length "$v" < 16 ? 0 + $v : "$v"
                : $k eq 'layout' ? "$v"
                : !defined $v ? undef
                : $k eq 'window' ? 0 + Data::BloomFilter::Shared::Args::duration_text($v)
                : 0 + $v;
        }
        # A filter that grows: each stage's capacity, bits, hashes, fill.
        $out{stage_info} = [map { my $st = $_; +{ map { ($_ => 0 + $st->{$_}) } keys %$st } } @{ $s->{stage_info} }]
            if $s->{grow};
        write_out(\*STDOUT, JSON::PP->new->canonical->encode(\%out), "\n");
    }
    else {
        my %shown = (
            %$s,
            bits      => "$s->{bits} (" . human_bytes($s->{bits} / 8) . ')',
            mmap_size => "$s->{mmap_size} (" . human_bytes($s->{mmap_size}) . ')',
            frozen    => $s->{frozen} ? 'yes' : 'no',
            readonly  => $s->{readonly} ? 'yes' : 'no',
            $s->{grow}
            # Each stage: the new items counted into it of its capacity.
            ? (stages => "$s->{stages} (" . join(', ',
                    map { "$_->{fill}/$_->{capacity}" } @{ $s->{stage_info} }) . ' items)',
                max_capacity => $s->{max_capacity} // 'none')
            : (),
            $s->{generations}
            # The window as it was given (2 s in 3 steps of whole
            # nanoseconds reads back as 2.000000001).
            ? (window => defined $s->{window}
                ? Data::BloomFilter::Shared::Args::duration_text($s->{window}) . ' s'
                : 'none (steps only when rotated)',
                generation_start => defined $s->{generation_start}
                ? do {
                    my @t = gmtime $s->{generation_start};
                    sprintf('%04d-%02d-%02dT%02d:%02d:%02dZ', $t[5] + 1900, $t[4] + 1, @t[3, 2, 1, 0]);
                }
                : '-')
            : (),
        );
        write_out(\*STDOUT, sprintf("%-14s %s\n", 'file', show($file)));
        write_out(\*STDOUT, sprintf("%-14s %s\n", $_, $shown{$_})) for @keys;
    }
    close_stdout();
    my $warning = overfull_warning($s, $file);
    say_err($warning) if defined $warning;
    return $EXIT_OK;
}

sub cmd_freeze {
    my ($args) = @_;
    my $o = options($args);
    want_args('freeze', $args, 1, 1, 'FILE');
    my ($file) = @$args;
    my $f = open_filter($file, 1);
    if ($f->frozen) {
        say_err(show($file) . ': already frozen') if !$o->{quiet};
        return $EXIT_OK;
    }
    try_library($file, sub { $f->freeze; $f->sync });
    return $EXIT_OK;
}

sub cmd_export {
    my ($args) = @_;
    my $o = options($args, 'output|o=s', 'force|f', 'mode=s', 'format=s');
    want_args('export', $args, 1, 1, 'FILE');
    my ($file) = @$args;
    my $out = $o->{output};
    my @format;
    if (defined $o->{format}) {
        usage_error("export: --format must be 'datasketches' (or left out for the module's own bytes), not "
                . show($o->{format}))
            if $o->{format} ne 'datasketches';
        @format = (format => 'datasketches');
    }
    usage_error('export: --force and --mode apply to -o OUT only')
        if !defined $out && ($o->{force} || defined $o->{mode});
    my $mode = defined $o->{mode} ? mode_arg($o->{mode}) : $Data::BloomFilter::Shared::Args::DEFAULT_MODE;
    if (defined $out) {
        check_output($out, $o->{force});    # before any work
    }
    elsif (-t STDOUT) {
        fail('export: refusing to write binary data to a terminal (use -o OUT or redirect)');
    }
    my $f = open_filter($file, 0);
    my $bytes = try_library($file, sub { $f->serialize(@format) });
    undef $f;
    if (defined $out) {
        write_bytes_file($out, $o->{force}, $mode, $bytes);
    }
    else {
        binmode STDOUT;
        write_out(\*STDOUT, $bytes);
        close_stdout();
    }
    return $EXIT_OK;
}

sub cmd_import {
    my ($args) = @_;
    my $o = options($args, 'input|i=s', 'mode=s', 'force|f', 'window=s', 'generations=s', 'max-bytes=s');
    want_args('import', $args, 1, 1, 'FILE');
    my ($file) = @$args;
    my $mode = defined $o->{mode} ? mode_arg($o->{mode}) : $Data::BloomFilter::Shared::Args::DEFAULT_MODE;
    my %window = window_opts($o);
    my $max = $o->{'max-bytes'};
    if (defined $max) {
        my $n = Data::BloomFilter::Shared::Args::uint64($max);
        usage_error('--max-bytes must be a positive integer (the most bytes the new filter may need), got '
                . show($max))
            if !defined $n || $n eq '0';
        $window{max_bytes} = $n;
    }
    check_output($file, $o->{force});    # before reading anything
    my $in = \*STDIN;
    my $from = 'standard input';
    if (defined $o->{input}) {
        open($in, '<', $o->{input}) or fail(show($o->{input}) . ": $!");
        $from = show($o->{input});
    }
    binmode $in;
    my $bytes = do { local $/; <$in> };
    fail("$from: read error: $!") if !defined $bytes && $!;
    $bytes //= '';
    fail("$from: empty input (expected the output of '$ME export')") if $bytes eq '';
    make_filter_file($file, $o->{force},
        sub { $C->deserialize($bytes, { path => $_[0], mode => $mode, %window }) }, undef, $from);
    return $EXIT_OK;
}

sub cmd_merge {
    my ($args) = @_;
    my $o = options($args, 'mode=s');
    want_args('merge', $args, 2, undef, 'OUT and at least one IN');
    my ($out, @in) = @$args;
    my @filters = map { open_filter($_, 0) } @in;
    my $merge_all = sub {
        my ($target) = @_;
        check_compatible($target, $out, \@filters, \@in);    # before changing anything
        for my $i (0 .. $#in) {
            try_library($in[$i], sub { $target->merge($filters[$i]) });
            progress('merge: ' . ($i + 1) . ' of ' . @in . ' merged');
        }
        progress_done();
    };
    if (-e $out || -l $out) {
        # An existing OUT is changed in place: every process using it sees
        # the merged bits, and merging is safe while they add.
        $merge_all->(open_writable($out));
        return $EXIT_OK;
    }
    # Refuse incompatible inputs before creating anything.
    check_compatible($filters[0], $in[0], \@filters, \@in);
    my $first = $filters[0];
    my %opts = (
        mode => defined $o->{mode} ? mode_arg($o->{mode}) : $Data::BloomFilter::Shared::Args::DEFAULT_MODE,
        seed => $first->seed,
        layout => $first->layout,
        # A datasketches filter's size need not follow from its capacity
        # and rate (given bits and hashes, or read from an image): copy it.
        $first->layout eq 'datasketches' ? (bits => $first->bits, hashes => $first->hashes) : (),
        # A filter that grows: OUT grows alike, from the same first stage
        # (its capacity is the first stage's, not the grown total).
        $first->grow ? (grow => $first->grow) : (),
        defined $first->max_capacity ? (max_capacity => $first->max_capacity) : (),
    );
    my $capacity = $first->grow ? $first->stats->{stage_info}[0]{capacity} : $first->capacity;
    make_filter_file($out, 0,
        sub { $C->new($_[0], $capacity, $first->fp_rate, \%opts) }, $merge_all);
    return $EXIT_OK;
}

sub check_compatible {
    my ($target, $name, $filters, $names) = @_;
    for my $i (0 .. $#$filters) {
        my $f = $filters->[$i];
        next if $target->is_compatible($f);
        fail(sprintf('%s: not compatible with %s (layout %s vs %s)',
            $names->[$i], $name, $f->layout, $target->layout))
            if $f->layout ne $target->layout;
        fail(sprintf('%s: not compatible with %s (bits %s vs %s, hashes %s vs %s, seeds %s)',
            show($names->[$i]), show($name), $f->bits, $target->bits, $f->hashes,
            $target->hashes, $f->seed eq $target->seed ? 'equal' : 'differ'));
    }
}

# Convert a filter file of the original C module (0.04), or of this
# module's format 2, in place.
sub cmd_upgrade {
    my ($args) = @_;
    my $o = options($args);
    want_args('upgrade', $args, 1, 1, 'FILE');
    my ($file) = @$args;
    my $r = try_library($file, sub { $C->upgrade($file) });
    printf STDERR "%s: %s: converted from format %d of %s: %d bits, %d hashes, capacity %d, fp_rate %g, %d bits set\n",
        $ME, $file, $r->{from_version}, ($r->{earlier_release} ? 'an earlier release' : '0.04'),
        @$r{qw(bits hashes capacity fp_rate bits_set)}
        if !$o->{quiet};
    return $EXIT_OK;
}

my %COMMANDS = (
    create => \&cmd_create,
    add    => \&cmd_add,
    check  => \&cmd_check,
    info   => \&cmd_info,
    freeze => \&cmd_freeze,
    export => \&cmd_export,
    import => \&cmd_import,
    merge  => \&cmd_merge,
    upgrade => \&cmd_upgrade,
);

sub main {
    my @args = @_;
    usage_error('missing command') if !@args;
    my $cmd = shift @args;
    help() if $cmd =~ /\A(?:-h|--help|help)\z/;
    if ($cmd eq '--version') {
        print "$ME (Data::BloomFilter::Shared) $Data::BloomFilter::Shared::VERSION\n";
        close_stdout();
        return $EXIT_OK;
    }
    my $run = $COMMANDS{$cmd} or usage_error("unknown command '$cmd'");
    $progress_on = -t STDERR;
    my $status = $run->(\@args);
    return $status;
}

# Runs the command line @args (what follows the command's name); returns
# the exit code. Errors have been reported on stderr by then.
sub run {
    my @args = @_;
    my %handlers = signal_handlers();
    local @SIG{keys %handlers} = values %handlers;
    my $getopt = Getopt::Long::Configure(qw(no_ignore_case bundling permute));
    ($progress_on, $progress_shown, $progress_last) = (0, 0, 0);
    my $status = eval { main(@args) };
    my $err = $@;
    Getopt::Long::Configure($getopt);
    return $status if defined $status;
    return $err->{status} if ref $err eq 'HASH' && defined $err->{status};
    remove_temps();
    my $msg = ref $err eq 'HASH' ? $err->{message} : library_message($err);
    say_err($msg);
    return $EXIT_ERROR;
}

1;

__END__

=head1 NAME

Data::BloomFilter::Shared::CLI - the code of the bloomfilter-shared command (internal)

=head1 SYNOPSIS

    exit Data::BloomFilter::Shared::CLI::run(@ARGV);

=head1 DESCRIPTION

Internal to the distribution: what L<bloomfilter-shared> runs. C<run>
takes the command line's arguments and returns the exit status; the
command's behaviour is described in its manual. No part of it is an API.

=cut
