-- External workers: df.task, df.claim_tasks, df.heartbeat_task,
-- df.complete_task, df.fail_task, df.grant_worker, df.tasks.

-- the builder and its errors
SELECT df.task('payments');
SELECT df.task('payments', '{"order": {order_id}}', 60, 10);
SELECT df.task('');
SELECT df.task(NULL);
SELECT df.task('pay*');
SELECT df.task('payments', NULL);
SELECT df.task('payments', '{}', 0);
SELECT df.task('payments', '{}', NULL, -1);
SELECT df.task(repeat('q', 201));
-- a hand-written node is validated by df.start
SET ROLE df_user;
SELECT df.start('{"node_type":"TASK","query":"{\"queue\":\"\"}"}');
SELECT df.start('{"node_type":"TASK","query":"{\"queue\":\"q\",\"payload\":{}}"}');
SELECT df.start('{"node_type":"TASK","query":"{\"queue\":\"q\",\"timeout_seconds\":\"x\"}"}');
RESET ROLE;

-- workers: a role granted one queue pattern
CREATE ROLE ext_worker LOGIN;
CREATE ROLE ext_other LOGIN;
GRANT USAGE ON SCHEMA df TO ext_other;
SELECT df.grant_worker('ext_worker', 'xt.*');
SELECT df.grant_worker('nobody_here', 'xt.*');
SELECT df.grant_worker('ext_worker', '');
SET ROLE ext_worker;
SELECT df.grant_worker('ext_worker', 'other');
RESET ROLE;

-- a workflow: a SQL step, a task that reads its result, a step that reads the task's
SET ROLE df_user;
SELECT df.start(('SELECT 41 AS n' |=> 'prev')
				~> (df.task('xt.pay', '{"amount": $prev.n, "label": "{sys_label}"}', 60) |=> 'paid')
				~> 'SELECT $paid.charge_id AS charge', 'order-1') AS id \gset
RESET ROLE;
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.pay' AND state = 'ready')$$);
-- df.metrics: the queue's depth and age, as df.task_queues shows it to the caller
SELECT task_queues->'xt.pay'->'ready' AS ready, task_queues->'xt.pay'->'leased' AS leased,
	   (task_queues->'xt.pay'->>'oldest_ready_age_seconds')::numeric >= 0 AS has_age
FROM df.metrics();
GRANT EXECUTE ON FUNCTION df.metrics() TO ext_worker, ext_other;
SET ROLE ext_other;
SELECT task_queues ? 'xt.pay' AS other_sees_queue FROM df.metrics();
RESET ROLE;

-- the argument checks
SELECT * FROM df.claim_tasks(NULL, 'w');
SELECT * FROM df.claim_tasks('xt.pay', '');
SELECT * FROM df.claim_tasks('xt.pay', 'w', 0);
SELECT * FROM df.claim_tasks('xt.pay', 'w', 1, '0 seconds');
SELECT * FROM df.claim_tasks('xt.pay', 'w', 1, '2 days');

-- a role without the grant is refused, and sees no task
SET ROLE ext_other;
SELECT * FROM df.claim_tasks('xt.pay', 'w-other');
SELECT count(*) FROM df.tasks;
RESET ROLE;

-- the granted worker claims it: attempt 1, the payload substituted, the key and the trace
SET ROLE ext_worker;
SELECT count(*) AS visible FROM df.tasks;
CREATE TEMP TABLE claimed AS SELECT * FROM df.claim_tasks('xt.pay', 'w1', 10, '30 seconds');
SELECT attempt, payload, deadline IS NOT NULL AS has_deadline,
	   idempotency_key = instance_id || '::1:' || split_part(idempotency_key, ':', 4) AS key_per_node,
	   traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$' AS traceparent_ok
FROM claimed;
-- nothing more to claim
SELECT count(*) FROM df.claim_tasks('xt.pay', 'w2', 10);
SELECT queue, state, attempt, worker, leased_until > now() AS leased FROM df.tasks;
SELECT queue, ready, leased, oldest_ready_age IS NULL AS none_waiting FROM df.task_queues;
SELECT task_queues->'xt.pay' AS xt_pay FROM df.metrics();
-- a heartbeat extends the lease; a wrong token is 'lost'
SELECT df.heartbeat_task(task_id, lease_token) FROM claimed;
SELECT df.heartbeat_task(task_id, lease_token, '1 minute') FROM claimed;
SELECT df.heartbeat_task(task_id, 'not-the-token') FROM claimed;
-- a completion with a stale token changes nothing
SELECT df.complete_task(task_id, gen_random_uuid()::text, '{"charge_id": "wrong"}') FROM claimed;
-- result size limit
SELECT df.complete_task(task_id, lease_token, jsonb_build_object('x', repeat('x', 1100 * 1024)))
FROM claimed;
-- the completion, then a second one: 'already'
SELECT df.complete_task(task_id, lease_token, '{"charge_id": "ch_1"}') FROM claimed;
SELECT df.complete_task(task_id, lease_token, '{"charge_id": "ch_2"}') FROM claimed;
SELECT df.fail_task(task_id, lease_token, 'late') FROM claimed;
SELECT df.heartbeat_task(task_id, lease_token) FROM claimed;
-- a task that does not exist is refused like one of another queue
SELECT df.complete_task(-1, 'x');
RESET ROLE;
SELECT df.await_instance(:'id', 30);
SELECT df.result(:'id');

-- a failure: df.fail_task with its code, caught by df.catch
SET ROLE df_user;
SELECT df.start(df.catch(df.task('xt.ship', '{"order": 7}'), 'SELECT $error.code AS code, $error.message AS message'),
				'order-2') AS id2 \gset
RESET ROLE;
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.ship' AND state = 'ready')$$);
SET ROLE ext_worker;
SELECT df.fail_task(task_id, lease_token, 'no truck', true, 'no_truck')
FROM df.claim_tasks('xt.ship', 'w1');
RESET ROLE;
SELECT df.await_instance(:'id2', 30);
SELECT df.result(:'id2');

-- df.retry around a task: a failed attempt is offered again, with the same key, attempt 2
SET ROLE df_user;
SELECT df.start(df.retry(df.task('xt.retry'), 3, '10 ms'), 'order-3') AS id3 \gset
RESET ROLE;
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.retry' AND state = 'ready')$$);
SET ROLE ext_worker;
CREATE TEMP TABLE first_try AS SELECT * FROM df.claim_tasks('xt.retry', 'w1');
SELECT df.fail_task(task_id, lease_token, 'flaky') FROM first_try;
RESET ROLE;
-- offered again once its back-off is over
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.retry' AND state = 'ready'
                                   AND ready_at <= clock_timestamp())$$);
SET ROLE ext_worker;
CREATE TEMP TABLE second_try AS SELECT * FROM df.claim_tasks('xt.retry', 'w1');
SELECT s.attempt, s.idempotency_key = f.idempotency_key AS same_key, s.task_id = f.task_id AS same_task
FROM second_try s, first_try f;
-- the first attempt's token is stale now
SELECT df.complete_task(task_id, lease_token) FROM first_try;
SELECT df.complete_task(task_id, lease_token, '{"ok": true}') FROM second_try;
RESET ROLE;
SELECT df.await_instance(:'id3', 30);
SELECT df.result(:'id3');

-- a non-retryable failure is not retried
SET ROLE df_user;
SELECT df.start(df.retry(df.task('xt.retry'), 3, '10 ms'), 'order-4') AS id4 \gset
RESET ROLE;
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.retry' AND state = 'ready')$$);
SET ROLE ext_worker;
SELECT df.fail_task(task_id, lease_token, 'card declined', false, 'declined')
FROM df.claim_tasks('xt.retry', 'w1');
RESET ROLE;
SELECT df.await_instance(:'id4', 30);
SELECT status FROM df.instances WHERE id = :'id4';

-- cancel seen by heartbeat; the completion after it is 'already'
SET ROLE df_user;
SELECT df.start(df.task('xt.cancel'), 'order-5') AS id5 \gset
RESET ROLE;
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.cancel' AND state = 'ready')$$);
SET ROLE ext_worker;
CREATE TEMP TABLE to_cancel AS SELECT * FROM df.claim_tasks('xt.cancel', 'w1');
RESET ROLE;
SET ROLE df_user;
SELECT df.cancel(:'id5', 'changed my mind') IS NOT NULL AS cancelled;
RESET ROLE;
SET ROLE ext_worker;
SELECT df.heartbeat_task(task_id, lease_token) FROM to_cancel;
SELECT df.complete_task(task_id, lease_token) FROM to_cancel;
RESET ROLE;

-- a ready task of a cancelled instance leaves df.tasks and df.task_queues with the cancel
SET ROLE df_user;
SELECT df.start(df.task('xt.gone'), 'order-6') AS id6 \gset
RESET ROLE;
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.gone' AND state = 'ready')$$);
SET ROLE df_user;
SELECT df.cancel(:'id6', 'not needed') IS NOT NULL AS cancelled;
SELECT count(*) AS ready_after_cancel FROM df.tasks WHERE queue = 'xt.gone';
SELECT count(*) AS queues_after_cancel FROM df.task_queues WHERE queue = 'xt.gone';
RESET ROLE;

-- a lease that runs out: the next claim takes it back (attempt 2), the
-- old worker's completion is stale; after 3 attempts the node fails
-- with code task_lease_expired
SET ROLE df_user;
SELECT df.start(df.catch(df.task('xt.lease'), 'SELECT $error.code AS code'), 'order-7') AS id7 \gset
RESET ROLE;
SELECT wait_until($$SELECT EXISTS (SELECT FROM df.tasks WHERE queue = 'xt.lease' AND state = 'ready')$$);
SET ROLE ext_worker;
CREATE TEMP TABLE lease1 AS SELECT * FROM df.claim_tasks('xt.lease', 'w1', 1, '1 second');
RESET ROLE;
SELECT wait_until($$SELECT coalesce(leased_until < clock_timestamp(), state = 'ready') FROM df.tasks WHERE queue = 'xt.lease'$$);
SET ROLE ext_worker;
CREATE TEMP TABLE lease2 AS SELECT * FROM df.claim_tasks('xt.lease', 'w2', 1, '1 second');
SELECT attempt FROM lease2;
SELECT df.complete_task(task_id, lease_token, '{"late": true}') FROM lease1;
SELECT df.heartbeat_task(task_id, lease_token) FROM lease1;
RESET ROLE;
SELECT wait_until($$SELECT coalesce(leased_until < clock_timestamp(), state = 'ready') FROM df.tasks WHERE queue = 'xt.lease'$$);
SET ROLE ext_worker;
SELECT attempt FROM df.claim_tasks('xt.lease', 'w3', 1, '1 second');
RESET ROLE;
SELECT df.await_instance(:'id7', 30);
SELECT df.result(:'id7');
SELECT state, attempt FROM df.tasks WHERE queue = 'xt.lease';

-- a payload that is not JSON once substituted fails the node, with no task
SET ROLE df_user;
SELECT df.start(df.task('xt.bad', '{"x": {sys_label}}'), 'not json') AS id6 \gset
RESET ROLE;
SELECT df.await_instance(:'id6', 30);
SELECT df.status(:'id6') AS status, (SELECT count(*) FROM df.tasks WHERE queue = 'xt.bad') AS tasks;

REVOKE EXECUTE ON FUNCTION df.metrics() FROM ext_worker, ext_other;

-- revoked, the worker is refused again
SELECT df.revoke_worker('ext_worker', 'xt.*');
SELECT df.revoke_worker('ext_worker', 'xt.*');
SET ROLE ext_worker;
SELECT * FROM df.claim_tasks('xt.pay', 'w1');
RESET ROLE;
