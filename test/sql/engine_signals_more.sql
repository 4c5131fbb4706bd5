-- Signals beyond engine_timers: waits inside RACE branches and loop
-- bodies, signals to finished instances, FIFO order per name across names,
-- a SIGNAL with a timeout inside a loop, and waits of abandoned branches
-- (a lost RACE, an earlier loop iteration) that must not pile up or take
-- signals meant for live waits.
CREATE FUNCTION waits_of(inst text) RETURNS bigint LANGUAGE sql
	AS $$ SELECT count(*) FROM df_internal.waits WHERE instance_id = inst $$;
-- wait (with a deadline) until an instance has n registered waits
CREATE FUNCTION await_waits(inst text, n int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE waits_of(inst) < n LOOP
		IF clock_timestamp() > deadline THEN RETURN false; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
-- wait (with a deadline) until sig_log has n rows
CREATE FUNCTION await_log(n int) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE (SELECT count(*) FROM sig_log) < n LOOP
		IF clock_timestamp() > deadline THEN RETURN false; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
GRANT EXECUTE ON FUNCTION waits_of(text), await_waits(text, int), await_log(int) TO df_user;
ALTER FUNCTION waits_of(text) SECURITY DEFINER;
SET ROLE df_user;
CREATE TABLE sig_log (i serial, v text);

-- a signal reaches a wait inside a RACE branch; the losing branch's wait is released
SELECT df.start(df.wait_for_signal('left') | df.wait_for_signal('right')) AS id \gset
SELECT await_waits(:'id', 2);
SELECT df.signal(:'id', 'right', '"R"');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');
SELECT waits_of(:'id') AS waits_left;

-- a signal to a finished instance fails and is not kept
SELECT set_config('test.id', :'id', false) IS NOT NULL AS noted;
DO $$
BEGIN
	PERFORM df.signal(current_setting('test.id'), 'left', '"L"');
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE '%', regexp_replace(SQLERRM, '[0-9a-f]{8}', '<id>');
END
$$;
-- ... and so does one to a cancelled instance
SELECT df.start(df.wait_for_signal('never')) AS id \gset
SELECT df.cancel(:'id') IS NOT NULL AS cancelled;
SELECT set_config('test.id', :'id', false) IS NOT NULL AS noted;
DO $$
BEGIN
	PERFORM df.signal(current_setting('test.id'), 'never', '1');
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE '%', regexp_replace(SQLERRM, '[0-9a-f]{8}', '<id>');
END
$$;
SELECT waits_of(:'id') AS waits_left;

-- FIFO per name, whatever the order of names: x1 y1 x2 y2 sent, waits y x y x
SELECT df.start('SELECT pg_sleep(0.2)'
                ~> (df.wait_for_signal('y') |=> 'a') ~> (df.wait_for_signal('x') |=> 'b')
                ~> (df.wait_for_signal('y') |=> 'c') ~> (df.wait_for_signal('x') |=> 'd')
                ~> 'SELECT $a.data || $b.data || $c.data || $d.data AS got') AS id \gset
SELECT df.signal(:'id', 'x', '"x1"');
SELECT df.signal(:'id', 'y', '"y1"');
SELECT df.signal(:'id', 'x', '"x2"');
SELECT df.signal(:'id', 'y', '"y2"');
SELECT df.await_instance(:'id');
SELECT df.result(:'id');

-- waits in the body of a non-root loop: three buffered signals, one per iteration, in order
SELECT df.start('SELECT 1'
                ~> df.loop((df.wait_for_signal('tick') |=> 't') ~> 'INSERT INTO sig_log (v) SELECT $t.data',
                           'SELECT count(*) < 3 FROM sig_log')
                ~> 'SELECT string_agg(v, '','' ORDER BY i) AS ticks FROM sig_log') AS id \gset
SELECT df.signal(:'id', 'tick', '"t1"');
SELECT df.signal(:'id', 'tick', '"t2"');
SELECT df.signal(:'id', 'tick', '"t3"');
SELECT df.await_instance(:'id', 30);
SELECT df.result(:'id');

-- a SIGNAL with a timeout inside a loop: the first iteration gets the
-- buffered signal, the next two time out
TRUNCATE sig_log;
SELECT df.start(df.loop((df.wait_for_signal('maybe', 1) |=> 'w')
                        ~> 'INSERT INTO sig_log (v) SELECT $w.timed_out || ''/'' || coalesce($w.data?, ''-'')',
                        'SELECT count(*) < 3 FROM sig_log')) AS id \gset
SELECT df.signal(:'id', 'maybe', '"yes"');
SELECT df.await_instance(:'id', 30);
SELECT string_agg(v, ',' ORDER BY i) AS iterations FROM sig_log;
SELECT waits_of(:'id') AS waits_left;

-- a loop whose body races a wait against a short sleep: the sleep wins
-- every iteration, and the abandoned waits must not pile up; the wait
-- after the loop is then the only one, and gets the signal
TRUNCATE sig_log;
SELECT df.start('SELECT 1'
                ~> df.loop((df.wait_for_signal('late') | df.sleep(0)) ~> 'INSERT INTO sig_log (v) VALUES (''i'')',
                           'SELECT count(*) < 3 FROM sig_log')
                ~> 'INSERT INTO sig_log (v) VALUES (''after the loop'')'
                ~> (df.wait_for_signal('late') |=> 'late')
                ~> 'SELECT $late.data AS late') AS id \gset
SELECT await_log(4);
SELECT await_waits(:'id', 1);
SELECT string_agg(v, ',' ORDER BY i) AS iterations FROM sig_log;
SELECT waits_of(:'id') AS waits_registered;
SELECT df.signal(:'id', 'late', '"for the live wait"');
SELECT df.await_instance(:'id', 30);
SELECT df.result(:'id');

RESET ROLE;
SELECT engine_idle();
SELECT (SELECT count(*) FROM df_internal.signals) AS signals,
       (SELECT count(*) FROM df_internal.waits) AS waits,
       (SELECT count(*) FROM df_internal.runs) AS runs;

-- 20,000 signals of a name nobody waits for do not hold up the instance's
-- other work (delivered each on its own, under the runs lock, queued ahead
-- of the timer, they would delay a 3 s sleep to 22 s):
-- a 3 s sleep beside a wait for another name still ends within 5 s, and the
-- waited signal is delivered after them
SET ROLE df_user;
SELECT df.start(df.sleep(3) & df.wait_for_signal('go')) AS id \gset
SELECT await_waits(:'id', 1);
SELECT count(df.signal(:'id', 'noise', '{}')) AS noise_sent FROM generate_series(1, 20000);
SELECT df.signal(:'id', 'go', '"went"');
SELECT df.await_instance(:'id', 60);
RESET ROLE;
SELECT (SELECT e.at FROM df_internal.events e JOIN df.nodes n
          ON n.instance_id = e.instance_id AND n.id = e.node_id
        WHERE e.instance_id = :'id' AND e.kind = 'node_completed' AND n.node_type = 'SLEEP')
       - (SELECT at FROM df_internal.history_events WHERE instance_id = :'id' AND kind = 'instance_started')
       AS sleep_took \gset
SELECT :'sleep_took'::interval < interval '5 seconds' AS sleep_not_held_up,
       (SELECT result->'data' FROM df.nodes WHERE instance_id = :'id' AND node_type = 'SIGNAL') AS go_data;
