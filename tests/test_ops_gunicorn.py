"""``ops/gunicorn.conf.py`` and the metrics folder its workers share: one it made for itself
(no ``PROMETHEUS_MULTIPROC_DIR``) goes when the server stops; one it was given stays."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ops_servers import free_port, request

from app.config import PROJECT_ROOT

GUNICORN = Path(sys.executable).with_name("gunicorn")


def _healthy(port: int) -> bool:
    try:
        return request(port, "GET", "/healthz", timeout=5)[0] == 200
    except (OSError, http.client.HTTPException):
        return False


def _serve_and_stop(tmp_path: Path, given: Path | None) -> dict[Path, int]:
    """Start gunicorn with the ops config until /healthz answers, stop it with SIGTERM; the
    metrics folders in its TMPDIR while it ran, with how many files each held."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env |= {
        "TMPDIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'app.db'}",
        "SECRET_KEY": "gunicorn-config-test",
        "TIERDESK_WORKERS": "1",
        "TIERDESK_BIND": f"127.0.0.1:{port}",
        "TIERDESK_LOAD_MODELS": "false",
        "TIERDESK_VAR_DIR": str(tmp_path / "var"),
        "TIERDESK_MODELS_DIR": str(tmp_path / "models"),
        "TIERDESK_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(PROJECT_ROOT),
    }
    if given is not None:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(given)
    proc = subprocess.Popen(
        [str(GUNICORN), "-c", str(PROJECT_ROOT / "ops" / "gunicorn.conf.py"), "app:create_app()"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _healthy(port):
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "gunicorn did not answer /healthz"
            time.sleep(0.5)
        running = {d: len(list(d.iterdir())) for d in tmp.glob("tierdesk-metrics-*")}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return running


@pytest.mark.parametrize("given", [False, True], ids=["own_folder", "given_folder"])
def test_the_metrics_folder_outlives_the_server_only_when_it_was_given(tmp_path, given):
    folder = tmp_path / "metrics" if given else None
    running = _serve_and_stop(tmp_path, folder)
    if given:
        assert running == {}  # nothing made in TMPDIR
        assert folder.is_dir() and any(folder.iterdir())
    else:
        [(own, files)] = running.items()
        assert files > 0  # the workers wrote their metrics there
        assert not own.exists()
