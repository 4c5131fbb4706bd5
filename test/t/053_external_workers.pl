# External workers (docs/guides/external-workers.md): TASK steps claimed over
# SQL with leases.
#  1. A worker process SIGKILLed holding a task: after its lease the task is
#     offered again with attempt 2, the instance completes, and the old
#     worker's late completion is 'stale'.
#  2. df.retry, df.timeout, df.catch and df.with_undo around a TASK.
#  3. The server stopped in immediate mode while tasks are leased: after the
#     restart the leases still hold, their completions count, nothing is
#     lost or doubled.
#  4. 1,000 tasks across 4 worker processes: each completed exactly once,
#     and the step after each ran exactly once.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use PgDurableTest;

my $node = engine_node('extworkers', 2);
$node->safe_psql('postgres', q{
CREATE ROLE worker LOGIN;
SELECT df.grant_worker('worker', 't.*');
});

sub worker_sql
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET ROLE worker; $sql");
}

sub wait_ready
{
	my ($queue, $n) = @_;
	query_until($node,
		"SELECT count(*) >= $n FROM df.tasks WHERE queue = '$queue' AND state = 'ready'")
	  or die "no ready task in $queue";
}

# --- 1. a worker killed mid-task -------------------------------------------------
my $id = start_instance($node,
	"df.task('t.kill', '{\"n\": 1}') |=> 'k' ~> "
	  . "'INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''after_'' || \$k.done'",
	'after_yes');
wait_ready('t.kill', 1);
# the worker: claims with a 2 s lease in one transaction, then works on (no heartbeat)
my ($out, $err) = ('', '');
my $worker = IPC::Run::start(
	[ 'psql', '-X', '-q', '-At', '-d', $node->connstr('postgres'),
	  '-c', "SET ROLE worker; SELECT task_id || ' ' || lease_token || ' ' || attempt FROM df.claim_tasks('t.kill', 'doomed', 1, '2 seconds')",
	  '-c', 'SELECT pg_sleep(600)' ],
	'>', \$out, '2>', \$err);
query_until($node, "SELECT state = 'leased' FROM df.tasks WHERE queue = 't.kill'")
  or die "the worker did not claim";
$worker->signal('KILL');
$worker->finish;
my ($task, $old_token, $attempt) = split / /, (split /\n/, $out)[0];
is($attempt, 1, 'the killed worker held attempt 1');
query_until($node, "SELECT state = 'ready' AND attempt = 1 FROM df.tasks WHERE queue = 't.kill'")
  or die "the lease was not taken back";
pass('after the lease, the task is offered again');
my ($t2, $token2, $attempt2) = split /\|/,
  worker_sql("SELECT task_id, lease_token, attempt FROM df.claim_tasks('t.kill', 'second')");
is($t2, $task, 'the same task');
is($attempt2, 2, 'with attempt 2');
is(worker_sql("SELECT df.complete_task($task, '$old_token', '{\"done\": \"late\"}')"), 'stale',
	"the killed worker's late completion is stale");
is(worker_sql("SELECT df.heartbeat_task($task, '$old_token')"), 'lost', "and its heartbeat: lost");
is(worker_sql("SELECT df.complete_task($task, '$token2', '{\"done\": \"yes\"}')"), 'ok', 'the second worker completes it');
is(worker_sql("SELECT df.complete_task($task, '$old_token', '{\"done\": \"late\"}')"), 'already',
	'a completion after the end: already');
wait_instances_done($node, 'killed worker');
check_effects($node, 1);

# a lease that runs out 3 times fails the node with task_lease_expired
$id = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start(df.catch(df.task('t.expire'), 'SELECT \$error.code AS code'))");
for my $n (1 .. 3)
{
	wait_ready('t.expire', 1);
	is(worker_sql("SELECT attempt FROM df.claim_tasks('t.expire', 'w', 1, '1 second')"), $n, "attempt $n claimed and abandoned");
}
query_until($node, "SELECT status = 'completed' FROM df.instances WHERE id = '$id'") or die 'not ended';
like($node->safe_psql('postgres', "SELECT df.result('$id')"), qr/task_lease_expired/, 'after 3 expired leases: task_lease_expired');

# --- 2. the wrappers around a TASK ----------------------------------------------
# df.retry: an expired lease fails the attempt, the policy offers it again
$id = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start(df.retry(df.task('t.retry'), 3, '10 ms'))");
wait_ready('t.retry', 1);
worker_sql("SELECT attempt FROM df.claim_tasks('t.retry', 'w', 1, '1 second')");
query_until($node, "SELECT EXISTS (SELECT FROM df_internal.events WHERE instance_id = '$id' AND kind = 'retry_scheduled' AND detail->>'code' = 'task_lease_expired')")
  or die 'no retry after the expired lease';
pass('df.retry: an expired lease is a failed attempt, retried');
wait_ready('t.retry', 1);
is(worker_sql("SELECT df.complete_task(task_id, lease_token, '{\"r\": 2}') FROM df.claim_tasks('t.retry', 'w')"), 'ok', 'df.retry: the next attempt completes');
query_until($node, "SELECT status = 'completed' FROM df.instances WHERE id = '$id'") or die 'retry not completed';

# df.timeout: the node times out while leased; the heartbeat says cancel_requested
$id = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start(df.catch(df.timeout(df.task('t.slow'), 1), 'SELECT \$error.code AS code'))");
wait_ready('t.slow', 1);
my ($ts, $tok) = split /\|/, worker_sql("SELECT task_id, lease_token FROM df.claim_tasks('t.slow', 'w', 1, '1 minute')");
query_until($node, "SELECT status = 'completed' FROM df.instances WHERE id = '$id'") or die 'timeout did not fire';
is(worker_sql("SELECT df.heartbeat_task($ts, '$tok')"), 'cancel_requested', 'df.timeout: the heartbeat says cancel_requested');
is(worker_sql("SELECT df.complete_task($ts, '$tok')"), 'already', 'df.timeout: a late completion is already');
like($node->safe_psql('postgres', "SELECT df.result('$id')"), qr/timeout/, 'df.catch sees the timeout');

# df.with_undo: a completed TASK's undo is a TASK too, run when the saga fails
$id = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start(df.saga(df.with_undo(df.task('t.pay', '{\"amount\": 5}') |=> 'pay', "
	  . "df.task('t.refund', '{\"charge\": \"\$pay.charge_id\"}')) ~> 'SELECT 1/0'))");
wait_ready('t.pay', 1);
worker_sql("SELECT df.complete_task(task_id, lease_token, '{\"charge_id\": \"ch_9\"}') FROM df.claim_tasks('t.pay', 'w')");
wait_ready('t.refund', 1);
my ($rt, $rtok, $charge) = split /\|/,
  worker_sql("SELECT task_id, lease_token, payload->>'charge' FROM df.claim_tasks('t.refund', 'w', 1, '1 minute')");
is($charge, 'ch_9', 'df.with_undo: the undo task reads the forward result');
is(worker_sql("SELECT df.complete_task($rt, '$rtok')"), 'ok', 'the undo task completes');
query_until($node, "SELECT status = 'compensated' FROM df.instances WHERE id = '$id'") or die 'not compensated';
pass('df.with_undo: the saga is compensated by its undo task');

# --- 3. an immediate restart while tasks are leased -------------------------------
my @ids = map {
	start_instance($node,
		"df.task('t.restart', '{\"i\": $_}') |=> 'r' ~> "
		  . "'INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''after_restart'''",
		'after_restart')
} 1 .. 5;
wait_ready('t.restart', 5);
my @leases = map { [ split /\|/ ] } split /\n/,
  worker_sql("SELECT task_id, lease_token FROM df.claim_tasks('t.restart', 'w', 10, '5 minutes')");
is(scalar(@leases), 5, 'five tasks leased');
$node->stop('immediate');
$node->start;
wait_engine_ready($node, 2);
is(worker_sql("SELECT string_agg(df.complete_task(task_id, lease_token), ',') FROM (VALUES "
	  . join(', ', map { "($_->[0], '$_->[1]')" } @leases) . ") AS l(task_id, lease_token)"),
	'ok,ok,ok,ok,ok', 'after the restart, the leases still hold');
wait_instances_done($node, 'immediate restart');
is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT instance_id) FROM effects WHERE step = 'after_restart'"),
	'5|5', 'the step after each leased task ran once');

# --- 4. 1,000 tasks across 4 workers ----------------------------------------------
$node->safe_psql('postgres', q{
CREATE TABLE ledger (task_id bigint, worker text);
GRANT INSERT ON ledger TO worker;
SET ROLE df_user;
SELECT count(df.start(df.task('t.bulk', '{"i": ' || i || '}') |=> 'b' ~>
       'INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''bulk''', 'bulk'))
FROM generate_series(1, 1000) AS i;
});
my (@workers, @worker_errors);
for my $w (1 .. 4)
{
	my $loop = qq{
DO \$\$
DECLARE
	t record;
	idle int := 0;
BEGIN
	WHILE idle < 300 LOOP
		idle := idle + 1;
		FOR t IN SELECT * FROM df.claim_tasks('t.bulk', 'w$w', 8) LOOP
			idle := 0;
			IF df.complete_task(t.task_id, t.lease_token, jsonb_build_object('w', $w)) = 'ok' THEN
				INSERT INTO ledger VALUES (t.task_id, 'w$w');
			END IF;
		END LOOP;
		COMMIT;
		IF idle > 0 THEN PERFORM pg_sleep(0.01); END IF;
	END LOOP;
END
\$\$;};
	push @workers, IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', 'SET ROLE worker', '-c', $loop ],
		'>', \my $o, '2>', \$worker_errors[$w]);
}
query_until($node, "SELECT count(*) = 1000 FROM effects WHERE step = 'bulk'")
  or diag 'the bulk run did not finish';
$_->finish for @workers;
diag "worker $_: $worker_errors[$_]" for grep { $worker_errors[$_] } 1 .. 4;
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT task_id) FROM ledger'), '1000|1000',
	'1,000 tasks, each completed once');
# (shared: on a loaded machine a worker that starts late can find the
# queue already drained, so not every one of the four need take part)
cmp_ok($node->safe_psql('postgres', 'SELECT count(DISTINCT worker) FROM ledger'), '>=', 2,
	'shared by the workers');
is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT instance_id) FROM effects WHERE step = 'bulk'"),
	'1000|1000', 'the step after each task ran once');
wait_instances_done($node, 'bulk');

$node->stop;
done_testing();
