-- A $name that no step of the workflow names (docs/concepts.md,
-- "Substitution"): in SQL text 0.2.6's rule keeps it as written, and a SQL
-- step that then fails with a syntax error at it says that it matched no
-- result.
SET ROLE df_user;

SELECT df.start(('SELECT 1 AS n' |=> 'count') ~> 'SELECT $cuont + 1 AS total') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result #>> '{}' AS failure FROM df.nodes
WHERE instance_id = :'id' AND node_type = 'SQL' AND status = 'failed';
-- a syntax error elsewhere says nothing of references
SELECT df.start('SELEC 1') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result #>> '{}' AS failure FROM df.nodes WHERE instance_id = :'id';
