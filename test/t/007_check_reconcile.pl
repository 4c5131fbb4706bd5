# df.check() and reconciliation (pg_durable.reconcile_interval = 2): the
# engine's state is corrupted on purpose, df.check() reports each problem
# in the very transaction that made it (so reconciliation cannot have
# repaired it yet), and after the commit reconciliation repairs it:
#  A. the timer of a running df.sleep(4) is deleted: the instance would
#     wait forever; the timer comes back due when the sleep would have
#     ended (not earlier) and the next step runs once;
#  B. the step after a sleep is running but its task is lost (the state a
#     lost "step" task leaves): the step is enqueued again and runs once;
#  C. a task and a runs row are left for a finished instance: both go.
# Every problem is logged; df.check() is empty at the end.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PgDurableTest;

my $node = engine_node('check_reconcile', 2,
	"pg_durable.reconcile_interval = 2\nlog_min_messages = log\n");

sub wait_sleeping
{
	my ($id) = @_;
	$node->poll_query_until('postgres', qq{
SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = '$id' AND node_type = 'SLEEP'
               AND status = 'running')
   AND EXISTS (SELECT 1 FROM df_internal.tasks WHERE instance_id = '$id' AND kind = 'timer')})
	  or die "instance $id did not reach its sleep";
}

my $iid = q{''{sys_instance_id}''};

# A: a lost timer
my $a = start_instance($node,
	qq{df.sleep(4) ~> 'INSERT INTO effects (instance_id, step) VALUES ($iid, ''a'')'}, 'a');
wait_sleeping($a);
is( $node->safe_psql('postgres', qq{
BEGIN;
DELETE FROM df_internal.tasks WHERE instance_id = '$a' AND kind = 'timer';
SELECT string_agg(problem, ',' ORDER BY problem) FROM df.check() WHERE instance_id = '$a';
COMMIT;}),
	'missing_timer,no_pending_work',
	'A: df.check reports the lost timer');

# B: a step that lost its task
my $b = start_instance($node,
	qq{df.sleep(600) ~> 'INSERT INTO effects (instance_id, step) VALUES ($iid, ''b'')'}, 'b');
wait_sleeping($b);
is( $node->safe_psql('postgres', qq{
BEGIN;
DO \$\$ BEGIN PERFORM FROM df_internal.runs WHERE instance_id = '$b' FOR UPDATE; END \$\$;
DELETE FROM df_internal.tasks WHERE instance_id = '$b';
UPDATE df.nodes s SET status = 'completed', result = '{"slept": true, "seconds": 600}'
FROM df.instances i JOIN df.nodes t ON t.instance_id = i.id AND t.id = i.root_node
WHERE i.id = '$b' AND s.instance_id = i.id AND s.id = t.left_node;
UPDATE df.nodes q SET status = 'running', status_details = t.status_details
FROM df.instances i JOIN df.nodes t ON t.instance_id = i.id AND t.id = i.root_node
WHERE i.id = '$b' AND q.instance_id = i.id AND q.id = t.right_node;
SELECT string_agg(problem, ',' ORDER BY problem) FROM df.check() WHERE instance_id = '$b';
COMMIT;}),
	'no_pending_work,stranded_step',
	'B: df.check reports the step without a task');

wait_instances_done($node, 'A and B');
check_effects($node, 2);
ok( $node->safe_psql('postgres', qq{
SELECT e.at >= i.created_at + interval '4 seconds'
FROM effects e JOIN df.instances i ON i.id = e.instance_id WHERE e.instance_id = '$a'}) eq 't',
	'A: the restored timer did not end the sleep early');

# C: leftovers of a finished instance
is( $node->safe_psql('postgres', qq{
BEGIN;
INSERT INTO df_internal.tasks (instance_id, scope, kind, run_at)
VALUES ('$a', '$a', 'timer', now() + interval '1 hour');
INSERT INTO df_internal.runs (instance_id, submitted_by, status) VALUES ('$a', 10, 'running');
SELECT string_agg(problem, ',' ORDER BY problem) FROM df.check() WHERE instance_id = '$a';
COMMIT;}),
	'orphan_run,task_of_finished_instance',
	'C: df.check reports the leftovers of a finished instance');

ok( $node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM df.check()'),
	'reconciliation repaired everything: df.check() is empty');
check_engine_empty($node);

my $log = slurp_file($node->logfile);
like($log, qr/reconciliation repaired instance $a: missing_timer/, 'A: the repair is logged');
like($log, qr/reconciliation repaired instance $b: stranded_step/, 'B: the repair is logged');
like($log, qr/reconciliation repaired instance $a: orphan_run/, 'C: the repair is logged');

# the executors show themselves in pg_stat_activity
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'pg_durable executor' AND application_name = 'pg_durable executor'}),
	'2', 'executors are named in pg_stat_activity');

$node->stop;
done_testing();
