"""Production serving: ``gunicorn -c ops/gunicorn.conf.py 'app:create_app()'``.

Each worker loads and warms its own models after the fork (torch's thread pools do not survive
a fork safely, so no ``preload_app``). Metrics from all workers are merged through
PROMETHEUS_MULTIPROC_DIR.
"""

import os
import shutil
import tempfile

bind = os.environ.get("TIERDESK_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("TIERDESK_WORKERS", "2"))
threads = int(os.environ.get("TIERDESK_THREADS", "4"))
worker_class = "gthread"
timeout = 60
graceful_timeout = 30
keepalive = 5
accesslog = "-"

_metrics_dir = os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="tierdesk-metrics-")
)


def on_starting(server):
    # Stale files from a previous run would add old counts to the new ones.
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    os.makedirs(_metrics_dir, exist_ok=True)


def post_fork(server, worker):
    # One intra-op thread per worker: two workers on two cores, no oversubscription.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
