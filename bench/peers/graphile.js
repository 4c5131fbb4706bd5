/*
 * graphile.js: the graphile-worker side of bench/peers, run as a child
 * process of bench.js (so that scenario E can kill -9 a worker).
 * graphile-worker 0.16.6 (the newest release that runs on Node 20) is a job
 * queue, not a workflow engine: each scenario is built from its own
 * primitives, jobs in the graphile_worker schema of database graphile_bench
 * and graphile_worker.add_job / add_jobs called in SQL.
 *
 *  - A step is a job whose task calls one SQL function, so the step's
 *    INSERT INTO bench_step and the enqueueing of what comes next commit in
 *    one transaction (one round trip).  graphile-worker then deletes the job
 *    in a transaction of its own (complete_job) and claims the next one with
 *    get_job, as it always does.
 *  - A chain (A) is a job that does its step and adds the next step's job.
 *  - A fan-out (B) is a counter row plus N jobs added in one statement; each
 *    branch does its step and decrements the counter, and the branch that
 *    brings it to zero adds the join job, which deletes the counter.
 *  - A one-step workflow (C) is a single job.
 *  - Completion: the last job of a workflow sends NOTIFY bench_done with
 *    the workflow's id in its transaction; the client LISTENs on one
 *    connection (graphile-worker has no "await job" of its own).
 *  - D's signal: graphile-worker has no signal or wait primitive; the
 *    closest equivalent is another process adding the job that continues
 *    the workflow, so the "signal" is graphile_worker.add_job from the
 *    client and signal-to-wake is from that call to the step's commit.
 *  - E: the worker process is killed with SIGKILL and a new one started at
 *    once.  graphile-worker 0.16 cannot tell that a worker died: jobs it had
 *    locked stay locked until their locked_at is 4 hours old and a sweep
 *    (every 8-10 minutes) releases them.  The run measures what resumes
 *    without that, then ages the locks by 4 hours and runs the same sweep
 *    statement to show what happens when they expire (duplicates).
 *
 * The worker pool of a phase runs with graphile-worker's defaults
 * (LISTEN/NOTIFY on jobs:insert, pollInterval 2 s) and concurrency = the
 * phase's concurrency, maxPoolSize = max(10, concurrency) so that
 * graphile-worker does not warn of a pool smaller than its concurrency.
 *
 *   node graphile.js bench PLAN      the A-D phases of PLAN, then E; prints JSON
 *   node graphile.js tasks PLAN      scenario T (tasks()); prints JSON
 *   node graphile.js e-worker PLAN   run a worker pool until killed (E)
 */
'use strict';

const crypto = require('crypto');
const { spawn } = require('child_process');
const { Pool } = require('pg');
const { run, Logger } = require('graphile-worker');
const c = require('./common');

const DB = 'graphile_bench';
const SYSTEM = 'graphile-worker';
const WAIT_MS = 300000;
/* every session of a phase ends inside it: a short pause around it will do */
const PAUSE_MS = 300;

/* Only errors, on stderr; graphile-worker logs every start and stop. */
const logger = new Logger(() => (level, message) => {
	if (level === 'error')
		process.stderr.write(`graphile-worker: ${message}\n`);
});

/* The steps, in SQL: each one a single transaction with its next jobs. */
const SETUP = `
CREATE TABLE IF NOT EXISTS bench_step (wf text, k int, ts timestamptz DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS bench_join (wf text PRIMARY KEY, remaining int NOT NULL);

-- a chain's step k of n: its write, then the job of step k + 1 or, after
-- the last step, the completion notice
CREATE OR REPLACE FUNCTION bench_chain_step(p_wf text, p_k int, p_n int)
RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO bench_step (wf, k) VALUES (p_wf, p_k);
	IF p_k < p_n THEN
		PERFORM graphile_worker.add_job('chain', json_build_object('wf', p_wf, 'k', p_k + 1, 'n', p_n));
	ELSE
		PERFORM pg_notify('bench_done', p_wf);
	END IF;
END $f$;

-- one branch of a fan-out: its write; the last branch adds the join job
CREATE OR REPLACE FUNCTION bench_branch_step(p_wf text, p_k int)
RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
	v_left int;
BEGIN
	INSERT INTO bench_step (wf, k) VALUES (p_wf, p_k);
	UPDATE bench_join SET remaining = remaining - 1 WHERE wf = p_wf RETURNING remaining INTO v_left;
	IF v_left = 0 THEN
		PERFORM graphile_worker.add_job('join', json_build_object('wf', p_wf));
	END IF;
END $f$;

-- the join: the workflow is done
CREATE OR REPLACE FUNCTION bench_join_step(p_wf text)
RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	DELETE FROM bench_join WHERE wf = p_wf;
	PERFORM pg_notify('bench_done', p_wf);
END $f$;

-- the start of a fan-out: the counter and the N branch jobs, one statement
CREATE OR REPLACE FUNCTION bench_fanout_start(p_wf text, p_n int)
RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO bench_join (wf, remaining) VALUES (p_wf, p_n);
	PERFORM graphile_worker.add_jobs(ARRAY(
		SELECT ROW('branch', json_build_object('wf', p_wf, 'k', k), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
		  FROM generate_series(1, p_n) AS k));
END $f$;
`;

const taskList = {
	chain: async (p, h) => {
		await h.query('SELECT bench_chain_step($1, $2, $3)', [p.wf, p.k, p.n]);
	},
	branch: async (p, h) => {
		await h.query('SELECT bench_branch_step($1, $2)', [p.wf, p.k]);
	},
	join: async (p, h) => {
		await h.query('SELECT bench_join_step($1)', [p.wf]);
	},
	/* scenario T: a no-op job, and one that reports when it started */
	noop: async () => {},
	lat: async (p) => {
		const started = c.nowMs();
		if (latWaiter)
			latWaiter(started - Number(p.t));
	},
};
let latWaiter = null;

function poolOptions(max, app) {
	return { ...c.conn, database: DB, max, application_name: app };
}

/* A worker pool with graphile-worker's defaults at concurrency conc. */
async function startWorker(conc, app) {
	const pgPool = new Pool(poolOptions(Math.max(10, conc), app || 'graphile-worker'));
	pgPool.on('error', () => {});
	const runner = await run({ pgPool, concurrency: conc, noHandleSignals: true, taskList, logger });
	return {
		stop: async () => {
			await runner.stop();
			await pgPool.end();
		},
	};
}

/*
 * The clients' side: a pool to add jobs from and one LISTEN connection that
 * resolves the promise of each workflow whose last job has committed.
 */
async function startClients(conc) {
	const pool = new Pool(poolOptions(conc, 'graphile-bench-client'));
	const listener = await c.connect(DB, 'graphile-bench-listen');
	const waiting = new Map();
	listener.on('notification', (m) => {
		const w = waiting.get(m.payload);
		if (w) {
			waiting.delete(m.payload);
			clearTimeout(w.timer);
			w.resolve();
		}
	});
	await listener.query('LISTEN bench_done');
	let seq = 0;
	const prefix = crypto.randomBytes(4).toString('hex');
	return {
		pool,
		newId: () => `g${prefix}-${++seq}`,
		/* register before starting, so that no notice can be missed */
		done: (wf) => new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				waiting.delete(wf);
				reject(new Error(`workflow ${wf} not done after ${WAIT_MS / 1000} s`));
			}, WAIT_MS);
			waiting.set(wf, { resolve, timer });
		}),
		end: async () => {
			await listener.end();
			await pool.end();
		},
	};
}

async function startChain(pool, wf, n) {
	await pool.query("SELECT graphile_worker.add_job('chain', json_build_object('wf', $1::text, 'k', 1, 'n', $2::int))", [wf, n]);
}

/*
 * Run body(clients) with a worker pool at concurrency conc and conc client
 * connections, all started and ended inside the measured window: a backend
 * that flushed its statistics less than a second before going idle keeps
 * the rest for 10 s (PGSTAT_IDLE_INTERVAL) or until it exits, so ending the
 * sessions is what puts every commit of the phase into pg_stat_database
 * before the closing snapshot.  The window thus also holds graphile-worker's
 * start-up and shutdown (a few transactions); the wall time is drive()'s.
 */
async function withWorker(conc, body) {
	const worker = await startWorker(conc);
	let cl = null;
	try {
		cl = await startClients(conc);
		return await body(cl);
	} finally {
		if (cl)
			await cl.end();
		await worker.stop();
	}
}

async function throughput(mon, p) {
	return c.measure(mon, DB, SYSTEM, p, () => withWorker(p.conc, async (cl) => {
		const r = await c.drive(p.workflows, p.conc, async () => {
			const wf = cl.newId();
			const done = cl.done(wf);
			if (p.kind === 'B')
				await cl.pool.query('SELECT bench_fanout_start($1, $2)', [wf, p.n]);
			else
				await startChain(cl.pool, wf, p.n);
			await done;
		});
		return { ...r, workflows: p.workflows - r.failed, steps: p.n * (p.workflows - r.failed) };
	}), PAUSE_MS);
}

async function stepTimes(pool, wf) {
	const r = await pool.query('SELECT k, extract(epoch FROM ts) * 1000 AS ms FROM bench_step WHERE wf = $1', [wf]);
	const ts = [];
	for (const row of r.rows)
		ts[row.k] = Number(row.ms);
	return ts;
}

/*
 * D: a chain of five steps whose last one notifies the client; 30 ms later
 * (as for the other systems) the client adds the sixth step's job, the
 * closest thing graphile-worker has to a signal.
 */
async function latency(mon, p) {
	const first = [], step = [], wake = [];
	const db = await c.connect(DB, 'graphile-bench');
	await db.query('TRUNCATE bench_step');
	await db.end();
	return c.measure(mon, DB, SYSTEM, p, () => withWorker(p.conc, async (cl) => {
		const r = await c.drive(p.workflows, p.conc, async () => {
			const wf = cl.newId();
			let done = cl.done(wf);
			const t0 = c.nowMs();
			await startChain(cl.pool, wf, p.n);
			await done;
			await c.sleep(30);
			done = cl.done(wf);
			const tsig = c.nowMs();
			await cl.pool.query(
				"SELECT graphile_worker.add_job('chain', json_build_object('wf', $1::text, 'k', $2::int, 'n', $2::int))",
				[wf, p.n + 1]);
			await done;
			const ts = await stepTimes(cl.pool, wf);
			first.push(ts[1] - t0);
			for (let k = 2; k <= p.n; k++)
				step.push(ts[k] - ts[k - 1]);
			wake.push(ts[p.n + 1] - tsig);
		});
		const lr = [['start-to-first-step', first], ['step-to-step', step], ['signal-to-wake', wake]]
			.map(([what, v]) => ({ what, p50: c.percentile(v, 50), p99: c.percentile(v, 99) }));
		return { ...r, workflows: p.workflows, steps: (p.n + 1) * p.workflows, extra: { latRows: lr } };
	}), PAUSE_MS);
}

async function count(db, sql, args) {
	return Number((await db.query(sql, args)).rows[0].n);
}

/*
 * Wait until every chain of E has run its last step, or until no step has
 * committed for quietMs; returns whether all are done.
 */
async function settle(db, p, quietMs, maxMs) {
	const t0 = Date.now();
	let last = -1, since = Date.now();
	while (Date.now() - t0 < maxMs) {
		if (await count(db, 'SELECT count(DISTINCT wf) AS n FROM bench_step WHERE k = $1', [p.n]) >= p.workflows)
			return true;
		const n = await count(db, 'SELECT count(*) AS n FROM bench_step');
		if (n !== last) {
			last = n;
			since = Date.now();
		} else if (Date.now() - since > quietMs)
			return false;
		await c.sleep(20);
	}
	return false;
}

/*
 * E: 32 chains of 100 steps on a worker of concurrency 32; once 800 steps
 * are in, kill -9 the worker and start another at once (as a supervisor
 * would).  Then: time to the first step after the kill; the chains stalled
 * behind the dead worker's locks once nothing has moved for 3 s (more than
 * graphile-worker's 2 s poll interval); and, after ageing those locks by
 * 4 hours and running graphile-worker's own sweep statement (what its
 * 8-10 minute timer would do 4 hours later), the steps that ran twice and
 * those that never ran.
 */
async function kill(plan) {
	const p = plan.e;
	const db = await c.connect(DB, 'graphile-bench-e');
	await db.query('TRUNCATE bench_step');
	await db.query('DELETE FROM graphile_worker._private_jobs');
	const child = (app) => spawn(process.execPath, [__filename, 'e-worker', JSON.stringify(plan), app],
		{ stdio: ['ignore', 'ignore', 'inherit'] });
	const first = child('graphile-worker-killed');
	const wfs = [];
	for (let i = 0; i < p.workflows; i++) {
		wfs.push(`e${i}`);
		await startChain(db, wfs[i], p.n);
	}
	const start = Date.now();
	while (await count(db, 'SELECT count(*) AS n FROM bench_step') < p.killAfterSteps) {
		if (Date.now() - start > 120000) {
			first.kill('SIGKILL');
			throw new Error(`E: fewer than ${p.killAfterSteps} steps after 120 s`);
		}
		await c.sleep(5);
	}
	const tKill = c.nowMs();
	first.kill('SIGKILL');
	const gone = new Promise((r) => first.on('exit', r));
	const second = child('graphile-worker-restarted');
	await gone;
	/*
	 * A step the dead worker had already sent may still commit after the
	 * kill: count from the moment its sessions are gone.
	 */
	while (await count(db, "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'graphile-worker-killed'") > 0)
		await c.sleep(2);
	const tGone = c.nowMs();
	const allDone = await settle(db, p, 3000, 120000);
	const q = (await db.query(
		`SELECT (SELECT extract(epoch FROM min(ts)) * 1000 FROM bench_step WHERE ts > to_timestamp($1 / 1000.0)) AS resumed,
		        (SELECT count(*) FROM graphile_worker._private_jobs WHERE locked_at IS NOT NULL) AS locked,
		        (SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM bench_step GROUP BY wf, k) d) AS dup,
		        (SELECT count(DISTINCT wf) FROM bench_step WHERE k = $2) AS done`, [tGone, p.n])).rows[0];
	const stalled = p.workflows - Number(q.done);
	/* 4 hours later: graphile-worker's sweep releases the locks */
	let expired = allDone;
	if (!allDone) {
		await db.query("UPDATE graphile_worker._private_jobs SET locked_at = locked_at - interval '4 hours' WHERE locked_at IS NOT NULL");
		await db.query(`WITH j AS (
				UPDATE graphile_worker._private_jobs AS jobs
				   SET locked_at = NULL, locked_by = NULL, run_at = greatest(run_at, now())
				 WHERE locked_at < now() - interval '4 hours')
			UPDATE graphile_worker._private_job_queues AS job_queues
			   SET locked_at = NULL, locked_by = NULL
			 WHERE locked_at < now() - interval '4 hours'`);
		await db.query(`SELECT pg_notify('jobs:insert', '{"count":32}')`);
		/* until the queue is empty: forked chains run behind the first copy */
		const deadline = Date.now() + 120000;
		while (Date.now() < deadline && await count(db, 'SELECT count(*) AS n FROM graphile_worker._private_jobs') > 0)
			await c.sleep(20);
		expired = await count(db, 'SELECT count(DISTINCT wf) AS n FROM bench_step WHERE k = $1', [p.n]) >= p.workflows;
	}
	second.kill('SIGTERM');
	await new Promise((r) => second.on('exit', r));
	const row = (await db.query(
		`SELECT (SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM bench_step GROUP BY wf, k) d) AS dup,
		        (SELECT count(DISTINCT (wf, k)) FROM bench_step) AS distinct_steps,
		        (SELECT count(DISTINCT wf) FROM bench_step WHERE k = $1) AS done`, [p.n])).rows[0];
	await db.query('DELETE FROM graphile_worker._private_jobs');
	await db.end();
	return {
		system: SYSTEM, scenario: 'E kill -9', n: p.n, conc: p.conc,
		resumeMs: q.resumed === null ? NaN : Number(q.resumed) - tKill,
		stalled, locked: Number(q.locked), dupBeforeExpiry: Number(q.dup),
		duplicates: Number(row.dup), lost: p.n * p.workflows - Number(row.distinct_steps),
		completed: Number(row.done), workflows: p.workflows,
		note: `worker killed and restarted at once; ${stalled} of ${p.workflows} chains stalled on ` +
			`${q.locked} jobs locked by the dead worker until their 4-hour lock expired (simulated); ` +
			`${q.dup} steps ran twice before the expiry` +
			(expired ? '' : '; not every chain finished after the expiry'),
	};
}

/*
 * T, graphile-worker's side of scenario T (tasks.js has pg_durable's): a
 * worker pool of concurrency 32 (graphile-worker's defaults otherwise)
 * started before each phase and stopped inside it.
 *  - Throughput: `tasks` no-op jobs added in one statement
 *    (graphile_worker.add_jobs); jobs/s is their number over the time from
 *    that statement's return to the moment its job table is empty (polled
 *    every 10 ms: every job run and deleted).
 *  - Latency: `latency` jobs, one at a time, each added by a statement
 *    that puts its clock_timestamp() in the payload; the task takes the
 *    time from it to its own start (the add's commit included, the
 *    LISTEN/NOTIFY on jobs:insert, the claim by get_job).  20 ms between
 *    jobs, so the pool waits on LISTEN each time.
 */
async function tasks(mon, plan) {
	const t = plan.t;
	const db = await c.connect(DB, 'graphile-bench-tasks');
	const jobs = async () => Number((await db.query('SELECT count(*) AS n FROM graphile_worker._private_jobs')).rows[0].n);
	const p = { kind: 'T', n: 1, conc: t.conc, workflows: t.tasks };
	const thr = await c.measure(mon, DB, SYSTEM, p, async () => {
		const worker = await startWorker(t.conc);
		try {
			await db.query(`SELECT graphile_worker.add_jobs(ARRAY(
				SELECT ROW('noop', '{}'::json, NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
				  FROM generate_series(1, $1)))`, [t.tasks]);
			const t0 = c.nowMs();
			const deadline = Date.now() + WAIT_MS;
			while (await jobs() > 0) {
				if (Date.now() > deadline)
					throw new Error(`T: jobs left after ${WAIT_MS / 1000} s`);
				await c.sleep(10);
			}
			return { seconds: (c.nowMs() - t0) / 1000, lat: [], steps: t.tasks, workflows: t.tasks };
		} finally {
			await worker.stop();
		}
	}, PAUSE_MS);
	thr.unit = 'jobs/s';
	thr.p50 = thr.p99 = NaN;
	const lat = [];
	const pl = { kind: 'T', n: 1, conc: 1, workflows: t.latency };
	const lr = await c.measure(mon, DB, SYSTEM, pl, async () => {
		const worker = await startWorker(t.conc);
		try {
			/* the pool's LISTEN is up once a job added now runs */
			const d = await c.drive(t.latency + 1, 1, async (i) => {
				const ran = new Promise((resolve) => { latWaiter = resolve; });
				await db.query("SELECT graphile_worker.add_job('lat', json_build_object('t', " +
					'extract(epoch FROM clock_timestamp()) * 1000))');
				const ms = await ran;
				if (i > 0)
					lat.push(ms);
				await c.sleep(20);
			});
			return { ...d, lat: [], steps: t.latency, workflows: t.latency };
		} finally {
			latWaiter = null;
			await worker.stop();
		}
	}, PAUSE_MS);
	lr.latRows = [{ what: 'add-to-handler', p50: c.percentile(lat, 50), p99: c.percentile(lat, 99) }];
	await db.end();
	return [thr, lr];
}

async function eWorker(plan, app) {
	await startWorker(plan.e.conc, app);
	process.on('SIGTERM', () => process.exit(0));
	await new Promise(() => {});	/* until killed */
}

async function setup() {
	/* installs or upgrades the graphile_worker schema, then our functions */
	const w = await startWorker(1);
	await w.stop();
	const db = await c.connect(DB, 'graphile-bench-setup');
	await db.query(SETUP);
	await db.end();
}

async function main() {
	const [mode, planText, app] = process.argv.slice(2);
	const plan = JSON.parse(planText);
	if (mode === 'e-worker')
		return eWorker(plan, app);
	await setup();
	const mon = await c.connect('postgres', 'peers-monitor');
	const out = [];
	if (mode === 'tasks') {
		process.stderr.write(`  ${SYSTEM} T tasks x${plan.t.conc}\n`);
		out.push(...await tasks(mon, plan));
		await mon.end();
		process.stdout.write(JSON.stringify(out) + '\n');
		return;
	}
	await throughput(mon, { kind: 'A', n: 5, conc: 4, workflows: 40 });	/* warm-up */
	for (const p of plan.phases) {
		process.stderr.write(`  ${SYSTEM} ${c.label(p)} x${p.conc}\n`);
		out.push(p.kind === 'D' ? await latency(mon, p) : await throughput(mon, p));
	}
	if (plan.e) {
		process.stderr.write(`  ${SYSTEM} E kill -9\n`);
		out.push(await kill(plan));
	}
	await mon.end();
	process.stdout.write(JSON.stringify(out) + '\n');
}

if (require.main === module)
	main().then(() => process.exit(0), (e) => {
		console.error(`graphile.js: ${e.stack || e.message}`);
		process.exit(1);
	});

module.exports = { throughput, latency, kill, tasks, setup, DB };
