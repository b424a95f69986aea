"""Stepped load test of a running gunicorn server with a realistic mix, up to 120 % of capacity.

Set-up as bench/bench_load.py (whose server start-up and HTTP machinery this reuses): a
temporary SQLite database (``--db pg``: PostgreSQL) with the demo KB and intents, the trained
models from ``models/``, Redis at 127.0.0.1:6379 under a key prefix of the run, rate limit
off, ``TIERDESK_TRUSTED_PROXIES=1`` so that the generator's ``X-Forwarded-For`` gives every
simulated customer an address of its own, gunicorn with ``ops/gunicorn.conf.py`` (2 workers).

**The mix** (share of all requests, drawn independently per request):

- 45 % a new conversation: ``POST /api/v1/chat`` with a question drawn from a pool of 600
  (55 % example utterances of ``simple``-tier intents, 30 % of ``complex``-tier intents, 15 %
  out-of-scope questions from intents/out_of_scope/test.csv) by a Zipf law over the pool's
  ranks (exponent 1.1: the top question is about 14 % of asks, 330 of the 600 are asked at
  least once in 10,000), from one of 5,000 customers (addresses);
- 15 % a follow-up in a conversation the run started (a new Zipf question; one in four asks
  the conversation's previous question again: "asked twice");
- 30 % a poll of a known conversation (``GET /api/v1/conversations/<id>``, as the widget
  does while a person is on the way);
- 10 % a feedback vote on an answered bot message (85 % helpful, 15 % not: those go to review).

**The steps.** Open loop (requests scheduled at a fixed rate, latency from the scheduled time,
so a stalled server cannot hide its queue). Capacity is the highest rate with p99 <= 250 ms
and < 1 % errors, found by rates rising by 25 % from 40 req/s (``--probe-seconds`` each) and
one bisection between the last pass and the first failure. Then 50, 70, 80, 90, 110 and 120 %
of it are held for ``--seconds`` each. Per step: errors (5xx, timeouts after 5 s, refused or
reset connections), p50/p95/p99 over all requests, the chat outcomes (answered on the simple or
the complex route, sent to review), BERT calls shed or refused by admission control and the
answers made without BERT (from /metrics), escalations by reason, and the server's CPU (share
of the machine) and memory (RSS and PSS of master and workers).

**Nothing lost.** After the last step: every chat answer the server returned has its customer
and bot message stored with the status it reported; every escalation it reported (chat turns
sent to review, "not helpful" votes) has exactly one review item, and every open review item is
in the Redis queue exactly once (and nothing else is).

``--compare`` instead measures closed-loop throughput on the same mix (4 connections) with the
answer cache off, per process only, and shared through Redis; and with ``--preload`` against
``ops/gunicorn.conf.py``'s default, with the memory (PSS) of 1 and 2 workers.

    python bench/bench_loadtest.py                  # about 8 minutes; table + docs/load.png
    python bench/bench_loadtest.py --compare        # about 6 minutes
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import (  # noqa: E402 - the sibling benchmark's machinery
    HOST,
    ROOT,
    VENV_BIN,
    LoadLoop,
    Measure,
    _Conn,
    _delete_prefix,
    _free_port,
    _json_field,
    _percentile,
    _pg_database,
    _redis_url,
    _server_pids,
    _tierdesk,
    _wait_ready,
)

OUT = ROOT / "bench" / "out" / "loadtest.json"
PLOT = ROOT / "docs" / "load.png"
P99_LIMIT_MS = 250.0
ERROR_LIMIT = 0.01
HOLD_SHARES = (0.5, 0.7, 0.8, 0.9, 1.1, 1.2)
TIMEOUT_S = 5.0
POOL = {"simple": 330, "complex": 180, "out_of_scope": 90}
ZIPF_S = 1.1
CUSTOMERS = 5000
MIX = (("ask", 0.45), ("follow", 0.15), ("poll", 0.30), ("vote", 0.10))
MAX_CONNECTIONS = 512
COMPARE_CONNECTIONS = 4


# ---------------------------------------------------------------- the workload


def question_pool(seed: int = 7) -> list[tuple[str, str]]:
    """(kind, text): simple- and complex-tier examples and out-of-scope questions, shuffled."""
    import csv

    import yaml

    by_tier: dict[str, list[str]] = {"simple": [], "complex": []}
    for path in sorted((ROOT / "intents").glob("*.yaml")):
        for intent in (yaml.safe_load(path.read_text()) or {}).get("intents", []):
            tier = intent.get("tier", "simple")
            by_tier.setdefault(tier, []).extend(str(e) for e in intent.get("examples", []))
    with open(ROOT / "intents" / "out_of_scope" / "test.csv", newline="") as f:
        oos = [row["text"] for row in csv.DictReader(f)]
    rng = random.Random(seed)
    pool = []
    for kind, texts in (("simple", by_tier["simple"]), ("complex", by_tier["complex"])):
        pool += [(kind, t) for t in rng.sample(sorted(set(texts)), POOL[kind])]
    pool += [("out_of_scope", t) for t in rng.sample(sorted(set(oos)), POOL["out_of_scope"])]
    rng.shuffle(pool)  # the Zipf rank of a question does not depend on its kind
    return pool


class Workload:
    """Builds the next request from the mix and learns ids from the answers."""

    def __init__(self, port: int, seed: int) -> None:
        self.port = port
        self.rng = random.Random(seed)
        self.pool = question_pool()
        weights = [1 / (rank + 1) ** ZIPF_S for rank in range(len(self.pool))]
        total = 0.0
        self.cum = []
        for w in weights:
            total += w
            self.cum.append(total)
        self.kinds = [k for k, _ in MIX]
        self.kind_cum = []
        acc = 0.0
        for _, share in MIX:
            acc += share
            self.kind_cum.append(acc)
        self.conversations: list[tuple[str, str, str]] = []  # (id, client, last question)
        self.votable: list[str] = []  # answered bot message ids not voted on yet
        # What the server accepted, for the nothing-lost check.
        self.accepted_turns: list[tuple[str, str, str]] = []  # (conversation, bot message, status)
        self.escalated_votes: list[str] = []  # bot message ids whose vote went to review
        self.answers: dict[str, Counter] = {}  # question -> the articles it was answered with

    def _question(self) -> tuple[str, str]:
        return self.rng.choices(self.pool, cum_weights=self.cum)[0]

    def _client(self) -> str:
        n = self.rng.randrange(CUSTOMERS)
        return f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"

    def _post(self, path: str, body: dict, client: str) -> bytes:
        data = json.dumps(body).encode()
        return (
            f"POST {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\nX-Forwarded-For: {client}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode() + data

    def next(self) -> tuple[str, bytes, object]:
        """(kind, request bytes, context for ``learn``)."""
        kind = self.rng.choices(self.kinds, cum_weights=self.kind_cum)[0]
        if kind in ("follow", "poll") and not self.conversations:
            kind = "ask"
        if kind == "vote" and not self.votable:
            kind = "ask"
        if kind == "ask":
            qkind, text = self._question()
            client = self._client()
            return (
                f"ask:{qkind}",
                self._post("/api/v1/chat", {"message": text}, client),
                (
                    client,
                    text,
                ),
            )
        if kind == "follow":
            index = self.rng.randrange(len(self.conversations))
            conversation, client, last = self.conversations[index]
            if self.rng.random() < 0.25:
                qkind, text = "repeat", last
            else:
                qkind, text = self._question()
            body = {"message": text, "conversation_id": conversation}
            return f"follow:{qkind}", self._post("/api/v1/chat", body, client), (client, text)
        if kind == "poll":
            conversation, client, _ = self.rng.choice(self.conversations)
            request = (
                f"GET /api/v1/conversations/{conversation} HTTP/1.1\r\nHost: {HOST}:{self.port}"
                f"\r\nX-Forwarded-For: {client}\r\n\r\n"
            ).encode()
            return "poll", request, None
        message = self.votable.pop(self.rng.randrange(len(self.votable)))
        helpful = self.rng.random() < 0.85
        return (
            "vote",
            self._post(f"/api/v1/messages/{message}/feedback", {"helpful": helpful}, "10.9.9.9"),
            message,
        )

    def learn(self, kind: str, context, status: int, body: bytes) -> str | None:
        """Record what a 200 answer says; returns the chat outcome (answered:route | pending)."""
        if status != 200:
            return None
        if kind.startswith(("ask", "follow")):
            conversation = _json_field(body, b"conversation_id")
            message = _json_field(body, b"message_id")
            outcome = _json_field(body, b"status")
            route = _json_field(body, b"route")
            if not (conversation and message and outcome):
                return None
            self.accepted_turns.append((conversation, message, outcome))
            if kind.startswith("ask") and len(self.conversations) < 20000:
                self.conversations.append((conversation, context[0], context[1]))
            if outcome == "answered":
                if len(self.votable) < 20000:
                    self.votable.append(message)
                # Keys are sorted: the answer's article is the first slug of the body.
                at = body.find(b'"slug":"')
                if at > 0:
                    slug = body[at + 8 : body.find(b'"', at + 8)].decode()
                    self.answers.setdefault(context[1], Counter())[slug] += 1
                return f"answered:{route}"
            return outcome
        if kind == "vote" and b'"escalated":true' in body:
            self.escalated_votes.append(context)
        return None


# ---------------------------------------------------------------- one step of load


class StepRecorder:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: Counter = Counter()
        self.kinds: Counter = Counter()
        self.outcomes: Counter = Counter()

    def ok(self, latency: float) -> None:
        self.latencies.append(latency)

    def summary(self, elapsed: float, **extra) -> dict:
        lat = self.latencies
        total = len(lat) + sum(self.errors.values())
        return {
            **extra,
            "requests": total,
            "seconds": round(elapsed, 2),
            "rps": round(total / elapsed, 1) if elapsed > 0 else 0.0,
            "errors": dict(self.errors),
            "error_rate": round(sum(self.errors.values()) / total, 5) if total else 0.0,
            "p50_ms": round(_percentile(lat, 50) * 1000, 1),
            "p95_ms": round(_percentile(lat, 95) * 1000, 1),
            "p99_ms": round(_percentile(lat, 99) * 1000, 1),
            "max_ms": round(max(lat) * 1000, 1) if lat else None,
            "kinds": dict(self.kinds),
            "chat_outcomes": dict(self.outcomes),
        }


class MixLoop:
    """Non-blocking connections driven by one selector; each knows what it is waiting for."""

    def __init__(self, port: int, workload: Workload, recorder: StepRecorder) -> None:
        self.port = port
        self.workload = workload
        self.recorder = recorder
        self.selector = selectors.DefaultSelector()
        self.idle: list[_Conn] = []
        self.waiting: dict[int, tuple[_Conn, str, object]] = {}

    def _open(self) -> _Conn | None:
        try:
            sock = socket.create_connection((HOST, self.port), timeout=TIMEOUT_S)
        except OSError:
            return None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = _Conn(sock)
        self.selector.register(sock, selectors.EVENT_READ, conn)
        return conn

    def _drop(self, conn: _Conn) -> None:
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        self.waiting.pop(id(conn), None)

    def _fail(self, kind: str, reason: str) -> None:
        self.recorder.errors[reason] += 1
        self.recorder.kinds[kind] += 1

    def send(self, t0: float) -> bool:
        """Send the next request, counted from ``t0``; False when no connection is free."""
        conn = self.idle.pop() if self.idle else None
        if conn is None:
            if len(self.waiting) >= MAX_CONNECTIONS:
                return False
            conn = self._open()
            if conn is None:
                kind, _, _ = self.workload.next()
                self._fail(kind, "refused")
                return True
        kind, request, context = self.workload.next()
        conn.t0, conn.busy, conn.buf = t0, True, b""
        self.waiting[id(conn)] = (conn, kind, context)
        try:
            sent = conn.sock.send(request)
            if sent < len(request):  # not seen with requests this small; stay correct
                conn.sock.setblocking(True)
                conn.sock.sendall(request[sent:])
                conn.sock.setblocking(False)
        except OSError:
            self._drop(conn)
            self._fail(kind, "refused")
        return True

    def poll(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            conn: _Conn = key.data
            entry = self.waiting.get(id(conn))
            try:
                data = conn.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if entry is None:  # an idle connection, or one the server said it closes: its FIN
                if conn in self.idle:
                    self.idle.remove(conn)
                self._drop(conn)
                continue
            _, kind, context = entry
            if not data:
                self._drop(conn)
                self._fail(kind, "refused")  # reset or closed before an answer
                continue
            conn.buf += data
            finished = LoadLoop._response(conn)
            if finished is None:
                continue
            status, body, keep = finished
            del self.waiting[id(conn)]
            conn.busy = False
            latency = time.perf_counter() - conn.t0
            self.recorder.kinds[kind] += 1
            if status >= 500 or status == 0:
                self.recorder.errors["5xx" if status else "bad_response"] += 1
            elif status >= 400:
                self.recorder.errors[f"{status}"] += 1
            else:
                self.recorder.ok(latency)
                outcome = self.workload.learn(kind, context, status, body)
                if outcome:
                    self.recorder.outcomes[outcome] += 1
            if keep:
                self.idle.append(conn)
            # else: "Connection: close": closed on the server's FIN (above), so that the server,
            # not this process, keeps the TIME_WAIT and no ephemeral ports run out

    def expire(self, now: float) -> None:
        for conn, kind, _ in list(self.waiting.values()):
            if now - conn.t0 > TIMEOUT_S:
                self._drop(conn)
                self._fail(kind, "timeout")

    def drain(self) -> None:
        deadline = time.perf_counter() + TIMEOUT_S + 1
        while self.waiting and time.perf_counter() < deadline:
            self.poll(0.05)
            self.expire(time.perf_counter())
        for conn, kind, _ in list(self.waiting.values()):
            self._drop(conn)
            self._fail(kind, "timeout")
        for key in list(self.selector.get_map().values()):
            self._drop(key.data)
        self.idle.clear()
        self.selector.close()


def open_loop(port: int, workload: Workload, rate: float, seconds: float, pids) -> dict:
    recorder = StepRecorder()
    loop = MixLoop(port, workload, recorder)
    before = scrape(port)
    measure = Measure(list(pids))
    total = int(rate * seconds)
    begin = time.perf_counter() + 0.05
    sent = 0
    last_check = begin
    while sent < total:
        now = time.perf_counter()
        while sent < total and begin + sent / rate <= now:
            if not loop.send(begin + sent / rate):
                break  # every connection busy: the due request waits, and the wait counts
            sent += 1
        due = begin + sent / rate
        loop.poll(max(0.0, min(0.01, due - time.perf_counter())))
        if now - last_check > 0.25:
            loop.expire(now)
            last_check = now
    loop.drain()
    elapsed = time.perf_counter() - begin
    summary = recorder.summary(elapsed, target_rate=round(rate, 1))
    summary.update(measure.result(summary["requests"]))
    summary["memory"] = server_memory(pids)
    summary["server"] = metric_deltas(before, scrape(port))
    return summary


def closed_loop(port: int, workload: Workload, connections: int, seconds: float, pids) -> dict:
    recorder = StepRecorder()
    loop = MixLoop(port, workload, recorder)
    measure = Measure(list(pids))
    begin = time.perf_counter()
    stop = begin + seconds
    while time.perf_counter() < stop:
        while len(loop.waiting) < connections and time.perf_counter() < stop:
            loop.send(time.perf_counter())
        loop.poll(0.01)
        loop.expire(time.perf_counter())
    loop.drain()
    elapsed = time.perf_counter() - begin
    summary = recorder.summary(elapsed, connections=connections)
    summary.update(measure.result(summary["requests"]))
    summary["memory"] = server_memory(pids)
    return summary


# ---------------------------------------------------------------- server-side figures


def scrape(port: int) -> dict[tuple, float]:
    """The counters of /metrics that the table reports, by (name, labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        return {}
    finally:
        conn.close()
    wanted = (
        "tierdesk_bert_admission_total",
        "tierdesk_degraded_total",
        "tierdesk_escalations_total",
        "tierdesk_answer_cache_total",
        "tierdesk_route_decisions_total",
    )
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "tierdesk_worker_busy_share":
                out[("busy", sample.labels.get("pid", ""))] = sample.value
            if sample.name in wanted:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def metric_deltas(before: dict, after: dict) -> dict:
    def total(name: str, **match) -> float:
        return sum(
            v - before.get(k, 0.0)
            for k, v in after.items()
            if k[0] == name and all(dict(k[1]).get(a) == b for a, b in match.items())
        )

    decisions = total("tierdesk_route_decisions_total")
    escalations = {}
    for key in after:
        if key[0] == "tierdesk_escalations_total":
            reason = dict(key[1])["reason"]
            escalations[reason] = round(total("tierdesk_escalations_total", reason=reason))
    return {
        "busy_share": sorted(round(v, 3) for k, v in after.items() if k[0] == "busy"),
        "decisions": round(decisions),
        "bert_admitted": round(total("tierdesk_bert_admission_total", outcome="admitted")),
        "bert_refused": {
            r: round(total("tierdesk_bert_admission_total", outcome="refused", reason=r))
            for r in ("shed", "budget", "busy")
        },
        "without_bert": {
            result: round(total("tierdesk_degraded_total", result=result))
            for result in ("fast_answer", "escalated")
        },
        "cache": {
            r: round(total("tierdesk_answer_cache_total", result=r))
            for r in ("hit", "shared_hit", "miss")
        },
        "escalations": escalations,
    }


def server_memory(pids) -> dict:
    """RSS and PSS (shared pages divided among the processes that share them), MiB."""
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return {"rss_mib": round(rss / 1024, 1), "pss_mib": round(pss / 1024, 1)}


# ---------------------------------------------------------------- the generator process


def passes(step: dict) -> bool:
    return step["p99_ms"] <= P99_LIMIT_MS and step["error_rate"] < ERROR_LIMIT


def find_capacity(port, workload, pids, probe_seconds: float) -> tuple[float, list[dict]]:
    probes = []
    rate, best, failed = 40.0, None, None
    while rate < 5000:
        step = open_loop(port, workload, rate, probe_seconds, pids)
        probes.append(step)
        _log_step("probe", step)
        if not passes(step):
            failed = rate
            break
        best = rate
        rate *= 1.25
    if best is None:
        return 0.0, probes
    if failed is not None:
        mid = (best + failed) / 2
        step = open_loop(port, workload, mid, probe_seconds, pids)
        probes.append(step)
        _log_step("probe", step)
        if passes(step):
            best = mid
    return best, probes


def _log_step(label: str, step: dict) -> None:
    server = step.get("server", {})
    print(
        f"  {label} {step.get('target_rate', step.get('connections'))}: "
        f"{step['rps']:.0f} req/s p50 {step['p50_ms']} p99 {step['p99_ms']} ms "
        f"errors {step['errors']} outcomes {step['chat_outcomes']} "
        f"refused {server.get('bert_refused')} busy {server.get('busy_share')} "
        f"cpu {step.get('server_cpu_share')}",
        file=sys.stderr,
        flush=True,
    )


def generate(args) -> dict:
    pids = _server_pids(args.server_pid) if args.server_pid else []
    workload = Workload(args.generate, seed=11)
    if args.mode == "compare":
        closed_loop(args.generate, workload, 4, 3.0, pids)  # warm the server and the ids
        # Four connections keep both workers busy without a queue that admission control
        # would answer by shedding BERT (which would change the answers compared).
        result = closed_loop(args.generate, workload, COMPARE_CONNECTIONS, args.seconds, pids)
        _log_step("closed loop", result)
        answers = {q: c.most_common(1)[0][0] for q, c in workload.answers.items()}
        return {"closed_loop": result, "pids": len(pids), "answers": answers}
    open_loop(args.generate, workload, 30, 3.0, pids)  # warm-up: conversations to poll
    if args.mode.startswith("rate="):  # one open-loop step at a given rate (diagnostics)
        step = open_loop(args.generate, workload, float(args.mode[5:]), args.seconds, pids)
        _log_step("rate", step)
        return {"step": step}
    capacity, probes = find_capacity(args.generate, workload, pids, args.probe_seconds)
    holds = {}
    for share in HOLD_SHARES:
        step = open_loop(args.generate, workload, share * capacity, args.seconds, pids)
        holds[f"{round(share * 100)}%"] = step
        _log_step(f"hold {round(share * 100)}%", step)
    return {
        "capacity_rps": round(capacity, 1),
        "probes": probes,
        "holds": holds,
        "accepted_turns": workload.accepted_turns,
        "escalated_votes": workload.escalated_votes,
    }


# ---------------------------------------------------------------- nothing lost


def check_nothing_lost(db_url: str, redis_url: str | None, prefix: str, result: dict) -> dict:
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    with engine.connect() as conn:
        bots = {
            row.id: (row.conversation_id, row.status, row.in_reply_to)
            for row in conn.execute(
                text(
                    "SELECT id, conversation_id, status, in_reply_to FROM messages WHERE role='bot'"
                )
            )
        }
        customers = {
            row.id for row in conn.execute(text("SELECT id FROM messages WHERE role='customer'"))
        }
        items = list(conn.execute(text("SELECT id, message_id, status, reason FROM review_items")))
    engine.dispose()
    turns = result["accepted_turns"]
    missing = [m for _, m, _ in turns if m not in bots]
    wrong_status = [m for _, m, s in turns if m in bots and bots[m][1] != s]
    wrong_conversation = [m for c, m, _ in turns if m in bots and bots[m][0] != c]
    no_question = [m for _, m, _ in turns if m in bots and bots[m][2] not in customers]
    per_message = Counter(row.message_id for row in items)
    escalated_questions = [bots[m][2] for _, m, s in turns if s == "pending_review" and m in bots]
    not_once = [q for q in escalated_questions if per_message[q] < 1]
    votes_without_item = [
        m
        for m in result["escalated_votes"]
        if m in bots
        and not any(row.message_id == bots[m][2] and row.reason == "not_helpful" for row in items)
    ]
    duplicates = [q for q, n in per_message.items() if n > 1]
    open_ids = {str(row.id) for row in items if row.status == "pending"}
    queued: list[str] = []
    if redis_url:
        import redis

        client = redis.Redis.from_url(redis_url, decode_responses=True)
        queued = client.zrange(f"{prefix}review:queue", 0, -1)
        leased = client.zrange(f"{prefix}review:leases", 0, -1)
        client.close()
    else:
        leased = []
    queued_set = set(queued)
    report = {
        "accepted_turns": len(turns),
        "escalated_turns": len(escalated_questions),
        "escalated_votes": len(result["escalated_votes"]),
        "review_items": len(items),
        "open_review_items": len(open_ids),
        "queued_in_redis": len(queued),
        "missing_messages": len(missing),
        "wrong_status": len(wrong_status),
        "wrong_conversation": len(wrong_conversation),
        "bot_without_question": len(no_question),
        "escalations_without_item": len(not_once) + len(votes_without_item),
        "questions_with_two_items": len(duplicates),
        "open_items_not_queued": len(open_ids - queued_set),
        "queued_not_open": len(queued_set - open_ids),
        "queued_twice": len(queued) - len(queued_set),
        "leased": len(leased),
    }
    report["nothing_lost"] = all(
        report[k] == 0
        for k in (
            "missing_messages",
            "wrong_status",
            "wrong_conversation",
            "bot_without_question",
            "escalations_without_item",
            "questions_with_two_items",
            "open_items_not_queued",
            "queued_not_open",
            "queued_twice",
        )
    )
    return report


# ---------------------------------------------------------------- the server


def run(
    args, *, cache_size=2048, shared=True, preload=False, workers=2, check=True, mode="steps"
) -> dict:
    work = Path(tempfile.mkdtemp(prefix="tierdesk-loadtest-"))
    drop_db = None
    if args.db == "pg":
        db_url, drop_db = _pg_database()
    else:
        db_url = f"sqlite:///{work / 'bench.db'}"
    prefix = f"tdload:{uuid.uuid4().hex[:8]}:"
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "TIERDESK_VAR_DIR": str(work / "var"),
        "TIERDESK_MODELS_DIR": os.environ.get("TIERDESK_MODELS_DIR", str(ROOT / "models")),
        "TIERDESK_RATE_LIMIT": "off",
        "TIERDESK_TRUSTED_PROXIES": "1",
        "TIERDESK_REDIS_PREFIX": prefix,
        "TIERDESK_ANSWER_CACHE_SIZE": str(cache_size),
        "TIERDESK_ANSWER_CACHE_SHARED": "1" if shared else "0",
        "TIERDESK_PRELOAD": "1" if preload else "0",
        "TIERDESK_WORKERS": str(workers),
        "TIERDESK_LOG_LEVEL": "WARNING",
        "SECRET_KEY": "bench",
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
        cmd = [str(VENV_BIN / "gunicorn"), "-c", str(ROOT / "ops" / "gunicorn.conf.py")]
        cmd += ["--bind", f"{HOST}:{port}", "--access-logfile", "/dev/null", "app:create_app()"]
        server = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        ready = _wait_ready(port, server)
        time.sleep(2)  # every worker warm (each loads after the fork unless preloaded)
        memory_idle = server_memory(_server_pids(server.pid))
        gen = [sys.executable, __file__, "--generate", str(port), "--mode", mode]
        gen += ["--seconds", str(args.seconds), "--probe-seconds", str(args.probe_seconds)]
        gen += ["--server-pid", str(server.pid)]
        generator = subprocess.run(gen, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        if generator.returncode != 0:
            sys.exit("load generator failed")
        result = json.loads(generator.stdout)
        result["readyz"] = ready
        result["memory_idle"] = memory_idle
        if check:
            time.sleep(1)
            result["nothing_lost"] = check_nothing_lost(db_url, redis_url, prefix, result)
        result.pop("accepted_turns", None)
        result.pop("escalated_votes", None)
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


# ---------------------------------------------------------------- report


def step_table(result: dict) -> list[str]:
    cap = result["capacity_rps"]
    lines = [
        f"Capacity (p99 <= {P99_LIMIT_MS:.0f} ms, errors < 1 %): **{cap:.0f} req/s**.",
        "",
        "| load | offered / completed (req/s, incl. the drain) | errors (5xx, timeout, refused) | p50 / p95 / p99 (ms) "
        "| chat: simple / complex / review | BERT refused: share of asks (shed, budget, busy) "
        "| answered without BERT / escalated so | escalations by reason | server CPU | "
        "memory RSS / PSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, s in result["holds"].items():
        errors = s["errors"]
        err = (
            f"{s['error_rate']:.2%} ({errors.get('5xx', 0)}, {errors.get('timeout', 0)}, "
            f"{errors.get('refused', 0)})"
        )
        chat = s["chat_outcomes"]
        total = sum(chat.values()) or 1
        mix = " / ".join(
            f"{chat.get(k, 0) / total:.0%}"
            for k in ("answered:simple", "answered:complex", "pending_review")
        )
        server = s["server"]
        refused = server["bert_refused"]
        shed = (
            f"{_refused_share(server):.0%} ({refused['shed']}, {refused['budget']}, "
            f"{refused['busy']})"
        )
        without = server["without_bert"]
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(server["escalations"].items()) if v)
        lines.append(
            f"| {label} | {s['target_rate']:.0f} / {s['rps']:.0f} | {err} "
            f"| {s['p50_ms']:.0f} / {s['p95_ms']:.0f} / {s['p99_ms']:.0f} | {mix} | {shed} "
            f"| {without['fast_answer']} / {without['escalated']} | {reasons} "
            f"| {s.get('server_cpu_share', 0):.0%} | {s['memory']['rss_mib']:.0f} / "
            f"{s['memory']['pss_mib']:.0f} |"
        )
    return lines


def _refused_share(server: dict) -> float:
    refused = sum(server["bert_refused"].values())
    asked = refused + server["bert_admitted"]
    return refused / asked if asked else 0.0


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    holds = result["holds"]
    labels = list(holds)
    x = range(len(labels))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, style in (("p50_ms", "o-"), ("p95_ms", "s-"), ("p99_ms", "^-")):
        ax1.plot(x, [holds[k][key] for k in labels], style, label=key.replace("_ms", ""))
    ax1.axhline(P99_LIMIT_MS, color="grey", linestyle="--", linewidth=1, label="250 ms")
    ax1.set_xticks(list(x), labels)
    ax1.set_xlabel(f"share of capacity ({result['capacity_rps']:.0f} req/s)")
    ax1.set_ylabel("latency (ms)")
    ax1.set_yscale("log")
    ax1.legend()
    ax1.set_title("latency per step")
    err = [holds[k]["error_rate"] * 100 for k in labels]
    refused = [100 * _refused_share(holds[k]["server"]) for k in labels]
    complex_share = [
        100
        * holds[k]["chat_outcomes"].get("answered:complex", 0)
        / (sum(holds[k]["chat_outcomes"].values()) or 1)
        for k in labels
    ]
    ax2.plot(x, err, "o-", label="errors (% of requests)")
    ax2.plot(x, refused, "s-", label="BERT refused (% of asks for it)")
    ax2.plot(x, complex_share, "^-", label="complex route (% of chat, cache hits incl.)")
    ax2.set_xticks(list(x), labels)
    ax2.set_xlabel("share of capacity")
    ax2.set_ylabel("%")
    ax2.legend()
    ax2.set_title("errors, shedding, route mix")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def compare(args) -> dict:
    runs = {}
    for label, kwargs in (
        ("cache off", {"cache_size": 0}),
        ("cache per process", {"shared": False}),
        ("cache shared (Redis)", {}),
        ("preload, 2 workers", {"preload": True}),
        ("1 worker", {"workers": 1}),
        ("preload, 1 worker", {"preload": True, "workers": 1}),
    ):
        print(f"{label}:", file=sys.stderr, flush=True)
        runs[label] = run(args, mode="compare", check=False, **kwargs)
    return runs


def same_answers(a: dict, b: dict) -> str:
    common = set(a) & set(b)
    same = sum(a[q] == b[q] for q in common)
    return f"{same}/{len(common)}"


def compare_table(runs: dict) -> list[str]:
    base = runs["cache off"]["closed_loop"]["rps"] or 1
    conf = runs["cache shared (Redis)"]["closed_loop"]["rps"] or 1
    lines = [
        f"| server (2 workers unless said) | req/s, closed loop, {COMPARE_CONNECTIONS} connections "
        "| vs cache off | vs the default (shared cache, no preload) | p50 / p99 (ms) | errors "
        "| same article as cache off | memory idle / after PSS (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r in runs.items():
        c = r["closed_loop"]
        lines.append(
            f"| {label} | {c['rps']:.0f} | {c['rps'] / base:.2f}x | {c['rps'] / conf:.2f}x "
            f"| {c['p50_ms']:.0f} / {c['p99_ms']:.0f} | {c['error_rate']:.2%} "
            f"| {same_answers(runs['cache off']['answers'], r['answers'])} "
            f"| {r['memory_idle']['pss_mib']:.0f} / {c['memory']['pss_mib']:.0f} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--seconds", type=float, default=20.0, help="per held step")
    parser.add_argument("--probe-seconds", type=float, default=8.0, help="per capacity probe")
    parser.add_argument("--compare", action="store_true", help="cache and --preload comparison")
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument(
        "--from-json", action="store_true", help="print the table and plot of the last run"
    )
    parser.add_argument("--generate", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="steps", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        print(json.dumps(generate(args)))
        return 0
    models = Path(os.environ.get("TIERDESK_MODELS_DIR", ROOT / "models"))
    if not (models / "current").exists():
        print(f"no trained models in {models}: run `tierdesk train` first", file=sys.stderr)
        return 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    if args.compare:
        runs = compare(args)
        out = OUT.with_name("loadtest_compare.json")
        out.write_text(json.dumps({"db": args.db, "runs": runs}, indent=2))
        print("\n".join(compare_table(runs)))
        print(f"\nWrote {out.relative_to(ROOT)}")
        return 0
    if args.from_json:
        saved = json.loads(OUT.read_text())
        result, args.db = saved["result"], saved["db"]
    else:
        result = run(args)
        OUT.write_text(json.dumps({"db": args.db, "result": result}, indent=2))
    plot(result, args.plot)
    print(f"#### Stepped load test, gunicorn 2 workers, {args.db}, realistic mix")
    print()
    print("\n".join(step_table(result)))
    print()
    print(f"Nothing lost: {json.dumps(result['nothing_lost'])}")
    print(f"\nWrote {OUT.relative_to(ROOT)} and {args.plot}")
    return 0 if result["nothing_lost"]["nothing_lost"] else 2


if __name__ == "__main__":
    sys.exit(main())
