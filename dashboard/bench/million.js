/*
 * million.js
 *	  The timing half of bench/million: starts the dashboard as the superuser
 *	  and as an ordinary role, asks each for the list in several ways, and
 *	  prints the median and the slowest of 20 answers (after 3 to warm up).
 */
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');

function startDashboard(db) {
	const child = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'pg-durable-dashboard'),
		'--db', db, '--listen', '127.0.0.1:0', '--read-only'], { stdio: ['ignore', 'pipe', 'inherit'] });
	return new Promise((resolve) => {
		let out = '';
		child.stdout.on('data', (d) => {
			out += d;
			const m = /listening on (\S+)/.exec(out);
			if (m)
				resolve({ url: m[1], child });
		});
	});
}

async function time(url) {
	const t0 = performance.now();
	const res = await fetch(url);
	const body = await res.text();
	const ms = performance.now() - t0;
	if (res.status !== 200)
		throw new Error(`${url}: ${res.status} ${body.slice(0, 200)}`);
	return { ms, body };
}

async function measure(base, what, url) {
	for (let i = 0; i < 3; i++)
		await time(base + url);
	const runs = [];
	for (let i = 0; i < 20; i++)
		runs.push((await time(base + url)).ms);
	runs.sort((a, b) => a - b);
	console.log(`   ${what.padEnd(44)} median ${runs[10].toFixed(1).padStart(7)} ms   max ${runs[19].toFixed(1).padStart(7)} ms`);
}

async function deepCursor(base) {
	// a cursor 10,000 rows into the list
	let after = '';
	for (let i = 0; i < 20; i++) {
		const r = await fetch(`${base}/api/instances?limit=500${after ? `&after=${after}` : ''}`).then((x) => x.json());
		after = encodeURIComponent(r.next);
	}
	return after;
}

(async () => {
	for (const [who, db] of [['superuser', process.env.PGD_BENCH_SUPER], ['role bench_a (a third of the rows)', process.env.PGD_BENCH_ROLE]]) {
		const d = await startDashboard(db);
		console.log(`== as ${who}`);
		await measure(d.url, 'GET /instances (the page, 50 rows)', '/instances');
		await measure(d.url, 'GET /api/instances', '/api/instances');
		await measure(d.url, 'GET /instances/counts (counts by status)', '/instances/counts');
		const deep = await deepCursor(d.url);
		await measure(d.url, 'GET /instances, 10,000 rows deep (keyset)', `/instances?after=${deep}`);
		await measure(d.url, 'GET /instances?status=failed', '/instances?status=failed');
		await measure(d.url, 'GET /instances?status=running', '/instances?status=running');
		await measure(d.url, 'GET /instances?label=batch-99999', '/instances?label=batch-99999');
		await measure(d.url, 'GET /instances?submitter=bench_c', '/instances?submitter=bench_c');
		await measure(d.url, 'GET /instances?from=<15 days ago>', `/instances?from=${encodeURIComponent(new Date(Date.now() - 15 * 86400e3).toISOString())}`);
		d.child.kill('SIGTERM');
	}
})().catch((err) => {
	console.error(err);
	process.exit(1);
});
