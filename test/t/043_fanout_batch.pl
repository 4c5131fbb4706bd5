# A fan-out run inside one batch (engine/README.md "Batches"):
# its branch tasks stay in the executor's memory, its JOIN counts too, and
# each node's start and end are one write, as a chain's steps are.
#
# - a fan-out of 20 branches behind a signal runs in the batch that takes
#   the signal: every node one event row with its start in it; its result
#   is the one a run without batches gives (pg_durable.batch_max_steps =
#   1); how many task rows and JOIN counter rows a batch writes is a figure
#   of bench/run, not an assertion here;
# - a branch that calls df.check() in the middle of such a batch finds no
#   problem: the held tasks and counts are written before its rows are
#   read;
# - a fan-out wider than the batch: the batch runs on its branches past
#   pg_durable.batch_max_steps, up to twice as many steps, then writes the
#   rest (tasks, counts) and other batches finish it: the same result,
#   nothing left in the engine tables;
# - a branch that gives way (a row lock another session holds) after
#   others of its JOIN were counted in memory: the JOIN completes with
#   every effect once when the lock is free.
# df.check() is clean after each.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $node = engine_node('fanout_batch', 4, qq{
pg_durable.batch_max_steps = 32
pg_durable.batch_max_ms = 60000
pg_durable.enable_superuser_instances = on
});

$node->safe_psql('postgres', qq{
CREATE TABLE fan_effects (instance_id text NOT NULL, step int NOT NULL);
GRANT INSERT, SELECT ON fan_effects TO $ROLE;
CREATE TABLE seen_problems (instance_id text, problem text, detail text);
CREATE TABLE locked (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO locked VALUES (1, 0);
GRANT SELECT, UPDATE ON locked TO $ROLE;
});

# A balanced df.join tree of steps lo .. hi-1; leaf(k) is step k's SQL.
sub tree
{
	my ($lo, $hi, $leaf) = @_;
	return $leaf->($lo) if $hi - $lo == 1;
	my $mid = int(($lo + $hi) / 2);
	return 'df.join(' . tree($lo, $mid, $leaf) . ', ' . tree($mid, $hi, $leaf) . ')';
}

sub effect
{
	my ($k) = @_;
	return "'INSERT INTO fan_effects SELECT ''{sys_instance_id}'', $k RETURNING step * 10 AS v'";
}

sub start
{
	my ($graph, $as_superuser) = @_;
	my $role = $as_superuser ? '' : "SET ROLE $ROLE; ";
	my $id = $node->safe_psql('postgres', "${role}SELECT df.start($graph)");
	die "df.start returned '$id'" unless $id =~ /^[0-9a-f]{8}$/;
	return $id;
}

# Start graph behind a wait for the signal 'go', and wait until it waits.
sub start_gated
{
	my ($graph, $what, $as_superuser) = @_;
	my $id = start("df.wait_for_signal('go') ~> $graph", $as_superuser);
	ok(query_until($node, qq{
SELECT EXISTS (SELECT FROM df.nodes WHERE instance_id = '$id'
			   AND node_type = 'SIGNAL' AND status = 'running')}),
		"$what waits for its signal");
	return $id;
}

sub await_completed
{
	my ($id, $what) = @_;
	is($node->safe_psql('postgres', "SELECT df.await_instance('$id', 120)"),
		'completed', "$what: completed")
	  or diag_engine($node);
}

sub result_of
{
	my ($id) = @_;
	return $node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.result('$id')");
}

sub effects_once
{
	my ($id, $n, $what) = @_;
	is($node->safe_psql('postgres', qq{
SELECT count(*) || '/' || count(DISTINCT step) FROM fan_effects WHERE instance_id = '$id'}),
		"$n/$n", "$what: every branch's effect exists once");
}

sub check_clean
{
	my ($what) = @_;
	check_df_clean($node, $what);
	check_engine_empty($node);
}

sub set_batch_steps
{
	my ($n) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET pg_durable.batch_max_steps = $n; SELECT pg_reload_conf()");
	$node->poll_query_until('postgres',
		"SELECT current_setting('pg_durable.batch_max_steps') = '$n'")
	  or die 'the batch setting was not reloaded';
	# every executor has read it once it has run a workflow since
	for (1 .. 8)
	{
		my $id = start("'SELECT 1'");
		$node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.await_instance('$id', 60)");
	}
}

# The oracle: graph's result in a run without batches.
sub result_without_batches
{
	my ($graph, $what) = @_;
	set_batch_steps(1);
	my $id = start($graph);
	await_completed($id, "$what without batches");
	my $result = result_of($id);
	like($result, qr/^\[/, "$what without batches has a result");
	return $result;
}

my $W = 20;
my $fan = tree(0, $W, \&effect);
my $expected = result_without_batches($fan, 'the fan-out');
set_batch_steps(32);

# --- a fan-out run in the batch that takes its signal ------------------
my $gated = start_gated($fan, 'the gated fan-out');
$node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.signal('$gated', 'go')");
await_completed($gated, 'the gated fan-out');
is(result_of($gated), $expected, 'the gated fan-out: the result of the run without batches');
effects_once($gated, $W, 'the gated fan-out');
my $nodes = 2 * $W - 1;
is($node->safe_psql('postgres', qq{
SELECT count(*) FROM df_internal.events e
JOIN df.nodes n ON n.instance_id = e.instance_id AND n.id = e.node_id
WHERE e.instance_id = '$gated' AND n.node_type IN ('JOIN', 'SQL') AND e.started_at IS NOT NULL}),
	$nodes, "each of its $nodes nodes wrote its start and its end as one event row");
check_clean('the gated fan-out');

# --- a branch calls df.check() in the middle of the batch --------------
my $checking = tree(0, $W, sub {
	my ($k) = @_;
	return $k == $W / 2
	  ? "'INSERT INTO seen_problems SELECT * FROM df.check()'"
	  : effect($k);
});
# (df.check() reads the engine's tables: a superuser's workflow)
my $cid = start_gated($checking, 'the checking fan-out', 1);
$node->safe_psql('postgres', "SELECT df.signal('$cid', 'go')");
await_completed($cid, 'the checking fan-out');
# (but the calling step itself: running, its task claimed by the very
# transaction that asks, as in any step that calls df.check())
is($node->safe_psql('postgres', qq{
SELECT coalesce(string_agg(problem || ': ' || detail, '; '), 'none') FROM seen_problems p
WHERE NOT (p.problem = 'stranded_step' AND p.detail LIKE
		   (SELECT format('running SQL node %s in scope %%', id) FROM df.nodes
			WHERE instance_id = '$cid' AND query LIKE '%df.check()%'))}),
	'none', 'df.check() called by a branch in the middle of the batch found no problem');
check_clean('the checking fan-out');

# --- a fan-out wider than the batch ------------------------------------
my $W2 = 40;
my $wide_graph = tree(0, $W2, \&effect);
my $wide_expected = result_without_batches($wide_graph, 'the wide fan-out');
set_batch_steps(8);
my $wide = start($wide_graph);
await_completed($wide, 'the wide fan-out in batches of 8');
is(result_of($wide), $wide_expected, 'the wide fan-out: the result of the run without batches');
effects_once($wide, $W2, 'the wide fan-out');
check_clean('the wide fan-out');

# --- a branch gives way after others of its JOIN were counted ----------
set_batch_steps(32);
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe('SELECT * FROM locked WHERE id = 1 FOR UPDATE');
my $lock_graph = tree(0, 8, sub {
	my ($k) = @_;
	return $k == 0
	  ? "'UPDATE locked SET v = v + 1 WHERE id = 1 RETURNING v'"
	  : effect($k);
});
my $lid = start($lock_graph);
ok(query_until($node, qq{
SELECT count(*) = 7 FROM fan_effects WHERE instance_id = '$lid'}),
	'the other branches ran while the lock is held');
ok(query_until($node, q{
SELECT count(*) = 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
WHERE a.backend_type = 'pg_durable executor' AND a.wait_event_type = 'Lock'
  AND a.query LIKE 'UPDATE locked%'
  -- a wait that lasts: a later step of a batch gives way after 5 ms
  AND l.waitstart < clock_timestamp() - interval '0.5 s'}),
	'the branch that gave way waits for the lock as the first step of a batch');
$holder->query_safe('COMMIT');
$holder->quit;
await_completed($lid, 'the JOIN with a branch that gave way');
is($node->safe_psql('postgres', 'SELECT v FROM locked WHERE id = 1'), '1',
	'the branch that gave way ran once');
is($node->safe_psql('postgres', qq{
SELECT count(*) || '/' || count(DISTINCT step) FROM fan_effects WHERE instance_id = '$lid'}),
	'7/7', 'every other branch\'s effect exists once');
check_clean('the JOIN with a branch that gave way');

done_testing();
