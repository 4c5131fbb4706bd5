"""A worker for pg_durable's external tasks (df.task), speaking only SQL.

Register a handler per queue; the worker claims ready tasks of those
queues (df.claim_tasks), runs at most ``concurrency`` handlers at a time
in threads, heartbeats every third of the lease, and ends each task with
the handler's return value (df.complete_task) or its exception's text
(df.fail_task).  A notification names its queue: the worker then claims
from that queue only; a poll claims from every queue.  The completions of handlers that return while others are
being sent go in one statement (one round trip, one commit), in the order
of their instances, so that two such statements never wait on each other.  It LISTENs on df_tasks and also polls, with jitter.  A
heartbeat answered 'cancel_requested' sets ``task.cancelled``; a handler
that looks at it may stop early.  On SIGTERM (or stop()) it claims no
more, lets the handlers it runs finish (up to ``shutdown_timeout``) and
returns; a task still running then is left to its lease.  Connections are
made with target_session_attrs=read-write, so a multi-host connection
string finds the primary, and made again with jittered back-off when they
break.

    from pg_durable_worker import Worker

    worker = Worker("host=db1,db2 dbname=app user=payments", concurrency=32)

    @worker.handler("payments")
    def charge(task):
        return {"charge_id": pay(task.payload["amount"], key=task.idempotency_key)}

    worker.run()
"""

import json
import logging
import os
import random
import select
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg

__all__ = ["Worker", "Task", "TaskError"]

log = logging.getLogger("pg_durable_worker")


class TaskError(Exception):
    """A handler's failure with a code, and whether df.retry may retry it."""

    def __init__(self, message, code=None, retryable=True):
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class Task:
    """One claimed task, as df.claim_tasks returned it."""

    def __init__(self, queue, row, lease_s):
        (self.task_id, self.lease_token, self.attempt, self.instance_id,
         self.payload, self.deadline, self.idempotency_key,
         self.traceparent) = row
        self.queue = queue
        self.lease_s = lease_s
        self.cancelled = threading.Event()
        self.lost = threading.Event()
        self.next_heartbeat = time.monotonic() + lease_s / 3.0

    def __repr__(self):
        return "Task(%s/%d attempt %d)" % (self.queue, self.task_id, self.attempt)


class Worker:
    def __init__(self, conninfo, worker_id=None, concurrency=4, lease=30.0,
                 poll_interval=2.0, batch=16, max_backoff=10.0,
                 shutdown_timeout=30.0):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if lease < 1:
            raise ValueError("lease must be at least 1 second")
        self.conninfo = conninfo
        self.worker_id = worker_id or "%s:%d" % (socket.gethostname(), os.getpid())
        self.concurrency = concurrency
        self.lease = float(lease)
        self.poll_interval = float(poll_interval)
        self.batch = batch
        self.max_backoff = float(max_backoff)
        self.shutdown_timeout = float(shutdown_timeout)
        self.handlers = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._notified = set()  # queues notified since the last look; None: every queue
        self._notified_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._active = {}
        self._active_lock = threading.Lock()
        self._local = threading.local()
        self._conns = []
        self._conns_lock = threading.Lock()
        self._done = []  # (task, result) of handlers that returned, not yet sent
        self._done_cv = threading.Condition()
        self.stats = {"completed": 0, "failed": 0, "stale": 0, "reconnects": 0}

    # -- registration ----------------------------------------------------------

    def register(self, queue, fn):
        self.handlers[queue] = fn

    def handler(self, queue):
        def decorate(fn):
            self.register(queue, fn)
            return fn
        return decorate

    # -- connections -----------------------------------------------------------

    def _connect(self):
        """A new autocommit connection to a read-write server, with back-off."""
        delay = 0.1
        while True:
            try:
                conn = psycopg.connect(self.conninfo, autocommit=True,
                                       target_session_attrs="read-write",
                                       application_name="pg_durable worker")
                with self._conns_lock:
                    self._conns.append(conn)
                return conn
            except psycopg.OperationalError as e:
                if self._stop.is_set() and not self._active:
                    raise
                log.warning("cannot connect (%s); again in %.1f s", e, delay)
                self.stats["reconnects"] += 1
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, self.max_backoff)

    def _run_sql(self, sql, args):
        """sql on this thread's connection, made again once when it broke."""
        for tries in (1, 2):
            conn = getattr(self._local, "conn", None)
            if conn is None or conn.closed:
                conn = self._local.conn = self._connect()
            try:
                with conn.cursor() as cur:
                    cur.execute(sql, args)
                    return cur.fetchall()
            except psycopg.OperationalError:
                self._local.conn = None
                if tries == 2:
                    raise

    # -- the loop --------------------------------------------------------------

    def run(self):
        """Claim and run tasks until stop() or SIGTERM."""
        if not self.handlers:
            raise ValueError("no handler registered")
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
        listener = threading.Thread(target=self._listen, daemon=True)
        beater = threading.Thread(target=self._heartbeats, daemon=True)
        completer = threading.Thread(target=self._completions, daemon=True)
        listener.start()
        beater.start()
        completer.start()
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="pgd-task")
        look = list(self.handlers)  # the queues to claim from
        try:
            while not self._stop.is_set():
                look = self._claim_round(pool, look)
                if look:
                    continue
                woke = self._wake.wait(self.poll_interval * (0.5 + random.random()))
                self._wake.clear()
                with self._notified_lock:
                    notified, self._notified = self._notified, set()
                # a poll, or a LISTEN connection made again: every queue
                look = [q for q in self.handlers
                        if not woke or None in notified or q in notified]
        finally:
            pool.shutdown(wait=False)
            deadline = time.monotonic() + self.shutdown_timeout
            while self._active and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._active:
                log.warning("stopping with %d tasks still running: their leases run out",
                            len(self._active))
            self._close_all()

    def stop(self):
        self._stop.set()
        self._wake.set()

    def _wake_for(self, queue):
        with self._notified_lock:
            self._notified.add(queue)
        self._wake.set()

    def _claim_round(self, pool, queues):
        """Claim into the free slots from queues, in turn; the queues to look
        at again: those that had tasks, and those not reached for want of a
        free slot."""
        again = []
        for i, queue in enumerate(queues):
            fn = self.handlers[queue]
            free = 0
            while free < self.batch and self._slots.acquire(blocking=False):
                free += 1
            if free == 0:
                # every slot is busy: wait for one, then look again
                if self._slots.acquire(timeout=self.poll_interval):
                    self._slots.release()
                return again + queues[i:]
            try:
                rows = self._run_sql(
                    "SELECT task_id, lease_token, attempt, instance_id, payload, deadline, "
                    "idempotency_key, traceparent "
                    "FROM df.claim_tasks(%s, %s, %s, make_interval(secs => %s))",
                    (queue, self.worker_id, free, self.lease))
            except psycopg.Error as e:
                log.warning("claim on %s failed: %s", queue, e)
                rows = []
                time.sleep(0.1)
            for _ in range(free - len(rows)):
                self._slots.release()
            for row in rows:
                task = Task(queue, row, self.lease)
                with self._active_lock:
                    self._active[task.task_id] = task
                pool.submit(self._run_task, fn, task)
            if rows:
                again.append(queue)
        return again

    def _run_task(self, fn, task):
        try:
            result = fn(task)
            result = json.dumps(result if result is not None else {})
        except Exception as e:  # the handler's failure (or a result not JSON) is the task's
            try:
                ended = self._end(task, "SELECT df.fail_task(%s, %s, %s, %s, %s)",
                                  (task.task_id, task.lease_token, str(e) or type(e).__name__,
                                   getattr(e, "retryable", True), getattr(e, "code", None)))
                self.stats["failed" if ended == "ok" else "stale"] += 1
            finally:
                self._release(task)
            return
        with self._done_cv:
            self._done.append((task, result))
            self._done_cv.notify()

    def _release(self, task):
        with self._active_lock:
            self._active.pop(task.task_id, None)
        self._slots.release()

    def _completions(self):
        """Send the completions of returned handlers, all that wait in one statement."""
        while True:
            with self._done_cv:
                while not self._done:
                    if self._stop.is_set() and not self._active:
                        return
                    self._done_cv.wait(0.1)
                done, self._done = self._done, []
            # in the order of their instances: runs rows are locked in one order
            done.sort(key=lambda d: (d[0].instance_id, d[0].task_id))
            try:
                answers = [r[0] for r in self._run_sql(
                    "SELECT df.complete_task(t.id, t.token, t.result::jsonb) "
                    "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS t(id, token, result)",
                    ([t.task_id for t, _ in done], [t.lease_token for t, _ in done],
                     [r for _, r in done]))]
            except Exception:
                # one of them is refused (e.g. a result too large): one at a time
                answers = [self._end(t, "SELECT df.complete_task(%s, %s, %s::jsonb)",
                                     (t.task_id, t.lease_token, r)) for t, r in done]
            for (task, _), answer in zip(done, answers):
                self.stats["completed" if answer == "ok" else "stale"] += 1
                self._release(task)

    def _end(self, task, sql, args):
        try:
            return self._run_sql(sql, args)[0][0]
        except Exception as e:
            log.warning("%r could not be ended (%s): its lease runs out", task, e)
            return "error"

    # -- LISTEN and heartbeats ---------------------------------------------------

    def _listen(self):
        while not self._stop.is_set():
            try:
                conn = self._connect()
                conn.execute("LISTEN df_tasks")
                self._wake_for(None)  # what was notified while disconnected
                while not self._stop.is_set():
                    # libpq's own calls: Connection.notifies() has no timeout before psycopg 3.2
                    ready, _, _ = select.select([conn.fileno()], [], [], 1.0)
                    if not ready:
                        continue
                    conn.pgconn.consume_input()
                    n = conn.pgconn.notifies()
                    while n is not None:
                        if n.extra.decode() in self.handlers:
                            self._wake_for(n.extra.decode())
                        n = conn.pgconn.notifies()
            except (psycopg.Error, OSError) as e:
                if self._stop.is_set():
                    return  # stop() closed it
                log.warning("LISTEN connection lost (%s)", e)
                time.sleep(0.2)

    def _heartbeats(self):
        while not self._stop.is_set() or self._active:
            now = time.monotonic()
            with self._active_lock:
                due = [t for t in self._active.values()
                       if t.next_heartbeat <= now and not t.lost.is_set()]
            for task in due:
                task.next_heartbeat = now + task.lease_s / 3.0
                try:
                    answer = self._run_sql("SELECT df.heartbeat_task(%s, %s)",
                                           (task.task_id, task.lease_token))[0][0]
                except psycopg.Error as e:
                    log.warning("heartbeat of %r failed: %s", task, e)
                    continue
                if answer == "cancel_requested":
                    task.cancelled.set()
                elif answer == "lost":
                    task.lost.set()
                    task.cancelled.set()
            time.sleep(0.05)

    def _close_all(self):
        with self._conns_lock:
            for c in self._conns:
                try:
                    c.close()
                except Exception:
                    pass
            self._conns = []


def main():
    """python3 pg_durable_worker.py CONNINFO QUEUE: complete each task with its payload."""
    import sys
    logging.basicConfig(level=logging.INFO)
    w = Worker(sys.argv[1])
    w.register(sys.argv[2], lambda task: task.payload)
    w.run()


if __name__ == "__main__":
    main()
