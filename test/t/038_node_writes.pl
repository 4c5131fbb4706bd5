# The node writes of wide fan-outs (store/node_writes.c), whatever the
# statistics of df.nodes.  Here they say that an instance has three nodes
# (the ANALYZE autovacuum takes after the first small workflows of a new
# installation; autovacuum is off so that nothing else makes the executors
# plan again), and then come wide fan-outs.
#
# One fan-out of 2,000 branches (a balanced tree of df.join, 3,999 nodes)
# runs with the executors writing the node rows straight into the heap (no
# statement writes them), and a second with a trigger of the user's on
# df.nodes, which makes the engine write through its statement so that the
# trigger fires for every node.  Every node completes either way, and the
# history reads the same.  How many rows and index entries a node write
# reads or writes is a figure of bench/run ("df.nodes_pkey entries read per
# node update"), not an assertion here.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $BRANCHES = 2000;
my $node = engine_node('node_writes', 4, qq{
shared_preload_libraries = 'pg_durable,pg_stat_statements'
pg_stat_statements.track = all
autovacuum = off
});

sub tree
{
	my ($lo, $hi) = @_;
	return "'SELECT $lo'" if $hi - $lo == 1;
	my $mid = int(($lo + $hi) / 2);
	return 'df.join(' . tree($lo, $mid) . ', ' . tree($mid, $hi) . ')';
}

$node->safe_psql('postgres', qq{
CREATE EXTENSION pg_stat_statements;
CREATE TABLE graph AS SELECT (} . tree(0, $BRANCHES) . qq{)::text AS g;
GRANT SELECT ON graph TO $ROLE;
});
# small workflows first, then the statistics autovacuum would take of
# them: a few nodes per instance
$node->safe_psql('postgres', qq{
SET ROLE $ROLE;
DO \$\$
DECLARE
	id text;
BEGIN
	FOR i IN 1..40 LOOP
		id := df.start(df.join('SELECT 1', 'SELECT 2'));
		COMMIT;
		PERFORM df.await_instance(id, 60);
	END LOOP;
END
\$\$;
});
$node->safe_psql('postgres', 'ANALYZE df.nodes');
ok($node->safe_psql('postgres',
		"SELECT n_distinct FROM pg_stats WHERE schemaname = 'df' AND tablename = 'nodes' "
		  . "AND attname = 'instance_id'") != 0,
	'df.nodes has statistics of small instances');

sub fan_out
{
	my ($what) = @_;
	my $id = $node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.start((SELECT g FROM graph))");
	like($id, qr/^[0-9a-f]{8}$/, "$what: the fan-out started");
	is($node->safe_psql('postgres',
			"SET ROLE $ROLE; SELECT df.await_instance('$id', 300)"),
		'completed', "$what: the $BRANCHES-branch fan-out completed")
	  or diag_engine($node);
	is($node->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE status = 'completed') || '/' || count(*) "
			  . "FROM df.nodes WHERE instance_id = '$id'"),
		(2 * $BRANCHES - 1) . '/' . (2 * $BRANCHES - 1), "$what: every node completed");
	return $id;
}

# 1. straight into the heap
my $direct = fan_out('direct');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM pg_stat_statements
WHERE query LIKE '%UPDATE df.nodes%' AND query LIKE '%INSERT INTO df_internal.events%'}),
	'0', 'direct: no statement wrote the nodes');

# 2. through the statements, for a trigger of the user's
$node->safe_psql('postgres', q{
CREATE FUNCTION count_node_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_catalog.nextval('public.node_write_count');
	RETURN NULL;
END $$;
CREATE SEQUENCE node_write_count;
CREATE TRIGGER count_node_write AFTER INSERT OR UPDATE ON df.nodes
	FOR EACH ROW EXECUTE FUNCTION count_node_write();
SELECT pg_stat_statements_reset();
});
my $id = fan_out('statement');
# df.start's rows went in by its INSERT too (api/start.c)
cmp_ok($node->safe_psql('postgres', 'SELECT last_value FROM node_write_count'), '>=', 2 * (2 * $BRANCHES - 1),
	'statement: the trigger fired for every node inserted and every node written');
$node->safe_psql('postgres', 'DROP TRIGGER count_node_write ON df.nodes');

# Either way an event row keeps its scope without the instance's id in
# front, which df_internal.history_events puts back, and only a step's own
# event has a row count, not the JOINs' ending with copies of results
for my $case (['direct', $direct], ['statement', $id])
{
	my ($what, $i) = @$case;
	is($node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE e.scope NOT LIKE '::%') || '/'
	   || count(*) FILTER (WHERE h.scope IS DISTINCT FROM e.instance_id || e.scope) || '/'
	   || (count(*) > 0)
FROM df_internal.events e
JOIN df_internal.history_events h ON h.row_id = e.id AND h.sub = 1
WHERE e.instance_id = '$i'}),
		'0/0/true', "$what: the history's scopes are kept short and read whole");
	is($node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE n.node_type = 'SQL' AND e.detail ? 'row_count') || '/'
	   || count(*) FILTER (WHERE n.node_type = 'JOIN' AND e.detail ? 'row_count')
FROM df_internal.events e JOIN df.nodes n ON n.instance_id = e.instance_id AND n.id = e.node_id
WHERE e.instance_id = '$i' AND e.kind = 'node_completed'}),
		"$BRANCHES/0", "$what: a row count on every step's end, none on a JOIN's");
}

is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean');

# A chain run in one batch updates each node row once, start and end in
# one write, with both events (node_writes.c): a second update of a row in
# the transaction that wrote it would make PostgreSQL check the row's
# foreign keys again at commit, a locking SELECT on df.nodes per key (3.9
# node updates and 2.75 such locks per step of a 20-step chain).  The
# whole chain fits one batch here, so not one of those checks runs.
my $STEPS = 20;
$node->safe_psql('postgres', q{
ALTER SYSTEM SET pg_durable.batch_max_steps = 64;
ALTER SYSTEM SET pg_durable.batch_max_ms = 60000;
SELECT pg_reload_conf();
});
$node->poll_query_until('postgres',
	"SELECT current_setting('pg_durable.batch_max_steps') = '64'")
  or die 'the batch settings were not reloaded';
# the chain waits for a signal, so that df.start's own checks of its
# node rows (at its commit) come before the count
my $chain = join(' ~> ', "df.wait_for_signal('go')", map { "'SELECT $_'" } 2 .. $STEPS);
my $cid = $node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.start($chain)");
$node->poll_query_until('postgres', qq{
SELECT EXISTS (SELECT FROM df.nodes WHERE instance_id = '$cid'
			   AND node_type = 'SIGNAL' AND status = 'running')})
  or die 'the chain did not begin to wait for its signal';
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
$node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.signal('$cid', 'go')");
is($node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.await_instance('$cid', 120)"),
	'completed', "the $STEPS-step chain completed")
  or diag_engine($node);
my $nnodes = 2 * $STEPS - 1;
is($node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE status = 'completed') FROM df.nodes WHERE instance_id = '$cid'"),
	$nnodes, 'every node of the chain completed');
is($node->safe_psql('postgres', q{
SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
WHERE query LIKE '%FROM ONLY "df"."nodes"%FOR KEY SHARE%'
   OR query LIKE '%FROM ONLY "df"."instances"%submitted_by%FOR KEY SHARE%'}),
	'0', 'no foreign key of df.nodes was checked again while the chain ran')
  or diag($node->safe_psql('postgres', q{
SELECT calls, query FROM pg_stat_statements
WHERE query LIKE '%FOR KEY SHARE%'}));
# both events of every node, in order, timed from the node's start, as
# the history shows them (df_internal.history_events)
is($node->safe_psql('postgres', qq{
SELECT count(*) FROM (
	SELECT e.node_id,
		   min(e.ord) FILTER (WHERE e.kind = 'node_started') AS s,
		   min(e.ord) FILTER (WHERE e.kind = 'node_completed') AS c,
		   count(*) FILTER (WHERE e.kind IN ('node_started', 'node_completed')) AS k,
		   min(e.at) FILTER (WHERE e.kind = 'node_started') AS s_at,
		   min(e.at) FILTER (WHERE e.kind = 'node_completed') AS c_at,
		   min(e.duration_ms) FILTER (WHERE e.kind = 'node_completed') AS d
	FROM (SELECT h.*, row_number() OVER (ORDER BY h.id, h.sub) AS ord
		  FROM df_internal.history_events h WHERE h.instance_id = '$cid') e
	WHERE e.node_id IS NOT NULL
	GROUP BY e.node_id) x
WHERE x.k = 2 AND x.s IS NOT NULL AND x.c IS NOT NULL AND x.s < x.c AND x.s_at <= x.c_at AND x.d >= 0}),
	$nnodes, 'every node has its start and its end, in order');
# a step the batch started and ran is one event row, its start in started_at
# (node_writes.c): the 19 SQL steps after the signal, no other node
is($node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE n.node_type = 'SQL') || '/' || count(*)
FROM df_internal.events e JOIN df.nodes n ON n.instance_id = e.instance_id AND n.id = e.node_id
WHERE e.instance_id = '$cid' AND e.started_at IS NOT NULL}),
	($STEPS - 1) . '/' . ($STEPS - 1), 'each step run in the batch wrote one event row, not two');
is($node->safe_psql('postgres', qq{
SELECT count(*) FROM df.history('$cid') WHERE kind = 'node_started'}),
	$nnodes, 'df.history shows every start');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean after the chain');

# A chain whose THEN nodes start and end in one batch too: each THEN's
# start and end are one event row with its children's events between, the
# row's id drawn at the start's place and ended_id at the end's
# (node_writes.c).  The history must still show every start before the
# events of the node's subtree and every end after them.
my $chain2 = join(' ~> ', map { "'SELECT $_'" } 1 .. $STEPS);
my $cid2 = $node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.start($chain2)");
is($node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.await_instance('$cid2', 120)"),
	'completed', "the second $STEPS-step chain completed")
  or diag_engine($node);
cmp_ok($node->safe_psql('postgres', qq{
SELECT count(*) FROM df_internal.events e JOIN df.nodes n ON n.instance_id = e.instance_id AND n.id = e.node_id
WHERE e.instance_id = '$cid2' AND n.node_type = 'THEN' AND e.ended_id IS NOT NULL AND e.started_at IS NOT NULL}),
	'>=', $STEPS / 2, 'THEN nodes started and ended in the batch wrote one event row each');
# every node's start comes before, and its end after, each event of its
# descendants, in df.history's order: in a left-nested chain, THEN k
# (1 the innermost) has 2k descendants
my $pairs = 0;
$pairs += 2 * $_ for 1 .. $STEPS - 1;
is($node->safe_psql('postgres', qq{
WITH RECURSIVE h AS (
	SELECT node_id, kind, row_number() OVER (ORDER BY id, sub) AS ord
	FROM df_internal.history_events WHERE instance_id = '$cid2' AND node_id IS NOT NULL),
span AS (
	SELECT node_id, min(ord) FILTER (WHERE kind = 'node_started') AS s,
		   min(ord) FILTER (WHERE kind = 'node_completed') AS c
	FROM h GROUP BY node_id),
tree AS (
	SELECT n.id AS anc, c.child AS node FROM df.nodes n
	CROSS JOIN LATERAL (VALUES (n.left_node), (n.right_node)) c (child)
	WHERE n.instance_id = '$cid2' AND c.child IS NOT NULL
	UNION
	SELECT t.anc, c.child FROM tree t JOIN df.nodes n ON n.instance_id = '$cid2' AND n.id = t.node
	CROSS JOIN LATERAL (VALUES (n.left_node), (n.right_node)) c (child)
	WHERE c.child IS NOT NULL)
SELECT count(*) || '/' || count(*) FILTER (WHERE a.s < d.s AND d.c < a.c)
FROM tree t JOIN span a ON a.node_id = t.anc JOIN span d ON d.node_id = t.node}),
	"$pairs/$pairs",
	'every start precedes its descendants\' events and every end follows them');
is($node->safe_psql('postgres', qq{
SELECT count(*) FROM df.history('$cid2') WHERE kind IN ('node_started', 'node_completed')}),
	2 * $nnodes, 'df.history shows every start and every end');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean after the second chain');

# A one-step workflow run to its end in its first batch: its start is
# held and never written as an update (store/held_start.c), so its
# df.instances row is updated once, and its whole history is its node's
# row, which holds the instance's start and end too (instance_completed_at,
# store/node_rows.c).  Its history is unchanged: the four events
# in order.
my $one = $node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.start('SELECT 42')");
is($node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.await_instance('$one', 120)"),
	'completed', 'the one-step workflow completed')
  or diag_engine($node);
is($node->safe_psql('postgres', qq{
SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE kind = 'node_completed'
	AND started_at IS NOT NULL AND instance_completed_at >= at AND ended_id IS NULL)
FROM df_internal.events WHERE instance_id = '$one'}),
	'1 rows, 1', 'its start and end and its step\'s are one event row');
is($node->safe_psql('postgres', qq{
SELECT string_agg(kind, ',' ORDER BY id, sub) FROM df_internal.history_events
WHERE instance_id = '$one'}),
	'instance_started,node_started,node_completed,instance_completed',
	'its history shows the four events in order');
is($node->safe_psql('postgres', qq{
SELECT status || ' ' || (completed_at IS NOT NULL) FROM df.instances WHERE id = '$one'}),
	'completed true', 'df.instances shows it completed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean after the one-step workflow');

# An instance's end updates its df.instances row by the primary key, not
# by a statement (store/task_rows.c): its row is
# updated, and its indexes find it under its new status.  A trigger of
# the user's on df.instances brings the statement back, and it fires.
my $quiet = $node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.start('SELECT 43')");
is($node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.await_instance('$quiet', 120)"),
	'completed', 'a one-step workflow without a trigger completed')
  or diag_engine($node);
is($node->safe_psql('postgres', qq{
SET enable_seqscan = off;
SELECT count(*) FROM df.instances WHERE status = 'completed' AND id = '$quiet'
  AND completed_at IS NOT NULL AND updated_at >= created_at}),
	'1', 'its row shows it completed, through the status index too');
$node->safe_psql('postgres', q{
CREATE TABLE instance_updates (id text, status text);
CREATE FUNCTION log_instance_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.instance_updates VALUES (NEW.id, NEW.status);
	RETURN NULL;
END $$;
CREATE TRIGGER log_instance_update AFTER UPDATE ON df.instances
	FOR EACH ROW EXECUTE FUNCTION log_instance_update();
});
my $logged = $node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.start('SELECT 44')");
is($node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.await_instance('$logged', 120)"),
	'completed', 'a one-step workflow with a trigger on df.instances completed')
  or diag_engine($node);
is($node->safe_psql('postgres',
		"SELECT count(*) FROM instance_updates WHERE id = '$logged' AND status = 'completed'"),
	'1', 'the trigger fired for the update of its end');
$node->safe_psql('postgres', 'DROP TRIGGER log_instance_update ON df.instances');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean after the instance ends');

done_testing();
