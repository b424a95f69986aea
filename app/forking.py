"""What a process forked from one that already ran ``create_app`` must redo (gunicorn
``--preload``, or any pre-forking server).

With ``--preload`` the gunicorn master builds the app, loads and warms the models, then forks
the workers: the models' memory is shared copy-on-write instead of loaded once per worker. Two
things do not survive the fork and are fixed in the child, before it serves anything:

- **torch's intra-op thread pool.** The master warmed BERT with its OpenMP pool (one thread
  per core); that pool's threads do not exist in the child, and its first multi-threaded
  inference waits for them forever (the hang seen with ``gunicorn -w 2 --preload``). The child
  sets torch to ``OMP_NUM_THREADS`` threads (1 unless set), so it never waits on the parent's
  pool; one thread per worker is what the workers use anyway.
- **pooled database connections.** A connection opened by the master (loading the KB) must not
  be used by two workers at once; the child's pools forget them (``dispose(close=False)``:
  the parent's sockets are left alone) and open their own.

Redis clients check the process id on every use and reconnect by themselves.
"""

from __future__ import annotations

import os
import sys

_registered = False


def _after_fork_in_child() -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
        except (ValueError, RuntimeError):
            torch.set_num_threads(1)
    from app import db

    for engine in list(db._engines.values()):
        engine.dispose(close=False)


def register() -> None:
    """Install the fork handler once per process."""
    global _registered
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _registered = True
