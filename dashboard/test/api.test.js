/*
 * api.test.js
 *	  The dashboard's data and actions over HTTP, against the throwaway
 *	  cluster of dashboard/test/run: what a superuser and two ordinary roles
 *	  each see (row-level security: only their own instances), keyset paging,
 *	  the filters, the counts, an instance's page, coordination and overview,
 *	  every action as the role it acts as, and every action refused with
 *	  --read-only and without the CSRF token; --login signing in and out.
 */
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

let admin, alice, bob;
let dSuper, dAlice, dBob, dReadOnly, dLogin;
const ids = {};
const pageIds = [];

before(async () => {
	admin = h.superPool();
	alice = await h.makeRole(admin, 'api_alice', 'alice secret');
	bob = await h.makeRole(admin, 'api_bob', 'bob secret');
	await admin.query('GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO api_alice');

	ids.ok = await h.start(alice, "'SELECT 1 AS a' ~> ('SELECT 2 AS b' |=> 'b')", 'api ok');
	ids.fail = await h.start(alice, "'SELECT 1' ~> 'SELECT 1/0'", 'api fails');
	ids.wait = await h.start(alice, "df.wait_for_signal('go')", 'api waits');
	ids.xss = await h.start(alice, "df.sleep(600)", '<img src=x onerror=alert(1)>');
	ids.markup = await h.start(alice, "$$SELECT '<script>alert(2)</script>' AS s$$ ~> $$SELECT '<b onmouseover=alert(3)>'::int$$", 'markup in steps');
	for (let i = 0; i < 7; i++)
		pageIds.push(await h.start(alice, "'SELECT 1'", `page-${i}`));
	ids.bob1 = await h.start(bob, "'SELECT 1'", 'bob one');
	ids.bob2 = await h.start(bob, "df.sleep(600)", 'bob two');

	// coordination: a lock held and waited for, a limit slot held and queued for
	ids.lockHolder = await h.start(alice, "df.with_lock(df.wait_for_signal('release'), ARRAY['k-api'])", 'lock holder');
	await h.waitRunning(admin, ids.lockHolder, 'SIGNAL');
	ids.lockWaiter = await h.start(alice, "df.with_lock('SELECT 1', ARRAY['k-api'])", 'lock waiter');
	ids.limitHolder = await h.start(alice, "df.limit(df.wait_for_signal('free'), 'lim-api', 1)", 'limit holder');
	await h.waitRunning(admin, ids.limitHolder, 'SIGNAL');
	ids.limitWaiter = await h.start(alice, "df.limit('SELECT 1', 'lim-api', 1)", 'limit waiter');
	await admin.query("SELECT df.create_circuit_breaker('api_breaker')");
	await alice.query("SELECT df.subscribe('api_sub', 'api-topic', $1)", ["SELECT 'event' AS e"]);
	await admin.query("SELECT df.publish_event('api-other-topic', '{\"n\": 1}')");

	await h.waitStatus(admin, ids.ok, 'completed');
	await h.waitStatus(admin, ids.fail, 'failed');
	await h.waitStatus(admin, ids.markup, 'failed');
	await h.waitRunning(admin, ids.wait, 'SIGNAL');
	await h.waitFor('the lock waiter to queue', async () =>
		(await admin.query("SELECT 1 FROM df.locks WHERE holder = $1 AND state = 'waiting'", [ids.lockWaiter])).rows.length);
	await h.waitFor('the limit waiter to queue', async () =>
		(await admin.query('SELECT 1 FROM df.limit_queue WHERE instance_id = $1', [ids.limitWaiter])).rows.length);

	[dSuper, dAlice, dBob, dReadOnly, dLogin] = await Promise.all([
		h.startDashboard(['--db', h.SUPER_URL]),
		h.startDashboard(['--db', h.tcpUrl('api_alice', 'alice secret')]),
		h.startDashboard(['--db', h.tcpUrl('api_bob', 'bob secret')]),
		h.startDashboard(['--db', h.SUPER_URL, '--read-only']),
		h.startDashboard(['--db', h.SERVER_URL, '--login']),
	]);
});

after(async () => {
	await Promise.all([dSuper, dAlice, dBob, dReadOnly, dLogin].filter(Boolean).map((d) => d.stop()));
	await Promise.all([alice, bob, admin].filter(Boolean).map((p) => p.end()));
});

const client = (d) => new h.Client(d.url);
const idsOf = (list) => list.instances.map((i) => i.id);

test('a superuser sees the instances of every role', async () => {
	const list = await client(dSuper).getJson('/api/instances?limit=500');
	const seen = idsOf(list);
	for (const id of [ids.ok, ids.fail, ids.bob1, ids.bob2])
		assert.ok(seen.includes(id), `${id} is listed`);
	assert.deepEqual(new Set(list.instances.map((i) => i.submitter)), new Set(['api_alice', 'api_bob']));
	const detail = await client(dSuper).getJson(`/api/instances/${ids.bob1}`);
	assert.equal(detail.instance.submitter, 'api_bob');
});

test('each ordinary role sees only its own instances', async () => {
	const a = await client(dAlice).getJson('/api/instances?limit=500');
	const b = await client(dBob).getJson('/api/instances?limit=500');
	assert.ok(a.instances.length >= 16);
	assert.ok(a.instances.every((i) => i.submitter === 'api_alice'));
	assert.deepEqual(idsOf(b).sort(), [ids.bob1, ids.bob2].sort());
	assert.ok(b.instances.every((i) => i.submitter === 'api_bob'));
	// another role's instance does not exist for it, as JSON or as a page
	const c = client(dAlice);
	assert.equal((await c.get(`/api/instances/${ids.bob1}`, { json: true })).status, 404);
	assert.equal((await client(dBob).get(`/instances/${ids.ok}`)).status, 404);
	// nor its counts
	const counts = await client(dBob).getJson('/api/counts');
	const bobCounts = Object.fromEntries(counts.map((x) => [x.status, x.count]));
	assert.equal(Object.values(bobCounts).reduce((s, n) => s + n, 0), 2);
});

test('keyset paging walks every instance once, newest first', async () => {
	const c = client(dAlice);
	const seen = [];
	const sizes = [];
	let after = '';
	for (let n = 0; n < 10; n++) {
		const page = await c.getJson(`/api/instances?label=page-&limit=3${after ? `&after=${encodeURIComponent(after)}` : ''}`);
		sizes.push(page.instances.length);
		seen.push(...page.instances);
		if (!page.next)
			break;
		after = page.next;
	}
	assert.deepEqual(sizes, [3, 3, 1]);
	assert.deepEqual(seen.map((i) => i.id), [...pageIds].reverse());
	const times = seen.map((i) => new Date(i.created_at).getTime());
	assert.deepEqual(times, [...times].sort((x, y) => y - x));
	// the page links to the next one
	const html = await c.get('/instances?label=page-&limit=3');
	assert.match(html.text, /id="next-page" rel="next"/);
	// a cursor that is not one is ignored, not an error
	assert.equal((await c.get('/api/instances?after=nonsense', { json: true })).status, 200);
});

test('filters: status, label pattern, submitter, time range', async () => {
	const c = client(dSuper);
	const failed = await c.getJson('/api/instances?status=failed');
	assert.ok(failed.instances.length >= 1 && failed.instances.every((i) => i.status === 'failed'));
	assert.ok(idsOf(failed).includes(ids.fail));
	assert.deepEqual(idsOf(await c.getJson('/api/instances?label=api%20fails')), [ids.fail]);
	assert.equal((await c.getJson('/api/instances?label=page-%25')).instances.length, 7);
	assert.equal((await c.getJson('/api/instances?label=PAGE-')).instances.length, 7, 'case-insensitive');
	assert.equal((await c.getJson('/api/instances?label=page_')).instances.length, 0, '_ is literal');
	const byBob = await c.getJson('/api/instances?submitter=api_bob');
	assert.deepEqual(idsOf(byBob).sort(), [ids.bob1, ids.bob2].sort());
	const future = new Date(Date.now() + 3600e3).toISOString();
	assert.equal((await c.getJson(`/api/instances?from=${future}`)).instances.length, 0);
	assert.equal((await c.getJson('/api/instances?to=2000-01-01')).instances.length, 0);
	const past = new Date(Date.now() - 3600e3).toISOString();
	assert.ok((await c.getJson(`/api/instances?from=${past}&to=${future}`)).instances.length >= 15);
	const bad = await c.get('/api/instances?from=yesterday-ish', { json: true });
	assert.equal(bad.status, 400);
	assert.match(bad.data.error, /not a date/);
});

test('counts by status add up to what the role sees', async () => {
	const c = client(dSuper);
	const counts = await c.getJson('/api/counts');
	const { rows } = await admin.query('SELECT status, count(*)::int AS n FROM df.instances GROUP BY status');
	const want = Object.fromEntries(rows.map((r) => [r.status, r.n]));
	assert.equal(counts.length, 6);
	for (const x of counts)
		assert.equal(x.count, want[x.status] || 0, x.status);
	const html = await client(dAlice).get('/instances/counts');
	assert.match(html.text, /data-status="running"/);
});

test('an instance: graph, nodes, timeline, history, error, trace id', async () => {
	const c = client(dSuper);
	const d = await c.getJson(`/api/instances/${ids.fail}`);
	assert.equal(d.instance.status, 'failed');
	assert.match(d.error, /division by zero/);
	const failedSql = d.nodes.filter((n) => n.status === 'failed' && n.node_type === 'SQL');
	assert.deepEqual(failedSql.map((n) => n.query), ['SELECT 1/0']);
	assert.ok(d.failedNodes.includes(failedSql[0].node_id));
	assert.match(d.dot, /^digraph/);
	assert.ok(d.nodes.length >= 3);
	assert.ok(d.timeline.rows.length >= 3);
	assert.ok(d.timeline.rows.every((r) => r.waitMs >= 0 && r.runMs >= 0));
	assert.ok(d.timeline.rows.some((r) => r.status === 'ERROR'));
	assert.ok(d.history.some((e) => e.kind === 'instance_failed'));
	assert.match(d.instance.trace_id, /^[0-9a-f]{32}$/);
	const page = await c.get(`/instances/${ids.fail}`);
	assert.equal(page.status, 200);
	assert.match(page.text, /<svg class="graph"/);
	assert.match(page.text, /class="state-failed"/);
	assert.match(page.text, /<svg class="gantt" id="timeline"/);
	assert.ok(page.text.includes(d.instance.trace_id));
	assert.match(page.headers.get('content-security-policy'), /script-src 'self'/);
	const ok = await c.getJson(`/api/instances/${ids.ok}`);
	assert.match(ok.instance.output, /"b": 2/);
	assert.equal((await c.get('/api/instances/NOTANID', { json: true })).status, 400);
});

test('why it waits: a signal, a lock, a limit queue, a timer', async () => {
	const c = client(dAlice);
	const texts = async (id) => (await c.getJson(`/api/instances/${id}`)).waits.map((w) => w.text).join('\n');
	assert.match(await texts(ids.wait), /waiting for signal "go"/);
	assert.match(await texts(ids.lockWaiter), /waiting for lock "k-api"/);
	assert.match(await texts(ids.limitWaiter), /queued on limit "lim-api", position 1/);
	assert.match(await texts(ids.xss), /timer: sleeping 600 s/);
	const list = await c.getJson('/api/instances?label=api%20waits');
	assert.match(list.instances[0].waits[0].text, /signal "go"/);
});

test('coordination and overview, per role', async () => {
	const sup = await client(dSuper).getJson('/api/coordination');
	assert.ok(sup.breakers.some((b) => b.name === 'api_breaker' && b.state === 'closed'));
	assert.ok(sup.locks.some((l) => l.key === 'k-api' && l.state === 'held' && l.token));
	assert.ok(sup.locks.some((l) => l.key === 'k-api' && l.state === 'waiting'));
	assert.ok(sup.limits.some((l) => l.key === 'lim-api' && l.held === 1 && l.queued === 1));
	assert.ok(sup.subscriptions.some((s) => s.name === 'api_sub'));
	assert.ok(sup.topics.some((t) => t.topic === 'api-other-topic' && Number(t.events) === 1));
	const a = await client(dAlice).getJson('/api/coordination');
	assert.ok(a.locks.some((l) => l.key === 'k-api'));
	assert.ok(a.subscriptions.some((s) => s.name === 'api_sub'));
	// df.events: alice sees no event of the administrator's own topic
	assert.ok(Array.isArray(a.topics));
	assert.ok(!a.topics.some((t) => t.topic === 'api-other-topic'));
	const b = await client(dBob).getJson('/api/coordination');
	assert.equal(b.locks.length, 0);
	assert.equal(b.limits.length, 0);
	assert.equal(b.subscriptions.length, 0);
	assert.equal((await client(dBob).get('/coordination')).status, 200);

	const so = await client(dSuper).getJson('/api/overview');
	assert.ok(Number(so.metrics.total_instances) >= 17);
	assert.equal(typeof so.metrics.task_queues, 'object');
	assert.equal((await client(dSuper).get('/')).status, 200);
	assert.ok(Array.isArray(so.check));
	assert.equal(so.buckets.length, 12);
	assert.ok(so.lastHour.started >= 17);
	const ao = await client(dAlice).getJson('/api/overview');
	assert.equal(ao.metrics, null);
	assert.equal(ao.check, null);
	assert.equal(ao.lastHour.started, (await client(dAlice).getJson('/api/instances?limit=500')).instances.length);
	assert.equal((await client(dAlice).get('/')).status, 200);
});

test('labels, SQL text, results and errors are escaped in the pages', async () => {
	const c = client(dAlice);
	for (const url of ['/instances', `/instances/${ids.xss}`]) {
		const r = await c.get(url);
		assert.ok(!r.text.includes('<img src=x'), `${url} has no raw <img`);
		assert.ok(r.text.includes('&lt;img src=x onerror=alert(1)&gt;'), `${url} shows the label as text`);
	}
	const r = await c.get(`/instances/${ids.markup}`);
	assert.equal(r.status, 200);
	assert.ok(!/<script>alert|<b onmouseover/.test(r.text), 'no markup from the steps, their results or errors');
	assert.ok(r.text.includes('&lt;script&gt;alert(2)&lt;/script&gt;'), 'the step and its result as text');
	assert.ok(r.text.includes('&lt;b onmouseover=alert(3)&gt;'), 'the error as text');
});

// --- actions -------------------------------------------------------------------

test('signal: sends the named signal with its JSON data', async () => {
	const c = client(dAlice);
	const bad = await c.post(`/instances/${ids.wait}/signal`, { name: 'go', data: '{not json' }, { json: true });
	assert.equal(bad.status, 400);
	assert.match(bad.data.error, /not JSON/);
	const r = await c.post(`/instances/${ids.wait}/signal`, { name: 'go', data: '{"ok": true}' }, { json: true });
	assert.equal(r.status, 200, r.text);
	await h.waitStatus(admin, ids.wait, 'completed');
	const { rows } = await admin.query('SELECT df.result($1) AS r', [ids.wait]);
	assert.match(rows[0].r, /"ok": true/);
});

test('cancel: without compensation, and from a form (303 back to the page)', async () => {
	const id = await h.start(alice, 'df.sleep(600)', 'cancel me');
	await h.waitRunning(admin, id, 'SLEEP');
	const c = client(dAlice);
	await c.get(`/instances/${id}`);
	const r = await c.post(`/instances/${id}/cancel`, { reason: 'test' });
	assert.equal(r.status, 303);
	assert.equal(r.location, `/instances/${id}`);
	await h.waitStatus(admin, id, 'cancelled');
	const page = await c.get(`/instances/${id}`);
	assert.match(page.text, /id="flash">cancel: /);
	// compensating it is the extension's error, shown to the user on the page
	const again = await c.post(`/instances/${id}/compensate`, {});
	assert.equal(again.status, 303);
	assert.match((await c.get(`/instances/${id}`)).text, /compensate refused: df.compensate: instance [0-9a-f]{8} has no undo to run/);
});

test('cancel with compensation runs the undos', async () => {
	const id = await h.start(alice, "('SELECT 1' <~> 'SELECT 2') ~> df.wait_for_signal('never')", 'cancel compensate');
	await h.waitRunning(admin, id, 'SIGNAL');
	const r = await client(dAlice).post(`/instances/${id}/cancel`, { compensate: 'on' }, { json: true });
	assert.equal(r.status, 200, r.text);
	await h.waitStatus(admin, id, 'compensated');
	const d = await client(dAlice).getJson(`/api/instances/${id}`);
	assert.equal(d.compensations.length, 1);
	assert.equal(d.compensations[0].state, 'done');
});

test('compensate resumes a compensation that an undo stopped', async () => {
	await alice.query('CREATE TABLE api_fix (x int)');
	const id = await h.start(alice,
		"df.saga(('SELECT 1' <~> df.retry('SELECT 1 / (SELECT count(*)::int FROM api_fix)', 1)) ~> 'SELECT 1/0', on_undo_failure => 'stop')",
		'compensate me');
	await h.waitStatus(admin, id, 'failed');
	await alice.query('INSERT INTO api_fix VALUES (1)');
	const r = await client(dAlice).post(`/instances/${id}/compensate`, {}, { json: true });
	assert.equal(r.status, 200, r.text);
	await h.waitFor('the undo to run again', async () => {
		const d = await client(dAlice).getJson(`/api/instances/${id}`);
		return d.compensations.length === 1 && d.compensations[0].state === 'done' &&
			d.history.some((e) => e.kind === 'instance_resumed');
	});
});

test('start again: a new instance of the same graph and label', async () => {
	const shapes = "df.if('SELECT true', 'SELECT 1', 'SELECT 2') ~> df.join3('SELECT 1', 'SELECT 2', 'SELECT 3') " +
		"~> df.loop('SELECT 1', 'SELECT false') ~> (df.retry('SELECT 4 AS four', 2) |=> 'r')";
	const first = await h.start(alice, shapes, 'again');
	await h.waitStatus(admin, first, 'completed');
	for (const id of [first, ids.ok]) {
		const r = await client(dAlice).post(`/instances/${id}/restart`, {}, { json: true });
		assert.equal(r.status, 200, r.text);
		const fresh = r.data.instance;
		assert.match(fresh, /^[0-9a-f]{8}$/);
		assert.notEqual(fresh, id);
		await h.waitStatus(admin, fresh, 'completed');
		const shape = async (x) => (await admin.query(
			'SELECT node_type, query, result_name FROM df.instance_nodes($1) ORDER BY 1, 2, 3', [x])).rows;
		const strip = (rows) => rows.map((n) => ({ ...n, query: /condition_node|extra_nodes/.test(n.query || '') ? '(link)' : n.query }));
		assert.deepEqual(strip(await shape(fresh)), strip(await shape(id)));
		const labels = await admin.query('SELECT label, submitted_by::text AS s FROM df.instances WHERE id = ANY($1) ORDER BY id', [[id, fresh]]);
		assert.equal(labels.rows[0].label, labels.rows[1].label);
		assert.deepEqual(labels.rows.map((x) => x.s), ['api_alice', 'api_alice']);
	}
});

test('every action is refused with --read-only, and no form is shown', async () => {
	const id = await h.start(alice, "df.wait_for_signal('ro')", 'read-only target');
	await h.waitRunning(admin, id, 'SIGNAL');
	const c = client(dReadOnly);
	const page = await c.get(`/instances/${id}`);
	assert.equal(page.status, 200);
	assert.ok(!page.text.includes('id="actions"'));
	assert.match(page.text, /read-only/);
	await c.get('/instances');
	for (const [action, form] of [['cancel', {}], ['cancel', { compensate: 'on' }], ['signal', { name: 'ro' }],
		['compensate', {}], ['restart', {}]]) {
		const r = await c.post(`/instances/${id}/${action}`, form, { json: true });
		assert.equal(r.status, 403, action);
		assert.match(r.data.error, /read-only/);
	}
	assert.equal(await h.statusOf(admin, id), 'running');
	const { rows } = await admin.query("SELECT count(*)::int AS n FROM df.instances WHERE label = 'read-only target'");
	assert.equal(rows[0].n, 1, 'no instance was started again');
	await admin.query("SELECT df.cancel($1)", [id]);
});

test('every action is refused without the CSRF token, or with a wrong one', async () => {
	const id = await h.start(alice, "df.wait_for_signal('csrf')", 'csrf target');
	await h.waitRunning(admin, id, 'SIGNAL');
	const c = client(dAlice);
	await c.get(`/instances/${id}`);
	for (const [action, form] of [['cancel', {}], ['cancel', { compensate: 'on' }], ['signal', { name: 'csrf' }],
		['compensate', {}], ['restart', {}]]) {
		const none = await c.post(`/instances/${id}/${action}`, form, { csrf: false, json: true });
		assert.equal(none.status, 403, `${action} without a token`);
		assert.match(none.data.error, /CSRF/);
		const wrong = await c.post(`/instances/${id}/${action}`, { _csrf: 'x'.repeat(32), ...form }, { csrf: false, json: true });
		assert.equal(wrong.status, 403, `${action} with a wrong token`);
		// another session's token is no good either
		const other = client(dAlice);
		await other.get('/instances');
		const foreign = await c.post(`/instances/${id}/${action}`, { _csrf: other.csrf, ...form }, { csrf: false, json: true });
		assert.equal(foreign.status, 403, `${action} with another session's token`);
	}
	assert.equal(await h.statusOf(admin, id), 'running');
	const unknown = await c.post(`/instances/${id}/delete`, {}, { json: true });
	assert.equal(unknown.status, 404);
	await admin.query('SELECT df.cancel($1)', [id]);
});

test('an ordinary role cannot act on another role\'s instance', async () => {
	const r = await client(dBob).post(`/instances/${ids.xss}/cancel`, {}, { json: true });
	assert.equal(r.status, 400);
	assert.equal(await h.statusOf(admin, ids.xss), 'running');
});

// --- --login --------------------------------------------------------------------

test('--login: a wrong password is refused, the right one acts as that role only', async () => {
	const c = client(dLogin);
	assert.equal((await c.get('/instances')).status, 303);
	assert.equal((await c.get('/api/instances', { json: true })).status, 401);
	await c.get('/login');
	const wrong = await c.post('/login', { user: 'api_alice', password: 'not it' });
	assert.equal(wrong.status, 401);
	assert.match(wrong.text, /sign-in refused/);
	assert.equal((await c.get('/api/instances', { json: true })).status, 401);
	const nobody = await c.post('/login', { user: 'no_such_role', password: 'x' });
	assert.equal(nobody.status, 401);
	const noToken = await c.post('/login', { user: 'api_alice', password: 'alice secret' }, { csrf: false });
	assert.equal(noToken.status, 403);

	const ok = await c.post('/login', { user: 'api_alice', password: 'alice secret' });
	assert.equal(ok.status, 303);
	const list = await c.getJson('/api/instances?limit=500');
	assert.ok(list.instances.length >= 15 && list.instances.every((i) => i.submitter === 'api_alice'));

	const b = client(dLogin);
	await b.get('/login');
	assert.equal((await b.post('/login', { user: 'api_bob', password: 'bob secret' })).status, 303);
	assert.deepEqual(idsOf(await b.getJson('/api/instances')).sort(), [ids.bob1, ids.bob2].sort());
	const page = await b.get('/instances');
	const denied = await b.post(`/instances/${ids.xss}/cancel`, {}, { json: true });
	assert.equal(denied.status, 400, page.status + denied.text);
	assert.equal(await h.statusOf(admin, ids.xss), 'running');

	// alice acts as alice
	await c.get(`/instances/${ids.xss}`);
	const cancel = await c.post(`/instances/${ids.xss}/cancel`, {}, { json: true });
	assert.equal(cancel.status, 200, cancel.text);
	await h.waitStatus(admin, ids.xss, 'cancelled');

	assert.equal((await c.post('/logout', {})).status, 303);
	assert.equal((await c.get('/api/instances', { json: true })).status, 401);
});
