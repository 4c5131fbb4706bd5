-- Tracing: df.start(traceparent, tracestate) and its checks,
-- the spans of an instance (df.instance_spans) and its timeline
-- (df.timeline) under df.history's visibility, HTTP steps sending
-- traceparent, and df.explain(…, format => 'dot').  Ids are random: only
-- their shape and their links are shown.
SELECT df.grant_usage('df_user', include_http => true);
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));

-- a traceparent that is not W3C's is refused, saying why
SELECT df.start('SELECT 1', traceparent => 'nonsense');
SELECT df.start('SELECT 1', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7');
SELECT df.start('SELECT 1', traceparent => '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01');
SELECT df.start('SELECT 1', traceparent => '00-00000000000000000000000000000000-00f067aa0ba902b7-01');
SELECT df.start('SELECT 1', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01');
SELECT df.start('SELECT 1', traceparent => 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
SELECT df.start('SELECT 1', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra');
SELECT df.start('SELECT 1', tracestate => E'a=1\nb=2');
SELECT df.start('SELECT 1', tracestate => repeat('a', 600));
SELECT df.start('SELECT 1', transaction_mode => 'new',
				traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
-- a later version may append fields
SELECT df.start('SELECT 1', traceparent => '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later') AS id \gset
SELECT trace_id, traceparent FROM df.instances WHERE id = :'id';
SELECT df.await_instance(:'id');

-- without one, a new trace
SELECT df.start('SELECT 1') AS id \gset
SELECT trace_id ~ '^[0-9a-f]{32}$' AS new_trace, traceparent IS NULL AS no_parent
FROM df.instances WHERE id = :'id';
SELECT df.await_instance(:'id');

-- a step reads the trace context as {sys_trace_id}, {sys_trace_flags} and
-- {sys_tracestate}: the instance's, whatever a variable of that name says
SELECT df.setvar('sys_trace_id', 'a variable');
SELECT df.start($$SELECT '{sys_trace_id}' AS t, '{sys_trace_flags}' AS f, '{sys_tracestate}' AS s$$,
				traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00',
				tracestate => 'vendor=xyz') AS id \gset
SELECT df.await_instance(:'id');
SELECT df.result(:'id')::jsonb->'rows'->0 AS seen;
SELECT df.start($$SELECT '{sys_trace_id}' AS t, '{sys_trace_flags}' AS f$$) AS id \gset
SELECT df.await_instance(:'id');
SELECT (df.result(:'id')::jsonb->'rows'->0->>'t') = trace_id AS own_trace,
	   df.result(:'id')::jsonb->'rows'->0->>'f' AS flags
FROM df.instances WHERE id = :'id';
SELECT df.unsetvar('sys_trace_id');

-- a workflow with a retried SQL step, an HTTP call and a failing step,
-- continuing the caller's trace
SELECT df.start('SELECT 1' ~> df.retry('SELECT 1/0', max_attempts => 2, initial_interval => '10 ms',
									   retry_on => '{sql}')
				& (df.http('{base}/echo') |=> 'echo'),
				'traced', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
				tracestate => 'vendor=abc') AS id \gset
SELECT df.await_instance(:'id');
CREATE TEMP VIEW spans AS SELECT * FROM df.instance_spans(:'id');
-- one trace, the caller's; ids are lower-case hex; every parent is a span of
-- the set except the root's, which is the caller's span
SELECT count(*) AS spans, count(DISTINCT span_id) AS distinct_ids,
	   bool_and(trace_id = '4bf92f3577b34da6a3ce929d0e0e4736') AS one_trace,
	   bool_and(span_id ~ '^[0-9a-f]{16}$') AS hex_ids,
	   bool_and(end_time >= start_time) AS ordered
FROM spans;
SELECT name, kind, status, parent_span_id FROM spans WHERE kind = 'SERVER';
SELECT count(*) AS orphans FROM spans s
WHERE kind <> 'SERVER' AND NOT EXISTS (SELECT 1 FROM spans p WHERE p.span_id = s.parent_span_id);
-- the tree: each span with its parent's node type, kinds and statuses
SELECT coalesce(s.attributes->>'pg_durable.node_type', s.name) AS span, s.kind, s.status,
	   coalesce(p.attributes->>'pg_durable.node_type', p.kind) AS parent,
	   s.attributes->>'pg_durable.attempt' AS attempt,
	   s.attributes->>'error.type' AS error_type,
	   s.attributes->>'http.response.status_code' AS http_status
FROM spans s LEFT JOIN spans p ON p.span_id = s.parent_span_id
ORDER BY coalesce(s.attributes->>'db.query.text', s.attributes->>'url.full', ''), span, attempt, s.status;
-- (url.full is the step's URL as written, before substitution)
SELECT attributes->>'http.request.method' AS method, attributes->>'url.full' AS url_full
FROM spans WHERE kind = 'CLIENT';

-- the HTTP step received the CLIENT span as its parent, and the tracestate
SELECT ((n.result->>'body')::jsonb->'headers'->>'traceparent')
		 = '00-4bf92f3577b34da6a3ce929d0e0e4736-' || (SELECT span_id FROM spans WHERE kind = 'CLIENT') || '-01'
		 AS traceparent_sent,
	   (n.result->>'body')::jsonb->'headers'->>'tracestate' AS tracestate_sent
FROM df.nodes n WHERE n.instance_id = :'id' AND n.result_name = 'echo';

-- the timeline: the same tree, indented, with attempts and statuses
SELECT depth, regexp_replace(span, '[0-9a-f]{8}', '<id>', 'g') AS span, attempt, status,
	   offset_ms >= 0 AS after_start, duration_ms >= 0 AS has_duration, length(bar) AS bar_width
FROM df.timeline(:'id');

-- a sequence of five steps: the steps are siblings under one THEN span,
-- not a staircase of nested THENs, and a sequence written with its
-- parentheses on the right reads the same
SELECT df.start('SELECT 1' ~> 'SELECT 2' ~> 'SELECT 3' ~> 'SELECT 4' ~> 'SELECT 5') AS seq_id \gset
SELECT df.await_instance(:'seq_id');
SELECT depth, btrim(regexp_replace(span, '[0-9a-f]{8}', '<id>', 'g')) AS span, status FROM df.timeline(:'seq_id');
SELECT count(*) AS steps, count(DISTINCT s.parent_span_id) AS parents,
	   bool_and(p.attributes->>'pg_durable.node_type' = 'THEN') AS under_then
FROM df.instance_spans(:'seq_id') s JOIN df.instance_spans(:'seq_id') p ON p.span_id = s.parent_span_id
WHERE s.attributes->>'pg_durable.node_type' = 'SQL';
SELECT df.start('SELECT 1' ~> ('SELECT 2' ~> ('SELECT 3' ~> 'SELECT 4'))) AS seq_id \gset
SELECT df.await_instance(:'seq_id');
SELECT depth, btrim(regexp_replace(span, '[0-9a-f]{8}', '<id>', 'g')) AS span FROM df.timeline(:'seq_id');

-- the same visibility as df.history: another role sees nothing
RESET ROLE;
CREATE ROLE df_trace_other LOGIN;
GRANT USAGE ON SCHEMA df TO df_trace_other;
GRANT SELECT ON df.instances, df.nodes TO df_trace_other;
SET ROLE df_trace_other;
SELECT count(*) AS other_sees FROM df.instance_spans(:'id');
SELECT count(*) AS other_sees FROM df.timeline(:'id');
SELECT count(*) AS unknown FROM df.instance_spans('00000000');
RESET ROLE;
DROP OWNED BY df_trace_other;
DROP ROLE df_trace_other;
SET ROLE df_user;

-- df.explain(…, format => 'dot'): a Graphviz digraph, dry and live
SELECT df.explain('SELECT 1' ~> ('SELECT 2' & df.http('http://example.com/x')), format => 'dot');
SELECT df.explain(df.retry('SELECT 1', max_attempts => 3) ~> df.catch('SELECT 2', 'SELECT 3')
				  ~> ('SELECT true' ?> 'SELECT 4' !> 'SELECT 5'), format => 'dot');
SELECT df.explain($$SELECT 'a "quoted" \ text'$$, format => 'dot');
SELECT df.explain('SELECT 1', format => 'text') = df.explain('SELECT 1') AS text_is_the_tree;
SELECT df.explain('SELECT 1', format => 'svg');
-- live: the failed step and its RETRY are marked, completed ones green
SELECT df.explain(:'id', format => 'dot') ~ 'SELECT 1/0 ✗", fillcolor="salmon", color="red3", penwidth=3' AS failed_marked,
	   df.explain(:'id', format => 'dot') ~ 'label="SQL\\nSELECT 1 ✓", fillcolor="palegreen"' AS completed_green,
	   df.explain(:'id', format => 'dot') ~ '^digraph workflow \{' AS is_digraph;
SELECT df.explain('ffffffff', format => 'dot');
RESET ROLE;

-- the event nodes are messaging spans: PUBLISH a PRODUCER, EVENT a
-- CONSUMER, with the topic
GRANT EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) TO df_user;
SET ROLE df_user;
SELECT df.start(df.publish('trace.topic', '{"n": 1}')
				~> df.wait_for_event('trace.topic', '{"n": 1}', 30)) AS mid \gset
SELECT public.wait_until(format('SELECT status = %L FROM df.instances WHERE id = %L', 'completed', :'mid'));
SELECT kind, split_part(name, ' ', 1) AS node, attributes ->> 'messaging.system' AS system,
	   attributes ->> 'messaging.operation.type' AS operation,
	   attributes ->> 'messaging.destination.name' AS topic
FROM df.instance_spans(:'mid') WHERE kind IN ('PRODUCER', 'CONSUMER') ORDER BY kind;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) FROM df_user;
