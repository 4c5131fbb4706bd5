/*
 * queries.js
 *	  Every statement the dashboard runs, each with $n parameters, and the
 *	  shapes the pages read.  Reads go through the extension's public
 *	  functions and views (df.instance_nodes, df.explain, df.instance_spans,
 *	  df.history, df.compensations, df.locks, df.limits, df.limit_queue,
 *	  df.circuit_breakers, df.subscriptions, df.metrics, df.check) and its
 *	  user-visible tables df.instances and df.nodes, as the role of the
 *	  connection: row-level security decides which instances exist.  Actions
 *	  call df.cancel, df.signal, df.compensate and df.start, nothing else.
 *
 *	  The list is paged by keyset on (created_at DESC, id), the order of
 *	  idx_instances_created_at and idx_instances_status, so a page costs the
 *	  same whatever its depth; the cursor carries created_at in microseconds
 *	  since the epoch, exact, and the last id.  Counts by status stop at
 *	  COUNT_CAP, so that they too cost a bounded read.
 */
'use strict';

const { rebuildGraph } = require('./graph');
const { whyWaiting } = require('./waits');

const STATUSES = ['pending', 'running', 'completed', 'failed', 'cancelled', 'compensated'];
const COUNT_CAP = 10000;
const PAGE_SIZE = 50;
const ID_RE = /^[0-9a-f]{8}$/;
// an instance's page shows at most this many history events and spans (a
// long loop has many more), and draws no graph of more nodes than MAX_DRAWN
const MAX_ROWS = 2000;
const MAX_DRAWN = 1500;

function likePattern(text) {
	// a pattern with % is the user's own LIKE pattern; any other text matches as a substring
	if (text.includes('%'))
		return text;
	return '%' + text.replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}

function encodeCursor(micros, id) {
	return `${micros}.${id}`;
}

function decodeCursor(text) {
	const m = /^(-?\d{1,20})\.([0-9a-f]{8})$/.exec(text || '');
	return m ? { micros: m[1], id: m[2] } : null;
}

/*
 * One page of instances, newest first.  filter: status, label (pattern),
 * from and to (created_at bounds, ISO text), submitter (role name), after
 * (a cursor), limit.
 */
async function listInstances(pool, filter) {
	const limit = Math.min(Math.max(Number(filter.limit) || PAGE_SIZE, 1), 500);
	const cursor = decodeCursor(filter.after);
	const params = [
		STATUSES.includes(filter.status) ? filter.status : null,
		filter.label ? likePattern(filter.label) : null,
		filter.from || null,
		filter.to || null,
		filter.submitter || null,
		cursor ? cursor.micros : null,
		cursor ? cursor.id : null,
		limit + 1,
	];
	const { rows } = await pool.query(`
SELECT i.id, i.label, i.status, i.submitted_by::text AS submitter, i.created_at,
       CASE WHEN i.status IN ('completed', 'failed', 'cancelled', 'compensated')
            THEN greatest(i.completed_at, i.updated_at) END AS ended_at,
       (extract(epoch FROM i.created_at) * 1000000)::bigint::text AS created_us
FROM df.instances i
WHERE ($1::text IS NULL OR i.status = $1)
  AND ($2::text IS NULL OR i.label ILIKE $2)
  AND ($3::timestamptz IS NULL OR i.created_at >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR i.created_at < $4::timestamptz)
  AND ($5::text IS NULL OR i.submitted_by::text = $5)
  AND ($6::bigint IS NULL
       OR i.created_at < 'epoch'::timestamptz + $6::bigint * interval '1 microsecond'
       OR (i.created_at = 'epoch'::timestamptz + $6::bigint * interval '1 microsecond' AND i.id > $7))
ORDER BY i.created_at DESC, i.id
LIMIT $8`, params);
	const more = rows.length > limit;
	const page = more ? rows.slice(0, limit) : rows;
	const last = page[page.length - 1];
	const waits = await waitsOf(pool, page.filter((r) => r.status === 'running' || r.status === 'pending'));
	return {
		instances: page.map((r) => ({
			id: r.id, label: r.label, status: r.status, submitter: r.submitter,
			created_at: r.created_at, ended_at: r.ended_at,
			duration_ms: (r.ended_at || new Date()) - r.created_at,
			waits: waits.get(r.id) || [],
		})),
		next: more ? encodeCursor(last.created_us, last.id) : null,
	};
}

// how many visible instances have each status, each count stopping at COUNT_CAP + 1
async function statusCounts(pool) {
	const { rows } = await pool.query(`
SELECT s.status,
       (SELECT count(*) FROM (SELECT 1 FROM df.instances i WHERE i.status = s.status LIMIT $2) x) AS n
FROM unnest($1::text[]) WITH ORDINALITY s(status, ord) ORDER BY s.ord`, [STATUSES, COUNT_CAP + 1]);
	return rows.map((r) => ({ status: r.status, count: Number(r.n), capped: Number(r.n) > COUNT_CAP, cap: COUNT_CAP }));
}

// the running leaves, held locks, limit queues of some live instances: what each waits on
async function waitsOf(pool, live) {
	const result = new Map();
	if (live.length === 0)
		return result;
	const ids = live.map((r) => r.id);
	const [nodes, locks, queue] = await Promise.all([
		pool.query(`
SELECT n.instance_id::text AS instance_id, n.id::text AS node_id, n.node_type, n.query, n.updated_at,
       n.status_details
FROM df.nodes n
WHERE n.instance_id = ANY($1::text[]) AND n.status = 'running'
ORDER BY n.instance_id, n.updated_at, n.id`, [ids]),
		pool.query(`
SELECT l.holder AS instance_id, l.node_id, l.key, l.state, l.waiters, l.token
FROM df.locks l WHERE l.holder = ANY($1::text[]) AND l.state = 'waiting'`, [ids]),
		pool.query(`
SELECT q.instance_id, q.node_id, q.key, q.position, q.queued_at, q.deadline
FROM df.limit_queue q WHERE q.instance_id = ANY($1::text[])`, [ids]),
	]);
	for (const r of live)
		result.set(r.id, whyWaiting(r, nodes.rows.filter((n) => n.instance_id === r.id),
			locks.rows.filter((l) => l.instance_id === r.id),
			queue.rows.filter((q) => q.instance_id === r.id)));
	return result;
}

function checkId(id) {
	if (!ID_RE.test(id || ''))
		throw Object.assign(new Error('an instance id is 8 lower-case hexadecimal digits'), { status: 400 });
}

/*
 * Everything the page of one instance shows, or null when the role cannot
 * see it (it may not exist, or belong to another role: the same answer).
 */
async function instanceDetail(pool, id) {
	checkId(id);
	const inst = await pool.query(`
SELECT i.id, i.label, i.status, i.submitted_by::text AS submitter, i.root_node, i.created_at,
       i.updated_at, i.completed_at, i.trace_id, i.traceparent, i.idempotency_key, i.database,
       CASE WHEN i.status IN ('completed', 'failed', 'cancelled', 'compensated')
            THEN greatest(i.completed_at, i.updated_at) END AS ended_at
FROM df.instances i WHERE i.id = $1`, [id]);
	if (inst.rows.length === 0)
		return null;
	const instance = inst.rows[0];
	const [nodes, dot, spans, history, comps, info, locks, queue] = await Promise.all([
		pool.query('SELECT * FROM df.instance_nodes($1)', [id]),
		pool.query("SELECT df.explain($1, 'dot') AS dot", [id]),
		pool.query(`SELECT span_id, parent_span_id, name, kind, start_time, end_time, status, attributes
FROM df.instance_spans($1) ORDER BY start_time, span_id LIMIT $2`, [id, MAX_ROWS + 1]),
		pool.query('SELECT * FROM df.history($1) LIMIT $2', [id, MAX_ROWS + 1]),
		pool.query('SELECT * FROM df.compensations($1)', [id]),
		pool.query('SELECT output FROM df.instance_info($1)', [id]),
		pool.query(`SELECT l.holder AS instance_id, l.node_id, l.key, l.mode, l.state, l.since, l.waiters, l.token
FROM df.locks l WHERE l.holder = $1`, [id]),
		pool.query('SELECT q.* FROM df.limit_queue q WHERE q.instance_id = $1', [id]),
	]);
	instance.output = info.rows[0] ? info.rows[0].output : null;
	// the end of the workflow's span is the history's instance end, which can
	// come later than df.instances.completed_at (stamped when its last
	// transaction began, before its last step ran)
	const rootSpan = spans.rows.find((x) => !x.parent_span_id);
	if (rootSpan && rootSpan.end_time && instance.ended_at)
		instance.ended_at = rootSpan.end_time;
	const running = nodes.rows.filter((n) => n.status === 'running')
		.map((n) => ({ node_id: n.node_id, node_type: n.node_type, query: n.query, updated_at: n.updated_at,
			status_details: n.status_details }));
	const failed = nodes.rows.filter((n) => n.status === 'failed');
	return {
		instance,
		nodes: nodes.rows,
		dot: dot.rows[0].dot,
		drawGraph: nodes.rows.length <= MAX_DRAWN,
		spans: spans.rows.slice(0, MAX_ROWS),
		history: history.rows.slice(0, MAX_ROWS),
		truncated: { spans: spans.rows.length > MAX_ROWS, history: history.rows.length > MAX_ROWS, max: MAX_ROWS },
		compensations: comps.rows,
		locks: locks.rows,
		limitQueue: queue.rows,
		waits: (instance.status === 'running' || instance.status === 'pending')
			? whyWaiting(instance, running, locks.rows.filter((l) => l.state === 'waiting'), queue.rows) : [],
		error: instance.status === 'failed' ? (instance.output || (failed[0] && failed[0].result)) : null,
		failedNodes: failed.map((n) => n.node_id),
	};
}

async function coordination(pool) {
	const [breakers, limits, queue, locks, subs] = await Promise.all([
		pool.query('SELECT * FROM df.circuit_breakers ORDER BY name'),
		pool.query('SELECT * FROM df.limits ORDER BY key'),
		pool.query('SELECT * FROM df.limit_queue ORDER BY key, position'),
		pool.query('SELECT * FROM df.locks ORDER BY key, since'),
		pool.query('SELECT name, topic, workflow, filter::text AS filter, owner::text AS owner, created_at FROM df.subscriptions ORDER BY name'),
	]);
	// the events of the bus the role may see (df.events, under row-level security): a
	// topic of a role's own space is shown as its name and the role whose space it is
	// (docs/design/tenancy.md)
	const topics = (await pool.query(`
SELECT e.topic, coalesce(e.space, 'shared') AS space,
       count(*) AS events, max(e.published_at) AS last_published,
       count(*) FILTER (WHERE e.published_at > now() - interval '1 hour') AS last_hour
FROM df.events e GROUP BY e.topic, e.space ORDER BY 1, 2`)).rows;
	return { breakers: breakers.rows, limits: limits.rows, limitQueue: queue.rows,
		locks: locks.rows, subscriptions: subs.rows, topics };
}

/*
 * The overview: df.metrics() and df.check() where the role may run them,
 * and what started in the last hour, per five minutes, by how it stands.
 */
async function overview(pool, role) {
	const hour = await pool.query(`
SELECT b.bucket,
       count(i.id) AS started,
       count(i.id) FILTER (WHERE i.status = 'completed') AS completed,
       count(i.id) FILTER (WHERE i.status IN ('failed', 'cancelled', 'compensated')) AS failed,
       count(i.id) FILTER (WHERE i.status IN ('pending', 'running')) AS live
FROM generate_series(date_bin('5 minutes', now() - interval '55 minutes', 'epoch'),
                     date_bin('5 minutes', now(), 'epoch'), interval '5 minutes') b(bucket)
LEFT JOIN df.instances i
  ON i.created_at >= b.bucket AND i.created_at < b.bucket + interval '5 minutes'
 AND i.created_at >= now() - interval '1 hour'
GROUP BY b.bucket ORDER BY b.bucket`);
	const metrics = role.can_metrics ? (await pool.query('SELECT * FROM df.metrics()')).rows[0] : null;
	const check = role.can_check ? (await pool.query('SELECT * FROM df.check()')).rows : null;
	const buckets = hour.rows.map((r) => ({ bucket: r.bucket, started: Number(r.started),
		completed: Number(r.completed), failed: Number(r.failed), live: Number(r.live) }));
	return { metrics, check, buckets,
		lastHour: buckets.reduce((a, b) => ({ started: a.started + b.started, completed: a.completed + b.completed,
			failed: a.failed + b.failed, live: a.live + b.live }), { started: 0, completed: 0, failed: 0, live: 0 }) };
}

// --- actions: each one call of the extension's own function -----------------

async function cancel(pool, id, reason, compensate) {
	checkId(id);
	const { rows } = await pool.query('SELECT df.cancel($1, $2, $3) AS r',
		[id, reason || 'Cancelled from the dashboard', !!compensate]);
	return rows[0].r;
}

async function signal(pool, id, name, data) {
	checkId(id);
	if (!name)
		throw Object.assign(new Error('a signal needs a name'), { status: 400 });
	const text = data && data.trim() !== '' ? data : '{}';
	try {
		JSON.parse(text);
	} catch (err) {
		throw Object.assign(new Error(`the signal's data is not JSON: ${err.message}`), { status: 400 });
	}
	// sent when this statement's own transaction commits, as the dashboard's user
	const { rows } = await pool.query('SELECT df.signal($1, $2, $3) AS r', [id, name, text]);
	return rows[0].r;
}

async function compensate(pool, id) {
	checkId(id);
	const { rows } = await pool.query('SELECT df.compensate($1) AS r', [id]);
	return rows[0].r;
}

// start a new instance from the graph of this one (its nodes as df.instance_nodes shows them)
async function startAgain(pool, id) {
	checkId(id);
	const inst = await pool.query('SELECT root_node, label FROM df.instances WHERE id = $1', [id]);
	if (inst.rows.length === 0)
		throw Object.assign(new Error(`no instance ${id} visible to this role`), { status: 404 });
	const nodes = await pool.query('SELECT * FROM df.instance_nodes($1)', [id]);
	const graph = rebuildGraph(nodes.rows, inst.rows[0].root_node);
	const { rows } = await pool.query('SELECT df.start($1, $2) AS id', [JSON.stringify(graph), inst.rows[0].label]);
	return rows[0].id;
}

module.exports = {
	STATUSES, COUNT_CAP, PAGE_SIZE,
	listInstances, statusCounts, instanceDetail, coordination, overview,
	cancel, signal, compensate, startAgain, decodeCursor, likePattern,
};
