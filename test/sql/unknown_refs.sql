-- A $name that no step of the workflow names (docs/concepts.md,
-- "Substitution"): in SQL and HTTP text 0.2.6's rule keeps it as written;
-- df.start and df.explain say so in a NOTICE for each such name standing in
-- code, and a SQL step that then fails with a syntax error at it says that
-- it matched no result.
SET ROLE df_user;

SELECT df.start(('SELECT 1 AS n' |=> 'count') ~> 'SELECT $cuont + 1 AS total') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result #>> '{}' AS failure FROM df.nodes
WHERE instance_id = :'id' AND node_type = 'SQL' AND status = 'failed';
-- a syntax error elsewhere says nothing of references
SELECT df.start('SELEC 1') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result #>> '{}' AS failure FROM df.nodes WHERE instance_id = :'id';

-- df.explain: one NOTICE per name; none for $1, $$, a dollar quote's tag, a
-- name in a literal or a comment, or a name a step gives
SELECT df.explain($$('SELECT 1 AS n' |=> 'count')
                  ~> 'SELECT $cuont, $cuont, $count.n, $1, ''$quoted'', $t$ $tagged $t$ -- $commented'$$) IS NOT NULL AS explained;
SELECT df.explain('SELECT $total') IS NOT NULL AS explained;
RESET ROLE;
SELECT df.grant_usage('df_user', include_http => true);
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO df_user;
SET ROLE df_user;
-- HTTP text too
SELECT df.explain(df.http('{base}/orders/$order.id', 'GET')) IS NOT NULL AS explained;
-- a subscription's workflow binds $event; another name is noticed
SELECT df.subscribe('unknown_refs_sub', 'unknown_refs_topic', 'SELECT $event.key, $evnt.key');
SELECT df.unsubscribe('unknown_refs_sub');
