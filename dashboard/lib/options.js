/*
 * options.js
 *	  The command line of pg-durable-dashboard, parsed into one options object.
 *
 *	  --db <connection string>	 the server (a postgresql:// URL; libpq's PG*
 *								 environment variables fill in what it leaves out)
 *	  --listen host:port		 where to listen (127.0.0.1:8099)
 *	  --read-only				 no actions
 *	  --login					 each user signs in with a role and password
 *								 (--db then names only the server and database)
 */
'use strict';

const { parseArgs } = require('node:util');

const USAGE = `usage: pg-durable-dashboard --db <connection string> [--listen host:port] [--read-only] [--login]

  --db URL           the PostgreSQL server, e.g. postgresql://alice@localhost:5432/app
                     (a socket directory as ?host=/var/run/postgresql); without --login
                     the dashboard acts as that role
  --listen H:P       address to listen on (default 127.0.0.1:8099)
  --read-only        show everything, allow no action
  --login            each user signs in with a PostgreSQL role and password; every
                     query runs on that user's own connection
  --help             this text
`;

function parseListen(text) {
	const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text);
	if (!m)
		throw new Error(`--listen wants host:port, not "${text}"`);
	const port = Number(m[3]);
	if (port > 65535)
		throw new Error(`--listen: port ${port} is out of range`);
	return { host: m[1] || m[2] || '127.0.0.1', port };
}

function parseOptions(argv) {
	const { values } = parseArgs({
		args: argv,
		options: {
			db: { type: 'string' },
			listen: { type: 'string', default: '127.0.0.1:8099' },
			'read-only': { type: 'boolean', default: false },
			login: { type: 'boolean', default: false },
			help: { type: 'boolean', default: false },
		},
		strict: true,
	});
	if (values.help)
		return { help: true, usage: USAGE };
	const db = values.db || process.env.DATABASE_URL;
	if (!db)
		throw new Error('--db is required (a postgresql:// connection string)');
	if (!/^postgres(ql)?:\/\//.test(db))
		throw new Error('--db wants a postgresql:// URL, e.g. postgresql://alice@localhost/app?host=/var/run/postgresql');
	return {
		db,
		listen: parseListen(values.listen),
		readOnly: values['read-only'],
		login: values.login,
	};
}

module.exports = { parseOptions, USAGE };
