# df.start(..., database => 'x'): the steps run in database x, as the
# submitter, in a background session connected there; the engine stays in
# pg_durable.database.  Two ordinary roles play against each other:
#  - alice's steps run in appdb as alice, contained as local steps are
#    (df.in_workflow on, no SET ROLE), and df.start says they are at least
#    once; bob cannot see her instance;
#  - an unknown database, or one the submitter may not CONNECT to, fails
#    at df.start and leaves no row (bob, who has CONNECT, can start there);
#  - a database dropped, closed to connections, dropped WITH (FORCE) while a
#    step runs in it, or whose CONNECT was revoked after df.start fails the
#    instance with a message naming the database, and the executors go on;
#  - with no free background worker slot the step waits (re-queued), the
#    instance does not fail, and it completes once slots are available.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $node = engine_node('databases', 2);

$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
SELECT df.grant_usage('alice');
SELECT df.grant_usage('bob');
});
for my $db (qw(appdb secretdb dropme closeme revokeme forcedb))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
CREATE TABLE t (who text, db text, in_workflow text);
GRANT INSERT, SELECT ON t TO PUBLIC;
});
}
$node->safe_psql('postgres', q{
REVOKE CONNECT ON DATABASE secretdb FROM PUBLIC;
GRANT CONNECT ON DATABASE secretdb TO bob;
});

my $insert = q{'INSERT INTO t SELECT current_user, current_database(), }
  . q{current_setting(''df.in_workflow'') RETURNING who, db, in_workflow'};

# df.start as $role; returns (id or '', stderr)
sub start_as
{
	my ($role, $args) = @_;
	my ($out, $err) = ('', '');
	$node->psql('postgres', "SET ROLE $role; SELECT df.start($args);",
		stdout => \$out, stderr => \$err);
	return ($out, $err);
}

sub await_as
{
	my ($role, $id) = @_;
	return $node->safe_psql('postgres',
		"SET ROLE $role; SELECT df.await_instance('$id', 120);");
}

sub node_results
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(status || ': ' || coalesce(result #>> '{}', ''), ' | ' ORDER BY updated_at, id) "
		  . "FROM df.nodes WHERE instance_id = '$id' AND node_type = 'SQL'");
}

sub instance_count
{
	return $node->safe_psql('postgres', 'SELECT count(*) FROM df.instances');
}

# 1. steps run in appdb as alice, contained, at least once
my ($a1, $err) = start_as('alice',
	"$insert ~> 'SELECT count(*) AS n, current_database() AS db FROM t', 'to-appdb', 'appdb'");
like($a1, qr/^[0-9a-f]{8}$/, 'alice starts an instance in appdb');
like($err, qr/NOTICE:  the steps of instance $a1 run in database "appdb" at least once/,
	'df.start says that steps in another database are at least once');
is(await_as('alice', $a1), 'completed', 'it completes');
is(node_results($a1),
	'completed: {"rows": [{"db": "appdb", "who": "alice", "in_workflow": "true"}], "row_count": 1} | '
	  . 'completed: {"rows": [{"n": 1, "db": "appdb"}], "row_count": 1}',
	'both steps ran in appdb as alice, inside a workflow');
is($node->safe_psql('appdb', 'SELECT who, db FROM t'), 'alice|appdb', 'the effect is in appdb, once');
is( $node->safe_psql('postgres',
		"SELECT database, submitted_by FROM df.instances WHERE id = '$a1'"),
	'appdb|alice', 'the instance row stays in the extension database');
is( $node->safe_psql('postgres',
		"SET ROLE bob; SELECT count(*) FROM df.instances WHERE id = '$a1'"),
	'0', 'bob cannot see alice\'s instance');
is( $node->safe_psql('postgres', "SET ROLE bob; SELECT df.status('$a1') IS NULL"),
	't', 'nor its status');

# containment: a step in appdb cannot switch roles; errors are the node's
my ($a2) = start_as('alice', "'SET ROLE postgres', NULL, 'appdb'");
is(await_as('alice', $a2), 'failed', 'SET ROLE in a step in appdb fails the instance');
like(node_results($a2), qr/^failed: SQL execution failed: cannot set parameter "role"/,
	'refused as in a local step');
my ($a3) = start_as('alice', "'SELECT 1/0', NULL, 'appdb'");
is(await_as('alice', $a3), 'failed', 'a failing step in appdb fails the instance');
is(node_results($a3), 'failed: SQL execution failed: division by zero', 'with the statement\'s error');

# 2. refused at df.start: unknown database, no CONNECT
my $before = instance_count();
my ($x, $e) = start_as('alice', "'SELECT 1', NULL, 'nosuchdb'");
like($e, qr/ERROR:  database "nosuchdb" does not exist/, 'an unknown database fails at df.start');
($x, $e) = start_as('alice', "'SELECT 1', NULL, 'secretdb'");
like($e, qr/ERROR:  permission denied for database "secretdb"/,
	'alice may not start into a database she cannot CONNECT to');
like($e, qr/current_user "alice" does not have CONNECT privilege/, 'the detail names the role');
is(instance_count(), $before, 'no row left behind');
my ($b1) = start_as('bob', "$insert, NULL, 'secretdb'");
is(await_as('bob', $b1), 'completed', 'bob, who has CONNECT, can');
is($node->safe_psql('secretdb', 'SELECT who FROM t'), 'bob', 'and his step ran there as bob');

# 3. the database goes away (or closes) after df.start: the instance fails
# cleanly, naming the database; waiting for a signal holds the step back
sub start_waiting
{
	my ($db) = @_;
	my ($id) = start_as('alice', "df.wait_for_signal('go') ~> $insert, NULL, '$db'");
	$node->poll_query_until('postgres', qq{
SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = '$id' AND node_type = 'SIGNAL'
               AND status = 'running')})
	  or die "instance $id did not reach its wait";
	return $id;
}

sub go
{
	my ($id) = @_;
	$node->safe_psql('postgres', "SET ROLE alice; SELECT df.signal('$id', 'go');");
	return;
}

my $d1 = start_waiting('dropme');
my $d2 = start_waiting('closeme');
my $d3 = start_waiting('revokeme');
$node->safe_psql('postgres', 'DROP DATABASE dropme');
$node->safe_psql('postgres', 'ALTER DATABASE closeme ALLOW_CONNECTIONS false');
$node->safe_psql('postgres', 'REVOKE CONNECT ON DATABASE revokeme FROM PUBLIC');
go($_) for ($d1, $d2, $d3);
is(await_as('alice', $d1), 'failed', 'a dropped database fails the instance');
like(node_results($d1), qr/^failed: database "dropme" of this instance does not exist/,
	'the node says which database is gone');
is(await_as('alice', $d2), 'failed', 'a database closed to connections fails the instance');
like(node_results($d2), qr/^failed: database "closeme" of this instance is not accepting connections/,
	'the node says so');
is(await_as('alice', $d3), 'failed', 'CONNECT revoked after df.start fails the instance');
like(node_results($d3), qr/^failed: permission denied for database "revokeme"/,
	'the node says so');
is($node->safe_psql('revokeme', 'SELECT count(*) FROM t'), '0', 'and nothing ran there');

# DROP DATABASE ... WITH (FORCE) while a step runs there
my ($f1) = start_as('alice', "'SELECT pg_sleep(300)', NULL, 'forcedb'");
$node->poll_query_until('postgres', q{
SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable session'
               AND datname = 'forcedb' AND query LIKE '%pg_sleep(300)%')})
  or die "the step did not start in forcedb";
$node->safe_psql('postgres', 'DROP DATABASE forcedb WITH (FORCE)');
is(await_as('alice', $f1), 'failed', 'a database dropped under a running step fails the instance');
like(node_results($f1), qr/^failed: database "forcedb" of this instance does not exist/,
	'naming the database');

# the executors are still there and still work
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'"),
	'2', 'both executors survived');
my ($a4) = start_as('alice', "$insert, NULL, 'appdb'");
is(await_as('alice', $a4), 'completed', 'and run the next instance in appdb');
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'pg_durable session'}),
	'idle background sessions go away');
check_engine_empty($node);

# 4. no free background worker slot: launcher + 1 executor fill
# max_worker_processes = 3 with the logical replication launcher; the step is re-queued, not failed
$node->safe_psql('postgres', 'ALTER SYSTEM SET max_worker_processes = 3');
$node->safe_psql('postgres', 'ALTER SYSTEM SET pg_durable.workers = 1');
$node->restart;
wait_engine_ready($node, 1);
my ($s1) = start_as('alice', "$insert, NULL, 'appdb'");
$node->poll_query_until('postgres', qq{
SELECT count(*) >= 3 FROM df_internal.events
WHERE instance_id = '$s1' AND kind = 'step_retried' AND detail->>'sqlstate' = '53400'})
  or die 'the step was not re-queued for want of a worker slot';
is($node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$s1'"),
	'running', 'without a worker slot the instance waits, it does not fail');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET max_worker_processes');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET pg_durable.workers');
$node->restart;
wait_engine_ready($node, 2);
is(await_as('alice', $s1), 'completed', 'with slots again it completes');
is($node->safe_psql('appdb', 'SELECT count(*) FROM t'), '3', 'its step ran in appdb (once more)');
check_engine_empty($node);

$node->stop;
done_testing();
