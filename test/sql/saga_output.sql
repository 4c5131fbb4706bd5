-- What a compensation says (docs/guides/sagas.md): a compensated instance's
-- df.result is the root's compensation summary ({"error", "undos"}), and
-- df.list_instances and df.instance_info give as output what failed and
-- how many undos ran; an instance whose undo failed (on_undo_failure
-- 'stop') says which undo failed and what it was undoing.
SET ROLE df_user;
CREATE TABLE so_gate (open boolean);
INSERT INTO so_gate VALUES (false);
CREATE FUNCTION so_gated() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	IF NOT (SELECT open FROM so_gate) THEN
		RAISE EXCEPTION 'gate closed' USING ERRCODE = '22023';
	END IF;
	RETURN 1;
END $$;

-- compensated
SELECT df.start(('SELECT 1 AS a' <~> 'SELECT 2')
				~> ('SELECT 3 AS b' <~> 'SELECT 4')
				~> 'SELECT 1/0') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT df.result(:'id')::jsonb ->> 'error' AS result_error,
	   jsonb_array_length(df.result(:'id')::jsonb -> 'undos') AS result_undos;
SELECT status, output FROM df.list_instances() WHERE instance_id = :'id';
SELECT status, output FROM df.instance_info(:'id');

-- an undo that fails for good stops the compensation: failed, with the reason
SELECT df.start(df.saga(('SELECT 1 AS a' <~> 'SELECT 2')
						~> ('SELECT 3 AS b' <~> 'SELECT so_gated()')
						~> 'SELECT 1/0')) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT status, regexp_replace(output, 'compensation of [0-9a-f]{8}', 'compensation of N') AS output
FROM df.instance_info(:'id');
SELECT df.result(:'id') IS NULL AS no_result;
