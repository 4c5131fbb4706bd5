# Failure handling across server restarts:
#  A. a step whose first attempt failed waits for its retry (a task with a
#     run_at 4 s later) while the server stops in fast mode and starts
#     again: the next attempt keeps its schedule (not before the back-off
#     ends), runs once and succeeds, and no attempt is lost or doubled
#     (a sequence counts them; fast mode keeps its value exact);
#  B. a df.timeout whose deadline passes while the server is down (stopped
#     in immediate mode) fires after the restart: the instance fails with
#     kind timeout and the step after the wrapped sleep never runs.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $workers = 2;
my $node = engine_node('retry_restart', $workers);

$node->safe_psql('postgres', qq{
CREATE SEQUENCE attempts;
GRANT USAGE ON SEQUENCE attempts TO $PgDurableTest::ROLE;
CREATE FUNCTION flaky(iid text) RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE a bigint := nextval('attempts');
BEGIN
	IF a < 2 THEN
		RAISE EXCEPTION 'attempt % fails', a;
	END IF;
	INSERT INTO effects (instance_id, step) VALUES (iid, 'flaky');
	RETURN a;
END \$\$;
GRANT EXECUTE ON FUNCTION flaky(text) TO $PgDurableTest::ROLE;
});

# A: the retry is pending when the server stops
my $retry = start_instance($node,
	q{df.retry('SELECT flaky(''{sys_instance_id}'')', initial_interval => '4 s', jitter => 'none')},
	'flaky');
$node->poll_query_until('postgres', qq{
SELECT EXISTS (SELECT 1 FROM df_internal.events WHERE instance_id = '$retry' AND kind = 'retry_scheduled')})
  or die "the first attempt did not fail into a retry";
my $scheduled = $node->safe_psql('postgres',
	"SELECT run_at FROM df_internal.tasks WHERE instance_id = '$retry' AND kind = 'step'");
isnt($scheduled, '', 'the next attempt is a step task with a run_at');

$node->stop('fast');
$node->start;
wait_engine_ready($node, $workers);
pass('server stopped and restarted during the back-off');

# B: a deadline that passes while the server is down
my $timeout = $node->safe_psql('postgres',
	"SET ROLE $PgDurableTest::ROLE; SELECT df.start("
	  . q{df.timeout(df.sleep(30), 2) ~> 'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''after'')'}
	  . ');');
$node->poll_query_until('postgres', qq{
SELECT count(*) = 2 FROM df_internal.tasks WHERE instance_id = '$timeout' AND kind = 'timer'})
  or die "the timeout and the sleep never got their timers";
$node->stop('immediate');
sleep 3;
$node->start;
wait_engine_ready($node, $workers);
pass('server stopped in immediate mode past the deadline, and restarted');

$node->poll_query_until('postgres', qq{
SELECT count(*) = 0 FROM df.instances WHERE id IN ('$retry', '$timeout') AND status IN ('pending', 'running')})
  or diag_engine($node);

is( $node->safe_psql('postgres', qq{
SELECT i.status, n.updated_at >= '$scheduled'::timestamptz, n.updated_at > pg_postmaster_start_time()
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.node_type = 'SQL'
WHERE i.id = '$retry'}),
	'completed|t|t',
	'A: the retried step completed after the restart, not before its back-off ended');
is($node->safe_psql('postgres', 'SELECT last_value FROM attempts'),
	'2', 'A: two attempts in all: none lost, none doubled');
is( $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE kind = 'retry_scheduled'), count(*) FILTER (WHERE kind = 'node_completed' AND node_id = n.id)
FROM df_internal.events e, df.nodes n
WHERE e.instance_id = '$retry' AND n.instance_id = '$retry' AND n.node_type = 'SQL'}),
	'1|1', 'A: one retry scheduled, one completion');

is( $node->safe_psql('postgres', qq{
SELECT i.status, n.status_details->'error'->>'code', n.result #>> '{}',
       n.updated_at >= pg_postmaster_start_time()
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.node_type = 'TIMEOUT'
WHERE i.id = '$timeout'}),
	'failed|timeout|df.timeout: not finished within 2 s|t',
	'B: the deadline that passed during the downtime fired after the restart');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM effects WHERE instance_id = '$timeout'"),
	'0', 'B: the step after the timed-out sleep never ran');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM effects WHERE instance_id = '$retry'"),
	'1', 'A: the retried step took effect once');

check_engine_empty($node);
$node->stop;
done_testing();
