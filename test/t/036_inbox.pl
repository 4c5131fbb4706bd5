# The inbox (docs/design/batches-and-inbox.md §4): a completion whose instance's runs
# row another transaction holds is committed into df_internal.inbox with an
# apply task instead of waiting, and applied later in order.
#
# A 1,000-branch fan-out (a balanced tree of JOINs) whose branch steps all
# read the table "gate", locked by a session until every executor waits in
# a step; then a second session holds the instance's runs row and the gate
# opens: the branches complete into the inbox.  Executors are SIGKILLed
# twice: while completions pile up in the inbox (the holder dies with the
# crash, so after the restart the apply tasks apply the committed rows and
# the other branches complete), and again once the apply tasks have begun
# (a SIGKILL takes the whole server down: where it lands in the apply is
# not controlled).  Afterwards every branch ran exactly once (a unique
# key on the effects), every JOIN completed, the instance completed, the
# inbox and the queue are empty and df.check() is clean.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $WORKERS = 4;
my $BRANCHES = 1000;
my $node = engine_node('inbox', $WORKERS);

$node->safe_psql('postgres', qq{
CREATE TABLE inbox_effects (instance_id text NOT NULL, branch int NOT NULL,
                            PRIMARY KEY (instance_id, branch));
GRANT INSERT, SELECT ON inbox_effects TO $ROLE;
CREATE TABLE gate (g int);
INSERT INTO gate VALUES (1);
GRANT SELECT ON gate TO $ROLE;
});

# a balanced tree of df.join over the leaves lo..hi-1
sub tree
{
	my ($lo, $hi) = @_;
	if ($hi - $lo == 1)
	{
		return "'INSERT INTO inbox_effects SELECT ''{sys_instance_id}'', $lo FROM gate RETURNING branch'";
	}
	my $mid = int(($lo + $hi) / 2);
	return 'df.join(' . tree($lo, $mid) . ', ' . tree($mid, $hi) . ')';
}

sub scalar_sql
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

sub executor_pids
{
	return split /\n/, scalar_sql(
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable executor' ORDER BY pid");
}

# --- every executor waits in a step; the runs row is held; the gate opens
my $gate = $node->background_psql('postgres');
$gate->query_safe('BEGIN');
$gate->query_safe('LOCK TABLE gate IN ACCESS EXCLUSIVE MODE');

my $id = scalar_sql("SET ROLE $ROLE; SELECT df.start(" . tree(0, $BRANCHES) . ')');
like($id, qr/^[0-9a-f]{8}$/, "a $BRANCHES-branch fan-out started");
ok(query_until($node,
		"SELECT count(*) = $WORKERS FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted "
		  . "WHERE backend_type = 'pg_durable executor' AND wait_event_type = 'Lock' "
		  . "AND query LIKE 'INSERT INTO inbox_effects%' "
		  # a wait that lasts: a later step of a batch gives way after 5 ms
		  . "AND l.waitstart < clock_timestamp() - interval '0.5 s'"),
	'every executor waits in a branch step behind the gate');

my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe("SELECT 1 FROM df_internal.runs WHERE instance_id = '$id' FOR UPDATE");
$gate->query_safe('COMMIT');
$gate->quit;

ok(query_until($node,
		"SELECT count(*) >= 128 FROM df_internal.inbox WHERE instance_id = '$id'"),
	'while the runs row is held, branch completions commit into the inbox');
is(scalar_sql(
		"SELECT count(*) >= (SELECT count(*) FROM df_internal.inbox WHERE instance_id = '$id') "
		  . "FROM inbox_effects WHERE instance_id = '$id'"),
	't', 'their effects committed with them');
is(scalar_sql("SELECT status FROM df.instances WHERE id = '$id'"), 'running',
	'the instance is still running');
ok(scalar_sql("SELECT count(*) > 0 FROM df_internal.tasks WHERE instance_id = '$id' AND kind = 'apply'") eq 't',
	'the inbox rows have apply tasks');

# --- SIGKILL while completions pile up in the inbox
my ($pid) = executor_pids();
kill 'KILL', $pid;
eval { $holder->quit };    # the crash ended its session
ok(wait_executors_again($node, $WORKERS, $pid), 'the engine came back after the first SIGKILL');

ok(query_until($node,
		"SELECT count(*) > 0 FROM df.nodes WHERE instance_id = '$id' AND node_type = 'JOIN' "
		  . "AND status = 'completed'"),
	'the apply tasks began to complete JOINs after the restart');
($pid) = executor_pids();
kill 'KILL', $pid;
ok(wait_executors_again($node, $WORKERS, $pid), 'the engine came back after the second SIGKILL');

ok(query_until($node, "SELECT status = 'completed' FROM df.instances WHERE id = '$id'"),
	'the fan-out completed')
  or diag_engine($node);
is(scalar_sql("SELECT count(*) FROM inbox_effects WHERE instance_id = '$id'"), $BRANCHES,
	'every branch ran exactly once');
is(scalar_sql(
		"SELECT string_agg(node_type || ' ' || status || ' ' || n, ', ' ORDER BY node_type, status) FROM "
		  . "(SELECT node_type, status, count(*) AS n FROM df.nodes WHERE instance_id = '$id' "
		  . "GROUP BY 1, 2) c"),
	'JOIN completed ' . ($BRANCHES - 1) . ", SQL completed $BRANCHES",
	'every JOIN and every branch completed');
is(scalar_sql("SELECT jsonb_array_length(df.result('$id')::jsonb)"), '2',
	'the root JOIN has its two results');
is(scalar_sql(
		"SELECT (SELECT count(*) FROM df_internal.inbox) || ' inbox, ' "
		  . "|| (SELECT count(*) FROM df_internal.tasks) || ' tasks, ' "
		  . "|| (SELECT count(*) FROM df_internal.runs) || ' runs'"),
	'0 inbox, 0 tasks, 0 runs', 'nothing left in the inbox or the queue');
is(scalar_sql('SELECT count(*) FROM df.check()'), '0', 'df.check() is clean')
  or diag scalar_sql('SELECT * FROM df.check()');

done_testing();
