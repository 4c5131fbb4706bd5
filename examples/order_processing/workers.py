"""The payment and shipping services' workers of the OrderProcessing example.

In the example's workers mode (run --workers), the workflow's calls of the
payment and shipping services are TASK steps of the queues shop.payment and
shop.shipping (workflow.sql, shop.call).  This process claims them with the
Python worker library (clients/python) and makes the service's call itself:
POST <service url><path> with the task's body and its Idempotency-Key, so
the services' ledgers, faults and undos are the same as in the HTTP mode.
A 2xx answer completes the task with {"status", "body"}; any other fails it
with code http:<status>, which df.retry classifies as it does an HTTP
step's (a 402 is not retried).

    python3 workers.py PORTS_FILE CONNINFO QUEUE...
"""
import json
import os
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from pg_durable_worker import TaskError, Worker  # noqa: E402


def caller(base_url):
    def call(task):
        p = task.payload
        req = urllib.request.Request(base_url + p["path"], method="POST",
                                     data=json.dumps(p["body"]).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Idempotency-Key": p["key"] or task.idempotency_key,
                                              "traceparent": task.traceparent or ""})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                body = r.read().decode()
                return {"status": r.status, "body": body}
        except urllib.error.HTTPError as e:
            raise TaskError("%s %s returned %d: %s" % ("POST", p["path"], e.code, e.read().decode()[:200]),
                            code="http:%d" % e.code)
        except (urllib.error.URLError, OSError) as e:
            raise TaskError("POST %s failed: %s" % (p["path"], e), code="connection")
    return call


def main():
    ports_file, conninfo, queues = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(ports_file) as f:
        ports = json.load(f)
    worker = Worker(conninfo, concurrency=8, lease=3, poll_interval=1.0)
    for q in queues:
        service = q.split(".", 1)[1]
        worker.register(q, caller("http://127.0.0.1:%d" % ports[service]))
    print("worker %d: %s" % (os.getpid(), " ".join(queues)), flush=True)
    worker.run()


if __name__ == "__main__":
    main()
