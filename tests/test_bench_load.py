"""The load generator of bench/bench_load.py: response parsing and both loops against a real
HTTP server on loopback (keep-alive and one connection per request)."""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_load.py"
_spec = importlib.util.spec_from_file_location("bench_load", _PATH)
bench_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_load)


def _compact(obj) -> bytes:  # what Flask's jsonify writes outside debug mode
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def test_json_field_reads_top_level_keys_only():
    body = _compact(
        {
            "answer": {"text": 'say "status":"pending_review" and "route":"bert"', "html": ""},
            "route": "simple",
            "status": "answered",
            "suggestions": [{"slug": "a", "title": "b"}],
        }
    )
    assert bench_load._json_field(body, b"status") == "answered"
    assert bench_load._json_field(body, b"route") == "simple"
    assert bench_load._json_field(_compact({"route": None}), b"route") is None
    assert bench_load._json_field(b"not json", b"status") is None


def test_recorder_counts_errors_and_outcomes():
    rec = bench_load.Recorder()
    rec.add(0.01, 200, _compact({"status": "answered", "route": "simple"}))
    rec.add(0.02, 200, _compact({"status": "pending_review", "route": None}))
    rec.add(0.03, 500, b"{}")
    rec.add(0.04, 200, b"<html>")
    assert rec.errors == 2
    assert rec.routes == {"answered:simple": 1, "pending_review": 1}
    assert rec.latencies == [0.01, 0.02]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    close_each = False

    def do_POST(self):  # noqa: N802 - http.server's naming
        length = int(self.headers["Content-Length"])
        message = json.loads(self.rfile.read(length))["message"]
        body = _compact({"status": "answered", "route": "simple", "echo": message})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_each:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(params=[False, True], ids=["keep-alive", "close"])
def server_port(request):
    handler = type("Handler", (_Handler,), {"close_each": request.param})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_closed_and_open_loop_against_a_real_server(server_port):
    questions = ["how do I top up?", 'emoji 👍 and "quotes"']
    closed = bench_load.closed_loop(server_port, questions, 2, 0.5)
    assert closed["errors"] == 0 and closed["requests"] > 10
    assert closed["outcomes"] == {"answered:simple": closed["requests"]}
    assert closed["generator_cpu_s"] >= 0

    opened = bench_load.open_loop(server_port, questions, 40.0, 0.5)
    assert opened["errors"] == 0
    assert opened["requests"] == 20  # every scheduled request was sent and answered
    assert opened["p99_ms"] < 1000
