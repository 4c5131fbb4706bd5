-- Events: df.publish / df.publish_event, df.wait_for_event, and
-- subscriptions.  Who may publish and subscribe: EXECUTE on
-- df.publish_event and df.subscribe, not granted to PUBLIC.

-- builders
SELECT df.publish('orders');
SELECT df.publish('orders', '{"id": $order_id}', 'k-{sys_label}');
SELECT df.wait_for_event('orders');
SELECT df.wait_for_event('orders', '{"status": "paid"}', 30);
SELECT df.publish('');
SELECT df.publish(NULL);
SELECT df.publish('orders', NULL);
SELECT df.publish(repeat('t', 201));
SELECT df.wait_for_event('');
SELECT df.wait_for_event('orders', '[1]');
SELECT df.wait_for_event('orders', NULL);
SELECT df.wait_for_event('orders', '{}', 0);
-- a hand-written node is validated by df.start
SET ROLE df_user;
SELECT df.start('{"node_type":"EVENT","query":"{\"topic\":\"\"}"}');
SELECT df.start('{"node_type":"EVENT","query":"{\"topic\":\"t\",\"filter\":3}"}');
SELECT df.start('{"node_type":"PUBLISH","query":"{\"topic\":\"t\",\"payload\":{}}"}');
RESET ROLE;

-- who may publish: not PUBLIC
SET ROLE df_user;
SELECT df.publish_event('orders', '{"id": 1}');
SELECT df.subscribe('s', 'orders', 'SELECT 1');
RESET ROLE;
GRANT EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) TO df_user;
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO df_user;
SET ROLE df_user;

-- publish_event: the row, published_by, and bad input
SELECT df.publish_event('warmup', '{"n": 0}', 'k0') > 0 AS published;
RESET ROLE;
-- an unshared topic is the publisher's own: its name in df_user's space
SELECT regexp_replace(topic, '^~[0-9]+/', '') AS topic, key, payload, published_by FROM df_internal.bus_events
WHERE topic = df_internal.space_name('topic', 'warmup', 'df_user'::regrole, 'publish');
SET ROLE df_user;
SELECT df.publish_event('', '{}');
SELECT df.publish_event('orders', NULL);

-- from a trigger: the event commits with the row
CREATE TABLE ev_orders (id int);
CREATE FUNCTION ev_orders_publish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM df.publish_event('order_rows', jsonb_build_object('id', NEW.id));
	RETURN NEW;
END
$$;
CREATE TRIGGER ev_orders_publish AFTER INSERT ON ev_orders
	FOR EACH ROW EXECUTE FUNCTION ev_orders_publish();
INSERT INTO ev_orders VALUES (1), (2);
BEGIN;
INSERT INTO ev_orders VALUES (3);
ROLLBACK;
-- and from a workflow's step (its trigger runs in the step's transaction)
SELECT df.start('INSERT INTO ev_orders VALUES (4) RETURNING id', 'ev-trigger-step') AS ts \gset
SELECT df.await_instance(:'ts');
RESET ROLE;
SELECT payload, published_by FROM df_internal.bus_events WHERE topic = df_internal.space_name('topic', 'order_rows', 'df_user'::regrole, 'publish') ORDER BY id;
SET ROLE df_user;

-- wait with a filter: an event published before the start is not received,
-- one published after the start but before the wait is registered is
SELECT df.publish_event('pay', '{"order": 7, "status": "paid", "n": 1}') AS before_start \gset
SELECT df.start('SELECT pg_sleep(0.5)' ~> df.wait_for_event('pay', '{"order": 7}'), 'ev-filter') AS w \gset
-- the step sleeps, so the wait is not registered yet
SELECT df.publish_event('pay', '{"order": 8, "status": "paid"}') AS other_order \gset
SELECT df.publish_event('pay', '{"order": 7, "status": "paid", "n": 2}', 'key-7') AS after_start \gset
SELECT df.await_instance(:'w');
SELECT (df.result(:'w')::jsonb - 'published_at') =
       jsonb_build_object('topic', 'pay', 'key', 'key-7',
                          'payload', '{"order": 7, "status": "paid", "n": 2}'::jsonb,
                          'event_id', :after_start) AS received_after_start;
SELECT df.result(:'w')::jsonb ? 'published_at' AS has_published_at;

-- wait without a filter, registered before the event: woken by its commit
SELECT df.start(df.wait_for_event('ship'), 'ev-any') AS a \gset
SELECT pg_sleep(0.3); -- let the wait register (the test holds either way)
SELECT df.publish_event('ship', '{"box": 1}') AS ship1 \gset
SELECT df.await_instance(:'a');
SELECT (df.result(:'a')::jsonb ->> 'event_id')::bigint = :ship1 AS got_ship1;

-- two waits of one instance (a JOIN, then a loop) take different events
SELECT df.start(df.wait_for_event('multi') & df.wait_for_event('multi'), 'ev-join') AS j \gset
SELECT df.publish_event('multi', '{"i": 1}') AS m1 \gset
SELECT df.publish_event('multi', '{"i": 2}') AS m2 \gset
SELECT df.await_instance(:'j');
SELECT array_agg((r ->> 'event_id')::bigint ORDER BY (r ->> 'event_id')::bigint) = ARRAY[:m1, :m2]::bigint[] AS two_events
FROM jsonb_array_elements(df.result(:'j')::jsonb) r;

-- a loop takes successive events, one per iteration
CREATE TABLE ev_ticks (event_id bigint);
SELECT df.start(df.loop((df.wait_for_event('tick') |=> 'e')
                        ~> 'INSERT INTO ev_ticks VALUES ($e.event_id::bigint) RETURNING event_id',
                        'SELECT (SELECT count(*) FROM ev_ticks) < 3'), 'ev-loop') AS l \gset
SELECT df.publish_event('tick', '{}') AS t1 \gset
SELECT df.publish_event('tick', '{}') AS t2 \gset
SELECT df.publish_event('tick', '{}') AS t3 \gset
SELECT df.await_instance(:'l');
SELECT array_agg(event_id ORDER BY event_id) = ARRAY[:t1, :t2, :t3]::bigint[] AS three_ticks FROM ev_ticks;

-- a RACE of two waits: the first event decides, the other wait goes
SELECT df.start(df.wait_for_event('left') | df.wait_for_event('right'), 'ev-race') AS r \gset
SELECT df.publish_event('right', '{"side": "right"}') AS right_id \gset
SELECT df.await_instance(:'r');
SELECT df.result(:'r')::jsonb -> 'payload' AS winner;
RESET ROLE;
SELECT count(*) AS waits_left FROM df_internal.waits WHERE instance_id = :'r';
SET ROLE df_user;

-- df.explain shows the nodes
SELECT df.explain(df.publish('a', '{"x": 1}') ~> df.wait_for_event('b', '{"k": 1}', 5));

-- timeout
SELECT df.start(df.wait_for_event('never', '{}', 1), 'ev-timeout') AS t \gset
SELECT df.await_instance(:'t');
SELECT df.result(:'t');

-- PUBLISH node: published in the step's transaction, as the submitter, with
-- substitution; a waiting instance receives it
SELECT df.start(df.wait_for_event('from-node', '{"src": "node"}'), 'ev-waiter') AS rcv \gset
SELECT df.start('SELECT 41 + 1 AS v' |=> 'x' ~> df.publish('from-node', '{"src": "node", "v": $x.v}', 'k-$x.v'),
                'ev-publisher') AS pub \gset
SELECT df.await_instance(:'pub');
SELECT df.await_instance(:'rcv');
SELECT df.result(:'rcv')::jsonb -> 'payload' AS payload, df.result(:'rcv')::jsonb ->> 'key' AS key;
SELECT (df.result(:'pub')::jsonb ->> 'event_id') = (df.result(:'rcv')::jsonb ->> 'event_id') AS same_event;
RESET ROLE;
SELECT published_by FROM df_internal.bus_events WHERE topic = df_internal.space_name('topic', 'from-node', 'df_user'::regrole, 'publish');
SET ROLE df_user;
SELECT kind FROM df.history(:'pub') WHERE kind LIKE 'event%';
SELECT kind FROM df.history(:'rcv') WHERE kind LIKE 'event%';
-- a payload that is not JSON once substituted fails the node
SELECT df.start(df.publish('bad', 'not json'), 'ev-bad') AS bad \gset
SELECT df.await_instance(:'bad');
SELECT result FROM df.nodes WHERE instance_id = :'bad' AND status = 'failed';

-- subscriptions: each matching event starts one instance as the owner, $event bound
CREATE TABLE ev_seen (event_id bigint, payload jsonb, who name);
SELECT df.subscribe('audit', 'audit', 'INSERT INTO ev_seen VALUES ($event.event_id::bigint, $event.payload::jsonb, current_user) RETURNING event_id',
                    '{"kind": "login"}');
SELECT df.subscribe('audit', 'audit', 'SELECT 1');
SELECT df.subscribe('', 'audit', 'SELECT 1');
SELECT df.subscribe('x', 'audit', '{"node_type":"NOPE"}');
SELECT df.subscribe('x', 'audit', 'SELECT 1', '[]');
SELECT name, topic, filter, owner FROM df.subscriptions;
SELECT df.publish_event('audit', '{"kind": "login", "user": "ann"}') AS e1 \gset
SELECT df.publish_event('audit', '{"kind": "logout", "user": "ann"}') AS e2 \gset
BEGIN;
SELECT df.publish_event('audit', '{"kind": "login", "user": "rolled back"}') AS e3 \gset
ROLLBACK;
SELECT df.await_instance(id) FROM df.instances WHERE idempotency_key = 'sub:audit:' || :e1;
SELECT event_id = :e1 AS right_event, payload, who FROM ev_seen;
SELECT count(*) AS instances FROM df.instances WHERE idempotency_key LIKE 'sub:audit:%';
-- a PUBLISH node starts the subscription's workflow in its step's transaction
SELECT df.start(df.publish('audit', '{"kind": "login", "user": "node"}'), 'ev-node-sub') AS ns \gset
SELECT df.await_instance(:'ns');
SELECT (df.result(:'ns')::jsonb ->> 'event_id') AS node_event \gset
SELECT df.await_instance(id) FROM df.instances WHERE idempotency_key = 'sub:audit:' || :'node_event';
SELECT payload, who FROM ev_seen WHERE event_id = :'node_event';
SELECT df.unsubscribe('audit');
SELECT df.unsubscribe('audit');
SELECT df.publish_event('audit', '{"kind": "login", "user": "bob"}') AS e4 \gset
SELECT count(*) AS after_unsubscribe FROM df.instances WHERE idempotency_key LIKE 'sub:audit:%';
RESET ROLE;

-- another role cannot remove df_user's subscription, and does not see it;
-- a subscription's name is its owner's own: another role's of the same
-- name neither conflicts with it nor tells it exists
SET ROLE df_user;
SELECT df.subscribe('mine', 'audit', 'SELECT 1');
RESET ROLE;
CREATE ROLE ev_other;
GRANT USAGE ON SCHEMA df TO ev_other;
GRANT SELECT ON df.instances TO ev_other;
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO ev_other;
SET ROLE ev_other;
SELECT count(*) AS visible FROM df.subscriptions;
-- the subscriber's instances are df_user's, under row-level security
SELECT count(*) AS visible_instances FROM df.instances WHERE idempotency_key LIKE 'sub:%';
SELECT df.unsubscribe('mine') AS removed_another_roles;
SELECT df.subscribe('mine', 'audit', 'SELECT 2');
SELECT name, workflow, owner FROM df.subscriptions;
RESET ROLE;
SELECT name, workflow, owner FROM df_internal.subscriptions WHERE name = 'mine' ORDER BY owner::text;
-- a superuser is a member of every role: both go
SELECT df.unsubscribe('mine');
SELECT count(*) AS left_of_mine FROM df_internal.subscriptions WHERE name = 'mine';
REVOKE EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) FROM ev_other;
REVOKE SELECT ON df.instances FROM ev_other;
REVOKE USAGE ON SCHEMA df FROM ev_other;
DROP ROLE ev_other;

-- df.check() reports a running EVENT node without its registered wait
SET ROLE df_user;
SELECT df.start(df.wait_for_event('lonely'), 'ev-check') AS c \gset
RESET ROLE;
DO $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df_internal.waits w JOIN df.instances i ON i.id = w.instance_id
					  WHERE i.label = 'ev-check') LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'the EVENT wait was not registered within 30 seconds';
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;
SELECT problem FROM df.check() WHERE instance_id = :'c';
DELETE FROM df_internal.waits WHERE instance_id = :'c';
SELECT problem, regexp_replace(detail, '[0-9a-f]{8}', '<id>', 'g') AS detail
FROM df.check() WHERE instance_id = :'c' ORDER BY problem;
SELECT df.cancel(:'c', 'test') IS NOT NULL AS cancelled;

SELECT engine_idle();
REVOKE EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) FROM df_user;
REVOKE EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) FROM df_user;
DROP TABLE ev_seen, ev_ticks, ev_orders;
DROP FUNCTION ev_orders_publish();
