'use strict';
// Tests of worker.js against a throwaway cluster (clients/test/run):
// PGD_TEST_ADMIN_URL a superuser's URL, PGD_TEST_WORKER_URL the worker
// role's (granted the queues py.*), PGD_TEST_PORT the server's port.
const test = require('node:test');
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { Client } = require('pg');
const { Worker, TaskError, candidates } = require('../worker');

const ADMIN = process.env.PGD_TEST_ADMIN_URL;
const WORKER = process.env.PGD_TEST_WORKER_URL;
const PORT = process.env.PGD_TEST_PORT;

async function sql(query, args = [], role = null) {
  const c = new Client({ connectionString: ADMIN });
  await c.connect();
  try {
    if (role) await c.query(`SET ROLE ${role}`);
    return (await c.query(query, args)).rows;
  } finally {
    await c.end();
  }
}
const start = async (graph) => (await sql(`SELECT df.start(${graph}) AS id`, [], 'py_app'))[0].id;
async function waitFor(query, args = [], timeout = 30000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const rows = await sql(query, args);
    if (rows[0] && Object.values(rows[0])[0] === true) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for: ${query}`);
}
const completed = (id, timeout) =>
  waitFor("SELECT status = 'completed' AS ok FROM df.instances WHERE id = $1", [id], timeout);
const result = async (id) => (await sql('SELECT df.result($1)::jsonb AS r', [id]))[0].r;

async function running(worker, body) {
  const done = worker.run();
  try {
    await body();
  } finally {
    worker.stop();
    await done;
  }
}

test('multi-host URLs are tried host by host', () => {
  assert.deepStrictEqual(candidates('postgres://u@a:1,b:2/db?target_session_attrs=read-write'),
    ['postgres://u@a:1/db', 'postgres://u@b:2/db']);
  assert.deepStrictEqual(candidates('postgres://u@a:1/db'), ['postgres://u@a:1/db']);
});

test('completes with the handler\'s result', async () => {
  const w = new Worker(WORKER, { pollInterval: 200 }).handle('py.node', async (t) => ({ doubled: t.payload.n * 2, attempt: t.attempt }));
  const id = await start(`df.task('py.node', '{"n": 21}')`);
  await running(w, () => completed(id));
  assert.deepStrictEqual(await result(id), { doubled: 42, attempt: 1 });
});

test('LISTEN wakes the worker', async () => {
  const w = new Worker(WORKER, { pollInterval: 30000 }).handle('py.nlisten', async () => ({ ok: true }));
  await running(w, async () => {
    await new Promise((r) => setTimeout(r, 500));
    const id = await start(`df.task('py.nlisten')`);
    await completed(id, 5000);
  });
});

test('an error fails the task with its message', async () => {
  const w = new Worker(WORKER, { pollInterval: 200 }).handle('py.nfail', async () => {
    throw new TaskError('no truck', { code: 'no_truck', retryable: false });
  });
  const id = await start(`df.catch(df.retry(df.task('py.nfail'), 3, '10 ms'), 'SELECT $error.code AS code, $error.message AS message')`);
  await running(w, () => completed(id));
  assert.deepStrictEqual((await result(id)).rows, [{ code: 'no_truck', message: 'no truck' }]);
  assert.strictEqual(w.stats.failed, 1);
});

test('a result that is not JSON fails the task', async () => {
  const w = new Worker(WORKER, { pollInterval: 200 }).handle('py.nnotjson', async () => ({ n: 1n }));
  const id = await start(`df.catch(df.task('py.nnotjson'), 'SELECT $error.message AS message')`);
  await running(w, () => completed(id));
  assert.match((await result(id)).rows[0].message, /BigInt/);
  assert.strictEqual(w.stats.failed, 1);
});

test('the concurrency limit is kept', async () => {
  let now = 0;
  let max = 0;
  const w = new Worker(WORKER, { concurrency: 3, pollInterval: 200 }).handle('py.nconc', async () => {
    max = Math.max(max, ++now);
    await new Promise((r) => setTimeout(r, 200));
    now--;
    return {};
  });
  const ids = [];
  for (let i = 0; i < 12; i++) ids.push(await start(`df.task('py.nconc')`));
  await running(w, () => waitFor("SELECT count(*) = 12 AS ok FROM df.instances WHERE id = ANY($1) AND status = 'completed'", [ids]));
  assert.strictEqual(max, 3);
});

test('heartbeats keep a long task leased; a cancel reaches the handler', async () => {
  const w = new Worker(WORKER, { lease: 1, pollInterval: 200 })
    .handle('py.nlong', async (t) => { await new Promise((r) => setTimeout(r, 3000)); return { attempt: t.attempt }; })
    .handle('py.ncancel', (t) => new Promise((resolve) => t.signal.addEventListener('abort', () => resolve({ reason: t.signal.reason }))));
  const id = await start(`df.task('py.nlong')`);
  const id2 = await start(`df.task('py.ncancel')`);
  let reason;
  await running(w, async () => {
    await waitFor("SELECT EXISTS (SELECT FROM df.tasks WHERE instance_id = $1 AND state = 'leased') AS ok", [id2]);
    await sql("SELECT df.cancel($1, 'test')", [id2], 'py_app');
    await completed(id);
    await waitFor("SELECT state = 'cancelled' AS ok FROM df.tasks WHERE instance_id = $1", [id2]);
  });
  assert.deepStrictEqual(await result(id), { attempt: 1 });
});

test('SIGTERM finishes what it holds', async () => {
  const id = await start(`df.task('py.nterm')`);
  const script = `const { Worker } = require(${JSON.stringify(path.join(__dirname, '..', 'worker.js'))});
    new Worker(${JSON.stringify(WORKER)}, { pollInterval: 200 }).handle('py.nterm', async () => {
      console.log('started'); await new Promise((r) => setTimeout(r, 1000)); return { done: true };
    }).run().then(() => console.log('stopped'));`;
  const child = spawn(process.execPath, ['-e', script]);
  let out = '';
  await new Promise((resolve) => child.stdout.on('data', (d) => { out += d; if (out.includes('started')) resolve(); }));
  child.kill('SIGTERM');
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.strictEqual(code, 0);
  assert.match(out, /stopped/);
  await completed(id);
  assert.deepStrictEqual(await result(id), { done: true });
});

test('reconnects, to a multi-host URL', async () => {
  const multi = WORKER.replace(`127.0.0.1:${PORT}`, `127.0.0.1:1,127.0.0.1:${PORT}`);
  const w = new Worker(multi, { pollInterval: 200 }).handle('py.nre', async (t) => ({ n: t.payload.n }));
  await running(w, async () => {
    const first = await start(`df.task('py.nre', '{"n": 1}')`);
    await completed(first);
    await sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pg_durable worker'");
    const second = await start(`df.task('py.nre', '{"n": 2}')`);
    await completed(second);
    assert.deepStrictEqual(await result(second), { n: 2 });
  });
});
