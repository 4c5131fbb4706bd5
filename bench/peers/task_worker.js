/*
 * task_worker.js: the Node.js worker of bench/peers' scenario T
 * (tasks.js): the library of clients/node at concurrency 32 (or argv[4])
 * with two no-op handlers, until SIGTERM.
 *
 *   node task_worker.js URL PREFIX [CONCURRENCY]
 *
 * PREFIX.noop completes with {}; PREFIX.lat completes with {"lat": ms},
 * the time from payload.t (milliseconds since the epoch, the
 * clock_timestamp() of the step before) to the handler's start, on the
 * same machine's clock.
 */
'use strict';

const path = require('path');
const { Worker } = require(path.join(__dirname, '..', '..', 'clients', 'node', 'worker.js'));

async function main() {
	const [url, prefix, conc] = process.argv.slice(2);
	const worker = new Worker(url, { concurrency: Number(conc || 32), lease: 30 });
	worker.handle(`${prefix}.noop`, async () => ({}));
	worker.handle(`${prefix}.lat`, async (task) =>
		({ lat: performance.timeOrigin + performance.now() - Number(task.payload.t) }));
	await worker.run();
}

main().then(() => process.exit(0), (e) => {
	console.error(`task_worker.js: ${e.stack || e.message}`);
	process.exit(1);
});
