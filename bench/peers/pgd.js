/*
 * pgd.js: the pg_durable side of bench/peers, driven from SQL with node's
 * pg client (one connection per concurrent workflow: df.start, then
 * df.await_instance).  Every step is
 *   INSERT INTO bench_step (wf, k) VALUES ('{sys_instance_id}', k)
 * which the engine runs in one transaction with its checkpoint.  Graphs are
 * built once by the server's DSL as balanced trees of ~> or & (so a chain
 * of 100 nests 7 levels deep) and passed to df.start as a parameter.
 */
'use strict';

const c = require('./common');

const DB = 'pgd_bench';

function stepSql(k) {
	return `$s$INSERT INTO bench_step (wf, k) VALUES ('{sys_instance_id}', ${k})$s$`;
}

function balanced(op, lo, hi, leaf) {
	if (hi - lo === 1)
		return leaf(lo + 1);
	const mid = lo + Math.floor((hi - lo) / 2);
	return `(${balanced(op, lo, mid, leaf)} ${op} ${balanced(op, mid, hi, leaf)})`;
}

async function graph(db, expr) {
	const r = await db.query(`SELECT (${expr})::text AS g`);
	return r.rows[0].g;
}

async function setup(db) {
	await db.query('CREATE TABLE IF NOT EXISTS bench_step (wf text, k int, ts timestamptz DEFAULT clock_timestamp())');
}

async function clients(n) {
	const cl = [];
	for (let i = 0; i < n; i++)
		cl.push(await c.connect(DB, 'pgd-bench-client'));
	return cl;
}

async function startAwait(db, g) {
	const s = await db.query('SELECT df.start($1) AS id', [g]);
	const id = s.rows[0].id;
	const a = await db.query('SELECT df.await_instance($1, 300) AS st', [id]);
	if (a.rows[0].st !== 'completed')
		throw new Error(`instance ${id} is ${a.rows[0].st}`);
	return id;
}

async function throughput(mon, db, p) {
	const expr = p.kind === 'B' ? balanced('&', 0, p.n, stepSql) : balanced('~>', 0, p.n, stepSql);
	const g = await graph(db, expr);
	const cl = await clients(Math.min(p.conc, p.workflows));
	try {
		return await c.measure(mon, DB, 'pg_durable', p, async () => {
			const r = await c.drive(p.workflows, p.conc, (i, l) => startAwait(cl[l], g));
			return { ...r, workflows: p.workflows - r.failed, steps: p.n * (p.workflows - r.failed) };
		});
	} finally {
		for (const x of cl)
			await x.end();
	}
}

/* D: five logged steps, a wait for signal 'go', a sixth logged step. */
async function latency(mon, db, p) {
	const expr = `${balanced('~>', 0, p.n, stepSql)} ~> df.wait_for_signal('go') ~> ${stepSql(p.n + 1)}`;
	const g = await graph(db, expr);
	/* the client polls bench_step for step n: keep that a short scan */
	await db.query('TRUNCATE bench_step');
	const cl = await clients(Math.min(p.conc, p.workflows));
	const first = [], step = [], wake = [];
	try {
		return await c.measure(mon, DB, 'pg_durable', p, async () => {
			const r = await c.drive(p.workflows, p.conc, async (i, l) => {
				const x = cl[l];
				const t0 = c.nowMs();
				const id = (await x.query('SELECT df.start($1) AS id', [g])).rows[0].id;
				await waitForStep(x, id, p.n);
				await c.sleep(30);		/* let the engine reach the wait */
				const tsig = c.nowMs();
				await x.query("SELECT df.signal($1, 'go', '{}')", [id]);
				const a = await x.query('SELECT df.await_instance($1, 300) AS st', [id]);
				if (a.rows[0].st !== 'completed')
					throw new Error(`instance ${id} is ${a.rows[0].st}`);
				const ts = await stepTimes(x, id);
				first.push(ts[1] - t0);
				for (let k = 2; k <= p.n; k++)
					step.push(ts[k] - ts[k - 1]);
				wake.push(ts[p.n + 1] - tsig);
			});
			return { ...r, workflows: p.workflows, steps: (p.n + 1) * p.workflows,
				extra: { latRows: latRows(first, step, wake) } };
		});
	} finally {
		for (const x of cl)
			await x.end();
	}
}

function latRows(first, step, wake) {
	return [
		['start-to-first-step', first], ['step-to-step', step], ['signal-to-wake', wake],
	].map(([what, v]) => ({ what, p50: c.percentile(v, 50), p99: c.percentile(v, 99) }));
}

async function waitForStep(x, wf, k) {
	for (let i = 0; i < 30000; i++) {
		const r = await x.query('SELECT 1 FROM bench_step WHERE wf = $1 AND k = $2', [wf, k]);
		if (r.rowCount > 0)
			return;
		await c.sleep(2);
	}
	throw new Error(`step ${k} of ${wf} never ran`);
}

async function stepTimes(x, wf) {
	const r = await x.query('SELECT k, extract(epoch FROM ts) * 1000 AS ms FROM bench_step WHERE wf = $1', [wf]);
	const ts = [];
	for (const row of r.rows)
		ts[row.k] = Number(row.ms);
	return ts;
}

/*
 * E: 32 chains of 100 steps; once 800 steps have run, kill -9 every
 * executor (the postmaster then restarts the whole server, as for any
 * backend killed that way); measure from the kill to the first step
 * committed afterwards, and count steps that ran twice or never.
 */
async function kill(p) {
	let db = await c.connect(DB, 'pgd-bench-e');
	await db.query('TRUNCATE bench_step');
	const g = await graph(db, balanced('~>', 0, p.n, stepSql));
	const ids = [];
	for (let i = 0; i < p.workflows; i++)
		ids.push((await db.query('SELECT df.start($1) AS id', [g])).rows[0].id);
	while (Number((await db.query('SELECT count(*) AS n FROM bench_step')).rows[0].n) < p.killAfterSteps)
		await c.sleep(5);
	const pids = (await db.query(
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'pg_durable executor'")).rows.map((r) => r.pid);
	const tKill = c.nowMs();
	for (const pid of pids)
		process.kill(pid, 'SIGKILL');
	db.on('error', () => {});
	await db.end().catch(() => {});
	/* the server restarts: reconnect, then wait for every instance */
	const deadline = Date.now() + 180000;
	let connected = false;
	for (;;) {
		connected = false;
		try {
			db = await c.connect(DB, 'pgd-bench-e');
			db.on('error', () => {});
			connected = true;
			const r = await db.query("SELECT count(*) AS n FROM df.instances WHERE id = ANY($1) AND status = 'completed'", [ids]);
			if (Number(r.rows[0].n) === ids.length)
				break;
			/*
			 * Not all yet.  With synchronous_commit off, a df.start whose
			 * commit was acknowledged but not yet flushed is lost with the
			 * crash, and its instance never completes: the deadline ends the
			 * wait and the result counts it as not completed.
			 */
			if (Date.now() > deadline)
				break;
			await db.end();
			connected = false;
		} catch (e) {
			/* still recovering */
			connected = false;
		}
		if (Date.now() > deadline)
			break;
		await c.sleep(20);
	}
	if (!connected) {
		db = await c.connect(DB, 'pgd-bench-e');
		db.on('error', () => {});
	}
	const r = await db.query(
		`SELECT (SELECT extract(epoch FROM min(ts)) * 1000 FROM bench_step WHERE ts > to_timestamp($1 / 1000.0)) AS resumed,
		        (SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM bench_step GROUP BY wf, k) d) AS dup,
		        (SELECT count(DISTINCT (wf, k)) FROM bench_step) AS distinct_steps,
		        (SELECT count(*) FROM df.instances WHERE id = ANY($2) AND status = 'completed') AS done,
		        (SELECT count(*) FROM df.instances WHERE id = ANY($2)) AS found,
		        (SELECT string_agg(r.instance_id || ' ' || r.status || ' ' ||
		                (SELECT count(*) FROM df_internal.tasks t WHERE t.instance_id = r.instance_id) || ' tasks', ', ')
		         FROM df_internal.runs r WHERE r.instance_id = ANY($2)) AS live`,
		[tKill, ids]);
	await db.end();
	const row = r.rows[0];
	return {
		system: 'pg_durable', scenario: 'E kill -9', n: p.n, conc: p.conc,
		resumeMs: row.resumed === null ? NaN : Number(row.resumed) - tKill,
		duplicates: Number(row.dup), lost: p.n * p.workflows - Number(row.distinct_steps),
		completed: Number(row.done), workflows: p.workflows,
		/*
		 * An instance not completed by the deadline: not found (its df.start's
		 * commit lost, synchronous_commit off) or still live (its runs row)
		 */
		note: `${pids.length} executors killed; the postmaster restarts the server` +
			(Number(row.done) < ids.length ?
				`; ${ids.length - Number(row.done)} not completed: ${ids.length - Number(row.found)} not found` +
					(row.live ? `, live: ${row.live}` : '') :
				''),
	};
}

async function run(mon, plan) {
	const db = await c.connect(DB, 'pgd-bench');
	await setup(db);
	const out = [];
	try {
		/* warm-up: plans in every executor, first extension of the tables */
		if (plan.phases.length)
			await throughput(mon, db, { kind: 'A', n: 5, conc: 4, workflows: 40 });
		for (const p of plan.phases) {
			process.stderr.write(`  pg_durable ${c.label(p)} x${p.conc}\n`);
			out.push(p.kind === 'D' ? await latency(mon, db, p) : await throughput(mon, db, p));
		}
	} finally {
		await db.end();
	}
	if (plan.e) {
		process.stderr.write('  pg_durable E kill -9\n');
		out.push(await kill(plan.e));
	}
	return out;
}

module.exports = { run, DB };
