"""Tests of pg_durable_worker against a throwaway cluster (clients/test/run).

PGD_TEST_ADMIN: a superuser's connection string; PGD_TEST_WORKER: the
worker role's (granted the queues py.*); PGD_TEST_PORT: the server's port.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from pg_durable_worker import TaskError, Worker  # noqa: E402

ADMIN = os.environ["PGD_TEST_ADMIN"]
WORKER = os.environ["PGD_TEST_WORKER"]


def sql(query, args=None, role=None):
    with psycopg.connect(ADMIN, autocommit=True) as c:
        if role:
            c.execute("SET ROLE " + role)
        return c.execute(query, args).fetchall()


def start(graph):
    return sql("SELECT df.start(%s)" % graph, role="py_app")[0][0]


def wait_for(query, args=None, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sql(query, args)[0][0]:
            return True
        time.sleep(0.05)
    raise AssertionError("timed out waiting for: " + query)


def status(instance):
    return sql("SELECT status FROM df.instances WHERE id = %s", (instance,))[0][0]


def result(instance):
    return sql("SELECT df.result(%s)::jsonb", (instance,))[0][0]


class Running:
    """A worker running in a thread for the length of a with block."""

    def __init__(self, worker):
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self.worker

    def __exit__(self, *exc):
        self.worker.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()


def test_completes_with_the_handlers_result():
    w = Worker(WORKER, poll_interval=0.2)
    w.register("py.basic", lambda t: {"doubled": t.payload["n"] * 2, "attempt": t.attempt})
    i = start("""df.task('py.basic', '{"n": 21}')""")
    with Running(w):
        wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (i,))
    assert result(i) == {"doubled": 42, "attempt": 1}


def test_listen_wakes_the_worker():
    # a poll every 30 s: only the NOTIFY of the task's commit can be this quick
    w = Worker(WORKER, poll_interval=30)
    w.register("py.listen", lambda t: {"ok": True})
    with Running(w):
        time.sleep(0.5)
        i = start("df.task('py.listen')")
        wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (i,), timeout=5)


def test_an_exception_fails_the_task_with_its_text():
    w = Worker(WORKER, poll_interval=0.2)

    def boom(task):
        raise TaskError("the card was declined", code="declined", retryable=False)

    w.register("py.fail", boom)
    i = start("""df.catch(df.retry(df.task('py.fail'), 3, '10 ms'),
                          'SELECT $error.code AS code, $error.message AS message')""")
    with Running(w):
        wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (i,))
    assert result(i)["rows"] == [{"code": "declined", "message": "the card was declined"}]
    assert w.stats["failed"] == 1  # not retried: retryable=False


def test_a_result_that_is_not_json_fails_the_task():
    w = Worker(WORKER, poll_interval=0.2)
    w.register("py.notjson", lambda t: {"when": object()})
    i = start("""df.catch(df.task('py.notjson'), 'SELECT $error.message AS message')""")
    with Running(w):
        wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (i,))
    assert "not JSON serializable" in result(i)["rows"][0]["message"]
    assert w.stats["failed"] == 1


def test_concurrency_limit_is_kept():
    now = {"running": 0, "max": 0}
    lock = threading.Lock()

    def slow(task):
        with lock:
            now["running"] += 1
            now["max"] = max(now["max"], now["running"])
        time.sleep(0.2)
        with lock:
            now["running"] -= 1
        return {}

    w = Worker(WORKER, concurrency=3, poll_interval=0.2)
    w.register("py.conc", slow)
    ids = [start("df.task('py.conc')") for _ in range(12)]
    with Running(w):
        wait_for("SELECT count(*) = 12 FROM df.instances WHERE id = ANY(%s) AND status = 'completed'", (ids,))
    assert now["max"] == 3


def test_heartbeats_keep_a_long_task_leased():
    w = Worker(WORKER, lease=1, poll_interval=0.2)
    w.register("py.long", lambda t: (time.sleep(3), {"attempt": t.attempt})[1])
    i = start("df.task('py.long')")
    with Running(w):
        wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (i,))
    assert result(i) == {"attempt": 1}


def test_a_cancel_reaches_the_handler():
    seen = threading.Event()

    def wait_for_cancel(task):
        if task.cancelled.wait(30):
            seen.set()
        return {}

    w = Worker(WORKER, lease=1, poll_interval=0.2)
    w.register("py.cancel", wait_for_cancel)
    i = start("df.task('py.cancel')")
    with Running(w):
        wait_for("SELECT EXISTS (SELECT FROM df.tasks WHERE instance_id = %s AND state = 'leased')", (i,))
        sql("SELECT df.cancel(%s, 'test')", (i,), role="py_app")
        assert seen.wait(10)
    assert status(i) == "cancelled"


def test_sigterm_finishes_what_it_holds():
    i = start("df.task('py.term')")
    script = (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from pg_durable_worker import Worker\n"
        "w = Worker(%r, poll_interval=0.2)\n"
        "w.register('py.term', lambda t: (print('started', flush=True), time.sleep(1), {'done': True})[2])\n"
        "w.run()\n"
        "print('stopped', flush=True)\n"
    ) % (os.path.join(os.path.dirname(__file__), ".."), WORKER)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0
    assert "stopped" in out
    wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (i,))
    assert result(i) == {"done": True}


def test_reconnects_to_a_multi_host_string():
    # the first host refuses connections; libpq goes on to the second
    port = os.environ["PGD_TEST_PORT"]
    multi = WORKER.replace("port=%s" % port, "port=1,%s" % port).replace(
        "host=127.0.0.1", "host=127.0.0.1,127.0.0.1")
    w = Worker(multi, poll_interval=0.2)
    w.register("py.reconnect", lambda t: {"n": t.payload["n"]})
    first = start("""df.task('py.reconnect', '{"n": 1}')""")
    with Running(w):
        wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (first,))
        # every connection of the worker is cut: it connects again
        sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'pg_durable worker' AND pid <> pg_backend_pid()")
        second = start("""df.task('py.reconnect', '{"n": 2}')""")
        wait_for("SELECT status = 'completed' FROM df.instances WHERE id = %s", (second,))
    assert result(second) == {"n": 2}
