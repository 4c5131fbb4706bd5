# The upgrade path: a database created at the previous released
# version (sql/pg_durable--0.3.0.sql, frozen) with workflows under way
# (steps running, timers, SIGNAL waits) is updated with ALTER EXTENSION
# pg_durable UPDATE, and the workflows finish.  Then the updated schema must
# be the one a fresh CREATE EXTENSION gives: the schema-only binary-upgrade
# dumps of both (which list every member of the extension, with its
# privileges and comments) are compared, so that a schema change made in
# sql/pg_durable.sql without its upgrade script fails here.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/../perl";
use PgDurableTest;

my $role = $PgDurableTest::ROLE;
my $old = '0.3.0';

# the same setup in both clusters, so that the dumps can be compared
sub setup
{
	my ($node, $version) = @_;
	$node->safe_psql('postgres', qq{
CREATE EXTENSION pg_durable @{[ defined $version ? "VERSION '$version'" : '' ]};
CREATE ROLE $role LOGIN;
GRANT USAGE ON SCHEMA df TO $role;
GRANT SELECT ON df.instances, df.nodes TO $role;
GRANT CREATE ON SCHEMA public TO $role;
SELECT df.grant_usage('$role', include_http => true);
-- 0.2.6's df.loop keeps its grants and revokes, and they govern the
-- overload with continue_on_failure: callable by the role only
REVOKE EXECUTE ON FUNCTION df.loop(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION df.loop(text, text) TO $role;
-- df.list_instances gains a column (made anew) and keeps its privileges
REVOKE EXECUTE ON FUNCTION df.list_instances(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION df.list_instances(text, integer) TO $role WITH GRANT OPTION;
CREATE TABLE effects (instance_id text NOT NULL, step text NOT NULL,
                      at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON effects TO $role;
CREATE TABLE expected (instance_id text NOT NULL, step text NOT NULL,
                       PRIMARY KEY (instance_id, step));
});
	wait_engine_ready($node, 2);
	return;
}

# The schema of database postgres as pg_dump --binary-upgrade writes it
# (which, unlike a plain dump, lists the extension's members one by one, with
# their privileges and comments), without what differs between any two
# clusters: object and transaction ids, the header's random key, server
# versions, the positions of sequences, and the placeholders a dropped column
# leaves behind.  The extension's configuration tables are listed by name
# instead of by id.
sub schema_dump
{
	my ($node) = @_;
	my ($stdout, $stderr) = ('', '');
	IPC::Run::run(
		[ 'pg_dump', '--schema-only', '--binary-upgrade', '-d', $node->connstr('postgres') ],
		'<', \undef, '>', \$stdout, '2>', \$stderr)
	  or die "pg_dump failed: $stderr";
	my @out;
	for my $stmt (split /;\n/, $stdout)
	{
		next if $stmt =~ /binary_upgrade_set_next|^\s*\\(un)?restrict /m && $stmt !~ /\bCREATE\b/;
		next if $stmt =~ /SET relfrozenxid = /;
		$stmt =~ s/^.*binary_upgrade_set_next.*\n//mg;
		$stmt =~ s/^\\(un)?restrict .*\n?//mg;
		$stmt =~ s/^-- Dumped (from|by) .*\n//mg;
		# (the configuration sequences' positions are data)
		$stmt =~ s/^SELECT pg_catalog\.setval\(.*$/SELECT pg_catalog.setval(<position>)/m;
		if ($stmt =~ /pg\.dropped/)
		{
			next unless $stmt =~ /^\s*(--.*\n\s*)*CREATE TABLE/;
			$stmt =~ s/^.*pg\.dropped.*\n//mg;
			$stmt =~ s/,\n\)/\n)/;
		}
		$stmt =~ s/(binary_upgrade_create_empty_extension\('pg_durable', 'pg_catalog', false), '[^']*', .*$/$1, <version>, <config>)/m;
		push @out, $stmt;
	}
	my $config = $node->safe_psql('postgres', q{
SELECT string_agg(format('%s %s', c::regclass, cond), E'\n' ORDER BY c::regclass::text)
FROM pg_extension, unnest(extconfig, extcondition) AS u(c, cond) WHERE extname = 'pg_durable'});
	return join(";\n", @out) . "\n-- configuration tables:\n$config\n";
}

my $node = engine_cluster('upgrade', 2);
setup($node, $old);
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_durable'"),
	$old, "created at $old");
my $new = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'pg_durable'");
isnt($new, $old, "the default version ($new) is a later one");

# work under way at the old version: a finished one, steps running, timers,
# SIGNAL waits, a JOIN, and a queue waiting for an executor
my $n = 0;
my $done = start_instance($node, sprintf("df.seq('%s', '%s')", step_sql('f1', 0.1), step_sql('f2', 0.1)),
	'f1', 'f2');
$n++;
wait_instances_done($node, "at $old");
my @signalled;
for my $i (1 .. 3)
{
	start_instance($node,
		sprintf("df.seq(df.join('%s', '%s'), '%s')",
			step_sql("a$i", 2), step_sql("b$i", 1), step_sql("c$i", 0.1)), "a$i", "b$i", "c$i");
	start_instance($node, sprintf("df.seq(df.sleep(3), '%s')", step_sql("d$i", 0.1)), "d$i");
	push @signalled, start_instance($node,
		sprintf("df.seq(df.wait_for_signal('go', 120), '%s')", step_sql("s$i", 0.1)), "s$i");
	$n += 3;
}
executor_pid_in_step($node, '%effects%');

$node->safe_psql('postgres', 'ALTER EXTENSION pg_durable UPDATE');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_durable'"),
	$new, "updated to $new");
# df.loop(text, text) stays with its privileges; they govern the overload
# that takes continue_on_failure
is($node->safe_psql('postgres', qq{
SELECT has_function_privilege('$role', 'df.loop(text, text)', 'EXECUTE'),
       has_function_privilege('public', 'df.loop(text, text)', 'EXECUTE'),
       to_regprocedure('df.loop(character varying, text, boolean)') IS NOT NULL}),
	't|f|t', 'df.loop keeps its privileges and gains continue_on_failure');
is($node->safe_psql('postgres', qq{
SELECT has_function_privilege('$role', 'df.list_instances(text, integer)', 'EXECUTE WITH GRANT OPTION'),
       has_function_privilege('public', 'df.list_instances(text, integer)', 'EXECUTE'),
       has_function_privilege('public', 'df.list_instances(text, integer, text, text)', 'EXECUTE')}),
	't|f|t', 'df.list_instances, made anew with waiting_on, keeps its privileges');
like($node->safe_psql('postgres',
		"SET ROLE $role; SELECT df.loop('SELECT 1', continue_on_failure => true)"),
	qr/continue_on_failure/, 'the role granted df.loop(text, text) may pass continue_on_failure');
$node->psql('postgres', qq{
CREATE ROLE upgrade_other;
GRANT USAGE ON SCHEMA df TO upgrade_other;
SET ROLE upgrade_other;
SELECT df.loop('SELECT 1', continue_on_failure => true)},
	stderr => \my $loop_err);
like($loop_err, qr/permission denied for function loop/,
	'a role without EXECUTE on df.loop(text, text) may not call its overload');
$node->safe_psql('postgres', 'REVOKE USAGE ON SCHEMA df FROM upgrade_other; DROP ROLE upgrade_other');
# the SIGNAL waits are under way until the test signals them; the steps and
# timers may finish while a loaded machine runs the update
my $ids = join(',', map { "'$_'" } @signalled);
is($node->safe_psql('postgres',
		"SELECT count(*) FROM df.instances WHERE status IN ('pending', 'running') AND id IN ($ids)"),
	scalar @signalled, 'the SIGNAL waits were still under way at the update');
note('under way at the update: ' . $node->safe_psql('postgres',
		"SELECT count(*) FROM df.instances WHERE status IN ('pending', 'running')") . ' of ' . ($n - 1));

$node->safe_psql('postgres', "SET ROLE $role; SELECT df.signal('$_', 'go', '{}')") for @signalled;
wait_instances_done($node, "after the update to $new");
my $later = start_instance($node, sprintf("df.seq(df.sleep(1), '%s')", step_sql('l1', 0.1)), 'l1');
$n++;
wait_instances_done($node, "started after the update");
check_effects($node, $n);
check_engine_empty($node);
is($node->safe_psql('postgres', "SELECT df.status('$later')"), 'completed',
	'df.status after the update');
like($node->safe_psql('postgres',
		"SET ROLE $role; SELECT df.http('http://localhost:1/x', fail_on => '4xx')"),
	qr/fail_on/, 'a role granted df.http before the update may call the new df.http');

# the updated schema is a fresh install's
my $fresh = engine_cluster('fresh', 2);
setup($fresh, undef);
my ($updated_dump, $fresh_dump) = (schema_dump($node), schema_dump($fresh));
cmp_ok(length($fresh_dump), '>', 10_000, 'the dump lists the extension\'s objects');
like($fresh_dump, qr/ALTER EXTENSION pg_durable ADD FUNCTION df\.start\(/,
	'the dump lists the extension\'s members');
my $same = is($updated_dump, $fresh_dump, "the schema updated from $old is a fresh $new install's");
unless ($same)
{
	my $dir = $PostgreSQL::Test::Utils::tmp_check;
	PostgreSQL::Test::Utils::append_to_file("$dir/updated.sql", $updated_dump);
	PostgreSQL::Test::Utils::append_to_file("$dir/fresh.sql", $fresh_dump);
	my ($diff, $err) = ('', '');
	IPC::Run::run([ 'diff', '-u', "$dir/updated.sql", "$dir/fresh.sql" ], '>', \$diff, '2>', \$err);
	diag "the updated schema differs from a fresh install (- updated, + fresh); "
	  . "a change of sql/pg_durable.sql needs its upgrade script:\n" . substr($diff, 0, 8000);
}

$node->stop;
$fresh->stop;
done_testing();
