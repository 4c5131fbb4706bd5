# The manual's examples and its function reference, checked against a
# server (bash test/run docs):
#
#  - every ```sql run block of README.md and docs/**/*.md runs, in order, one
#    psql session per file, on a throwaway cluster of its own with pg_durable
#    preloaded (pg_durable.database = 'mydb', as the README's install says);
#    a block fails the file when it errors, or when the ```output block right
#    after it differs from what psql printed (runs of spaces and of dashes
#    count as one, so column widths do not matter; <id> stands for an
#    instance id, <any> for any text);
#  - the functions of schema df and the operators of the extension are
#    exactly those docs/reference/functions.md documents (a heading
#    "### df.name(types)" per function, "### `op` operator (left, right)"
#    per operator), and the settings of pg_settings exactly those of the
#    table of docs/reference/settings.md.
#
# The pages of docs/ continue from the README's quick start: its first
# block runs before each of them, in the same session.
#
# Examples that call a service call http://localhost:8765, where the manual
# tells the reader to start test/http_server.pl; this test starts it on a
# free port and puts that port into the examples instead.
#
# PG_DURABLE_DOCS is the directory holding README.md and docs/ (test/run
# passes a copy the postgres user can read); DOCS_FILES restricts the run to
# some files (paths relative to it).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use File::Find;
use File::Basename qw(dirname);
use PgDurableTest qw(start_http_server);

my $docs = $ENV{PG_DURABLE_DOCS} or die "PG_DURABLE_DOCS is not set";

# --- the files and their blocks ---------------------------------------------
my @files;
if ($ENV{DOCS_FILES})
{
	@files = split ' ', $ENV{DOCS_FILES};
}
else
{
	push @files, 'README.md';
	find({ wanted => sub { push @files, substr($File::Find::name, length($docs) + 1) if /\.md$/ }, no_chdir => 1 },
		"$docs/docs")
	  if -d "$docs/docs";
	@files = ('README.md', sort grep { $_ ne 'README.md' } @files);
}

# ([{ sql => text, line => n, output => text or undef }], not-run count)
sub blocks_of
{
	my ($file) = @_;
	open my $fh, '<', "$docs/$file" or die "$file: $!";
	my @lines = <$fh>;
	close $fh;
	my (@blocks, $cur, $kind, $notrun);
	$notrun = 0;
	my $last_end = -10;
	for my $i (0 .. $#lines)
	{
		my $l = $lines[$i];
		if (!defined $kind)
		{
			next unless $l =~ /^\s*```(.*?)\s*$/;
			my $info = $1;
			if ($info eq 'sql run')
			{
				$kind = 'sql';
				$cur = { sql => '', line => $i + 1 };
			}
			elsif ($info eq 'output' && @blocks && !defined $blocks[-1]{output}
				&& join('', @lines[ $last_end + 1 .. $i - 1 ]) =~ /^\s*$/)
			{
				$kind = 'output';
				$cur = $blocks[-1];
				$cur->{output} = '';
			}
			else
			{
				$notrun++ if $info =~ /^sql\b/;
				$kind = 'other';
			}
			next;
		}
		if ($l =~ /^\s*```\s*$/)
		{
			push @blocks, $cur if $kind eq 'sql';
			$last_end = $i if $kind eq 'sql';
			undef $kind;
			next;
		}
		$cur->{sql} .= $l if $kind eq 'sql';
		$cur->{output} .= $l if $kind eq 'output';
	}
	return (\@blocks, $notrun);
}

sub normalize
{
	my ($text) = @_;
	my @l = map { s/\s+$//r } split /\n/, $text;
	shift @l while @l && $l[0] eq '';
	pop @l while @l && $l[-1] eq '';
	return join("\n", map { my $x = $_; $x =~ s/ +/ /g; $x =~ s/-+/-/g; $x =~ s/^ //; $x } @l);
}

sub output_matches
{
	my ($got, $want) = @_;
	my @g = split /\n/, normalize($got);
	my @w = split /\n/, normalize($want);
	return 0 unless @g == @w;
	for my $i (0 .. $#w)
	{
		my $re = join '', map {
			$_ eq '<id>' ? '[0-9a-f]{8}' : $_ eq '<any>' ? '.*' : quotemeta($_)
		} split /(<id>|<any>)/, $w[$i];
		return 0 unless $g[$i] =~ /^$re$/;
	}
	return 1;
}

# --- one cluster per file ----------------------------------------------------
my $http_base = start_http_server();
my ($total_blocks, $total_files, $total_notrun) = (0, 0, 0);

sub docs_cluster
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pg_durable'
pg_durable.database = 'mydb'
pg_durable.workers = 2
pg_durable.http_allow_private = on
max_worker_processes = 16
log_min_messages = warning
});
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE mydb');
	return $node;
}

# The pages of docs/ continue from the README's quick start: its first block
# (the extension, the role alice, SET ROLE alice) runs before each of them.
my ($readme_blocks) = blocks_of('README.md');
my $prelude = @$readme_blocks ? $readme_blocks->[0]{sql} : '';

my $n = 0;
for my $file (@files)
{
	my ($blocks, $notrun) = blocks_of($file);
	$total_notrun += $notrun;
	next unless @$blocks;
	$total_files++;
	$total_blocks += @$blocks;
	my $node = docs_cluster('docs' . ++$n);

	my $script = "\\set ON_ERROR_STOP 1\n";
	$script .= "\\echo '\@\@prelude\@\@'\n$prelude" if $file ne 'README.md';
	for my $i (0 .. $#$blocks)
	{
		my $sql = $blocks->[$i]{sql};
		$sql =~ s{http://localhost:8765}{$http_base}g;
		$script .= "\\echo '\@\@block $i\@\@'\n$sql";
	}
	$script .= "\\echo '\@\@end\@\@'\n";
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'psql', '-X', '-d', $node->connstr('mydb'), '-f', '-' ],
		'<', \$script, '>', \$out, '2>', \$err,
		IPC::Run::timeout(600));

	# the output of each block, by its marker
	my %got;
	my $last = -1;
	my @parts = split /^\@\@(block \d+|end|prelude)\@\@\n/m, $out;
	shift @parts;
	while (@parts)
	{
		my ($tag, $text) = (shift @parts, shift @parts // '');
		if ($tag =~ /block (\d+)/) { $got{$1} = $text; $last = $1; }
		elsif ($tag eq 'end') { $last = scalar @$blocks; }
	}
	if (!$ok || $last < @$blocks)
	{
		my $b = $blocks->[ $last < 0 ? 0 : $last ];
		fail("$file: the block at line $b->{line} runs");
		diag("psql said:\n$err\nthe block:\n$b->{sql}");
	}
	else
	{
		pass("$file: " . scalar(@$blocks) . ' blocks run');
	}
	for my $i (0 .. $#$blocks)
	{
		my $b = $blocks->[$i];
		next unless defined $b->{output};
		last if $i > $last || ($i == $last && $last < @$blocks && !$ok);
		ok(output_matches($got{$i} // '', $b->{output}), "$file: the output shown at line $b->{line}")
		  or diag("psql printed:\n" . ($got{$i} // '') . "\nthe manual shows:\n$b->{output}");
	}
	$node->stop('fast');
}
diag("$total_blocks runnable blocks in $total_files files; $total_notrun sql blocks marked not run");

# --- every function and operator documented, nothing else -------------------
SKIP:
{
	skip 'DOCS_FILES without functions.md: no reference check', 4
	  if $ENV{DOCS_FILES} && $ENV{DOCS_FILES} !~ m{reference/functions\.md};
	my $node = docs_cluster('docs_reference');
	$node->safe_psql('mydb', 'CREATE EXTENSION pg_durable');
	my %catalog = map { $_ => 1 } split /\n/, $node->safe_psql('mydb', q{
SELECT 'df.' || p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')'
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'df'
UNION ALL
SELECT '`' || o.oprname || '` operator (' ||
       CASE WHEN o.oprleft = 0 THEN 'none' ELSE format_type(o.oprleft, NULL) END || ', ' ||
       format_type(o.oprright, NULL) || ')'
  FROM pg_operator o
  JOIN pg_depend d ON d.classid = 'pg_operator'::regclass AND d.objid = o.oid
                  AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_durable'});
	my %settings = map { $_ => 1 } split /\n/, $node->safe_psql('mydb',
		"SELECT name FROM pg_settings WHERE name LIKE 'pg\\_durable.%'");
	$node->stop('fast');

	open my $sf, '<', "$docs/docs/reference/settings.md" or die "settings.md: $!";
	my %in_table;
	while (<$sf>) { $in_table{$1} = 1 if /^\|\s*`(pg_durable\.\w+)`\s*\|/; }
	close $sf;
	is(join(' ', sort grep { !$in_table{$_} } keys %settings), '', 'every setting of pg_settings is in docs/reference/settings.md');
	is(join(' ', sort grep { !$settings{$_} } keys %in_table), '', 'docs/reference/settings.md lists no setting the server does not have');

	open my $fh, '<', "$docs/docs/reference/functions.md" or die "functions.md: $!";
	my %documented;
	while (<$fh>)
	{
		$documented{$1} = 1 if /^###\s+(df\.\w+\([^)]*\))\s*$/;
		$documented{$1} = 1 if /^###\s+(`[^`]+` operator \([^)]*\))\s*$/;
	}
	close $fh;
	my @missing = sort grep { !$documented{$_} } keys %catalog;
	my @extra = sort grep { !$catalog{$_} } keys %documented;
	is(join("\n", @missing), '', 'every function of schema df and operator of the extension is in docs/reference/functions.md');
	is(join("\n", @extra), '', 'docs/reference/functions.md documents nothing the extension does not create');
}

done_testing();
