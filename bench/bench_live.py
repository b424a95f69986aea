"""Stream capacity beside chat throughput, in one run: 200 open server-sent event streams on
gunicorn ``gevent`` workers, against today's ``sync`` workers without streams.

Set-up as ``bench_load.py`` (whose load generator and question screening this script reuses): a
temporary SQLite database with the demo KB and intents, the trained models from ``models/``,
Redis at 127.0.0.1:6379 under a key prefix of this run, rate limit off, gunicorn with
``ops/gunicorn.conf.py`` and 2 workers on loopback. Phases, one after another on the same
machine:

1. ``sync`` workers: closed-loop chat throughput (``--connections`` connections,
   ``--seconds`` s, after a warm-up): today's figure, the baseline.
2. ``gevent`` workers (``TIERDESK_WORKER_CLASS=gevent``): the same, no streams.
3. ``gevent`` workers with ``--streams`` (200) conversations each holding an open stream
   (``GET /api/v1/conversations/<id>/events``, from a separate holder process with one
   selector) while events are published through Redis at ``--event-rate`` per second to
   random conversations (the real path: Redis pub/sub -> each worker's hub -> the stream);
   the same chat load. Reported: streams connected, events received, publish-to-receive
   latency (median, p99), chat throughput and its ratio to phase 1.
4. ``sync`` workers again: a stream is refused with 503 (clients poll), and the baseline is
   measured a second time to show the run-to-run drift.

Each load runs in its own process (the generator and the holder share the two cores with the
server; their CPU is reported). Writes bench/out/live.json and prints Markdown tables.

    python bench/bench_live.py                     # about 3 minutes
    python bench/bench_live.py --streams 50 --seconds 5
"""

from __future__ import annotations

import argparse
import importlib.util
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
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "live.json"
VENV_BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
TARGET_RATIO = 0.9

_spec = importlib.util.spec_from_file_location("bench_load", ROOT / "bench" / "bench_load.py")
bench_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_load)


# ---------------------------------------------------------------- chat load (own process)


def chat_load(port: int, seconds: float, connections: int, server_pid: int) -> dict:
    questions, screened = bench_load.screen_simple_route(port, bench_load.simple_questions())
    pids = bench_load._server_pids(server_pid)
    bench_load.closed_loop(port, questions, connections, min(3.0, seconds), pids)  # warm-up
    result = bench_load.closed_loop(port, questions, connections, seconds, pids)
    result["questions"] = len(questions)
    result["screened"] = screened
    return result


# ---------------------------------------------------------------- stream holder (own process)


class _Stream:
    __slots__ = ("sock", "buf", "status", "hello", "events")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.status = None
        self.hello = False
        self.events = 0


def hold_streams(port: int, ids: list[str]) -> None:
    """Open one stream per conversation id; print "ready <n>" once every stream said hello,
    then count events until stdin closes, and print the counts and latencies as JSON."""
    selector = selectors.DefaultSelector()
    streams = []
    for cid in ids:
        sock = socket.create_connection((HOST, port))
        sock.sendall(
            f"GET /api/v1/conversations/{cid}/events HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        sock.setblocking(False)
        stream = _Stream(sock)
        streams.append(stream)
        selector.register(sock, selectors.EVENT_READ, stream)
    selector.register(sys.stdin, selectors.EVENT_READ, None)
    latencies: list[float] = []
    announced = False
    started = time.monotonic()
    while True:
        for key, _mask in selector.select(timeout=0.5):
            stream = key.data
            if stream is None:  # stdin closed: the measurement is over
                ready = sum(s.hello for s in streams)
                usage = resource.getrusage(resource.RUSAGE_SELF)
                print(
                    json.dumps(
                        {
                            "streams": len(streams),
                            "connected": ready,
                            "status_200": sum(s.status == 200 for s in streams),
                            "events": sum(s.events for s in streams),
                            "latency_ms": sorted(round(x * 1000, 2) for x in latencies),
                            "holder_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                        }
                    ),
                    flush=True,
                )
                return
            data = stream.sock.recv(65536)
            if not data:
                selector.unregister(stream.sock)
                continue
            stream.buf += data
            if stream.status is None and b"\r\n" in stream.buf:
                stream.status = int(stream.buf.split(b" ", 2)[1])
            while b"\n\n" in stream.buf:
                chunk, stream.buf = stream.buf.split(b"\n\n", 1)
                for line in chunk.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    event = json.loads(line[6:])
                    if event.get("type") == "hello":
                        stream.hello = True
                    elif "t" in event:
                        stream.events += 1
                        latencies.append(time.time() - event["t"])
        if not announced and all(s.hello for s in streams):
            announced = True
            print(f"ready {len(streams)} {time.monotonic() - started:.2f}", flush=True)


# ---------------------------------------------------------------- orchestration


def _env(work: Path, db_url: str, prefix: str, worker_class: str) -> dict:
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "TIERDESK_VAR_DIR": str(work / "var"),
        "TIERDESK_MODELS_DIR": os.environ.get("TIERDESK_MODELS_DIR", str(ROOT / "models")),
        "TIERDESK_RATE_LIMIT": "off",
        "TIERDESK_REDIS_PREFIX": prefix,
        "TIERDESK_LOG_LEVEL": "WARNING",
        "TIERDESK_WORKER_CLASS": worker_class,
        "SECRET_KEY": "bench",
    }
    url = bench_load._redis_url()
    if url:
        env["REDIS_URL"] = url
    return env


class Server:
    def __init__(self, env: dict, port: int) -> None:
        self.port = port
        self.proc = subprocess.Popen(
            [
                str(VENV_BIN / "gunicorn"),
                "-c",
                str(ROOT / "ops" / "gunicorn.conf.py"),
                "--bind",
                f"{HOST}:{port}",
                "--workers",
                "2",
                "--access-logfile",
                "/dev/null",
                "app:create_app()",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        bench_load._wait_ready(port, self.proc)
        # Both workers: the readiness probe may have reached only one of them.
        for _ in range(6):
            bench_load._get_json(port, "/readyz")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def _run_chat(server: Server, seconds: float, connections: int) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--chat",
            str(server.port),
            "--seconds",
            str(seconds),
            "--connections",
            str(connections),
            "--server-pid",
            str(server.proc.pid),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        sys.exit("chat load generator failed")
    return json.loads(proc.stdout)


def _conversations(port: int, count: int) -> list[str]:
    """``count`` conversations waiting for a person (a "talk to a person" each)."""
    import http.client

    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    ids = []
    try:
        for _ in range(count):
            conn.request(
                "POST",
                "/api/v1/chat",
                body=json.dumps({"message": "talk to a person"}).encode(),
                headers={"Content-Type": "application/json"},
            )
            ids.append(json.loads(conn.getresponse().read())["conversation_id"])
    finally:
        conn.close()
    return ids


def _publisher(redis_url: str, prefix: str, ids: list[str], rate: float, stop: threading.Event):
    import redis

    client = redis.Redis.from_url(redis_url)
    rng = random.Random(7)
    sent = 0
    start = time.perf_counter()
    while not stop.is_set():
        cid = rng.choice(ids)
        event = {"type": "typing", "agent": "bench", "t": time.time()}
        client.publish(f"{prefix}live:conversation:{cid}", json.dumps(event))
        sent += 1
        delay = start + sent / rate - time.perf_counter()
        if delay > 0:
            stop.wait(delay)
    return sent


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _with_streams(server: Server, env: dict, args) -> dict:
    ids = _conversations(server.port, args.streams)
    holder = subprocess.Popen(
        [sys.executable, __file__, "--hold", str(server.port)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    holder.stdin.write("\n".join(ids) + "\n\n")
    holder.stdin.flush()
    line = holder.stdout.readline().split()
    if not line or line[0] != "ready":
        holder.kill()
        sys.exit(f"the streams did not connect: {line}")
    print(f"  {line[1]} streams open after {line[2]} s", file=sys.stderr)
    stop = threading.Event()
    published: list[int] = []
    thread = threading.Thread(
        target=lambda: published.append(
            _publisher(env["REDIS_URL"], env["TIERDESK_REDIS_PREFIX"], ids, args.event_rate, stop)
        )
    )
    thread.start()
    chat = _run_chat(server, args.seconds, args.connections)
    stop.set()
    thread.join()
    time.sleep(1.0)  # the last events in flight
    holder.stdin.close()
    streams = json.loads(holder.stdout.readline())
    holder.wait(timeout=30)
    latencies = streams.pop("latency_ms")
    streams.update(
        published=published[0] if published else 0,
        latency_p50_ms=_percentile(latencies, 50),
        latency_p99_ms=_percentile(latencies, 99),
        connect_s=float(line[2]),
    )
    return {"chat": chat, "streams": streams}


def _refused_on_sync(port: int, cid: str) -> int:
    import http.client

    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", f"/api/v1/conversations/{cid}/events")
        return conn.getresponse().status
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15.0, help="per chat measurement")
    parser.add_argument("--connections", type=int, default=4, help="closed-loop chat connections")
    parser.add_argument("--event-rate", type=float, default=50.0, help="events published per s")
    parser.add_argument("--chat", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.chat:
        print(json.dumps(chat_load(args.chat, args.seconds, args.connections, args.server_pid)))
        return 0
    if args.hold:
        ids = []
        for line in sys.stdin:
            if not line.strip():
                break
            ids.append(line.strip())
        hold_streams(args.hold, ids)
        return 0

    models = Path(os.environ.get("TIERDESK_MODELS_DIR", ROOT / "models"))
    if not (models.is_dir() and any(p.name != "README.md" for p in models.iterdir())):
        print(f"no trained models in {models}: run `tierdesk train` first", file=sys.stderr)
        return 1
    if not bench_load._redis_url():
        print("needs the Redis at 127.0.0.1:6379 (the publisher talks to it)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="tierdesk-bench-live-"))
    db_url = f"sqlite:///{work / 'bench.db'}"
    prefix = f"tdbench:{uuid.uuid4().hex[:8]}:"
    results: dict = {}
    try:
        env = _env(work, db_url, prefix, "sync")
        bench_load._tierdesk(env, "db", "upgrade")
        bench_load._tierdesk(env, "intents", "load")
        bench_load._tierdesk(env, "kb", "import", str(ROOT / "knowledge_base"))
        for phase, worker_class in (
            ("sync", "sync"),
            ("gevent", "gevent"),
            ("sync_again", "sync"),
        ):
            print(f"{phase}:", file=sys.stderr)
            server = Server(_env(work, db_url, prefix, worker_class), bench_load._free_port())
            try:
                results[phase] = {"chat": _run_chat(server, args.seconds, args.connections)}
                print(f"  chat {results[phase]['chat']['rps']} req/s", file=sys.stderr)
                if worker_class == "gevent":
                    live = _with_streams(server, _env(work, db_url, prefix, "gevent"), args)
                    results["gevent_streams"] = live
                    print(
                        f"  with {live['streams']['connected']} streams: chat "
                        f"{live['chat']['rps']} req/s, events {live['streams']['events']}",
                        file=sys.stderr,
                    )
                else:
                    cid = _conversations(server.port, 1)[0]
                    results[phase]["stream_status"] = _refused_on_sync(server.port, cid)
            finally:
                server.stop()
    finally:
        if bench_load._redis_url():
            bench_load._delete_prefix(bench_load._redis_url(), prefix)
        shutil.rmtree(work, ignore_errors=True)

    base = results["sync"]["chat"]["rps"]
    live = results["gevent_streams"]
    ratio = live["chat"]["rps"] / base if base else 0.0
    verdict = {
        "streams_connected": live["streams"]["connected"],
        "chat_ratio_vs_sync": round(ratio, 3),
        "meets": live["streams"]["connected"] >= args.streams and ratio >= TARGET_RATIO,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"args": vars(args), "results": results, "verdict": verdict}, indent=2)
    )

    def row(label: str, chat: dict, streams: str) -> str:
        return (
            f"| {label} | {streams} | {chat['rps']:.0f} | {chat['rps'] / base:.2f} "
            f"| {chat['p50_ms']:.1f} | {chat['p99_ms']:.1f} | {chat['errors']} "
            f"| {chat['generator_cpu_share']:.0%} / {chat.get('server_cpu_share', 0):.0%} |"
        )

    s = live["streams"]
    print(
        f"#### Streams beside chat: 2 gunicorn workers, SQLite, {args.connections} closed-loop "
        f"chat connections, {args.seconds:.0f} s per measurement (target: {args.streams} streams, "
        f"chat >= {TARGET_RATIO:.0%} of sync)"
    )
    print()
    print(
        "| workers | open streams | chat (req/s) | ratio to sync | p50 (ms) | p99 (ms) | errors "
        "| CPU: generator / server |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(row("sync (today)", results["sync"]["chat"], "0 (refused: 503, clients poll)"))
    print(row("gevent", results["gevent"]["chat"], "0"))
    print(row("gevent", live["chat"], f"{s['connected']} of {s['streams']}"))
    print(row("sync, again", results["sync_again"]["chat"], "0"))
    print()
    print(
        f"Events through Redis pub/sub to the streams: {s['published']} published at "
        f"{args.event_rate:.0f}/s, {s['events']} received; publish-to-receive latency p50 "
        f"{s['latency_p50_ms']} ms, p99 {s['latency_p99_ms']} ms; all streams open in "
        f"{s['connect_s']:.2f} s; holder CPU {s['holder_cpu_s']} s."
    )
    print()
    print(f"Verdict: {json.dumps(verdict)}")
    print()
    print(f"Wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
