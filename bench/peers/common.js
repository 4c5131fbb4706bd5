/*
 * common.js: what every system's runner in bench/peers shares: connecting
 * to the throwaway server, the scenario sizes, the measurement of one
 * phase (wall time, per-workflow latency, pg_stat_database.xact_commit and
 * pg_current_wal_lsn() deltas) and percentiles.
 *
 * Measurement rules, the same for every system:
 *  - A phase runs `workflows` workflows keeping `conc` of them in flight
 *    (conc client loops, each starting one workflow and awaiting it);
 *    throughput is steps (or workflows) over the wall time of the phase.
 *  - Commits are the xact_commit delta of the system's own database (its
 *    engine tables, its steps' table and its clients all live there); WAL
 *    is the cluster's LSN delta, so systems never run at the same time.
 *    Backends publish their counters at most once a second, and an idle
 *    pg_durable executor only when its latch wakes it (every 5 s), hence
 *    the pause on both sides of a phase and the pg_reload_conf() that wakes
 *    every backend (an executor then finds no work and flushes).  XIDs per
 *    step come from the next-XID delta, which needs no flush; it counts
 *    write transactions and subtransactions (savepoints) alike.
 *  - Clocks: the client's realtime clock (performance.timeOrigin + now(),
 *    microsecond resolution) and the server's clock_timestamp() are the
 *    same clock on this machine.
 */
'use strict';

const { Client } = require('pg');

const FLUSH_MS = 1300;
const env = process.env;
const conn = {
	host: env.PGHOST,
	port: Number(env.PGPORT || 5432),
	user: env.PGUSER || 'postgres',
};

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

/* Realtime in milliseconds with microsecond resolution. */
function nowMs() {
	return performance.timeOrigin + performance.now();
}

async function connect(database, appName) {
	const c = new Client({ ...conn, database, application_name: appName || 'peers-bench' });
	c.on('error', () => {});	/* a server restart (scenario E) ends every session */
	await c.connect();
	return c;
}

function urlFor(database) {
	return `postgresql://${conn.user}@localhost:${conn.port}/${database}?host=${encodeURIComponent(conn.host)}`;
}

/*
 * Scenario sizes.  A step budget per phase keeps every phase a few seconds
 * long: `budget` steps at conc 1, 4 x budget at higher concurrency, and at
 * least one workflow per client.
 */
function sizes(quick) {
	const q = quick ? 0.1 : 1;
	const budget1 = Math.max(20, Math.round(500 * q));
	const budgetN = Math.max(100, Math.round(2000 * q));
	const flows = (n, c) => {
		const want = Math.ceil((c === 1 ? budget1 : budgetN) / n);
		return Math.max(c, Math.ceil(want / c) * c);
	};
	const phases = [];
	for (const n of [10, 100])
		for (const c of [1, 16, 64])
			phases.push({ kind: 'A', n, conc: c, workflows: flows(n, c) });
	for (const [n, cs] of [[10, [1, 16, 64]], [100, [1, 16]], [1000, [1]]])
		for (const c of cs)
			phases.push({ kind: 'B', n, conc: c, workflows: flows(n, c) });
	phases.push({ kind: 'C', n: 1, conc: 1, workflows: Math.round(1000 * q) });
	for (const c of [16, 64])
		phases.push({ kind: 'C', n: 1, conc: c, workflows: Math.round(10000 * q) });
	for (const c of [1, 16])
		phases.push({ kind: 'D', n: 5, conc: c, workflows: Math.max(c, Math.round((c === 1 ? 100 : 160) * q)) });
	const e = { kind: 'E', n: 100, conc: 32, workflows: 32, killAfterSteps: Math.round(800 * (quick ? 0.5 : 1)) };
	/* T: external tasks (jobs) through a worker of concurrency 32 */
	const t = { conc: 32, tasks: Math.round(4000 * q), latency: Math.max(20, Math.round(200 * q)) };
	return { phases, e, t };
}

function label(p) {
	switch (p.kind) {
		case 'A': return `A chain ${p.n}`;
		case 'B': return `B fan-out ${p.n}`;
		case 'C': return 'C one-step';
		case 'D': return 'D latency';
		case 'E': return 'E kill -9';
		case 'T': return 'T tasks';
	}
	return p.kind;
}

function percentile(values, p) {
	if (values.length === 0)
		return NaN;
	const v = [...values].sort((a, b) => a - b);
	const i = Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1));
	return v[i];
}

async function snapshot(mon, database) {
	await mon.query('SELECT pg_reload_conf()');
	await sleep(200);
	const r = await mon.query(
		"SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = $1)::bigint AS commits, " +
		"pg_current_wal_lsn() - '0/0' AS wal, pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xid",
		[database]);
	const x = r.rows[0];
	return { commits: Number(x.commits), wal: Number(x.wal), xid: Number(x.xid) };
}

/*
 * Run `workflows` workflows through runOne(i) keeping `conc` in flight;
 * returns wall seconds and per-workflow latencies (ms).
 */
async function drive(workflows, conc, runOne) {
	let next = 0;
	const lat = [];
	let failed = 0;
	let firstError = null;
	const t0 = nowMs();
	const loops = [];
	for (let l = 0; l < Math.min(conc, workflows); l++)
		loops.push((async () => {
			while (next < workflows) {
				const i = next++;
				const s = nowMs();
				try {
					await runOne(i, l);
					lat.push(nowMs() - s);
				} catch (e) {
					failed++;
					if (!firstError)
						firstError = e.message;
				}
			}
		})());
	await Promise.all(loops);
	return { seconds: (nowMs() - t0) / 1000, lat, failed, firstError };
}

/*
 * One measured phase: flush pause, snapshot, body(), flush pause,
 * snapshot.  body returns { seconds, lat, failed, steps, workflows, extra }.
 * A system whose sessions all end inside body() (their statistics are
 * flushed when they exit) may pass a shorter pauseMs.
 */
async function measure(mon, database, system, phase, body, pauseMs = FLUSH_MS) {
	await sleep(pauseMs);
	const before = await snapshot(mon, database);
	const r = await body();
	await sleep(pauseMs);
	const after = await snapshot(mon, database);
	const steps = r.steps;
	const res = {
		system, scenario: label(phase), n: phase.n, conc: phase.conc,
		workflows: r.workflows, steps, seconds: r.seconds,
		throughput: phase.kind === 'C' ? r.workflows / r.seconds : steps / r.seconds,
		unit: phase.kind === 'C' ? 'wf/s' : 'steps/s',
		p50: percentile(r.lat || [], 50), p99: percentile(r.lat || [], 99),
		commitsPerStep: (after.commits - before.commits) / steps,
		xidsPerStep: (after.xid - before.xid) / steps,
		walPerStep: (after.wal - before.wal) / steps,
		failed: r.failed || 0, note: r.firstError || '',
	};
	if (r.extra)
		Object.assign(res, r.extra);
	return res;
}

module.exports = {
	FLUSH_MS, conn, sleep, nowMs, connect, urlFor, sizes, label, percentile, snapshot, drive, measure,
};
