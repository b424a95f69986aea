"""Chat API under gunicorn (2 workers) on loopback: maximum sustained rate, then p99 at 80 %.

Set-up: a temporary SQLite database (or ``--db pg``: a temporary database on the local
PostgreSQL) with the demo knowledge base and intents imported, the trained models from
``models/`` (``tierdesk train``), Redis at 127.0.0.1:6379 when it answers (else the embedded
one) under a key prefix of this run, rate limit off. gunicorn serves ``app:create_app()`` with
``ops/gunicorn.conf.py`` (2 workers, its default worker class) on 127.0.0.1 only.

The load comes from a separate process (``--generate``) with one thread and one selector:
non-blocking HTTP/1.1 connections (kept alive when the server allows it, else one per request,
closed after the server's FIN), request bytes built in advance, and responses read only as far
as the status line, Content-Length and the body's top-level ``status`` and ``route``. The
requests post simple-route questions to ``POST /api/v1/chat``: the example utterances of the
intents declared ``tier: simple`` that the server, asked once beforehand, answers on the simple
route (the few it sends to BERT or to review are counted in the output and left out). The generator shares the machine with the server, so
every run reports the CPU that the generator and the gunicorn processes used (user + system,
from getrusage and /proc) as a share of the machine, and per request.

1. Maximum sustained rate: closed loop at increasing concurrency (1, 2, 4, 8, 16 connections,
   10 s each; each connection sends its next request when the previous answer arrived); the
   best throughput without errors.
2. Latency at 80 % of it: open loop (requests scheduled at a fixed rate, latency measured from
   the scheduled time so that a stalled server cannot hide its queueing), 2x the step time;
   then at 50 % and 25 %. A due request goes out on the connection that became idle last, a
   new one is opened when none is idle (up to 64); a request that waits for one counts its
   wait. The selector wakes with millisecond resolution, so sends can be up to 1 ms late, and
   that lateness counts too.

Both runs are made with the per-process answer cache off (every request goes through the
engine) and, for comparison, on (the production default). Writes bench/out/load.json and prints
Markdown tables.

    python bench/bench_load.py                # about 4 minutes
    python bench/bench_load.py --db pg --seconds 5
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "load.json"
VENV_BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
TARGET_RPS = 300
TARGET_P99_MS = 50.0
CONCURRENCY_STEPS = (1, 2, 4, 8, 16)
OPEN_LOOP_SHARES = (0.8, 0.5, 0.25)


# ---------------------------------------------------------------- questions


def simple_questions() -> list[str]:
    """Example utterances of the intents declared ``tier: simple`` in intents/*.yaml."""
    import yaml

    questions: list[str] = []
    for path in sorted((ROOT / "intents").glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        for intent in data.get("intents", []):
            if intent.get("tier") == "simple":
                questions += [str(e) for e in intent.get("examples", [])]
    if not questions:
        sys.exit("no simple-tier intents found under intents/")
    return questions


# ---------------------------------------------------------------- load generator (own process)
#
# One thread, one selector, non-blocking keep-alive sockets. Requests are prebuilt bytes;
# a response is read as far as its status line, Content-Length and the body's top-level
# "status" and "route" (Flask writes compact JSON, so these keys appear as '"status":"...').


def _requests(port: int, questions: list[str], seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(5000):
        body = json.dumps({"message": rng.choice(questions)}).encode()
        head = (
            f"POST /api/v1/chat HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        out.append(head.encode() + body)
    return out


def _json_field(body: bytes, key: bytes) -> str | None:
    """The top-level string field ``key`` of a compact JSON object (None when null/absent).

    Inside a JSON string every quote is escaped, so ``"key":`` can only be a key; the
    response's other objects (answer, article, suggestions) have no "status" or "route".
    """
    at = body.find(b'"' + key + b'":')
    if at < 0:
        return None
    start = at + len(key) + 3
    if body[start : start + 1] != b'"':
        return None
    end = body.find(b'"', start + 1)
    return body[start + 1 : end].decode() if end > 0 else None


class Recorder:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.routes: dict[str, int] = {}

    def add(self, latency_s: float, status: int, body: bytes | None) -> None:
        outcome = _json_field(body, b"status") if status == 200 and body else None
        if outcome is None:
            self.errors += 1
            return
        self.latencies.append(latency_s)
        key = outcome if outcome != "answered" else f"answered:{_json_field(body, b'route')}"
        self.routes[key] = self.routes.get(key, 0) + 1


class _Conn:
    __slots__ = ("sock", "buf", "t0", "busy", "closing")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.t0 = 0.0  # the time the request in flight counts from
        self.busy = False
        self.closing = False  # answered with "Connection: close": waiting for the server's FIN


class LoadLoop:
    """Keep-alive HTTP/1.1 connections to the server, driven by one selector."""

    TIMEOUT_S = 10.0  # a request unanswered this long counts as an error

    def __init__(self, port: int, recorder: Recorder) -> None:
        self.port = port
        self.recorder = recorder
        self.selector = selectors.DefaultSelector()
        self.conns: list[_Conn] = []
        self.in_flight = 0

    def open(self) -> _Conn:
        sock = socket.create_connection((HOST, self.port), timeout=self.TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = _Conn(sock)
        self.selector.register(sock, selectors.EVENT_READ, conn)
        self.conns.append(conn)
        return conn

    def drop(self, conn: _Conn) -> None:
        self.selector.unregister(conn.sock)
        conn.sock.close()
        if not conn.closing:
            self.conns.remove(conn)
        if conn.busy:
            conn.busy = False
            self.in_flight -= 1

    def retire(self, conn: _Conn) -> None:
        """Stop using a connection the server is closing; close it on the server's FIN, so
        that the server, not this process, keeps the TIME_WAIT (no ephemeral ports run out
        when every request has its own connection)."""
        self.conns.remove(conn)
        conn.closing = True

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            self.drop(key.data)
        self.selector.close()

    def send(self, conn: _Conn, request: bytes, t0: float) -> None:
        conn.t0, conn.busy, conn.buf = t0, True, b""
        self.in_flight += 1
        try:
            sent = conn.sock.send(request)
            if sent < len(request):  # never seen with requests this small; stay correct
                conn.sock.setblocking(True)
                conn.sock.sendall(request[sent:])
                conn.sock.setblocking(False)
        except OSError:
            self.recorder.add(time.perf_counter() - t0, 0, None)
            self.drop(conn)
            return

    def poll(self, timeout: float | None) -> list[_Conn]:
        """Wait up to ``timeout`` s; record finished responses; return their connections."""
        done = []
        for key, _ in self.selector.select(timeout):
            conn: _Conn = key.data
            try:
                data = conn.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:  # closed by the server (after "Connection: close", idle, or a failure)
                if conn.busy:
                    self.recorder.add(time.perf_counter() - conn.t0, 0, None)
                self.drop(conn)
                continue
            conn.buf += data
            finished = self._response(conn)
            if finished is not None:
                status, body, keep = finished
                conn.busy = False
                self.in_flight -= 1
                self.recorder.add(time.perf_counter() - conn.t0, status, body)
                if keep:
                    done.append(conn)
                else:
                    self.retire(conn)
        return done

    @staticmethod
    def _response(conn: _Conn) -> tuple[int, bytes, bool] | None:
        buf = conn.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = buf[:end].lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            return 0, b"", False  # no length (chunked or broken): count as an error, reconnect
        length = int(
            head[at + 17 : head.find(b"\r\n", at + 2) if head.find(b"\r\n", at + 2) > 0 else None]
        )
        if len(buf) < end + 4 + length:
            return None
        keep = b"\r\nconnection: close" not in head
        return int(buf[9:12]), buf[end + 4 : end + 4 + length], keep

    def expire(self, now: float) -> None:
        for conn in list(self.conns):
            if conn.busy and now - conn.t0 > self.TIMEOUT_S:
                self.recorder.add(now - conn.t0, 0, None)
                self.drop(conn)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _server_pids(master: int) -> list[int]:
    try:
        with open(f"/proc/{master}/task/{master}/children") as f:
            return [master, *(int(p) for p in f.read().split())]
    except OSError:
        return []


def _server_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the gunicorn master and workers so far (from /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / ticks


class Measure:
    """Wall time and the CPU used by this process and by the server during one run."""

    def __init__(self, server_pids: list[int]) -> None:
        self.pids = server_pids
        self.wall = time.perf_counter()
        self.cpu = _cpu_seconds()
        self.server = _server_cpu_seconds(server_pids)

    def result(self, requests: int) -> dict:
        wall = time.perf_counter() - self.wall
        cpu = _cpu_seconds() - self.cpu
        server = _server_cpu_seconds(self.pids) - self.server
        cores = os.cpu_count() or 1
        out = {
            "generator_cpu_s": round(cpu, 2),
            "generator_cpu_share": round(cpu / wall / cores, 3) if wall > 0 else None,
            "generator_cpu_ms_per_request": round(cpu / requests * 1000, 3) if requests else None,
        }
        if self.pids:
            out["server_cpu_s"] = round(server, 2)
            out["server_cpu_share"] = round(server / wall / cores, 3) if wall > 0 else None
            out["server_cpu_ms_per_request"] = (
                round(server / requests * 1000, 3) if requests else None
            )
        return out


def closed_loop(
    port: int, questions: list[str], connections: int, seconds: float, server_pids=()
) -> dict:
    """Each connection sends its next request as soon as the previous answer arrived."""
    recorder = Recorder()
    loop = LoadLoop(port, recorder)
    requests = [_requests(port, questions, index) for index in range(connections)]
    sent = [0] * connections
    conns = {id(loop.open()): index for index in range(connections)}
    measure = Measure(list(server_pids))
    started = time.perf_counter()
    stop = started + seconds

    def send_next(conn: _Conn, now: float) -> None:
        index = conns.setdefault(id(conn), len(conns) % connections)
        loop.send(conn, requests[index][sent[index] % 5000], now)
        sent[index] += 1

    for conn in list(loop.conns):
        send_next(conn, time.perf_counter())
    last_check = started
    while loop.in_flight or len(loop.conns) < connections and time.perf_counter() < stop:
        for conn in loop.poll(0.5):
            now = time.perf_counter()
            if now < stop:
                send_next(conn, now)
        now = time.perf_counter()
        while now < stop and len(loop.conns) < connections:  # replace a dropped connection
            send_next(loop.open(), now)
        if now - last_check > 0.5:
            loop.expire(now)
            last_check = now
    elapsed = time.perf_counter() - started
    loop.close()
    summary = _summary(recorder, elapsed, connections=connections)
    summary.update(measure.result(summary["requests"]))
    return summary


def open_loop(
    port: int,
    questions: list[str],
    rate: float,
    seconds: float,
    server_pids=(),
    max_connections: int = 64,
) -> dict:
    """Requests scheduled at ``rate`` per second; latency counts from the scheduled send time
    (no coordinated omission). A due request goes out on the connection that became idle last
    (a pool, as an HTTP client or proxy keeps one); a new connection is opened only when none
    is idle, up to ``max_connections``; beyond that it waits, and the wait counts."""
    recorder = Recorder()
    loop = LoadLoop(port, recorder)
    bodies = _requests(port, questions, 1000)
    total = int(seconds * rate)
    idle = [loop.open() for _ in range(4)]
    pending: deque[float] = deque()  # scheduled times of due requests not yet sent
    measure = Measure(list(server_pids))
    begin = time.perf_counter() + 0.2
    next_i = 0
    last_check = begin
    while next_i < total or pending or loop.in_flight:
        now = time.perf_counter()
        while next_i < total and begin + next_i / rate <= now:
            pending.append(begin + next_i / rate)
            next_i += 1
        while pending:
            while idle and idle[-1] not in loop.conns:  # closed by the server while idle
                idle.pop()
            if idle:
                conn = idle.pop()
            elif len(loop.conns) < max_connections:
                conn = loop.open()
            else:
                break
            scheduled = pending.popleft()
            loop.send(conn, bodies[int((scheduled - begin) * rate + 0.5) % 5000], scheduled)
        timeout = max(0.0, begin + next_i / rate - time.perf_counter()) if next_i < total else 0.5
        idle += loop.poll(min(timeout, 0.5))
        if now - last_check > 0.5:
            loop.expire(now)
            last_check = now
    elapsed = time.perf_counter() - begin
    loop.close()
    summary = _summary(recorder, elapsed, target_rate=rate)
    summary.update(measure.result(summary["requests"]))
    return summary


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _summary(recorder: Recorder, elapsed: float, **extra) -> dict:
    lat = recorder.latencies
    return {
        **extra,
        "requests": len(lat) + recorder.errors,
        "errors": recorder.errors,
        "seconds": round(elapsed, 2),
        "rps": round(len(lat) / elapsed, 1) if elapsed > 0 else 0.0,
        "p50_ms": round(_percentile(lat, 50) * 1000, 2),
        "p90_ms": round(_percentile(lat, 90) * 1000, 2),
        "p99_ms": round(_percentile(lat, 99) * 1000, 2),
        "max_ms": round(max(lat) * 1000, 2) if lat else None,
        "outcomes": recorder.routes,
    }


def screen_simple_route(port: int, candidates: list[str]) -> tuple[list[str], dict[str, int]]:
    """Ask the server each candidate once; keep those it answers on the simple route.

    The target is about simple-route questions. Example utterances of simple-tier intents
    mostly are, but the router sends some to BERT or to review (a different workload, with a
    BERT call or a fully durable escalation); those are counted and left out.
    """
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    kept: list[str] = []
    outcomes: dict[str, int] = {}
    try:
        for question in dict.fromkeys(candidates):
            conn.request(
                "POST",
                "/api/v1/chat",
                body=json.dumps({"message": question}).encode(),
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            body = response.read()
            status = _json_field(body, b"status") if response.status == 200 else None
            route = _json_field(body, b"route")
            key = f"{status}:{route}" if status == "answered" else str(status)
            outcomes[key] = outcomes.get(key, 0) + 1
            if status == "answered" and route == "simple":
                kept.append(question)
    finally:
        conn.close()
    if not kept:
        sys.exit(f"no candidate question takes the simple route: {outcomes}")
    return kept, outcomes


def generate(port: int, seconds: float, server_pid: int | None = None) -> dict:
    """The whole measurement from the load-generator process."""
    questions, screened = screen_simple_route(port, simple_questions())
    print(f"  simple-route questions: {len(questions)} (candidates: {screened})", file=sys.stderr)
    pids = _server_pids(server_pid) if server_pid else []
    warm = closed_loop(port, questions, 4, min(3.0, seconds), pids)
    steps = []
    for connections in CONCURRENCY_STEPS:
        result = closed_loop(port, questions, connections, seconds, pids)
        steps.append(result)
        print(
            f"  closed loop {connections:>2} connections: {result['rps']:7.1f} req/s "
            f"p99 {result['p99_ms']:.1f} ms errors {result['errors']} "
            f"(CPU: generator {result['generator_cpu_share']:.0%}, "
            f"server {result.get('server_cpu_share', float('nan')):.0%} of {os.cpu_count()} cores)",
            file=sys.stderr,
        )
        if len(steps) >= 2 and result["rps"] < 0.97 * max(s["rps"] for s in steps[:-1]):
            break  # past the knee: more connections only queue
    clean = [s for s in steps if s["errors"] == 0] or steps
    best = max(clean, key=lambda s: s["rps"])
    open_runs = {}
    rates = [
        (f"{round(share * 100)}%", round(share * best["rps"], 1)) for share in OPEN_LOOP_SHARES
    ]
    # The issue's own wording: p99 at 80 % of the target rate (300 req/s), measured as such.
    rates.append(("80% of target", round(0.8 * TARGET_RPS, 1)))
    for label, rate in rates:  # 80 % of max first; lower shares show where p99 holds
        run = open_loop(port, questions, rate, seconds * 2, pids)
        open_runs[label] = run
        print(
            f"  open loop at {rate} req/s ({label}): p50 {run['p50_ms']} ms "
            f"p99 {run['p99_ms']} ms errors {run['errors']} "
            f"(CPU: generator {run['generator_cpu_share']:.0%}, "
            f"server {run.get('server_cpu_share', float('nan')):.0%})",
            file=sys.stderr,
        )
    return {
        "questions": {"simple_route": len(questions), "candidates_by_outcome": screened},
        "warmup": warm,
        "closed_loop": steps,
        "max_sustained_rps": best["rps"],
        "max_sustained_step": best,
        "open_loop_80": open_runs["80%"],
        "open_loop": open_runs,
    }


# ---------------------------------------------------------------- server set-up


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _redis_url() -> str | None:
    try:
        import redis

        url = "redis://127.0.0.1:6379/0"
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return url
    except Exception:  # noqa: BLE001 - absent: the app starts its embedded Redis
        return None


def _tierdesk(env: dict, *args: str) -> None:
    cmd = [str(VENV_BIN / "tierdesk"), *args]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")


def _pg_database() -> tuple[str, Callable[[], None]]:
    from sqlalchemy import create_engine, text

    admin_url = os.environ.get(
        "TIERDESK_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    name = f"tierdesk_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return admin_url.rsplit("/", 1)[0] + f"/{name}", drop


def _get_json(port: int, path: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(HOST, port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def gunicorn_command(port: int, workers: int = 2) -> list[str]:
    """gunicorn with the production config on 127.0.0.1:``port``, without an access log."""
    return [
        str(VENV_BIN / "gunicorn"),
        "-c",
        str(ROOT / "ops" / "gunicorn.conf.py"),
        "--bind",
        f"{HOST}:{port}",
        "--workers",
        str(workers),
        "--access-logfile",
        "/dev/null",
        "app:create_app()",
    ]


def _wait_ready(port: int, proc: subprocess.Popen, timeout_s: float = 180) -> dict:
    """Wait until both workers answer, then report /readyz (models loaded or not)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"gunicorn exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            status, body = _get_json(port, "/readyz")
            if status == 200 or body.get("checks", {}).get("models", "").startswith("not"):
                if status != 200:
                    print(f"  WARNING: models not ready: {body['checks']}", file=sys.stderr)
                return body
        except (OSError, ValueError, http.client.HTTPException):
            pass
        time.sleep(0.5)
    sys.exit(f"the server did not start in {timeout_s:.0f} s")


def run_server_and_measure(db: str, seconds: float, cache_size: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="tierdesk-bench-load-"))
    drop_db = None
    if db == "pg":
        db_url, drop_db = _pg_database()
    else:
        db_url = f"sqlite:///{work / 'bench.db'}"
    prefix = f"tdbench:{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "TIERDESK_VAR_DIR": str(work / "var"),
        "TIERDESK_MODELS_DIR": os.environ.get("TIERDESK_MODELS_DIR", str(ROOT / "models")),
        "TIERDESK_RATE_LIMIT": "off",
        "TIERDESK_REDIS_PREFIX": prefix,
        "TIERDESK_ANSWER_CACHE_SIZE": str(cache_size),
        "TIERDESK_LOG_LEVEL": "WARNING",
        "SECRET_KEY": "bench",
        # The SQLite runs measure 2 workers on one file, which production refuses
        # (app/security.py): the benchmark is a development set-up on purpose.
        "TIERDESK_ENV": "development",
    }
    redis_url = _redis_url()
    if redis_url:
        env["REDIS_URL"] = redis_url
    port = _free_port()
    server = None
    try:
        _tierdesk(env, "db", "upgrade")
        _tierdesk(env, "intents", "load")
        _tierdesk(env, "kb", "import", str(ROOT / "knowledge_base"))
        server = subprocess.Popen(
            gunicorn_command(port),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        ready = _wait_ready(port, server)
        generator = subprocess.run(
            [
                sys.executable,
                __file__,
                "--generate",
                str(port),
                "--seconds",
                str(seconds),
                "--server-pid",
                str(server.pid),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        sys.stderr.write(generator.stderr)
        if generator.returncode != 0:
            sys.exit("load generator failed")
        result = json.loads(generator.stdout)
        result["readyz"] = ready
        return result
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        if redis_url:
            _delete_prefix(redis_url, prefix)
        if drop_db:
            drop_db()
        shutil.rmtree(work, ignore_errors=True)


def _delete_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.delete(*keys)


def _table(results: dict[str, dict]) -> list[str]:
    lines = [
        "| answer cache | max sustained, closed loop (req/s) | open loop rate (share of max or target) "
        "| achieved (req/s) | p50 (ms) | p99 (ms) | errors | CPU: generator / server "
        "(share of the machine) | outcomes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, r in results.items():
        for share, run in r["open_loop"].items():
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(run["outcomes"].items()))
            cpu = f"{run['generator_cpu_share']:.0%} / {run.get('server_cpu_share', 0):.0%}"
            lines.append(
                f"| {label} | {r['max_sustained_rps']:.0f} | {run['target_rate']:.0f} ({share}) "
                f"| {run['rps']:.0f} | {run['p50_ms']:.1f} | {run['p99_ms']:.1f} "
                f"| {run['errors']} | {cpu} | {outcomes} |"
            )
    return lines


def _closed_loop_lines(results: dict[str, dict]) -> list[str]:
    lines = []
    for label, r in results.items():
        best = r["max_sustained_step"]
        lines.append(
            f"Closed-loop maximum, answer cache {label}: {best['rps']:.0f} req/s at "
            f"{best['connections']} connections (p50 {best['p50_ms']:.1f} ms, p99 "
            f"{best['p99_ms']:.1f} ms); CPU of the machine: generator "
            f"{best['generator_cpu_share']:.0%} ({best['generator_cpu_ms_per_request']:.2f} ms "
            f"per request), server {best.get('server_cpu_share', 0):.0%} "
            f"({best.get('server_cpu_ms_per_request') or 0:.2f} ms per request)."
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--seconds", type=float, default=10.0, help="per closed-loop step")
    parser.add_argument(
        "--allow-untrained",
        action="store_true",
        help="measure even without models (every question goes to review)",
    )
    parser.add_argument("--generate", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        print(json.dumps(generate(args.generate, args.seconds, args.server_pid)))
        return 0

    models = Path(os.environ.get("TIERDESK_MODELS_DIR", ROOT / "models"))
    trained = models.is_dir() and any(p.name != "README.md" for p in models.iterdir())
    if not trained and not args.allow_untrained:
        print(f"no trained models in {models}: run `tierdesk train` first", file=sys.stderr)
        return 1
    results = {}
    for label, cache_size in (("off", 0), ("on", 2048)):
        print(f"answer cache {label}:", file=sys.stderr)
        results[label] = run_server_and_measure(args.db, args.seconds, cache_size)
    off = results["off"]
    verdict = {
        "target_rps": TARGET_RPS,
        "target_p99_ms": TARGET_P99_MS,
        "meets_rps": off["max_sustained_rps"] >= TARGET_RPS,
        "meets_p99": off["open_loop_80"]["p99_ms"] <= TARGET_P99_MS,  # at 80 % of the max
        "meets_p99_at_80pct_of_target": off["open_loop"]["80% of target"]["p99_ms"]
        <= TARGET_P99_MS,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"db": args.db, "workers": 2, "results": results, "verdict": verdict}, indent=2)
    )
    print(
        f"#### Chat API under gunicorn, 2 workers, {args.db} (target >= {TARGET_RPS} req/s, "
        f"p99 <= {TARGET_P99_MS:.0f} ms at 80 %)"
    )
    print()
    print("\n".join(_table(results)))
    print()
    print("\n".join(_closed_loop_lines(results)))
    print()
    print(f"Verdict (answer cache off): {json.dumps(verdict)}")
    print()
    print(f"Wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
