/*
 * tasks.js: scenario T of bench/peers, pg_durable's side: external tasks
 * (df.task) through the worker libraries of clients/python and
 * clients/node, each run as a process of its own (task_worker.py,
 * task_worker.js) at concurrency 32 with no-op handlers, connected as a
 * role granted the queues bench.* (df.grant_worker).
 *
 *  - Throughput: `tasks` workflows of one TASK step are started in one
 *    statement (df.start in a generate_series); tasks/s is their number over
 *    the time from that statement's return (its commit) to the moment every
 *    task is completed (df.tasks polled every 10 ms: its ready and leased
 *    tasks through their indexes, and its completed ones once there are
 *    none).  The measured window
 *    (commits, WAL) also holds the instances' ends and the worker's start
 *    and stop, so that its sessions' statistics are flushed.
 *  - Latency: `latency` workflows, one at a time, of a SQL step that
 *    returns its clock_timestamp() and a TASK whose payload carries it; the
 *    handler completes with the time from it to its own start.  It is the
 *    time from the step before (in the transaction whose commit makes the
 *    task ready, the commit included) to the handler starting: the commit,
 *    NOTIFY df_tasks, the worker's claim.  20 ms between workflows, so the
 *    worker waits on LISTEN each time.
 *
 * graphile-worker's side (its jobs/s and add-to-start latency under the
 * same rules) is graphile.js's tasks().
 */
'use strict';

const path = require('path');
const { spawn } = require('child_process');
const c = require('./common');

const DB = 'pgd_bench';
const ROLE = 'bench_worker';
const PYTHON = process.env.PYTHON || '/usr/bin/python3';

const LANGS = {
	python: { system: 'pg_durable (Python worker)', prefix: 'bench.py',
		cmd: () => [PYTHON, [path.join(__dirname, 'task_worker.py'),
			`host=${c.conn.host} port=${c.conn.port} dbname=${DB} user=${ROLE}`, 'bench.py']] },
	node: { system: 'pg_durable (Node worker)', prefix: 'bench.node',
		cmd: () => [process.execPath, [path.join(__dirname, 'task_worker.js'),
			`postgresql://${ROLE}@localhost:${c.conn.port}/${DB}?host=${encodeURIComponent(c.conn.host)}`,
			'bench.node']] },
};

async function setup(db) {
	await db.query(`DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${ROLE}') THEN CREATE ROLE ${ROLE} LOGIN; END IF;
	END $$`);
	await db.query(`SELECT df.grant_worker('${ROLE}', 'bench.*')`);
}

/* Start a worker process; resolves once its LISTEN connection is up. */
async function startWorker(db, lang) {
	const [cmd, args] = LANGS[lang].cmd();
	const ch = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
	const exited = new Promise((r) => ch.on('exit', r));
	const deadline = Date.now() + 30000;
	for (;;) {
		const r = await db.query(
			"SELECT count(*) AS n FROM pg_stat_activity WHERE usename = $1 AND query = 'LISTEN df_tasks'", [ROLE]);
		if (Number(r.rows[0].n) > 0)
			break;
		if (ch.exitCode !== null || Date.now() > deadline) {
			ch.kill('SIGKILL');
			throw new Error(`the ${lang} worker did not start (${cmd} ${args[0]})`);
		}
		await c.sleep(20);
	}
	return {
		stop: async () => {
			ch.kill('SIGTERM');
			await exited;
			/* its sessions are gone, their statistics flushed */
			while (Number((await db.query('SELECT count(*) AS n FROM pg_stat_activity WHERE usename = $1',
				[ROLE])).rows[0].n) > 0)
				await c.sleep(20);
		},
	};
}

async function count(db, sql, args) {
	return Number((await db.query(sql, args)).rows[0].n);
}

async function throughput(mon, db, lang, p) {
	const { system, prefix } = LANGS[lang];
	const queue = `${prefix}.noop`;
	const label = `bench-${queue}`;
	const r = await c.measure(mon, DB, system, p, async () => {
		const w = await startWorker(db, lang);
		try {
			const before = await count(db, "SELECT count(*) AS n FROM df.tasks WHERE queue = $1 AND state = 'completed'",
				[queue]);
			await db.query('SELECT count(df.start(df.task($1), $2)) FROM generate_series(1, $3)',
				[queue, label, p.workflows]);
			const t0 = c.nowMs();
			const deadline = Date.now() + 300000;
			/*
			 * done once no task of the queue is ready or leased (the partial
			 * indexes of those states: cheap) and all are completed (a scan:
			 * only then)
			 */
			while (await count(db, "SELECT (SELECT count(*) FROM df.tasks WHERE queue = $1 AND state = 'ready') + " +
				"(SELECT count(*) FROM df.tasks WHERE queue = $1 AND state = 'leased') AS n", [queue]) > 0
				|| await count(db, "SELECT count(*) AS n FROM df.tasks WHERE queue = $1 AND state = 'completed'",
					[queue]) < before + p.workflows) {
				if (Date.now() > deadline)
					throw new Error(`${system}: tasks not completed after 300 s`);
				await c.sleep(10);
			}
			const seconds = (c.nowMs() - t0) / 1000;
			while (await count(db, "SELECT count(*) AS n FROM df.instances WHERE label = $1 AND status <> 'completed'",
				[label]) > 0)
				await c.sleep(10);
			return { seconds, lat: [], steps: p.workflows, workflows: p.workflows };
		} finally {
			await w.stop();
		}
	});
	r.unit = 'tasks/s';
	r.p50 = r.p99 = NaN;
	return r;
}

async function latency(mon, db, lang, p) {
	const { system, prefix } = LANGS[lang];
	const g = (await db.query(
		"SELECT (('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS t' |=> 'p') " +
		"~> df.task($1, '{\"t\": $p.t}'))::text AS g", [`${prefix}.lat`])).rows[0].g;
	const lat = [];
	const r = await c.measure(mon, DB, system, p, async () => {
		const w = await startWorker(db, lang);
		try {
			const d = await c.drive(p.workflows, 1, async () => {
				const id = (await db.query('SELECT df.start($1) AS id', [g])).rows[0].id;
				const a = await db.query('SELECT df.await_instance($1, 60) AS st, df.result($1) AS res', [id]);
				if (a.rows[0].st !== 'completed')
					throw new Error(`instance ${id} is ${a.rows[0].st}`);
				lat.push(Number(JSON.parse(a.rows[0].res).lat));
				await c.sleep(20);
			});
			return { ...d, lat: [], steps: p.workflows, workflows: p.workflows };
		} finally {
			await w.stop();
		}
	});
	r.latRows = [{ what: 'step-to-handler', p50: c.percentile(lat, 50), p99: c.percentile(lat, 99) }];
	if (lat.length < p.workflows)
		r.note = `${p.workflows - lat.length} of ${p.workflows} failed: ${r.note}`;
	return r;
}

/* Scenario T for the languages asked for; one row of each kind per language. */
async function run(mon, plan, langs) {
	const db = await c.connect(DB, 'pgd-bench-tasks');
	try {
		await setup(db);
		const out = [];
		for (const lang of langs) {
			process.stderr.write(`  ${LANGS[lang].system} T tasks x${plan.t.conc}\n`);
			out.push(await throughput(mon, db, lang, { kind: 'T', n: 1, conc: plan.t.conc, workflows: plan.t.tasks }));
			out.push(await latency(mon, db, lang, { kind: 'T', n: 1, conc: 1, workflows: plan.t.latency }));
		}
		return out;
	} finally {
		await db.end();
	}
}

module.exports = { run, LANGS };
