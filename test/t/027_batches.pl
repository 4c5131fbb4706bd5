# Batches (docs/design/batches-and-inbox.md §2): several ready steps in one
# transaction, each in its own subtransaction, committed together.
#
# - a chain's third step fails: the first two commit (in the batch that ran
#   the third), the third's node fails, the instance fails;
# - SIGKILL of an executor in the middle of a batch: nothing of the batch
#   is committed, and afterwards every step runs exactly once;
# - a later step of a batch would wait for a row lock another session
#   holds: it is rolled back and leads the next batch, where it waits; the
#   steps before it commit without waiting for it;
# - a later step that runs past the batch's budget gives way the same way
#   and runs to its end as the first step of the next batch;
# - a chain the batch runs itself draws no task ids for its steps (they
#   are held in the executor, never rows), and a held task that a step
#   wrote as a row before it gave way is not lost with its rollback;
# - two batched steps that take two rows in opposite orders: no deadlock
#   is left hanging, both effects exist once;
# - a start runs its first step with it: one-step workflows make no
#   multixact; a first step that would wait gives way and takes its start
#   back, the instance starts without it, the step waits in the next batch;
# df.check() is clean after each.
#
# Steps record now() (their transaction's start) in their effect, so that
# steps that committed together show the same time.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $node = engine_node('batches', 2, qq{
pg_durable.batch_max_steps = 16
pg_durable.batch_max_ms = 60000
});

$node->safe_psql('postgres', qq{
CREATE TABLE batch_effects (instance_id text NOT NULL, step text NOT NULL,
                            txn_start timestamptz NOT NULL DEFAULT now());
GRANT INSERT, SELECT ON batch_effects TO $ROLE;
CREATE TABLE killed (done bool);
GRANT SELECT ON killed TO $ROLE;
CREATE TABLE locked (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO locked VALUES (1, 0), (2, 0);
GRANT SELECT, UPDATE ON locked TO $ROLE;
});

sub eff
{
	my ($step, $extra) = @_;
	$extra //= '';
	return "INSERT INTO batch_effects (instance_id, step) "
	  . "SELECT ''{sys_instance_id}'', ''$step''$extra";
}

sub start
{
	my ($graph) = @_;
	my $id = $node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.start($graph);");
	die "df.start returned '$id'" unless $id =~ /^[0-9a-f]{8}$/;
	return $id;
}

sub wait_status
{
	my ($id, $status) = @_;
	return query_until($node,
		"SELECT status = '$status' FROM df.instances WHERE id = '$id'");
}

sub counts
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(step || '=' || n, ',' ORDER BY step) FROM "
		  . "(SELECT step, count(*) AS n FROM batch_effects WHERE instance_id = '$id' GROUP BY step) c");
}

# --- a batch whose third step fails ------------------------------------
{
	my $id = start(sprintf("df.seq(df.seq(df.seq('%s', '%s'), '%s'), '%s')",
			eff('f1'), eff('f2'), 'SELECT 1/0', eff('f4')));
	ok(wait_status($id, 'failed'), 'the instance whose third step fails fails');
	is(counts($id), 'f1=1,f2=1', 'the first two steps committed, the fourth never ran');
	is($node->safe_psql('postgres',
			"SELECT count(DISTINCT txn_start) FROM batch_effects WHERE instance_id = '$id'"),
		'1', 'the first two steps ran in one transaction');
	is($node->safe_psql('postgres',
			"SELECT string_agg(status, ',' ORDER BY status) FROM df.nodes "
			  . "WHERE instance_id = '$id' AND node_type = 'SQL'"),
		'completed,completed,failed,pending', 'only the third node failed');
	like($node->safe_psql('postgres',
			"SELECT concat(result::text, error, status_details::text) FROM df.nodes WHERE instance_id = '$id' "
			  . "AND query = 'SELECT 1/0'"),
		qr/division by zero|22012/, 'the third node carries its own error');
	ok($node->safe_psql('postgres',
			"SELECT sum(tasks * batches) >= 3 FROM df_internal.batch_sizes() WHERE tasks >= 3") eq 't',
		'batches of three or more tasks were counted');
	check_df_clean($node, 'a failed step in a batch');
}

# --- SIGKILL in the middle of a batch ----------------------------------
{
	my $id = start(sprintf("df.seq(df.seq(df.seq('%s', '%s'), '%s'), '%s')",
			eff('k1'), eff('k2'),
			eff('k3', ' FROM pg_sleep(CASE WHEN EXISTS (SELECT FROM killed) THEN 0 ELSE 300 END)'),
			eff('k4')));
	my $pid = executor_pid_in_step($node, '%k3%');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM batch_effects WHERE instance_id = '$id'"),
		'0', 'while the third step runs, the first two are not committed (one batch)');
	$node->safe_psql('postgres', 'INSERT INTO killed VALUES (true)');
	kill 'KILL', $pid;
	ok(wait_executors_again($node, 2, $pid), 'the engine came back after the SIGKILL');
	ok(wait_status($id, 'completed'), 'the killed batch ran again to completion');
	is(counts($id), 'k1=1,k2=1,k3=1,k4=1', 'every step of the killed batch ran exactly once');
	check_df_clean($node, 'a SIGKILL in a batch');
}

# A session that holds row $row of locked until it commits.
sub lock_row
{
	my ($row) = @_;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN');
	$holder->query_safe("SELECT * FROM locked WHERE id = $row FOR UPDATE");
	return $holder;
}

# An executor's step waits for a lock on locked.
sub executor_waits_for_lock
{
	return query_until($node,
		"SELECT count(*) = 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted "
		  . "WHERE backend_type = 'pg_durable executor' "
		  . "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE locked%' "
		  # a wait that lasts: a later step of a batch gives way after 5 ms
		  . "AND l.waitstart < clock_timestamp() - interval '0.5 s'");
}

# --- a later step would wait for a row lock held by another session ----
{
	my $holder = lock_row(1);

	my $id = start(sprintf("df.seq(df.seq('%s', '%s'), '%s')",
			eff('w1'),
			"UPDATE locked SET v = v + 1 WHERE id = 1 RETURNING v",
			eff('w3')));
	# w2 would wait: it gives way, w1 commits without it, and w2 waits as
	# the first step of the next batch
	ok(query_until($node,
			"SELECT count(*) = 1 FROM batch_effects WHERE instance_id = '$id' AND step = 'w1'"),
		'the step before the waiting one committed while the lock is held');
	ok(executor_waits_for_lock(), 'the step waits for the lock as the first step of a batch');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM df_internal.events WHERE instance_id = '$id' AND kind = 'step_retried'"),
		'0', 'giving way is not a retry');
	$holder->query_safe('COMMIT');
	$holder->quit;
	ok(wait_status($id, 'completed'), 'the instance completes once the lock is free');
	is($node->safe_psql('postgres', 'SELECT v FROM locked WHERE id = 1'), '1',
		'the waiting step ran once');
	is(counts($id), 'w1=1,w3=1', 'the other steps ran once');
	check_df_clean($node, 'a step that gave way');
}

# --- held step tasks: a chain the batch runs itself has no task rows ----
{
	my $g = "'" . eff('c1') . "'";
	$g = "df.seq($g, '" . eff("c$_") . "')" for 2 .. 12;
	my $seq = "SELECT last_value FROM df_internal.tasks_id_seq";
	my $before = $node->safe_psql('postgres', $seq);
	my $id = start($g);
	ok(wait_status($id, 'completed'), 'the 12-step chain completes');
	is($node->safe_psql('postgres',
			"SELECT count(*) || '/' || count(DISTINCT step) || '/' || count(DISTINCT txn_start) "
			  . "FROM batch_effects WHERE instance_id = '$id'"),
		'12/12/1', 'its 12 steps ran once each, in one batch');
	my $drawn = $node->safe_psql('postgres', $seq) - $before;
	ok($drawn <= 2, "the batch ran its steps without their task rows ($drawn task ids drawn)");
	check_df_clean($node, 'a chain of held tasks');
}

# --- a held task written by a step that then gives way ------------------
{
	# The JOIN's two branches are held; the batch takes the newest (the
	# right one), whose statement first writes the left one as a row, and
	# then would wait for the lock: its subtransaction's rollback takes
	# that row back, the left branch is held again and written with the
	# batch, and runs while the right one waits as the next batch's first.
	my $holder = lock_row(2);
	my $id = start(sprintf("df.seq('%s', df.join('%s', '%s'))",
			eff('j0'), eff('j1'), "UPDATE locked SET v = v + 1 WHERE id = 2 RETURNING v"));
	ok(query_until($node,
			"SELECT count(*) = 1 FROM batch_effects WHERE instance_id = '$id' AND step = 'j1'"),
		'the other branch ran while the lock is held: the rollback did not lose its task');
	ok(executor_waits_for_lock(),
		'the branch that gave way waits for the lock as the first step of a batch');
	$holder->query_safe('COMMIT');
	$holder->quit;
	ok(wait_status($id, 'completed'), 'the JOIN completes once the lock is free');
	is($node->safe_psql('postgres', 'SELECT v FROM locked WHERE id = 2'), '1',
		'the waiting branch ran once');
	is(counts($id), 'j0=1,j1=1', 'the other steps ran once');
	check_df_clean($node, 'a held task written by a step that gave way');
}

# --- two batched steps locking two rows in opposite orders -------------
{
	$node->safe_psql('postgres', qq{
CREATE FUNCTION lock_two(a int, b int, inst text, step text) RETURNS void
LANGUAGE plpgsql AS \$\$
BEGIN
	UPDATE locked SET v = v + 1 WHERE id = a;
	PERFORM pg_sleep(0.5);
	UPDATE locked SET v = v + 1 WHERE id = b;
	INSERT INTO batch_effects (instance_id, step) VALUES (inst, step);
END
\$\$;
GRANT EXECUTE ON FUNCTION lock_two(int, int, text, text) TO $ROLE;
UPDATE locked SET v = 0;
});
	my @ids;
	for my $round (1 .. 3)
	{
		my $a = start(sprintf("df.seq('%s', 'SELECT lock_two(1, 2, ''{sys_instance_id}'', ''d'')')",
				eff('d0')));
		my $b = start(sprintf("df.seq('%s', 'SELECT lock_two(2, 1, ''{sys_instance_id}'', ''d'')')",
				eff('d0')));
		push @ids, $a, $b;
		ok(wait_status($a, 'completed') && wait_status($b, 'completed'),
			"round $round: both deadlocking instances complete");
	}
	for my $id (@ids)
	{
		is(counts($id), 'd=1,d0=1', "instance $id: both effects once");
	}
	is($node->safe_psql('postgres', 'SELECT sum(v) FROM locked'), '12',
		'every lock_two ran its two updates once');
	check_df_clean($node, 'opposite lock orders');
}

# --- a start's first step: run with the start, given way without it ------
{
	# A one-step workflow's runs row is locked by its start and deleted by
	# its step's transition: one subtransaction does both (worker/executor.c,
	# run_start), so no multixact is made for two xids on the row.
	my $mxid = "SELECT next_multixact_id FROM pg_control_checkpoint()";
	$node->safe_psql('postgres', 'CHECKPOINT');
	my $before = $node->safe_psql('postgres', $mxid);
	my @ids = map { start("'" . eff("one$_") . "'") } 1 .. 20;
	ok(wait_status($_, 'completed'), "one-step workflow $_ completes") for @ids;
	is(join(',', map { counts($_) } @ids), join(',', map { "one$_=1" } 1 .. 20),
		'each step ran once');
	$node->safe_psql('postgres', 'CHECKPOINT');
	is($node->safe_psql('postgres', $mxid) - $before, 0,
		'20 one-step workflows made no multixact');

	# The first step would wait for a lock: it gives way and takes its start
	# back with it; the instance starts without it, and the step waits as
	# the first of the next batch.
	$node->safe_psql('postgres', 'INSERT INTO locked VALUES (3, 0)');
	my $holder = lock_row(3);
	my $id = start("'UPDATE locked SET v = v + 1 WHERE id = 3 RETURNING v'");
	ok(wait_status($id, 'running'), 'the instance started while its first step cannot run');
	ok(executor_waits_for_lock(), 'its first step waits for the lock as the first step of a batch');
	$holder->query_safe('COMMIT');
	$holder->quit;
	ok(wait_status($id, 'completed'), 'the instance completes once the lock is free');
	is($node->safe_psql('postgres', 'SELECT v FROM locked WHERE id = 3'), '1',
		'the step ran once');
	is($node->safe_psql('postgres',
			"SELECT string_agg(kind, ',' ORDER BY id, sub) FROM df_internal.history_events "
			  . "WHERE instance_id = '$id'"),
		'instance_started,node_started,node_completed,instance_completed',
		'its history has one start of the instance and one of the step');
	check_df_clean($node, "a start's first step");
}

# --- a later step that runs past the batch's budget ---------------------
{
	# a restart, not a reload: nothing outside an executor can see when it
	# has read a reloaded setting, and a restarted one reads it at start
	$node->safe_psql('postgres', 'ALTER SYSTEM SET pg_durable.batch_max_ms = 300');
	$node->restart;
	ok(wait_executors_again($node, 2, 0), 'the engine is back after the restart');
	my $id = start(sprintf("df.seq(df.seq('%s', '%s'), '%s')",
			eff('b1'), eff('b2', ' FROM pg_sleep(1.5)'), eff('b3')));
	ok(wait_status($id, 'completed'), 'the instance with a long later step completes');
	is(counts($id), 'b1=1,b2=1,b3=1', 'the long step ran once, after giving way');
	is($node->safe_psql('postgres',
			"SELECT count(DISTINCT txn_start) FROM batch_effects WHERE instance_id = '$id' "
			  . "AND step IN ('b1', 'b2')"),
		'2', 'the long step committed in a batch of its own, not with its predecessor');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM df_internal.events WHERE instance_id = '$id' "
			  . "AND kind IN ('step_retried', 'node_failed')"),
		'0', 'running past the budget is neither a retry nor a failure');
	check_df_clean($node, 'a step past its budget');
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET pg_durable.batch_max_ms');
}

is($node->safe_psql('postgres',
		"SELECT count(*) FROM df_internal.tasks"), '0', 'no task left');

done_testing();
