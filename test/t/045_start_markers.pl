# Starts by marker (store/tasks.c): df.start writes no
# start task.  Its pending runs row is the queued work, and its commit puts
# the instance into wake.c's ring as a marker.  A marker that may be lost
# is made good by the start sweep, which gives every pending instance
# without a start task one.  The safety poll is an hour in parts 1 and 2, so
# a start that nobody finds waits past the deadlines below.
#  1. Markers in the ring when the server crashes (both executors wait in a
#     step for a lock the test holds): after the restart the sweep gives
#     them start tasks, and each step runs exactly once.
#  2. More starts in one transaction than the ring holds (16,384): the ones
#     left out are swept, at the commit's request.
#  3. A start in a transaction that is prepared: its marker becomes a start
#     task before PREPARE TRANSACTION, which the executors' queue scan finds
#     after COMMIT PREPARED (at the safety poll, one second in this part).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $WORKERS = 2;
my $node = engine_node('start_markers', $WORKERS,
	"pg_durable.safety_poll = '1h'\nmax_prepared_transactions = 2\n");

$node->safe_psql('postgres', qq{
CREATE TABLE gate (x int);
GRANT SELECT ON gate TO $ROLE;
});

# --- 1. markers in the ring across a crash ------------------------------------
# The test's session holds the gate; one instance per executor waits for it
# in its step.  Three rounds.
my $started = 0;
for my $round (1 .. 3)
{
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN; LOCK TABLE gate IN ACCESS EXCLUSIVE MODE;');
	for (1 .. $WORKERS)
	{
		start_instance($node,
			"'INSERT INTO effects (instance_id, step) "
			  . "SELECT ''{sys_instance_id}'', ''waiter'' FROM (SELECT count(*) FROM gate) g'",
			'waiter');
	}
	ok( query_until($node,
			"SELECT count(*) = $WORKERS FROM pg_stat_activity "
			  . "WHERE backend_type = 'pg_durable executor' AND wait_event_type = 'Lock'"),
		"round $round: both executors wait for the gate in a step")
	  or diag_engine($node);

	my @one_step = map {
		start_instance($node,
			"'INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''one'''",
			'one')
	} 1 .. 20;
	$started += $WORKERS + 20;
	my $list = join(', ', map { "'$_'" } @one_step);
	# (an executor may run a start or two between its waits: a waiting step
	# first gives way after a short lock_timeout, then waits as the leader
	# of its next batch)
	like( $node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM df_internal.runs WHERE instance_id IN ($list) AND status = 'pending')
    || ' pending, '
    || (SELECT count(*) FROM df_internal.tasks WHERE instance_id IN ($list)) || ' tasks'}),
		qr/^(1\d|20) pending, 0 tasks$/,
		"round $round: the starts wrote no start task: their runs rows and markers are the queue");

	# a crash loses the ring (and the gate)
	$node->stop('immediate');
	eval { $holder->quit };    # its server is gone
	$node->start;
	wait_engine_ready($node, $WORKERS);
	wait_instances_done($node, "round $round: after a crash with markers in the ring")
	  or diag_engine($node);
	check_effects($node, $started);
}

# --- 2. more starts in one transaction than the ring holds ---------------------
my $MANY = 16_500;
$node->safe_psql('postgres', qq{
SET ROLE $ROLE;
CREATE TABLE many AS
SELECT df.start('INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''many''') AS id
FROM generate_series(1, $MANY);
RESET ROLE;
INSERT INTO expected SELECT id, 'many' FROM many;
});
wait_instances_done($node, "$MANY starts in one transaction") or diag_engine($node);
check_effects($node, $started + $MANY);

# --- 3. a start in a prepared transaction --------------------------------------
$node->safe_psql('postgres', q{
ALTER SYSTEM SET pg_durable.safety_poll = '1s';
SELECT pg_reload_conf();
});
ok(query_until($node, "SELECT current_setting('pg_durable.safety_poll') = '1s'"),
	'the safety poll is a second');
my $prepared = $node->safe_psql('postgres', qq{
BEGIN;
SET LOCAL ROLE $ROLE;
SELECT df.start('INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''prepared''');
PREPARE TRANSACTION 'with_a_start';
});
like($prepared, qr/^[0-9a-f]{8}$/, 'df.start in a transaction that is then prepared');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '1',
	'the transaction is prepared');
$node->safe_psql('postgres', qq{
COMMIT PREPARED 'with_a_start';
INSERT INTO expected VALUES ('$prepared', 'prepared');
});
wait_instances_done($node, 'a start committed by COMMIT PREPARED') or diag_engine($node);
check_effects($node, $started + $MANY + 1);
check_engine_empty($node);
check_df_clean($node, 'starts by marker');

done_testing();
