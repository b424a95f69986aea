"""Stream capacity beside chat throughput, in one run: 200 open server-sent event streams on
gunicorn ``gevent`` workers, against today's ``sync`` workers without streams.

Set-up as ``bench_load.py`` (whose load generator and question screening this script reuses): a
temporary SQLite database with the demo KB and intents, the trained models from ``models/``,
Redis at 127.0.0.1:6379 under a key prefix of this run, rate limit off. Two gunicorn servers
with ``ops/gunicorn.conf.py`` and 2 workers each run side by side on loopback: one with
``sync`` workers (today), one with ``gevent`` workers (``TIERDESK_WORKER_CLASS=gevent``). Only
the server being measured gets load; the other idles.

1. Round 0: closed-loop chat throughput (``--connections`` connections, ``--seconds`` s) on
   each server, no streams.
2. ``--streams`` (200) conversations open a stream each on the gevent server
   (``GET /api/v1/conversations/<id>/events``, held by a separate process with one selector)
   and stay open to the end.
3. Rounds 1..``--rounds``: chat throughput on the sync server, then on the gevent server while
   events are published through Redis at ``--event-rate`` per second to random conversations
   (the real path: Redis pub/sub -> each worker's hub -> the stream). Alternating the two
   servers round by round puts both under the same background load of a shared machine; the
   figures are the medians over the rounds and the ratio of the medians.

Also checked: the sync server refuses a stream with 503 (clients poll). Each load runs in its
own process (the generator and the holder share the two cores with the server; their CPU is
reported). Writes bench/out/live.json and prints Markdown tables.

    python bench/bench_live.py                     # about 4 minutes
    python bench/bench_live.py --streams 50 --rounds 3 --seconds 5
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


def chat_load(port: int, seconds: float, connections: int, server_pid: int, questions) -> dict:
    pids = bench_load._server_pids(server_pid)
    bench_load.closed_loop(port, questions, connections, min(2.0, seconds), pids)  # warm-up
    result = bench_load.closed_loop(port, questions, connections, seconds, pids)
    result["questions"] = len(questions)
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
            bench_load.gunicorn_command(port),
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


def _run_chat(server: Server, seconds: float, connections: int, questions: Path) -> dict:
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
            "--questions",
            str(questions),
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


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


class Holder:
    """The stream-holding process: opens one stream per conversation and waits."""

    def __init__(self, port: int, ids: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--hold", str(port)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.proc.stdin.write("\n".join(ids) + "\n\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "ready":
            self.proc.kill()
            sys.exit(f"the streams did not connect: {line}")
        self.open_s = float(line[2])

    def finish(self) -> dict:
        self.proc.stdin.close()
        result = json.loads(self.proc.stdout.readline())
        self.proc.wait(timeout=30)
        return result


class Publisher:
    """Publishes typing events with their send time to random conversations while on."""

    def __init__(self, redis_url: str, prefix: str, ids: list[str], rate: float) -> None:
        import redis

        self.client = redis.Redis.from_url(redis_url)
        self.prefix = prefix
        self.ids = ids
        self.rate = rate
        self.sent = 0
        self._on = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def on(self) -> None:
        self._on.set()

    def off(self) -> None:
        self._on.clear()

    def stop(self) -> None:
        self._stop.set()
        self._on.set()
        self._thread.join()

    def _run(self) -> None:
        rng = random.Random(7)
        while not self._stop.is_set():
            self._on.wait()
            started, sent = time.perf_counter(), 0
            while self._on.is_set() and not self._stop.is_set():
                event = {"type": "typing", "agent": "bench", "t": time.time()}
                channel = f"{self.prefix}live:conversation:{rng.choice(self.ids)}"
                self.client.publish(channel, json.dumps(event))
                sent += 1
                self.sent += 1
                delay = started + sent / self.rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


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
    parser.add_argument("--seconds", type=float, default=10.0, help="per chat measurement")
    parser.add_argument("--connections", type=int, default=4, help="closed-loop chat connections")
    parser.add_argument("--event-rate", type=float, default=50.0, help="events published per s")
    parser.add_argument("--rounds", type=int, default=5, help="alternating measurement rounds")
    parser.add_argument("--questions", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--chat", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.chat:
        questions = json.loads(args.questions.read_text())
        result = chat_load(args.chat, args.seconds, args.connections, args.server_pid, questions)
        print(json.dumps(result))
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
    redis_url = bench_load._redis_url()
    servers: dict[str, Server] = {}
    results: dict = {"rounds": []}
    try:
        env = _env(work, db_url, prefix, "sync")
        bench_load._tierdesk(env, "db", "upgrade")
        bench_load._tierdesk(env, "intents", "load")
        bench_load._tierdesk(env, "kb", "import", str(ROOT / "knowledge_base"))
        for kind in ("sync", "gevent"):
            servers[kind] = Server(_env(work, db_url, prefix, kind), bench_load._free_port())
        questions, screened = bench_load.screen_simple_route(
            servers["sync"].port, bench_load.simple_questions()
        )
        results["questions"] = {"simple_route": len(questions), "screened": screened}
        qfile = work / "questions.json"
        qfile.write_text(json.dumps(questions))
        cid = _conversations(servers["sync"].port, 1)[0]
        results["sync_stream_status"] = _refused_on_sync(servers["sync"].port, cid)

        def measure(kind: str) -> dict:
            return _run_chat(servers[kind], args.seconds, args.connections, qfile)

        round0 = {kind: measure(kind) for kind in ("sync", "gevent")}
        results["no_streams"] = round0
        print(
            f"  round 0 (no streams): sync {round0['sync']['rps']} req/s, gevent "
            f"{round0['gevent']['rps']} req/s",
            file=sys.stderr,
        )
        ids = _conversations(servers["gevent"].port, args.streams)
        holder = Holder(servers["gevent"].port, ids)
        print(f"  {args.streams} streams open after {holder.open_s:.2f} s", file=sys.stderr)
        publisher = Publisher(redis_url, prefix, ids, args.event_rate)
        for number in range(1, args.rounds + 1):
            sync = measure("sync")
            publisher.on()
            live = measure("gevent")
            publisher.off()
            results["rounds"].append({"sync": sync, "gevent_streams": live})
            print(
                f"  round {number}: sync {sync['rps']} req/s, gevent with streams "
                f"{live['rps']} req/s ({live['rps'] / sync['rps']:.2f})",
                file=sys.stderr,
            )
        time.sleep(1.0)  # the last events in flight
        publisher.stop()
        streams = holder.finish()
        latencies = streams.pop("latency_ms")
        streams.update(
            published=publisher.sent,
            latency_p50_ms=_percentile(latencies, 50),
            latency_p99_ms=_percentile(latencies, 99),
            open_s=holder.open_s,
        )
        results["streams"] = streams
    finally:
        for server in servers.values():
            server.stop()
        if redis_url:
            bench_load._delete_prefix(redis_url, prefix)
        shutil.rmtree(work, ignore_errors=True)

    def med(kind: str, key: str) -> float:
        return _median([r[kind][key] for r in results["rounds"]])

    base, live = med("sync", "rps"), med("gevent_streams", "rps")
    ratios = [r["gevent_streams"]["rps"] / r["sync"]["rps"] for r in results["rounds"]]
    s = results["streams"]
    verdict = {
        "streams_connected": s["connected"],
        "events_received_of_published": [s["events"], s["published"]],
        "chat_median_rps": {"sync": base, "gevent_with_streams": live},
        "ratio_of_medians": round(live / base, 3),
        "median_of_round_ratios": round(_median(ratios), 3),
        "meets": s["connected"] >= args.streams and live / base >= TARGET_RATIO,
    }
    results["verdict"] = verdict
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"args": vars(args), **results}, indent=2))

    print(
        f"#### Streams beside chat: 2 gunicorn workers per server, SQLite, "
        f"{args.connections} closed-loop chat connections, {args.seconds:.0f} s per measurement, "
        f"medians of {args.rounds} alternating rounds (target: {args.streams} streams open, "
        f"chat >= {TARGET_RATIO:.0%} of sync)"
    )
    print()
    print(
        "| workers | open streams | chat (req/s) | ratio to sync | p50 (ms) | p99 (ms) "
        "| server CPU (share of machine) |"
    )
    print("|---|---|---|---|---|---|---|")
    zero = results["no_streams"]
    for label, kind, streams_label in (
        ("sync (today)", "sync", "0 (a stream gets 503: clients poll)"),
        ("gevent", "gevent_streams", f"{s['connected']} of {s['streams']}"),
    ):
        print(
            f"| {label} | {streams_label} | {med(kind, 'rps'):.0f} | "
            f"{med(kind, 'rps') / base:.2f} | {med(kind, 'p50_ms'):.1f} | "
            f"{med(kind, 'p99_ms'):.1f} | {med(kind, 'server_cpu_share'):.0%} |"
        )
    print()
    print(
        f"Round 0, no streams: sync {zero['sync']['rps']:.0f} req/s, gevent "
        f"{zero['gevent']['rps']:.0f} req/s. Round ratios (gevent with streams / sync): "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + f". Events through Redis pub/sub to the streams: {s['published']} published at "
        f"{args.event_rate:.0f}/s during the gevent rounds, {s['events']} received; "
        f"publish-to-receive p50 {s['latency_p50_ms']} ms, p99 {s['latency_p99_ms']} ms; all "
        f"{s['streams']} streams open in {s['open_s']:.2f} s. A stream on the sync server: HTTP "
        f"{results['sync_stream_status']}."
    )
    print()
    print(f"Verdict: {json.dumps(verdict)}")
    print()
    print(f"Wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
