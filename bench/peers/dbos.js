/*
 * dbos.js: the DBOS Transact side of bench/peers, run as a child process
 * of bench.js (so that scenario E can kill -9 it).  DBOS keeps its system
 * tables and the steps' table in database dbos_bench on the same server.
 * Every step is a DBOS transaction through @dbos-inc/postgres-datasource:
 *   INSERT INTO bench_step (wf, k) VALUES (<workflow id>, k)
 * committed together with DBOS's own record of the step (its
 * transaction_completion row), the equivalent of a pg_durable SQL step.
 * Workflows run in this process; conc client loops each start one with
 * DBOS.startWorkflow and await its result.
 *
 *   node dbos.js bench PLAN      the A-D phases of PLAN, then E; prints JSON
 *   node dbos.js e-start PLAN    start E's workflows and run them until killed
 *   node dbos.js e-recover PLAN  launch (DBOS recovers pending workflows) and
 *                                wait until they are done
 */
'use strict';

const { spawn } = require('child_process');
const { Pool } = require('pg');
const { DBOS } = require('@dbos-inc/dbos-sdk');
const { PostgresDataSource } = require('@dbos-inc/postgres-datasource');
const c = require('./common');

const DB = 'dbos_bench';
const pgOpts = { host: c.conn.host, port: c.conn.port, user: c.conn.user, database: DB, onnotice: () => {} };
const ds = new PostgresDataSource('app', pgOpts);

const insertStep = ds.registerTransaction(async (wf, k) => {
	await PostgresDataSource.client`INSERT INTO bench_step (wf, k) VALUES (${wf}, ${k})`;
}, { name: 'insertStep' });

async function chainFn(n) {
	for (let k = 1; k <= n; k++)
		await insertStep(DBOS.workflowID, k);
}
const chain = DBOS.registerWorkflow(chainFn, { name: 'chain' });

async function fanoutFn(n) {
	const all = [];
	for (let k = 1; k <= n; k++)
		all.push(insertStep(DBOS.workflowID, k));
	await Promise.all(all);
}
const fanout = DBOS.registerWorkflow(fanoutFn, { name: 'fanout' });

async function latencyFn(n) {
	for (let k = 1; k <= n; k++)
		await insertStep(DBOS.workflowID, k);
	await DBOS.recv('go', 300);
	await insertStep(DBOS.workflowID, n + 1);
}
const latencyWf = DBOS.registerWorkflow(latencyFn, { name: 'latency' });

async function launch() {
	DBOS.setConfig({ name: 'peers-bench', systemDatabaseUrl: c.urlFor(DB), logLevel: 'error' });
	await PostgresDataSource.initializeDBOSSchema(pgOpts);
	const db = await c.connect(DB, 'dbos-bench-setup');
	await db.query('CREATE TABLE IF NOT EXISTS bench_step (wf text, k int, ts timestamptz DEFAULT clock_timestamp())');
	await db.end();
	await DBOS.launch();
}

async function startAwait(wf, n) {
	const h = await DBOS.startWorkflow(wf)(n);
	await h.getResult();
	return h.workflowID;
}

async function throughput(mon, p) {
	const wf = p.kind === 'B' ? fanout : chain;
	return c.measure(mon, DB, 'DBOS', p, async () => {
		const r = await c.drive(p.workflows, p.conc, () => startAwait(wf, p.n));
		return { ...r, workflows: p.workflows - r.failed, steps: p.n * (p.workflows - r.failed) };
	});
}

async function latency(mon, p) {
	const x = new Pool({ ...c.conn, database: DB, max: Math.min(p.conc, 8), application_name: 'dbos-bench-latency' });
	const first = [], step = [], wake = [];
	/* the client polls bench_step for step n: keep that a short scan */
	await x.query('TRUNCATE bench_step');
	try {
		return await c.measure(mon, DB, 'DBOS', p, async () => {
			const r = await c.drive(p.workflows, p.conc, async () => {
				const t0 = c.nowMs();
				const h = await DBOS.startWorkflow(latencyWf)(p.n);
				const id = h.workflowID;
				for (let i = 0; ; i++) {
					const q = await x.query('SELECT 1 FROM bench_step WHERE wf = $1 AND k = $2', [id, p.n]);
					if (q.rowCount > 0)
						break;
					if (i > 30000)
						throw new Error(`step ${p.n} of ${id} never ran`);
					await c.sleep(2);
				}
				await c.sleep(30);		/* let the workflow reach recv */
				const tsig = c.nowMs();
				await DBOS.send(id, {}, 'go');
				await h.getResult();
				const rows = (await x.query('SELECT k, extract(epoch FROM ts) * 1000 AS ms FROM bench_step WHERE wf = $1', [id])).rows;
				const ts = [];
				for (const row of rows)
					ts[row.k] = Number(row.ms);
				first.push(ts[1] - t0);
				for (let k = 2; k <= p.n; k++)
					step.push(ts[k] - ts[k - 1]);
				wake.push(ts[p.n + 1] - tsig);
			});
			const lr = [['start-to-first-step', first], ['step-to-step', step], ['signal-to-wake', wake]]
				.map(([what, v]) => ({ what, p50: c.percentile(v, 50), p99: c.percentile(v, 99) }));
			return { ...r, workflows: p.workflows, steps: (p.n + 1) * p.workflows, extra: { latRows: lr } };
		});
	} finally {
		await x.end();
	}
}

/*
 * E, from the parent side of two children: e-start runs the chains and is
 * killed with SIGKILL once killAfterSteps steps are in; e-recover is then
 * started at once (as a supervisor would) and DBOS recovers the pending
 * workflows when it launches.
 */
async function kill(plan) {
	const p = plan.e;
	const db = await c.connect(DB, 'dbos-bench-e');
	await db.query('TRUNCATE bench_step');
	const child = (mode) => spawn(process.execPath, [__filename, mode, JSON.stringify(plan)], { stdio: ['ignore', 'ignore', 'inherit'] });
	const worker = child('e-start');
	while (Number((await db.query('SELECT count(*) AS n FROM bench_step')).rows[0].n) < p.killAfterSteps)
		await c.sleep(5);
	const tKill = c.nowMs();
	worker.kill('SIGKILL');
	const rec = child('e-recover');
	const code = await new Promise((r) => rec.on('exit', r));
	const row = (await db.query(
		`SELECT (SELECT extract(epoch FROM min(ts)) * 1000 FROM bench_step WHERE ts > to_timestamp($1 / 1000.0)) AS resumed,
		        (SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM bench_step GROUP BY wf, k) d) AS dup,
		        (SELECT count(DISTINCT (wf, k)) FROM bench_step) AS distinct_steps,
		        (SELECT count(DISTINCT wf) FROM bench_step WHERE k = $2) AS done`, [tKill, p.n])).rows[0];
	await db.end();
	return {
		system: 'DBOS', scenario: 'E kill -9', n: p.n, conc: p.conc,
		resumeMs: row.resumed === null ? NaN : Number(row.resumed) - tKill,
		duplicates: Number(row.dup), lost: p.n * p.workflows - Number(row.distinct_steps),
		completed: Number(row.done), workflows: p.workflows,
		note: `worker process killed and restarted at once; recovery exit code ${code}`,
	};
}

async function eStart(plan) {
	const p = plan.e;
	for (let i = 0; i < p.workflows; i++)
		await DBOS.startWorkflow(chain)(p.n);
	await new Promise(() => {});	/* until killed */
}

async function eRecover(plan) {
	const p = plan.e;
	const db = await c.connect(DB, 'dbos-bench-e');
	const deadline = Date.now() + 180000;
	while (Date.now() < deadline) {
		const n = Number((await db.query('SELECT count(DISTINCT wf) AS n FROM bench_step WHERE k = $1', [p.n])).rows[0].n);
		if (n >= p.workflows)
			break;
		await c.sleep(20);
	}
	await db.end();
}

async function main() {
	const [mode, planText] = process.argv.slice(2);
	const plan = JSON.parse(planText);
	await launch();
	if (mode === 'e-start')
		return eStart(plan);
	if (mode === 'e-recover') {
		await eRecover(plan);
		await DBOS.shutdown();
		return;
	}
	const mon = await c.connect('postgres', 'peers-monitor');
	const out = [];
	await throughput(mon, { kind: 'A', n: 5, conc: 4, workflows: 40 });	/* warm-up */
	for (const p of plan.phases) {
		process.stderr.write(`  DBOS ${c.label(p)} x${p.conc}\n`);
		out.push(p.kind === 'D' ? await latency(mon, p) : await throughput(mon, p));
	}
	await DBOS.shutdown();
	if (plan.e) {
		process.stderr.write('  DBOS E kill -9\n');
		out.push(await kill(plan));
	}
	await mon.end();
	process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), (e) => {
	console.error(`dbos.js: ${e.stack || e.message}`);
	process.exit(1);
});
