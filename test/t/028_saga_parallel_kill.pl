# Sagas: df.saga survives crashes.
#  - parallel compensation: three undos start at once; an executor running
#    one of them is killed (SIGKILL), in two rounds; every undo must run
#    exactly once and the instance end 'compensated'.
#  - a nested saga with on_compensated: the server stops (immediate) between
#    two of its undos; after the restart the second undo, on_compensated and
#    the step after the saga run once each, the undo outside the saga never.
#  - a compensation stopped by a failing undo ('stop') survives a restart
#    and df.compensate then finishes it, each undo once.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $workers = 2;
my $node = engine_node('saga_parallel', $workers);

sub parallel_graph
{
	return sprintf(
		"df.saga(df.seq(df.seq(df.seq(df.with_undo('%s', '%s'), df.with_undo('%s', '%s')), "
		  . "df.with_undo('%s', '%s')), 'SELECT 1/0'), parallel => true)",
		step_sql('f1', 0), step_sql('u1', 1),
		step_sql('f2', 0), step_sql('u2', 1),
		step_sql('f3', 0), step_sql('u3', 1));
}

sub once_each
{
	my ($what) = @_;
	return is( $node->safe_psql('postgres', q{
SELECT coalesce(string_agg(format('%s/%s: %s', instance_id, step, n), ', '), 'none')
FROM (SELECT instance_id, step, count(e.at) AS n
      FROM expected x FULL JOIN effects e USING (instance_id, step)
      GROUP BY instance_id, step, x.instance_id IS NULL
      HAVING count(e.at) <> 1 OR x.instance_id IS NULL) wrong}),
		'none', "$what: every effect exactly once");
}

sub status_of
{
	my ($id) = @_;
	return $node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$id'");
}

# --- parallel compensation, SIGKILL inside an undo ---------------------------
for my $target (qw(u2 u3))
{
	my $id = start_instance($node, parallel_graph(), qw(f1 f2 f3 u1 u2 u3));
	my $pid = executor_pid_in_step($node, "%''$target''%");
	my $offset = -s $node->logfile;
	ok(kill('KILL', $pid), "parallel: SIGKILL executor $pid inside undo $target");
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	wait_engine_ready($node, $workers);
	ok(wait_instances_done($node, "parallel $target"), "parallel $target: finished");
	is(status_of($id), 'compensated', "parallel $target: compensated");
	once_each("parallel $target");
	is( $node->safe_psql('postgres',
			"SELECT string_agg(DISTINCT state, ',') FROM df_internal.compensations "
			  . "WHERE instance_id = '$id'"),
		'done', "parallel $target: every undo done");
}

# --- a nested saga, a stop between two of its undos --------------------------
my $nested = sprintf(
	"df.seq(df.seq(df.with_undo('%s', '%s'), "
	  . "df.saga(df.seq(df.seq(df.with_undo('%s', '%s'), df.with_undo('%s', '%s')), 'SELECT 1/0'), "
	  . "on_compensated => '%s')), '%s')",
	step_sql('f0', 0), step_sql('u0', 0),
	step_sql('f1', 0), step_sql('u1', 1),
	step_sql('f2', 0), step_sql('u2', 0.2),
	step_sql('oc', 0), step_sql('after', 0));
my $id = start_instance($node, $nested, qw(f0 f1 f2 u2 u1 oc after));
ok(query_until($node, "SELECT count(*) = 1 FROM effects WHERE instance_id = '$id' AND step = 'u2'"),
	'nested: undo u2 committed');
$node->stop('immediate');
$node->start;
wait_engine_ready($node, $workers);
ok(wait_instances_done($node, 'nested'), 'nested: finished');
is(status_of($id), 'completed', 'nested: the saga compensated, the instance went on');
once_each('nested');
is( $node->safe_psql('postgres', qq{
SELECT string_agg(step, ',' ORDER BY at) FROM effects
WHERE instance_id = '$id' AND step IN ('u2', 'u1', 'oc', 'after')}),
	'u2,u1,oc,after', 'nested: the undos latest first, then on_compensated, then the next step');

# --- 'stop', a restart, then df.compensate ------------------------------------
$node->safe_psql('postgres', qq{
CREATE TABLE gate (open boolean);
INSERT INTO gate VALUES (false);
GRANT SELECT ON gate TO $PgDurableTest::ROLE;
CREATE FUNCTION gated(iid text, step text) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
	IF NOT (SELECT open FROM gate) THEN
		RAISE EXCEPTION 'gate closed' USING ERRCODE = '22023';
	END IF;
	INSERT INTO effects (instance_id, step) VALUES (iid, step);
END \$\$;
GRANT EXECUTE ON FUNCTION gated(text, text) TO $PgDurableTest::ROLE;
});
my $stopped = sprintf(
	"df.saga(df.seq(df.seq(df.with_undo('%s', '%s'), df.with_undo('%s', '%s')), 'SELECT 1/0'))",
	step_sql('g1', 0), step_sql('v1', 0),
	step_sql('g2', 0), "SELECT gated(''{sys_instance_id}'', ''v2'')");
$id = start_instance($node, $stopped, qw(g1 g2 v2 v1));
ok(query_until($node, "SELECT status = 'failed' FROM df.instances WHERE id = '$id'"),
	'stop: the failing undo stopped the compensation');
$node->stop('immediate');
$node->start;
wait_engine_ready($node, $workers);
$node->safe_psql('postgres', 'UPDATE gate SET open = true');
$node->safe_psql('postgres', "SET ROLE $PgDurableTest::ROLE; SELECT df.compensate('$id')");
ok(wait_instances_done($node, 'stop'), 'stop: finished after df.compensate');
is(status_of($id), 'compensated', 'stop: compensated');
once_each('stop');

check_engine_empty($node);
$node->stop('fast');
done_testing();
