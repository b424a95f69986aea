"""Real tierdesk servers for the operations tests: gunicorn with ``ops/gunicorn.conf.py`` on a
free loopback port, against a given database, Redis prefix and models folder."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.config import PROJECT_ROOT

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(
    port: int,
    method: str,
    path: str,
    body: dict | None = None,
    headers: dict | None = None,
    timeout: float = 30,
) -> tuple[int, bytes]:
    """One HTTP request to 127.0.0.1:``port`` (``body`` sent as JSON): status and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=data, headers={**hdrs, **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class Server:
    def __init__(
        self,
        *,
        db_url: str,
        redis_url: str,
        redis_prefix: str,
        models_dir: Path,
        var_dir: Path,
        workers: int = 2,
        env: dict | None = None,
    ) -> None:
        self.port = free_port()
        self.workers = workers
        self.metrics_dir = tempfile.mkdtemp(prefix="tierdesk-test-metrics-")
        self.env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "REDIS_URL": redis_url,
            "TIERDESK_REDIS_PREFIX": redis_prefix,
            "TIERDESK_MODELS_DIR": str(models_dir),
            "TIERDESK_VAR_DIR": str(var_dir),
            "TIERDESK_RATE_LIMIT": "off",
            "TIERDESK_LOG_LEVEL": "WARNING",
            "TIERDESK_RECONCILE_INTERVAL_SECONDS": "2",
            "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir,
            "SECRET_KEY": "ops-test-secret",
            "PYTHONPATH": str(PROJECT_ROOT),
            **(env or {}),
        }
        if db_url.startswith("sqlite"):
            # Several workers on one SQLite file on purpose (one test machine): production
            # settings refuse that (app/security.py), as they should for a real deployment.
            self.env.setdefault("TIERDESK_ENV", "development")
        self.proc: subprocess.Popen | None = None

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        """``tierdesk ARGS`` against this server's database and Redis."""
        return subprocess.run(
            [str(BIN / "tierdesk"), *args],
            env=self.env,
            cwd=PROJECT_ROOT,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def start(self, timeout_s: float = 240) -> Server:
        cmd = [str(BIN / "gunicorn"), "-c", str(PROJECT_ROOT / "ops" / "gunicorn.conf.py")]
        cmd += ["--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers)]
        cmd += ["--access-logfile", "/dev/null", "app:create_app()"]
        self.proc = subprocess.Popen(
            cmd,
            cwd=PROJECT_ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        ready_in_a_row = 0
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.proc.stderr.read()[-3000:]}")
            try:
                status, _ = self.request("GET", "/readyz")
            except (OSError, http.client.HTTPException):
                status = 0
            # Several answers in a row: every worker, not only the first one up, is warm.
            ready_in_a_row = ready_in_a_row + 1 if status == 200 else 0
            if ready_in_a_row >= 4 * self.workers:
                return self
            time.sleep(0.3 if status == 200 else 1.0)
        self.stop()
        raise RuntimeError(f"the server on port {self.port} was not ready in {timeout_s:.0f} s")

    def request(
        self, method: str, path: str, body: dict | None = None, headers: dict | None = None
    ) -> tuple[int, bytes]:
        return request(self.port, method, path, body, headers)

    def json(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        status, raw = self.request(method, path, body)
        return status, json.loads(raw)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.metrics_dir, ignore_errors=True)  # made again by the next start

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
