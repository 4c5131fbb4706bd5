"""The Python worker of bench/peers' scenario T (tasks.js): the library of
clients/python at concurrency 32 (or argv[3]) with two no-op handlers,
until SIGTERM.

    python3 task_worker.py CONNINFO PREFIX [CONCURRENCY]

PREFIX.noop completes with {}; PREFIX.lat completes with {"lat": ms}, the
time from payload.t (milliseconds since the epoch, the clock_timestamp()
of the step before) to the handler's start, on the same machine's clock.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from pg_durable_worker import Worker  # noqa: E402


def main():
    conninfo, prefix = sys.argv[1], sys.argv[2]
    concurrency = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    worker = Worker(conninfo, concurrency=concurrency, lease=30)
    worker.register(prefix + ".noop", lambda task: {})
    worker.register(prefix + ".lat", lambda task: {"lat": time.time() * 1000 - float(task.payload["t"])})
    worker.run()


if __name__ == "__main__":
    main()
