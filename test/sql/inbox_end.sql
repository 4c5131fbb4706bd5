-- The record of an instance that ends while completions wait in its
-- inbox (docs/design/batches-and-inbox.md §4): a step whose completion
-- went to the inbox has committed its effects, so its node shows
-- completed with its result, and the inbox is empty once the instance
-- has ended.  The runs row is held here while a JOIN branch completes
-- (so its completion goes to the inbox), then the instance is cancelled
-- in the same transaction.
CREATE SEQUENCE ie_gate;
GRANT SELECT ON ie_gate TO df_user;
CREATE TABLE ie_effects (v int);
GRANT INSERT, SELECT ON ie_effects TO df_user;
-- waits (with a deadline) until the gate moves: setval is seen at once,
-- whatever transaction holds what
CREATE FUNCTION ie_gated() RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
	WHILE (SELECT last_value FROM ie_gate) < 2 AND clock_timestamp() < deadline LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	INSERT INTO ie_effects VALUES (7);
	RETURN 7;
END $$;
GRANT EXECUTE ON FUNCTION ie_gated() TO df_user;

SET ROLE df_user;
SELECT df.start(df.join(df.wait_for_signal('never'), 'SELECT ie_gated() AS v')) AS id \gset
RESET ROLE;
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = %L AND node_type = ''SQL'' AND status = ''running'')', :'id'), 60);

BEGIN;
SELECT status FROM df_internal.runs WHERE instance_id = :'id' FOR UPDATE;
SELECT setval('ie_gate', 2) > 0 AS opened;
-- the branch commits its effect and its completion into the inbox
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df_internal.inbox WHERE instance_id = %L)', :'id'), 60);
SELECT replace(df.cancel(:'id'), :'id', '<id>') AS answer;
COMMIT;

SELECT df.status(:'id');
SELECT count(*) AS effects FROM ie_effects;
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SQL';
SELECT count(*) AS inbox_left FROM df_internal.inbox WHERE instance_id = :'id';
SELECT problem FROM df.check() WHERE instance_id = :'id';
-- df.check() reports a completion left in the inbox of an ended instance
INSERT INTO df_internal.inbox (instance_id, node_id, scope, attempt, ok, result)
SELECT instance_id, id, instance_id, 1, true, '{}' FROM df.nodes
WHERE instance_id = :'id' AND node_type = 'SQL';
SELECT problem FROM df.check() WHERE instance_id = :'id';
DELETE FROM df_internal.inbox WHERE instance_id = :'id';
SELECT problem FROM df.check() WHERE instance_id = :'id';
