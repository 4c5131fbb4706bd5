/*
 * helpers.js
 *	  What the dashboard's tests share: connections to the throwaway cluster
 *	  that dashboard/test/run started (PGD_TEST_SOCKET, PGD_TEST_PORT), roles
 *	  with their instances, a dashboard started as a child process on a free
 *	  port, an HTTP client that keeps its session cookie and reads the CSRF
 *	  token from the forms, and waitFor: every wait is on a condition with a
 *	  deadline.
 */
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');
const pg = require('pg');

const SOCKET = process.env.PGD_TEST_SOCKET;
const PORT = Number(process.env.PGD_TEST_PORT);
if (!SOCKET || !PORT)
	throw new Error('run the dashboard tests with dashboard/test/run (PGD_TEST_SOCKET and PGD_TEST_PORT are unset)');

const SUPER_URL = `postgresql://postgres@/postgres?host=${encodeURIComponent(SOCKET)}&port=${PORT}`;
const tcpUrl = (user, password) =>
	`postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${PORT}/postgres`;
const SERVER_URL = `postgresql://127.0.0.1:${PORT}/postgres`;

function superPool() {
	return new pg.Pool({ connectionString: SUPER_URL, max: 3 });
}

async function waitFor(what, fn, { timeout = 30000, interval = 100 } = {}) {
	const deadline = Date.now() + timeout;
	let last;
	for (;;) {
		try {
			last = await fn();
			if (last)
				return last;
		} catch (err) {
			last = err;
		}
		if (Date.now() > deadline)
			throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
		await new Promise((r) => setTimeout(r, interval));
	}
}

// a role that may log in and use pg_durable, and its own pool
async function makeRole(admin, name, password) {
	const role = pg.escapeIdentifier(name);
	await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD ${pg.escapeLiteral(password)}`);
	await admin.query('SELECT df.grant_usage($1)', [name]);
	await admin.query(`GRANT CREATE ON SCHEMA public TO ${role}`);
	return new pg.Pool({ connectionString: tcpUrl(name, password), max: 2 });
}

async function start(pool, graphSql, label, params = []) {
	const { rows } = await pool.query(`SELECT df.start(${graphSql}, $1) AS id`, [label, ...params]);
	return rows[0].id;
}

async function statusOf(admin, id) {
	const { rows } = await admin.query('SELECT status FROM df.instances WHERE id = $1', [id]);
	return rows[0] && rows[0].status;
}

// waits until the instance has the status (or one of them), through its row
async function waitStatus(admin, id, want, timeout = 30000) {
	const wanted = Array.isArray(want) ? want : [want];
	return waitFor(`instance ${id} to be ${wanted.join(' or ')}`, async () => {
		const s = await statusOf(admin, id);
		return wanted.includes(s) ? s : false;
	}, { timeout });
}

// waits until a node of the instance of this type is running (a wait reached)
async function waitRunning(admin, id, nodeType, timeout = 30000) {
	return waitFor(`a running ${nodeType} node in ${id}`, async () => {
		const { rows } = await admin.query(
			"SELECT 1 FROM df.nodes WHERE instance_id = $1 AND node_type = $2 AND status = 'running'", [id, nodeType]);
		return rows.length > 0;
	}, { timeout });
}

// the dashboard as a child process; resolves once it listens
function startDashboard(args) {
	const bin = path.join(__dirname, '..', 'bin', 'pg-durable-dashboard');
	const child = spawn(process.execPath, [bin, '--listen', '127.0.0.1:0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
	let output = '';
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`the dashboard did not start: ${output}`)), 15000);
		const onData = (d) => {
			output += d;
			const m = /listening on (http:\/\/[^\s]+)/.exec(output);
			if (m) {
				clearTimeout(timer);
				resolve({ url: m[1], child, output: () => output,
					stop: () => new Promise((r) => { child.once('exit', r); child.kill('SIGTERM'); }) });
			}
		};
		child.stdout.on('data', onData);
		child.stderr.on('data', onData);
		child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`the dashboard exited (${code}): ${output}`)); });
	});
}

// an HTTP client with one session: its cookie, and the CSRF token of the last form seen
class Client {
	constructor(base) {
		this.base = base;
		this.cookie = null;
		this.csrf = null;
	}

	async request(method, url, { form, json = false, follow = false } = {}) {
		const headers = {};
		if (this.cookie)
			headers.cookie = this.cookie;
		if (json)
			headers.accept = 'application/json';
		let body;
		if (form) {
			headers['content-type'] = 'application/x-www-form-urlencoded';
			body = new URLSearchParams(form).toString();
		}
		const res = await fetch(this.base + url, { method, headers, body, redirect: follow ? 'follow' : 'manual' });
		const set = res.headers.get('set-cookie');
		if (set)
			this.cookie = set.split(';')[0];
		const text = await res.text();
		const m = /name="csrf-token" content="([^"]+)"/.exec(text);
		if (m)
			this.csrf = m[1];
		let data = null;
		if ((res.headers.get('content-type') || '').includes('application/json'))
			data = JSON.parse(text);
		return { status: res.status, text, data, location: res.headers.get('location'), headers: res.headers };
	}

	get(url, opts) {
		return this.request('GET', url, opts);
	}

	async getJson(url) {
		const r = await this.request('GET', url, { json: true });
		if (r.status !== 200)
			throw new Error(`GET ${url}: ${r.status} ${r.text.slice(0, 300)}`);
		return r.data;
	}

	// a POST with the session's token (fetched from a page first when there is none)
	async post(url, form = {}, { csrf = true, json = false } = {}) {
		if (csrf && !this.csrf)
			await this.get('/instances');
		return this.request('POST', url, { form: csrf ? { _csrf: this.csrf, ...form } : form, json });
	}
}

module.exports = { SUPER_URL, SERVER_URL, tcpUrl, superPool, waitFor, makeRole, start, statusOf, waitStatus,
	waitRunning, startDashboard, Client };
