/*
 * db.js
 *	  The dashboard's connections to PostgreSQL.
 *
 *	  Without --login there is one pool, logged in as the role of the
 *	  connection string: every page shows what that role may see.  With
 *	  --login each signed-in user gets a pool of its own, made with the role
 *	  and password it typed; the password lives only in that pool's
 *	  configuration, in this process's memory, and goes when the user signs
 *	  out or the session ends.  Row-level security on df.instances and df.nodes
 *	  decides what each role sees: the dashboard adds no filter of its own
 *	  on who may see what.
 */
'use strict';

const pg = require('pg');
const { parse } = require('pg-connection-string');

const POOL_SIZE = 4;
const USER_POOL_SIZE = 2;

// what the role of a pool may do, read once per pool
const ROLE_SQL = `
SELECT current_user::text AS role,
       r.rolsuper OR r.rolbypassrls AS sees_all,
       has_function_privilege('df.metrics()', 'EXECUTE') AS can_metrics,
       has_function_privilege('df.check()', 'EXECUTE') AS can_check
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`;

class Connections {
	constructor(options) {
		this.options = options;
		this.base = parse(options.db);
		this.sessionPools = new Map();	// session id -> { pool, role }
		if (!options.login)
			this.shared = this._pool({}, POOL_SIZE);
	}

	_pool(identity, max) {
		const config = { ...this.base, ...identity, max,
			idleTimeoutMillis: 60000, application_name: 'pg_durable dashboard' };
		const pool = new pg.Pool(config);
		pool.on('error', () => {});	// an idle client lost: the next query reconnects
		return pool;
	}

	async _describe(pool) {
		const { rows } = await pool.query(ROLE_SQL);
		return rows[0];
	}

	// the pool and role of a request, or null when it must sign in first
	async forSession(sessionId) {
		if (!this.options.login) {
			if (!this.sharedRole)
				this.sharedRole = await this._describe(this.shared);
			return { pool: this.shared, role: this.sharedRole };
		}
		return this.sessionPools.get(sessionId) || null;
	}

	// sign in: the role and password are checked by the server itself
	async login(sessionId, user, password) {
		const pool = this._pool({ user, password }, USER_POOL_SIZE);
		try {
			const role = await this._describe(pool);
			this.logout(sessionId);
			const entry = { pool, role };
			this.sessionPools.set(sessionId, entry);
			return entry;
		} catch (err) {
			pool.end().catch(() => {});
			throw err;
		}
	}

	logout(sessionId) {
		const entry = this.sessionPools.get(sessionId);
		if (entry) {
			this.sessionPools.delete(sessionId);
			entry.pool.end().catch(() => {});
		}
	}

	async close() {
		const pools = [...this.sessionPools.values()].map((e) => e.pool);
		if (this.shared)
			pools.push(this.shared);
		this.sessionPools.clear();
		await Promise.all(pools.map((p) => p.end().catch(() => {})));
	}
}

module.exports = { Connections };
