#!/usr/bin/env perl
# check-layering: enforce the include layering of docs/design/architecture.md §7.
#
#   scripts/check-layering                 check this repository's src/
#   scripts/check-layering --root DIR      check DIR/src/ (the fixtures of test/layering/)
#
# Reads only the #include "..." lines of src/**/*.c and src/**/*.h and checks:
#
#  1. layers: the folders of src/ are ordered, bottom to top,
#         common graph results dsl core store engine steps orchestration api monitor worker
#     and src/pg_durable.c (the module entry point) sits above them all.  A file may
#     include headers of its own folder or of folders below it, never of one above it.
#     A project header must be named with its folder ("engine/engine.h", not
#     "engine.h", not "../engine/engine.h"); a file in a folder outside that order,
#     or directly in src/ other than pg_durable.c, is an error too.
#  2. no cycles: a module is a file's path under src/ without its extension
#     (src/store/types.c and src/store/types.h are module store/types).  Module A
#     depends on module B when a file of A includes B's header.  Any cycle
#     A -> B -> ... -> A with A != B fails, inside one folder too.
#  3. no missing headers: an included project header must exist.
#
# With --symbols it also reads the built objects (src/**/*.o, as the Makefile
# leaves them beside their sources) with nm: what each defines and what it
# leaves undefined.  A file calls another when it uses a symbol the other
# defines, and:
#
#  4. no upward calls: a file may use symbols of its own folder or of the folders
#     below it, never of one above it (a folder below reaches one above only
#     through hooks, function pointers installed at load time);
#  5. no call cycles: any cycle of files A -> B -> ... -> A that call each other
#     fails, inside one folder too.  Includes cannot show these: a file may call
#     a function of another through a header of a third.
#
# --symbols needs every .c built into an .o newer than it (make first); a missing
# or stale object is a usage error (exit 2).
#
# Which includes are the project's: one whose first folder is a folder of src/ or of
# the layer order.  PostgreSQL also has a common/ folder (common/base64.h ...): the
# build puts -Isrc first, so "common/x.h" is ours when src/common/x.h exists and
# PostgreSQL's otherwise.  When the server's headers are known (--pg-include DIR, or
# found with $PG_CONFIG / pg_config --includedir-server) a "common/x.h" found in
# neither place is reported missing; without them it is taken to be PostgreSQL's.
# A folder-less include ("postgres.h") is PostgreSQL's unless a project header of
# that name exists somewhere under src/, which is then an error.
#
# On failure prints one line per violation, "file:line: what" (a cycle with all its
# edges), and exits 1; on success prints
#   layering: N files, M modules, no upward includes, no cycles
# and exits 0.  Usage errors exit 2.  Uses core Perl only.

use strict;
use warnings;
use File::Basename qw(dirname);
use File::Find ();
use Cwd qw(abs_path);
use Getopt::Long qw(GetOptions);

my @ORDER = qw(common graph results dsl core store engine steps orchestration api monitor worker);
my $ENTRY = 'pg_durable.c';		# above every folder
my %RANK;
@RANK{@ORDER} = (0 .. $#ORDER);
my $TOP = scalar @ORDER;
my $MAX_CYCLES = 200;			# per strongly connected component

sub usage
{
	my ($rc) = @_;
	my $fh = $rc ? \*STDERR : \*STDOUT;
	print $fh <<"EOF";
usage: check-layering [--root DIR] [--pg-include DIR | --no-pg-include] [--symbols]

Checks the #include "..." lines of DIR/src/**/*.{c,h} against the layer order
  @ORDER (then src/$ENTRY)
and reports upward includes, include cycles between modules, missing project
headers and project headers included without their folder.

  --root DIR         repository root holding src/ (default: the one this script is in)
  --pg-include DIR   PostgreSQL's server headers, to tell a missing "common/x.h" from
                     one of PostgreSQL's (default: \$PG_CONFIG --includedir-server)
  --no-pg-include    do not look for PostgreSQL's headers
  --symbols          also read the built objects' symbols (nm): no upward calls,
                     no call cycles between files (build first)
  --help             this text
EOF
	exit $rc;
}

my ($root, $pg_include, $no_pg_include, $symbols, $help);
GetOptions(
	'root=s'        => \$root,
	'pg-include=s'  => \$pg_include,
	'no-pg-include' => \$no_pg_include,
	'symbols'       => \$symbols,
	'help|h'        => \$help,
) or usage(2);
usage(0) if $help;
usage(2) if @ARGV;

$root = dirname(abs_path($0)) . '/..' unless defined $root;
my $src = "$root/src";
unless (-d $src)
{
	print STDERR "check-layering: no src/ folder in $root\n";
	exit 2;
}

if ($no_pg_include)
{
	$pg_include = undef;
}
elsif (defined $pg_include)
{
	unless (-d $pg_include)
	{
		print STDERR "check-layering: --pg-include $pg_include is not a folder\n";
		exit 2;
	}
}
else
{
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	my $dir = `$pg_config --includedir-server 2>/dev/null`;
	chomp $dir if defined $dir;
	$pg_include = ($? == 0 && defined $dir && -d $dir) ? $dir : undef;
}

# --- the files -------------------------------------------------------------------

my @files;						# paths relative to src/, sorted
File::Find::find(
	{
		no_chdir => 1,
		wanted   => sub {
			return unless -f $_ && /\.[ch]\z/;
			(my $rel = $File::Find::name) =~ s{\A\Q$src\E/}{};
			push @files, $rel;
		},
	},
	$src);
@files = sort @files;

my %is_file = map { $_ => 1 } @files;
my %by_basename;				# "engine.h" -> [ "engine/engine.h", ... ]
for my $f (@files)
{
	next unless $f =~ m{([^/]+\.h)\z};
	push @{ $by_basename{$1} }, $f;
}
my %src_folder = map { m{\A([^/]+)/} ? ($1 => 1) : () } @files;

sub module_of
{
	my ($path) = @_;
	(my $m = $path) =~ s/\.[^.\/]+\z//;
	return $m;
}

sub folder_of
{
	my ($path) = @_;
	return $path =~ m{\A([^/]+)/} ? $1 : undef;
}

# the layer of a file of src/, or undef when it is in none
sub rank_of_file
{
	my ($path) = @_;
	my $folder = folder_of($path);
	return defined $folder ? $RANK{$folder} : ($path eq $ENTRY ? $TOP : undef);
}

# --- read the includes -------------------------------------------------------------

my @violations;					# [ file, line, text ]
my %modules;					# module -> 1
my %edge;						# "A\0B" -> "src/file:line" of the first include of B by A
my %succ;						# A -> { B => 1 }
my $upward = 0;

sub violation
{
	my ($file, $line, $text) = @_;
	push @violations, [ "src/$file", $line, $text ];
}

for my $file (@files)
{
	my $from = module_of($file);
	$modules{$from} = 1;
	my $rank = rank_of_file($file);
	my $folder = folder_of($file);

	if (!defined $rank)
	{
		violation($file, 1,
			defined $folder
			  ? "folder $folder/ is not in the layer order (@ORDER)"
			  : "only $ENTRY may sit directly in src/; put this file in a layer folder");
	}

	open(my $fh, '<', "$src/$file") or die "check-layering: cannot read src/$file: $!\n";
	while (my $text = <$fh>)
	{
		next unless $text =~ /^\s*#\s*include\s*"([^"]+)"/;
		my $inc = $1;
		my $line = $.;

		# a path with . or .. components, or an absolute one
		if ($inc =~ m{\A/} || grep { $_ eq '.' || $_ eq '..' } split m{/}, $inc)
		{
			violation($file, $line,
				"include \"$inc\" by a relative path: name the header from src/, with its folder");
			next;
		}

		my $hfolder = folder_of($inc);
		if (!defined $hfolder)
		{
			# folder-less: PostgreSQL's, unless a project header has that name
			my @cands = @{ $by_basename{$inc} // [] };
			push @cands, "$folder/$inc" if defined $folder && $is_file{"$folder/$inc"};
			if (@cands)
			{
				my %seen;
				my $want = join ' or ', map { "\"$_\"" } grep { !$seen{$_}++ } sort @cands;
				violation($file, $line,
					"project header \"$inc\" included without its folder: write $want");
			}
			next;
		}

		next unless exists $RANK{$hfolder} || $src_folder{$hfolder};

		if (!$is_file{$inc})
		{
			if ($hfolder eq 'common')
			{
				# PostgreSQL's own common/ headers come after -Isrc
				next if !defined $pg_include || -f "$pg_include/$inc";
				violation($file, $line,
					"missing header \"$inc\": neither src/$inc nor PostgreSQL's $inc exists");
				next;
			}
			violation($file, $line, "missing header \"$inc\": src/$inc does not exist");
			next;
		}

		my $to = module_of($inc);
		if (!exists $RANK{$hfolder})
		{
			violation($file, $line,
				"includes \"$inc\" of folder $hfolder/, which is not in the layer order");
		}
		elsif (defined $rank && $RANK{$hfolder} > $rank)
		{
			$upward++;
			violation($file, $line,
				"upward include \"$inc\": $folder/ is below $hfolder/ in the layer order");
		}

		next if $to eq $from;
		my $key = "$from\0$to";
		$edge{$key} //= "src/$file:$line";
		$succ{$from}{$to} = 1;
	}
	close $fh;
}
$modules{$_} = 1 for map { keys %$_ } values %succ;

# --- cycles: strongly connected components (Tarjan), then their elementary cycles --

# cycles($succ, $site, $what): a violation for every elementary cycle of the graph
# %$succ (A -> { B => 1 }), each edge shown by $site->(A, B), which returns
# [ "src/file", line, "text" ]; $what names the edges ("include", "call").
# Returns how many cycles it reported.
sub cycles
{
	my ($succ, $site, $what) = @_;
	my %nodes = map { $_ => 1 } keys %$succ;
	$nodes{$_} = 1 for map { keys %$_ } values %$succ;
	my @sccs;
	my $index = 0;
	my (%idx, %low, %on, @stack);
	my $strong;
	$strong = sub {
		my ($v) = @_;
		$idx{$v} = $low{$v} = $index++;
		push @stack, $v;
		$on{$v} = 1;
		for my $w (sort keys %{ $succ->{$v} // {} })
		{
			if (!exists $idx{$w})
			{
				$strong->($w);
				$low{$v} = $low{$w} if $low{$w} < $low{$v};
			}
			elsif ($on{$w})
			{
				$low{$v} = $idx{$w} if $idx{$w} < $low{$v};
			}
		}
		if ($low{$v} == $idx{$v})
		{
			my @c;
			my $w;
			do
			{
				$w = pop @stack;
				$on{$w} = 0;
				push @c, $w;
			} while ($w ne $v);
			push @sccs, [ sort @c ] if @c > 1;
		}
	};
	{
		no warnings 'recursion';
		for my $v (sort keys %nodes)
		{
			$strong->($v) unless exists $idx{$v};
		}
	}

	my $n = 0;
	for my $scc (sort { $a->[0] cmp $b->[0] } @sccs)
	{
		my %in = map { $_ => 1 } @$scc;
		my @found;
		my $truncated = 0;

		# every elementary cycle once: start at its smallest module, visit only larger ones
		for my $s (@$scc)
		{
			my @path = ($s);
			my %onpath = ($s => 1);
			my $walk;
			$walk = sub {
				my ($v) = @_;
				for my $w (sort keys %{ $succ->{$v} // {} })
				{
					return if @found >= $MAX_CYCLES;
					next unless $in{$w};
					if ($w eq $s)
					{
						push @found, [ @path, $s ];
					}
					elsif ($w gt $s && !$onpath{$w})
					{
						push @path, $w;
						$onpath{$w} = 1;
						$walk->($w);
						pop @path;
						delete $onpath{$w};
					}
				}
			};
			no warnings 'recursion';
			$walk->($s);
			if (@found >= $MAX_CYCLES)
			{
				$truncated = 1;
				last;
			}
		}

		for my $cyc (sort { @$a <=> @$b || "@$a" cmp "@$b" } @found)
		{
			my @sites;
			for my $i (0 .. $#$cyc - 1)
			{
				push @sites, $site->($cyc->[$i], $cyc->[$i + 1])->[2];
			}
			my ($file, $line) = @{ $site->($cyc->[0], $cyc->[1]) };
			push @violations, [ $file, $line + 0,
				"$what cycle " . join(' -> ', @$cyc) . " (" . join('; ', @sites) . ")", 1 ];
			$n++;
		}
		if ($truncated)
		{
			my ($file, $line) = @{ $site->($found[0][0], $found[0][1]) };
			push @violations, [ $file, $line + 0,
				"$MAX_CYCLES or more $what cycles among " . join(', ', @$scc) . "; the first $MAX_CYCLES are shown", 1 ];
		}
	}
	return $n;
}

my $ncycles = cycles(\%succ, sub {
	my ($a, $b) = @_;
	my ($file, $line) = $edge{"$a\0$b"} =~ /\A(.*):(\d+)\z/;
	return [ $file, $line, "$a -> $b at " . $edge{"$a\0$b"} ];
}, 'include');

# --- calls: the built objects' symbols (--symbols) ---------------------------------

my $upward_calls = 0;
my $ncall_cycles = 0;
if ($symbols)
{
	my (%defines, %undefined);	# symbol -> module; module -> [ symbols ]
	my %cfile;					# module -> its .c file, relative to src/
	for my $file (grep { /\.c\z/ } @files)
	{
		(my $obj = "$src/$file") =~ s/\.c\z/.o/;
		unless (-f $obj && -M $obj <= -M "$src/$file")
		{
			print STDERR "check-layering: --symbols: src/$file is not built (no "
			  . "$obj newer than it): build first\n";
			exit 2;
		}
		my $m = module_of($file);
		$cfile{$m} = $file;
		open(my $nm, '-|', 'nm', $obj) or die "check-layering: cannot run nm: $!\n";
		while (my $l = <$nm>)
		{
			if ($l =~ /^\s+U\s+(\S+)$/)
			{
				push @{ $undefined{$m} }, $1;
			}
			elsif ($l =~ /^\S+\s+[TDRBGSCVW]\s+(\S+)$/)
			{
				$defines{$1} = $m;
			}
		}
		close $nm or die "check-layering: nm $obj failed\n";
	}
	my (%csucc, %cwhy);
	for my $m (sort keys %undefined)
	{
		my %seen;
		for my $sym (sort @{ $undefined{$m} })
		{
			my $to = $defines{$sym};
			next unless defined $to && $to ne $m && !$seen{"$to\0$sym"}++;
			$csucc{$m}{$to} = 1;
			push @{ $cwhy{"$m\0$to"} }, $sym;
			my ($rf, $rt) = (rank_of_file($cfile{$m}), rank_of_file($cfile{$to}));
			if (defined $rf && defined $rt && $rt > $rf)
			{
				$upward_calls++;
				violation($cfile{$m}, 1,
					"upward call: uses $sym of $to, in a folder above " . folder_of($cfile{$m}) . "/");
			}
		}
	}
	$ncall_cycles = cycles(\%csucc, sub {
		my ($a, $b) = @_;
		my @syms = @{ $cwhy{"$a\0$b"} };
		my $shown = join(', ', @syms[0 .. ($#syms < 2 ? $#syms : 2)]) . (@syms > 3 ? ', ...' : '');
		return [ "src/$cfile{$a}", 1, "$a uses $shown of $b" ];
	}, 'call');
}

# --- report ------------------------------------------------------------------------

my $nfiles = scalar @files;
my $nmodules = scalar keys %modules;
my $calls = $symbols ? ", no upward calls, no call cycles" : "";
if (!@violations)
{
	print "layering: $nfiles files, $nmodules modules, no upward includes, no cycles$calls\n";
	exit 0;
}

# the includes in file order first, then the cycles in the order found
my @includes = sort { $a->[0] cmp $b->[0] || $a->[1] <=> $b->[1] } grep { !$_->[3] } @violations;
my @cycles = grep { $_->[3] } @violations;
print "$_->[0]:$_->[1]: $_->[2]\n" for @includes, @cycles;
sub count
{
	my ($n, $what) = @_;
	return "$n $what" . ($n == 1 ? '' : 's');
}
my $other = @violations - $upward - $ncycles - $upward_calls - $ncall_cycles;
printf "layering: %d files, %d modules: %s (%s, %s, %s%d other)\n", $nfiles, $nmodules,
  count(scalar @violations, 'violation'), count($upward, 'upward include'),
  count($ncycles, 'cycle'),
  $symbols ? count($upward_calls, 'upward call') . ', ' . count($ncall_cycles, 'call cycle') . ', ' : '',
  $other;
exit 1;
