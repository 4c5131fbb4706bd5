'use strict';
// A worker for pg_durable's external tasks (df.task), speaking only SQL
// (docs/guides/external-workers.md), on the npm package pg.
//
// Register a handler per queue; the worker claims ready tasks of those
// queues (df.claim_tasks), runs at most `concurrency` handlers at a time,
// heartbeats every third of the lease and ends each task with the handler's
// resolved value (df.complete_task) or its error's message (df.fail_task).
// The completions of handlers that resolve while others are being sent go
// in one statement (one round trip, one commit), on a connection of their
// own, in the order of their instances (two such statements never wait on
// each other).
// It LISTENs on df_tasks and also polls, with jitter; a notification names
// its queue, and the worker then claims from that queue only (a poll, from
// every queue).  A heartbeat answered
// 'cancel_requested' (or 'lost') aborts task.signal, an AbortSignal the
// handler may watch.  On SIGTERM (or stop()) it claims no more and waits for
// the handlers it runs (up to shutdownTimeout ms); a task still running then
// is left to its lease.  Connections are made with
// target_session_attrs=read-write (a multi-host connection string finds the
// primary; pg itself takes one host, so the hosts are tried here in turn)
// and made again with jittered back-off when they break.
//
//   const { Worker } = require('pg-durable-worker');
//   const w = new Worker('postgres://payments@db1,db2/app', { concurrency: 32 });
//   w.handle('payments', async (task) => ({ chargeId: await pay(task.payload, task.idempotencyKey) }));
//   await w.run();

const { Client } = require('pg');
const os = require('os');

class TaskError extends Error {
  constructor(message, { code = null, retryable = true } = {}) {
    super(message);
    this.code = code;
    this.retryable = retryable;
  }
}

const ALL = Symbol('every queue');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const jitter = (ms) => ms * (0.5 + Math.random());

// postgres://user@h1:5432,h2:5433/db?x=y -> one URL per host, in order
// (pg itself connects to one host only); target_session_attrs is ours to apply
function candidates(url) {
  const m = /^(postgres(?:ql)?:\/\/(?:[^@/]*@)?)([^/?]*)(.*)$/.exec(url);
  const rest = m ? m[3].replace(/([?&])target_session_attrs=[^&]*&?/, '$1').replace(/[?&]$/, '') : '';
  if (!m || !m[2].includes(',')) return [m ? m[1] + m[2] + rest : url];
  return m[2].split(',').map((h) => m[1] + h + rest);
}

class Worker {
  constructor(connectionString, opts = {}) {
    this.urls = candidates(connectionString);
    this.workerId = opts.workerId || `${os.hostname()}:${process.pid}`;
    this.concurrency = opts.concurrency || 4;
    this.lease = opts.lease || 30; // seconds
    this.pollInterval = opts.pollInterval || 2000; // ms
    this.batch = opts.batch || 16;
    this.maxBackoff = opts.maxBackoff || 10000;
    this.shutdownTimeout = opts.shutdownTimeout || 30000;
    if (this.concurrency < 1) throw new Error('concurrency must be at least 1');
    if (this.lease < 1) throw new Error('lease must be at least 1 second');
    this.handlers = new Map();
    this.active = new Map();
    this.stats = { completed: 0, failed: 0, stale: 0, reconnects: 0 };
    this.stopping = false;
    this.wakeUp = null;
    this.notified = new Set(); // queues notified since the last look; ALL: every queue
    this.woken = false; // a wake came since the last look
    // claims, failures and heartbeats on one connection, completions on
    // another; on each, queries in order
    this.main = { client: null, pending: Promise.resolve() }; // pending: the last query sent on it
    this.ender = { client: null, pending: Promise.resolve() };
    this.done = []; // [task, result] of handlers that resolved, not yet sent
    this.sending = false;
    this.listener = null;
  }

  handle(queue, fn) {
    this.handlers.set(queue, fn);
    return this;
  }

  // a connection to the first host that takes writes (target_session_attrs=read-write)
  async connectOnce() {
    let last;
    for (const url of this.urls) {
      const c = new Client({ connectionString: url, application_name: 'pg_durable worker' });
      c.on('error', () => {}); // reported by the next query
      try {
        await c.connect();
        const { rows } = await c.query('SELECT pg_is_in_recovery() AS standby');
        if (!rows[0].standby) return c;
        last = new Error(`${url}: a standby`);
      } catch (e) {
        last = e;
      }
      c.end().catch(() => {});
    }
    throw last;
  }

  async connect() {
    let delay = 100;
    for (;;) {
      try {
        return await this.connectOnce();
      } catch (e) {
        if (this.stopping && this.active.size === 0) throw e;
        this.stats.reconnects++;
        await sleep(jitter(delay));
        delay = Math.min(delay * 2, this.maxBackoff);
      }
    }
  }

  // sql on the shared connection, one statement at a time (pg deprecates
  // a query sent while another runs), the connection made again once when
  // it broke
  query(sql, args, ch = this.main) {
    const run = ch.pending.then(() => this.queryNow(ch, sql, args));
    ch.pending = run.catch(() => {});
    return run;
  }

  async queryNow(ch, sql, args) {
    for (let tries = 1; ; tries++) {
      if (!ch.client) {
        const c = await this.connect();
        c.on('end', () => { if (ch.client === c) ch.client = null; });
        ch.client = c;
      }
      try {
        return (await ch.client.query(sql, args)).rows;
      } catch (e) {
        if (e.code !== undefined && !/^(08|57P)/.test(e.code)) throw e; // an SQL error
        const c = ch.client;
        ch.client = null;
        if (c) c.end().catch(() => {});
        if (tries === 2) throw e;
      }
    }
  }

  // queue: a notification's; ALL: every queue; none: a slot is free
  wake(queue) {
    if (queue !== undefined) this.notified.add(queue);
    this.woken = true;
    if (this.wakeUp) this.wakeUp(true);
  }

  async listen() {
    while (!this.stopping) {
      try {
        const c = await this.connect();
        // stop() may have come while it connected: run() has ended the
        // listener it knew, and nobody would end this one
        if (this.stopping) {
          await c.end().catch(() => {});
          return;
        }
        this.listener = c;
        const ended = new Promise((resolve) => { c.on('end', resolve); c.on('error', resolve); });
        c.on('notification', (n) => { if (this.handlers.has(n.payload)) this.wake(n.payload); });
        await c.query('LISTEN df_tasks');
        this.wake(ALL); // what was notified while disconnected
        await ended;
      } catch (e) {
        if (this.stopping) return;
      }
      await sleep(200);
    }
  }

  async heartbeats() {
    while (!this.stopping || this.active.size > 0) {
      const now = Date.now();
      for (const task of this.active.values()) {
        if (task.nextHeartbeat > now || task.controller.signal.aborted) continue;
        task.nextHeartbeat = now + (this.lease * 1000) / 3;
        try {
          const [{ answer }] = await this.query('SELECT df.heartbeat_task($1, $2) AS answer', [task.taskId, task.leaseToken]);
          if (answer !== 'ok') task.controller.abort(answer);
        } catch (e) { /* tried again at the next beat */ }
      }
      await sleep(50);
    }
  }

  // claim into the free slots from queues, in turn; the queues to look at
  // again: those that had tasks, and those not reached for want of a slot
  async claimRound(queues) {
    const again = [];
    for (const [i, queue] of queues.entries()) {
      const fn = this.handlers.get(queue);
      const free = Math.min(this.batch, this.concurrency - this.active.size);
      if (free <= 0) return again.concat(queues.slice(i));
      let rows = [];
      try {
        rows = await this.query(
          'SELECT task_id, lease_token, attempt, instance_id, payload, deadline, idempotency_key, traceparent ' +
          'FROM df.claim_tasks($1, $2, $3, make_interval(secs => $4))', [queue, this.workerId, free, this.lease]);
      } catch (e) {
        await sleep(100);
      }
      for (const r of rows) {
        const controller = new AbortController();
        const task = {
          queue, taskId: r.task_id, leaseToken: r.lease_token, attempt: r.attempt, instanceId: r.instance_id,
          payload: r.payload, deadline: r.deadline, idempotencyKey: r.idempotency_key, traceparent: r.traceparent,
          signal: controller.signal, controller, nextHeartbeat: Date.now() + (this.lease * 1000) / 3,
        };
        this.active.set(task.taskId, task);
        this.runTask(fn, task);
      }
      if (rows.length > 0) again.push(queue);
    }
    return again;
  }

  async runTask(fn, task) {
    let result;
    try {
      result = await fn(task);
      result = JSON.stringify(result === undefined ? {} : result);
    } catch (failure) { // the handler's failure (or a result not JSON) is the task's
      try {
        const [{ answer }] = await this.query('SELECT df.fail_task($1, $2, $3, $4, $5) AS answer',
          [task.taskId, task.leaseToken, String((failure && failure.message) || failure),
            !failure || failure.retryable !== false, (failure && failure.code) || null]);
        this.stats[answer === 'ok' ? 'failed' : 'stale']++;
      } catch (e) { /* its lease runs out */ }
      this.release(task);
      return;
    }
    this.done.push([task, result]);
    if (!this.sending) this.sendCompletions();
  }

  release(task) {
    this.active.delete(task.taskId);
    this.wake();
  }

  // every completion waiting, in one statement, until none waits
  async sendCompletions() {
    this.sending = true;
    while (this.done.length > 0) {
      const done = this.done.splice(0);
      // in the order of their instances: runs rows are locked in one order
      done.sort(([a], [b]) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : a.taskId - b.taskId));
      let answers;
      try {
        answers = (await this.query('SELECT df.complete_task(t.id, t.token, t.result) AS answer ' +
          'FROM unnest($1::bigint[], $2::text[], $3::jsonb[]) AS t(id, token, result)',
        [done.map(([t]) => t.taskId), done.map(([t]) => t.leaseToken), done.map(([, r]) => r)], this.ender))
          .map((r) => r.answer);
      } catch (e) {
        // one of them is refused (e.g. a result too large): one at a time
        answers = [];
        for (const [t, r] of done) {
          answers.push(await this.query('SELECT df.complete_task($1, $2, $3) AS answer',
            [t.taskId, t.leaseToken, r], this.ender).then((x) => x[0].answer, () => 'error'));
        }
      }
      done.forEach(([task], i) => {
        this.stats[answers[i] === 'ok' ? 'completed' : 'stale']++;
        this.release(task);
      });
    }
    this.sending = false;
  }

  async run() {
    if (this.handlers.size === 0) throw new Error('no handler registered');
    const onTerm = () => this.stop();
    process.on('SIGTERM', onTerm);
    const listening = this.listen();
    const beating = this.heartbeats();
    try {
      let look = [...this.handlers.keys()]; // the queues to claim from
      while (!this.stopping) {
        this.woken = false;
        if (look.length > 0 && this.active.size < this.concurrency) {
          look = await this.claimRound(look);
          if (look.length > 0) continue;
        }
        const woke = this.woken || await new Promise((resolve) => {
          this.wakeUp = resolve;
          setTimeout(() => resolve(false), jitter(this.pollInterval));
        });
        this.wakeUp = null;
        const notified = this.notified;
        this.notified = new Set();
        // a poll, or a LISTEN connection made again: every queue
        const fresh = [...this.handlers.keys()].filter((q) => !woke || notified.has(ALL) || notified.has(q));
        look = [...new Set([...look, ...fresh])];
      }
      const deadline = Date.now() + this.shutdownTimeout;
      while (this.active.size > 0 && Date.now() < deadline) await sleep(20);
    } finally {
      process.removeListener('SIGTERM', onTerm);
      this.active.clear();
      if (this.listener) await this.listener.end().catch(() => {});
      await Promise.race([listening, sleep(1000)]);
      await beating;
      for (const ch of [this.main, this.ender]) {
        await ch.pending; // the last end or heartbeat sent
        if (ch.client) await ch.client.end().catch(() => {});
      }
    }
  }

  stop() {
    this.stopping = true;
    this.wake();
  }
}

module.exports = { Worker, TaskError, candidates };
