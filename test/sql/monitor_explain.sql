-- Monitoring: df.explain of live instances (reference §3.11): a header with
-- the id and label, the status and the output, then the tree with the
-- inferred status of each node as a marker.  Ids are masked as <id>.
SET ROLE df_user;

CREATE FUNCTION wait_running_node(inst text, type text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = inst AND node_type = type
	                  AND status = 'running') LOOP
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.02);
	END LOOP;
	RETURN true;
END
$$;

-- completed, with a label; the untaken IF arm is skipped
SELECT df.start(('SELECT 1 AS one' |=> 'one')
                ~> df.if('SELECT $one = 1', 'SELECT ''yes'' AS answer', 'SELECT ''no'' AS answer'),
                'explain me') AS id \gset
SELECT df.await_instance(:'id');
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

-- failed, without a label: the failure is the output, the rest skipped
SELECT df.start('SELECT 1' ~> 'SELECT 1/0' ~> ('SELECT 3' & 'SELECT 4')) AS id \gset
SELECT df.await_instance(:'id');
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

-- running: done, running and pending nodes
SELECT df.start('SELECT 1' ~> df.wait_for_signal('go', 60) ~> df.sleep(0) ~> 'SELECT 4', 'waiting') AS id \gset
SELECT wait_running_node(:'id', 'SIGNAL');
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;
SELECT df.signal(:'id', 'go');
SELECT df.await_instance(:'id');
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

-- a RACE whose loser is skipped, a JOIN, a long output cut to 200 bytes
SELECT df.start(df.race('SELECT pg_sleep(2)', 'SELECT 1 AS fast')
                ~> df.join('SELECT 1', 'SELECT 2')
                ~> 'SELECT repeat(''x'', 300) AS long') AS id \gset
SELECT df.await_instance(:'id');
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

-- cancelled
SELECT df.start(df.wait_for_signal('never') ~> 'SELECT 2', 'to cancel') AS id \gset
SELECT wait_running_node(:'id', 'SIGNAL');
SELECT df.cancel(:'id') IS NOT NULL AS cancelled;
SELECT replace(df.explain(:'id'), :'id', '<id>') AS explain;

-- an id nobody has
SELECT df.explain('00000000');

RESET ROLE;
SELECT engine_idle();
