"""Production serving: ``gunicorn -c ops/gunicorn.conf.py 'app:create_app()'``.

By default each worker loads and warms its own models after the fork. ``TIERDESK_PRELOAD=1``
(or ``--preload``) loads them once in the master instead and the workers share that memory
copy-on-write; app/forking.py resets what does not survive the fork (torch's thread pool, pooled
database connections) in each worker. Metrics from all workers are merged through
PROMETHEUS_MULTIPROC_DIR.

Worker class: ``sync`` (one request at a time per worker, no keep-alive) by default. A chat
request is CPU-bound Python (about 3 ms), so threads in one worker only queue on the GIL, and a
keep-alive connection stays with the worker that accepted it, however busy. With ``sync`` the
workers take connections from one shared accept queue, each when it is free. Measured with
bench/bench_load.py on 2 cores, SQLite, 2 workers (closed loop, same session): ``sync``
390-400 req/s; ``gthread`` with 1 thread 250-300; with 4 threads 190-260, and there the turn's
INSERTs waited for the GIL or SQLite's lock in about half of the requests.

``sync`` workers must sit behind a buffering reverse proxy (nginx or the like) when clients can
be slow or hostile: a client that sends its request slowly holds a sync worker for up to
``timeout`` seconds. ``TIERDESK_WORKER_CLASS=gthread`` (with ``TIERDESK_THREADS``) serves
keep-alive connections directly instead, at the cost above.
"""

import os
import shutil
import tempfile

os.environ.setdefault("TIERDESK_ENV", "production")  # app/security.py: refuses unsafe settings
bind = os.environ.get("TIERDESK_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("TIERDESK_WORKERS", "2"))
worker_class = os.environ.get("TIERDESK_WORKER_CLASS", "sync")
# gunicorn turns a sync worker with more than one thread into gthread: one unless asked.
threads = int(os.environ.get("TIERDESK_THREADS", "1"))
preload_app = os.environ.get("TIERDESK_PRELOAD", "").strip().lower() in {"1", "true", "yes", "on"}
timeout = 60
graceful_timeout = 30
keepalive = 5
accesslog = "-"

# Without PROMETHEUS_MULTIPROC_DIR the server makes a temporary folder of its own (named in
# TIERDESK_OWN_METRICS_DIR, which survives a reload of this file) and removes it on exit.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="tierdesk-metrics-")
    os.environ["TIERDESK_OWN_METRICS_DIR"] = os.environ["PROMETHEUS_MULTIPROC_DIR"]
_metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"]
# Stale files from a previous run would add old counts to the new ones. Cleared when the
# configuration is read, before a preloaded app (--preload) writes its first gauges.
shutil.rmtree(_metrics_dir, ignore_errors=True)
os.makedirs(_metrics_dir, exist_ok=True)


def post_fork(server, worker):
    # One intra-op thread per worker: two workers on two cores, no oversubscription.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    own = os.environ.get("TIERDESK_OWN_METRICS_DIR")
    if own and own == os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        shutil.rmtree(own, ignore_errors=True)
