/*
 * app.js
 *	  The dashboard's HTTP side (express): pages rendered by nunjucks with
 *	  auto-escaping (every value from the database is user data: labels, SQL
 *	  text, results, errors), the same data as JSON under /api/, and the
 *	  actions, each a POST to /instances/<id>/<action> that must carry the
 *	  session's CSRF token and is refused outright with --read-only.
 *
 *	  Sessions (express-session, in memory) hold the CSRF token, one message
 *	  for the next page and, with --login, the key of the user's own pool
 *	  (db.js).  The Content-Security-Policy allows scripts and styles from
 *	  this server only, so markup that escaped escaping could still not run.
 */
'use strict';

const crypto = require('node:crypto');
const path = require('node:path');
const express = require('express');
const session = require('express-session');
const nunjucks = require('nunjucks');

const q = require('./queries');
const { dotToSvg } = require('./svg');
const { layoutTimeline } = require('./timeline');

const ACTIONS = new Set(['cancel', 'signal', 'compensate', 'restart']);

function httpError(status, message) {
	return Object.assign(new Error(message), { status });
}

function formatDuration(ms) {
	if (ms === null || ms === undefined || !isFinite(ms))
		return '';
	if (ms < 1000)
		return `${Math.round(ms * 10) / 10} ms`;
	const s = ms / 1000;
	if (s < 60)
		return `${s.toFixed(1)} s`;
	if (s < 3600)
		return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
	if (s < 86400)
		return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
	return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

function formatTime(d) {
	if (!d)
		return '';
	const date = d instanceof Date ? d : new Date(d);
	return isNaN(date) ? String(d) : date.toISOString().replace('T', ' ').replace('Z', ' UTC');
}

function createApp(options, connections) {
	const app = express();
	app.disable('x-powered-by');
	app.set('trust proxy', false);

	const env = nunjucks.configure(path.join(__dirname, '..', 'views'), { autoescape: true, express: app, noCache: false });
	env.addFilter('ts', formatTime);
	env.addFilter('dur', formatDuration);
	env.addFilter('pretty', (v) => {
		if (v === null || v === undefined)
			return '';
		if (typeof v === 'string') {
			try {
				return JSON.stringify(JSON.parse(v), null, 2);
			} catch (e) {
				return v;
			}
		}
		return JSON.stringify(v, null, 2);
	});
	env.addFilter('num', (v) => (v === null || v === undefined ? '' : Number(v).toLocaleString('en-US')));
	env.addFilter('max', (arr) => Math.max(...arr.map(Number)));
	app.set('view engine', 'njk');

	app.use((req, res, next) => {
		res.set({
			'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
				"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
			'X-Content-Type-Options': 'nosniff',
			'Referrer-Policy': 'no-referrer',
			'Cache-Control': 'no-store',
		});
		next();
	});
	app.use('/static', express.static(path.join(__dirname, '..', 'public'), { maxAge: 0 }));
	// with --login, a session that ended (expired, or the store lost it)
	// takes its user's pool with it, checked every ten minutes
	const store = new session.MemoryStore();
	if (options.login) {
		setInterval(() => {
			for (const sid of connections.sessionPools.keys())
				store.get(sid, (err, s) => {
					if (!err && !s)
						connections.logout(sid);
				});
		}, 10 * 60 * 1000).unref();
	}
	app.use(session({
		store,
		name: 'pgd_dashboard',
		secret: crypto.randomBytes(32).toString('hex'),
		resave: false,
		saveUninitialized: true,
		cookie: { httpOnly: true, sameSite: 'strict', maxAge: 8 * 3600 * 1000 },
	}));
	app.use(express.urlencoded({ extended: false, limit: '256kb' }));

	// the CSRF token of the session, and what every page needs to know
	app.use((req, res, next) => {
		if (!req.session.csrf)
			req.session.csrf = crypto.randomBytes(24).toString('base64url');
		res.locals.csrf = req.session.csrf;
		res.locals.readOnly = options.readOnly;
		res.locals.loginMode = options.login;
		res.locals.flash = req.session.flash || null;
		delete req.session.flash;
		res.locals.path = req.path;
		next();
	});

	function csrfOk(req) {
		const sent = (req.body && req.body._csrf) || req.get('x-csrf-token') || '';
		const want = req.session.csrf || '';
		const a = Buffer.from(String(sent));
		const b = Buffer.from(want);
		return want !== '' && a.length === b.length && crypto.timingSafeEqual(a, b);
	}

	const wrap = (fn) => (req, res, next) => Promise.resolve(fn(req, res, next)).catch(next);
	const wantsJson = (req) => req.path.startsWith('/api/') || (req.get('accept') || '').startsWith('application/json');

	// --- signing in (--login) -----------------------------------------------
	app.get('/login', (req, res) => {
		if (!options.login)
			return res.redirect(303, '/');
		res.render('login.njk', { title: 'Sign in', error: null, user: '' });
	});
	app.post('/login', wrap(async (req, res) => {
		if (!options.login)
			throw httpError(404, 'this dashboard does not sign users in (started without --login)');
		if (!csrfOk(req))
			throw httpError(403, 'the form is stale (CSRF token missing or wrong): load the page again');
		const user = String(req.body.user || '');
		const password = String(req.body.password || '');
		try {
			if (!user)
				throw new Error('a role name is required');
			await new Promise((resolve, reject) => req.session.regenerate((e) => (e ? reject(e) : resolve())));
			req.session.csrf = crypto.randomBytes(24).toString('base64url');
			await connections.login(req.session.id, user, password);
			req.session.user = user;
			res.redirect(303, '/');
		} catch (err) {
			res.locals.csrf = req.session.csrf;
			res.status(401).render('login.njk', { title: 'Sign in', user,
				error: 'sign-in refused: wrong role or password, or the role may not log in' });
		}
	}));
	app.post('/logout', (req, res) => {
		if (!csrfOk(req))
			return res.status(403).send('CSRF token missing or wrong');
		connections.logout(req.session.id);
		req.session.destroy(() => res.redirect(303, options.login ? '/login' : '/'));
	});

	// every other page needs a connection: the shared one, or the user's own
	app.use(wrap(async (req, res, next) => {
		const db = await connections.forSession(req.session.id);
		if (!db) {
			if (wantsJson(req) || req.method !== 'GET')
				throw httpError(401, 'sign in first');
			return res.redirect(303, '/login');
		}
		req.db = db;
		res.locals.role = db.role;
		next();
	}));

	// --- pages and their data -------------------------------------------------
	function listFilter(query) {
		const pick = (k) => (typeof query[k] === 'string' && query[k].trim() !== '' ? query[k].trim() : null);
		const f = { status: pick('status'), label: pick('label'), from: pick('from'), to: pick('to'),
			submitter: pick('submitter'), after: pick('after'), limit: pick('limit') };
		for (const k of ['from', 'to'])
			if (f[k] && isNaN(new Date(f[k])))
				throw httpError(400, `${k} is not a date or time: ${f[k]}`);
		return f;
	}

	async function listData(req) {
		const filter = listFilter(req.query);
		return { filter, ...(await q.listInstances(req.db.pool, filter)) };
	}

	app.get('/api/instances', wrap(async (req, res) => res.json(await listData(req))));
	// the counts by status come apart from the list: without an index on the
	// submitter, a role's counts read other roles' rows, which the list need not
	app.get('/api/counts', wrap(async (req, res) => res.json(await q.statusCounts(req.db.pool))));
	app.get('/instances/counts', wrap(async (req, res) => {
		const filterQuery = new URLSearchParams(Object.entries(listFilter(req.query))
			.filter(([k, v]) => v && k !== 'after' && k !== 'status'));
		res.render('_counts.njk', { counts: await q.statusCounts(req.db.pool), filter: listFilter(req.query),
			filterQuery: filterQuery.toString() });
	}));
	app.get('/instances', wrap(async (req, res) => {
		const data = await listData(req);
		const nextQuery = new URLSearchParams(Object.entries(data.filter).filter(([k, v]) => v && k !== 'after'));
		if (data.next)
			nextQuery.set('after', data.next);
		const filterQuery = new URLSearchParams(Object.entries(data.filter).filter(([k, v]) => v && k !== 'after' && k !== 'status'));
		const firstQuery = new URLSearchParams(Object.entries(data.filter).filter(([k, v]) => v && k !== 'after'));
		res.render('instances.njk', { title: 'Instances', ...data, statuses: q.STATUSES,
			nextQuery: data.next ? nextQuery.toString() : null, filterQuery: filterQuery.toString(),
			firstQuery: firstQuery.toString() });
	}));

	async function detailData(req) {
		const d = await q.instanceDetail(req.db.pool, req.params.id);
		if (!d)
			throw httpError(404, `no instance ${req.params.id} visible to role ${req.db.role.role}`);
		d.timeline = layoutTimeline(d.instance.created_at, d.spans);
		return d;
	}
	app.get('/api/instances/:id', wrap(async (req, res) => res.json(await detailData(req))));
	app.get('/instances/:id', wrap(async (req, res) => {
		const d = await detailData(req);
		let svg = null;
		let svgError = null;
		if (!d.drawGraph)
			svgError = `${d.nodes.length} nodes are more than the dashboard draws; the node table lists them`;
		else {
			try {
				svg = await dotToSvg(d.dot);
			} catch (err) {
				svgError = err.message;
			}
		}
		res.render('instance.njk', { title: `Instance ${d.instance.id}`, ...d, svg, svgError,
			live: d.instance.status === 'running' || d.instance.status === 'pending' });
	}));

	app.get('/api/coordination', wrap(async (req, res) => res.json(await q.coordination(req.db.pool))));
	app.get('/coordination', wrap(async (req, res) =>
		res.render('coordination.njk', { title: 'Coordination', ...(await q.coordination(req.db.pool)) })));

	app.get('/api/overview', wrap(async (req, res) => res.json(await q.overview(req.db.pool, req.db.role))));
	app.get('/', wrap(async (req, res) => {
		const data = await q.overview(req.db.pool, req.db.role);
		const max = Math.max(1, ...data.buckets.map((b) => b.started));
		res.render('overview.njk', { title: 'Overview', ...data, max });
	}));

	// --- actions ----------------------------------------------------------------
	app.post('/instances/:id/:action', wrap(async (req, res) => {
		const { id, action } = req.params;
		if (!ACTIONS.has(action))
			throw httpError(404, `no action "${action}" (cancel, signal, compensate, restart)`);
		if (options.readOnly)
			throw httpError(403, 'the dashboard runs with --read-only: actions are off');
		if (!csrfOk(req))
			throw httpError(403, 'the form is stale (CSRF token missing or wrong): load the page again');
		const pool = req.db.pool;
		let message;
		let target = id;
		try {
			if (action === 'cancel') {
				const compensate = req.body.compensate === 'on' || req.body.compensate === 'true';
				const r = await q.cancel(pool, id, req.body.reason, compensate);
				message = `cancel${compensate ? ' with compensation' : ''}: ${r}`;
			} else if (action === 'signal') {
				const r = await q.signal(pool, id, String(req.body.name || ''), String(req.body.data || ''));
				message = `signal "${req.body.name}" sent: ${r}`;
			} else if (action === 'compensate') {
				message = `compensate: ${await q.compensate(pool, id)}`;
			} else {
				target = await q.startAgain(pool, id);
				message = `started ${target} from the graph of ${id}`;
			}
		} catch (err) {
			if (!err.status)
				err.status = err.code ? 400 : 500;	// an error of the extension: the user's to read
			if (err.status >= 500 || wantsJson(req))
				throw err;
			req.session.flash = { ok: false, text: `${action} refused: ${err.message}` };
			return res.status(303).redirect(303, `/instances/${id}`);
		}
		if (wantsJson(req))
			return res.json({ ok: true, action, id, instance: target, message });
		req.session.flash = { ok: true, text: message };
		res.redirect(303, `/instances/${target}`);
	}));

	// --- errors ------------------------------------------------------------------
	app.use((req, res) => {
		res.status(404);
		if (wantsJson(req))
			return res.json({ error: 'not found' });
		res.render('error.njk', { title: 'Not found', status: 404, message: `nothing at ${req.path}` });
	});
	// eslint-disable-next-line no-unused-vars
	app.use((err, req, res, next) => {
		const status = err.status || (err.code && /^(22|42|P0|0A|55|28)/.test(err.code) ? 400 : 500);
		const message = err.message || String(err);
		if (status >= 500)
			console.error(`${req.method} ${req.path}: ${err.stack || message}`);
		res.status(status);
		if (wantsJson(req))
			return res.json({ error: message, code: err.code || null });
		const referer = req.method === 'POST' && /^\/instances\/[0-9a-f]{8}\/[a-z]+$/.test(req.path)
			? req.path.replace(/\/[a-z]+$/, '') : null;
		res.render('error.njk', { title: 'Error', status, message, back: referer });
	});
	return app;
}

module.exports = { createApp, formatDuration };
