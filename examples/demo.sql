-- A workflow that fans out three SQL steps in parallel, joins them, and
-- writes a summary step whose result names the totals.  Composing it is
-- pure; df.start runs it in the background executors, each step in its
-- own transaction, exactly once.
\set ON_ERROR_STOP 1
\pset footer off

-- workflows run as an ordinary role (steps run with its privileges)
DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'demo_user') THEN
		CREATE ROLE demo_user LOGIN;
	END IF;
END $$;
GRANT USAGE ON SCHEMA df TO demo_user;
GRANT SELECT ON df.instances, df.nodes TO demo_user;
GRANT SELECT, INSERT, UPDATE, DELETE ON df.vars TO demo_user;
GRANT CREATE ON SCHEMA public TO demo_user;
SET ROLE demo_user;

DROP TABLE IF EXISTS demo_orders;
CREATE TABLE demo_orders (region text, amount numeric);

\echo '== the workflow, composed with the DSL, is JSON text:'
SELECT ($q$INSERT INTO demo_orders VALUES ('eu', 10)$q$
        & $q$INSERT INTO demo_orders VALUES ('us', 20)$q$
        & $q$INSERT INTO demo_orders VALUES ('ap', 30)$q$)
       ~> ($q$SELECT count(*) AS orders, sum(amount) AS total FROM demo_orders$q$ |=> 'summary')
       ~> $q$SELECT '{sys_label}: ' || $summary.orders || ' orders, total ' || $summary.total AS report$q$
       AS workflow \gset
\echo :workflow
\echo
\echo '== its plan (df.explain):'
SELECT df.explain(:'workflow') AS plan \gset
\echo :plan

\echo '== df.start, then df.await_instance:'
SELECT df.start(:'workflow', 'demo') AS id \gset
\echo 'instance' :id
SELECT df.await_instance(:'id', 30) AS status;

\echo '== its result (the last step''s rows):'
SELECT df.result(:'id') AS result;

\echo '== its nodes:'
SELECT node_type, status, coalesce(result_name, '') AS name, left(coalesce(result::text, ''), 70) AS result
FROM df.nodes WHERE instance_id = :'id' ORDER BY created_at, node_type;

\echo '== what the steps did:'
SELECT * FROM demo_orders ORDER BY region;

\echo '== the instance as a picture: df.explain(id, format => ''dot'') is Graphviz text,'
\echo '   e.g.  psql -Atc "SELECT df.explain(''<id>'', format => ''dot'')" | dot -Tsvg > demo.svg'
SELECT df.explain(:'id', format => 'dot') AS picture \gset
\echo :picture
