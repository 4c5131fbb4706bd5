-- Data never becomes SQL: one role's event cannot run SQL as another role
-- through a subscription's SQL step (the first finding of the two-role
-- review).  alice subscribes with a step that writes the event's key into
-- her table; bob publishes an event whose key tries to end a literal and
-- publish alice's table to a topic bob can read.
CREATE ROLE subst_alice LOGIN;
CREATE ROLE subst_bob LOGIN;
SELECT df.grant_usage('subst_alice');
SELECT df.grant_usage('subst_bob');
GRANT EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) TO subst_alice, subst_bob;
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO subst_alice;
CREATE SCHEMA subst_a AUTHORIZATION subst_alice;
-- the topic is shared: alice reads it and bob may publish to it (without
-- the grant bob's events go to his own topic: docs/design/tenancy.md)
SELECT df.create_topic('subst_keys');
SELECT df.grant_topic('subst_keys', 'subst_alice', '{subscribe}');
SELECT df.grant_topic('subst_keys', 'subst_bob', '{publish}');

SET ROLE subst_alice;
CREATE TABLE subst_a.at (x text);
INSERT INTO subst_a.at VALUES ('secret-1'), ('secret-2');
-- the natural way to write it, a reference inside a literal, is refused
SELECT df.subscribe('subst_at', 'subst_keys',
                    'INSERT INTO subst_a.at (x) VALUES (''k2:$event.key'')');
-- the form the hint gives is accepted
SELECT df.subscribe('subst_at', 'subst_keys',
                    'INSERT INTO subst_a.at (x) VALUES (''k2:'' || $event.key)');
RESET ROLE;

-- bob's event, with the key of the finding
SET ROLE subst_bob;
SELECT df.publish_event('subst_keys', '{}',
       $k$'), ((SELECT df.publish_event($$leak$$, to_jsonb((SELECT string_agg(x,$$|$$) FROM subst_a.at)))::text)) --$k$) > 0 AS published;
RESET ROLE;
SELECT engine_idle();
-- alice's step ran and wrote bob's key as data, nothing else
SELECT i.status FROM df.instances i WHERE i.idempotency_key LIKE 'sub:subst_at:%';
SELECT x FROM subst_a.at ORDER BY x;
SELECT count(*) AS leaked FROM df_internal.bus_events WHERE regexp_replace(topic, '^~[0-9]+/', '') = 'leak';

-- a subscription kept from before the check (its workflow stored as it
-- was written then) starts, and its step fails when it runs, before any
-- of its SQL
SELECT df.unsubscribe('subst_at');
INSERT INTO df_internal.subscriptions (name, topic, workflow, owner)
VALUES ('subst_old', 'subst_keys', 'INSERT INTO subst_a.at (x) VALUES (''k2:$event.key'')', 'subst_alice');
SET ROLE subst_bob;
SELECT df.publish_event('subst_keys', '{}',
       $k$'), ((SELECT df.publish_event($$leak$$, to_jsonb((SELECT string_agg(x,$$|$$) FROM subst_a.at)))::text)) --$k$) > 0 AS published;
RESET ROLE;
SELECT engine_idle();
SELECT i.status, n.result
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
WHERE i.idempotency_key LIKE 'sub:subst_old:%';
SELECT count(*) AS rows_after FROM subst_a.at;
SELECT count(*) AS leaked FROM df_internal.bus_events WHERE regexp_replace(topic, '^~[0-9]+/', '') = 'leak';

-- the same through a {variable}: a variable is alice's own text, but what
-- it puts around a reference is checked when the step runs
SELECT df.unsubscribe('subst_old');
SET ROLE subst_alice;
SELECT df.setvar('open', '''k2:');
SELECT df.subscribe('subst_var', 'subst_keys',
                    'INSERT INTO subst_a.at (x) VALUES ({open}$event.key'')');
RESET ROLE;
SET ROLE subst_bob;
SELECT df.publish_event('subst_keys', '{}', $k$'); SELECT 1; --$k$) > 0 AS published;
RESET ROLE;
SET ROLE subst_alice;
SELECT df.clearvars();
RESET ROLE;
SELECT engine_idle();
SELECT i.status, n.result
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
WHERE i.idempotency_key LIKE 'sub:subst_var:%';
SELECT count(*) AS rows_after FROM subst_a.at;

-- clean up
SELECT df.unsubscribe('subst_var');
SET ROLE subst_alice;
SELECT count(*) AS alice_instances FROM df.instances;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) FROM subst_alice, subst_bob;
REVOKE EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) FROM subst_alice;
SELECT df.drop_topic('subst_keys');
