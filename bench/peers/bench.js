/*
 * bench.js: the driver of bench/peers/run.  For synchronous_commit on and
 * then off (ALTER SYSTEM + pg_reload_conf, so every session, the engines'
 * included, follows), runs the physical limit (pgbench: single-row INSERT
 * transactions at each concurrency), pg_durable (pgd.js, in this process),
 * DBOS Transact (dbos.js) and graphile-worker (graphile.js), each a child
 * process so that scenario E can kill -9 its worker, then prints one table
 * per setting and the ratios.  Systems run one after another, never together,
 * so the cluster-wide WAL delta of a phase belongs to one system.
 *
 * Needs PGHOST, PGPORT, PGUSER (a superuser) and PGBIN (pgbench's
 * directory); bench/peers/run sets them.  Options:
 *   --quick           a tenth of the default sizes
 *   --only LIST       what to run, comma-separated: pgbench,pgd,dbos,graphile,tasks
 *                     (tasks: scenario T, tasks.js, for pg_durable's Python and
 *                     Node.js workers and graphile-worker)
 *   --sync LIST       settings to run: on,off (default both)
 *   --json FILE       also write every result as JSON
 */
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn, execFileSync } = require('child_process');
const c = require('./common');
const pgd = require('./pgd');
const tasks = require('./tasks');

function parseArgs(argv) {
	const o = { quick: false, only: ['pgbench', 'pgd', 'dbos', 'graphile', 'tasks'], sync: ['on', 'off'], json: null };
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === '--quick') o.quick = true;
		else if (a === '--only') o.only = argv[++i].split(',');
		else if (a === '--sync') o.sync = argv[++i].split(',');
		else if (a === '--json') o.json = argv[++i];
		else if (a === '--help' || a === '-h') {
			process.stdout.write(fs.readFileSync(__filename, 'utf8').split('*/')[0]);
			process.exit(0);
		} else {
			console.error(`bench.js: unknown option ${a}`);
			process.exit(2);
		}
	}
	return o;
}

/*
 * The physical limit at concurrency conc: pgbench running as many
 * single-row INSERT transactions (the same statement a step runs) as the
 * matching pg_durable phase has steps, logging each transaction's latency.
 */
async function pgbench(mon, conc, total) {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'peers-pgbench-'));
	const script = path.join(dir, 'insert.sql');
	fs.writeFileSync(script, "INSERT INTO bench_step (wf, k) VALUES ('pgbench', 1);\n");
	const perClient = Math.max(1, Math.ceil(total / conc));
	const p = { kind: 'L', n: 1, conc };
	const r = await c.measure(mon, pgd.DB, 'pgbench (limit)', p, async () => {
		const t0 = c.nowMs();
		execFileSync(path.join(process.env.PGBIN, 'pgbench'),
			['-n', '-f', script, '-c', String(conc), '-j', String(Math.min(conc, 2)), '-t', String(perClient),
				'-l', '--log-prefix', path.join(dir, 'log'), '-h', c.conn.host, '-p', String(c.conn.port),
				'-U', c.conn.user, pgd.DB], { stdio: ['ignore', 'pipe', 'pipe'] });
		const seconds = (c.nowMs() - t0) / 1000;
		const lat = [];
		for (const f of fs.readdirSync(dir).filter((x) => x.startsWith('log')))
			for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n'))
				if (line)
					lat.push(Number(line.split(' ')[2]) / 1000);
		return { seconds, lat, steps: perClient * conc, workflows: perClient * conc };
	});
	fs.rmSync(dir, { recursive: true, force: true });
	r.scenario = 'INSERT';
	r.unit = 'commits/s';
	return r;
}

/* Run a peer in a child process; it prints its results as one JSON line. */
function child(script, args) {
	return new Promise((resolve, reject) => {
		const ch = spawn(process.execPath, [path.join(__dirname, script), ...args],
			{ stdio: ['ignore', 'pipe', 'inherit'] });
		let out = '';
		ch.stdout.on('data', (d) => { out += d; });
		ch.on('exit', (code) => {
			const line = out.trim().split('\n').pop();
			if (code !== 0)
				return reject(new Error(`${script} exited with ${code}`));
			try {
				resolve(JSON.parse(line));
			} catch (e) {
				reject(new Error(`${script}: no result (${line})`));
			}
		});
	});
}

function fmt(v, digits) {
	if (v === undefined || v === null || Number.isNaN(v))
		return '';
	if (digits !== undefined)
		return v.toFixed(digits);
	if (Math.abs(v) >= 100)
		return v.toFixed(0);
	if (Math.abs(v) >= 10)
		return v.toFixed(1);
	return v.toFixed(2);
}

function table(rows) {
	const head = ['system', 'scenario', 'conc', 'workflows', 'throughput', 'unit', 'p50 ms', 'p99 ms', 'commits/step', 'XIDs/step', 'WAL B/step'];
	const body = [];
	for (const r of rows) {
		if (r.scenario === 'E kill -9') {
			/* graphile-worker: chains stalled behind the dead worker's locks */
			body.push([r.system, r.scenario, String(r.conc), String(r.workflows),
				Number.isNaN(r.resumeMs) || r.resumeMs === null ? 'did not resume' : `resumed after ${fmt(r.resumeMs)} ms`,
				'', '', '', `dup ${r.duplicates}`, `lost ${r.lost}`,
				r.stalled === undefined ? '' : `stalled ${r.stalled}`]);
			continue;
		}
		if (r.latRows) {
			for (const l of r.latRows)
				body.push([r.system, `${r.scenario.split(' ')[0]} ${l.what}`, String(r.conc), String(r.workflows), '', '',
					fmt(l.p50), fmt(l.p99), fmt(r.commitsPerStep), fmt(r.xidsPerStep), fmt(r.walPerStep, 0)]);
			continue;
		}
		body.push([r.system, r.scenario, String(r.conc), String(r.workflows), fmt(r.throughput), r.unit,
			fmt(r.p50), fmt(r.p99), fmt(r.commitsPerStep), fmt(r.xidsPerStep), fmt(r.walPerStep, 0)]);
	}
	const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
	const right = new Set([2, 3, 4, 6, 7, 8, 9, 10]);
	const line = (cells) => '| ' + cells.map((x, i) => (right.has(i) ? x.padStart(w[i]) : x.padEnd(w[i]))).join(' | ') + ' |';
	const out = [line(head), '|' + w.map((n, i) => (right.has(i) ? '-'.repeat(n + 1) + ':' : '-'.repeat(n + 2))).join('|') + '|'];
	for (const b of body)
		out.push(line(b));
	return out.join('\n');
}

/* pg_durable / peer and pg_durable / limit, phase by phase. */
function ratios(rows) {
	const key = (r) => `${r.scenario}|${r.conc}`;
	const by = {};
	for (const r of rows)
		by[`${r.system}|${key(r)}`] = r;
	const limit = {};
	for (const r of rows)
		if (r.system === 'pgbench (limit)')
			limit[r.conc] = r;
	/* scenario T has rows of its own (tasks/s, jobs/s), not ratios */
	const peers = [...new Set(rows.filter((r) => r.scenario !== 'T tasks').map((r) => r.system))]
		.filter((s) => s !== 'pg_durable' && s !== 'pgbench (limit)');
	const head = ['scenario', 'conc', ...peers.map((p) => `pg_durable / ${p}`), 'pg_durable / limit'];
	const out = ['| ' + head.join(' | ') + ' |', '|' + head.map((h, i) => (i ? '-'.repeat(h.length + 1) + ':' : '-'.repeat(h.length + 2))).join('|') + '|'];
	for (const r of rows) {
		if (r.system !== 'pg_durable' || r.latRows || r.scenario === 'E kill -9')
			continue;
		const cells = [r.scenario, String(r.conc)];
		for (const p of peers) {
			const o = by[`${p}|${key(r)}`];
			cells.push(o && o.throughput > 0 ? fmt(r.throughput / o.throughput) : 'n/a');
		}
		const l = limit[r.conc];
		/* steps/s against commits/s (C: workflows/s, one step each) */
		cells.push(l ? fmt(r.throughput / l.throughput) : 'n/a');
		out.push('| ' + cells.join(' | ') + ' |');
	}
	return out.join('\n');
}

/* Where pg_durable's time goes: the top statements of its phases. */
async function topStatements(db) {
	const r = await db.query(
		`SELECT calls, round(total_exec_time)::bigint AS ms, round((100 * total_exec_time / sum(total_exec_time) OVER ())::numeric, 1) AS pct,
		        round((wal_bytes / greatest(calls, 1))::numeric) AS wal_per_call,
		        left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q
		   FROM pg_stat_statements JOIN pg_database d ON d.oid = dbid
		  WHERE d.datname = $1 AND query NOT LIKE '%await_instance%' AND query NOT LIKE '%pg_stat_statements%'
		  ORDER BY total_exec_time DESC LIMIT 12`, [pgd.DB]);
	const lines = ['| calls | total ms | % | WAL B/call | statement |', '|------:|---------:|--:|-----------:|-----------|'];
	for (const x of r.rows)
		lines.push(`| ${x.calls} | ${x.ms} | ${x.pct} | ${x.wal_per_call} | \`${x.q.replace(/\|/g, '\\|')}\` |`);
	return lines.join('\n');
}

async function setSync(mon, v) {
	await mon.query(`ALTER SYSTEM SET synchronous_commit = ${v === 'on' ? 'on' : 'off'}`);
	await mon.query('SELECT pg_reload_conf()');
	await c.sleep(500);
}

async function main() {
	const o = parseArgs(process.argv.slice(2));
	const plan = c.sizes(o.quick);
	const all = {};
	const t0 = Date.now();
	let mon = await c.connect('postgres', 'peers-monitor');
	const info = (await mon.query("SELECT version() AS v, current_setting('fsync') AS f")).rows[0];
	for (const sync of o.sync) {
		await setSync(mon, sync);
		const rows = [];
		const add = (r) => {
			rows.push(r);
			if (o.json)
				fs.writeFileSync(o.json, JSON.stringify({ ...all, [sync]: rows }, null, 1));
		};
		console.error(`== synchronous_commit = ${sync}`);
		if (o.only.includes('pgbench')) {
			const db = await c.connect(pgd.DB);
			await db.query('CREATE TABLE IF NOT EXISTS bench_step (wf text, k int, ts timestamptz DEFAULT clock_timestamp())');
			await db.end();
			for (const conc of [1, 16, 64]) {
				console.error(`  pgbench x${conc}`);
				add(await pgbench(mon, conc, conc === 1 ? 1000 : 10000));
			}
		}
		let statements = null;
		if (o.only.includes('pgd')) {
			const db = await c.connect(pgd.DB);
			await db.query('SELECT pg_stat_statements_reset()');
			const pl = { phases: plan.phases, e: null };
			for (const r of await pgd.run(mon, pl))
				add(r);
			statements = await topStatements(db);
			await db.end();
			for (const r of await pgd.run(mon, { phases: [], e: plan.e }))
				add(r);
		}
		/* pg_durable's E restarts the server: reconnect the monitor */
		await mon.end().catch(() => {});
		mon = await c.connect('postgres', 'peers-monitor');
		for (const [name, script] of [['dbos', 'dbos.js'], ['graphile', 'graphile.js']]) {
			if (!o.only.includes(name))
				continue;
			try {
				for (const r of await child(script, ['bench', JSON.stringify(plan)]))
					add(r);
			} catch (e) {
				console.error(`  ${name}: ${e.message}`);
			}
		}
		if (o.only.includes('tasks')) {
			try {
				for (const r of await tasks.run(mon, plan, ['python', 'node']))
					add(r);
			} catch (e) {
				console.error(`  tasks: ${e.message}`);
			}
			try {
				for (const r of await child('graphile.js', ['tasks', JSON.stringify(plan)]))
					add(r);
			} catch (e) {
				console.error(`  graphile tasks: ${e.message}`);
			}
		}
		all[sync] = rows;
		console.log(`\nsynchronous_commit = ${sync}\n`);
		console.log(table(rows));
		for (const r of rows)
			if ((r.scenario === 'E kill -9' || (r.scenario === 'T tasks' && r.failed)) && r.note)
				console.log(`\n${r.scenario.split(' ')[0]}, ${r.system}: ${r.note}.`);
		if (rows.some((r) => r.system === 'pg_durable')) {
			console.log(`\nratios of throughput, synchronous_commit = ${sync}\n`);
			console.log(ratios(rows));
		}
		if (statements)
			console.log(`\npg_durable phases A-D: statements by total execution time (pg_stat_statements, ` +
				`df.await_instance left out: it waits)\n\n${statements}`);
	}
	console.log(`\n${info.v.split(',')[0]}, fsync = ${info.f}, ${os.cpus().length} cores (${os.cpus()[0].model}), ` +
		`${Math.round(os.totalmem() / 2 ** 30)} GiB, pg_durable executors = ${process.env.PGD_WORKERS || '?'}; ` +
		`run took ${Math.round((Date.now() - t0) / 1000)} s`);
	await setSync(mon, 'on');
	await mon.end();
}

main().catch((e) => {
	console.error(`bench.js: ${e.stack || e.message}`);
	process.exit(1);
});
