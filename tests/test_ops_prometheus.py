"""Real Prometheus (Debian's ``prometheus`` and ``promtool``, installed by ``make
prometheus-deps``) scraping a real multi-worker tierdesk: every PromQL expression of the Grafana
dashboard (ops/grafana/tierdesk.json) and of the alert rules (ops/alerts.yml) parses and returns
data, and ``promtool check rules`` passes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from ops_servers import Server, free_port

from app.config import PROJECT_ROOT

OPS = PROJECT_ROOT / "ops"
DASHBOARD = OPS / "grafana" / "tierdesk.json"
ALERTS = OPS / "alerts.yml"
# An alert is "expression comparison threshold": the signal is what must return data.
THRESHOLD = re.compile(r"\s*(==|!=|>=|<=|>|<)\s*[0-9.e+-]+\s*$")


def _tools() -> tuple[str, str]:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        pytest.skip("Debian's prometheus/promtool are not installed (make prometheus-deps as root)")
    return prometheus, promtool


def dashboard_expressions() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels for t in p["targets"]]


def alert_expressions() -> list[tuple[str, str]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [(r["alert"], " ".join(r["expr"].split())) for g in groups for r in g["rules"]]


def test_promtool_accepts_the_alert_rules():
    _, promtool = _tools()
    result = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_expressions())} rules found" in result.stdout


def test_the_dashboard_covers_what_an_operator_watches():
    titles = " | ".join(t for t, _ in dashboard_expressions()).lower()
    for topic in (
        "route mix",
        "model switch",
        "latency per tier",
        "escalation rate by reason",
        "review backlog",
        "oldest review wait",
        "cache hit rate",
        "degraded and shed",
        "active model version",
        "cpu per worker",
        "memory per worker",
        "thumbs-down",
        "mean calibrated confidence",
    ):
        assert topic in titles, topic


def _query(port: int, expr: str) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:  # 400 with the parse error
        return json.loads(exc.read())


def _traffic(server: Server) -> None:
    """A bit of everything the dashboard shows: answers on both routes, escalations, votes,
    polls, BERT shed under pressure (every worker counts as saturated in this server)."""
    questions = [
        "my card has not arrived yet",
        "I want to dispute a card payment",
        "what is the exchange rate for a transfer",
        "write me a poem about autumn",
        "my top up failed",
    ]
    for question in questions:
        status, first = server.json("POST", "/api/v1/chat", {"message": question})
        assert status == 200, first
        conversation = first["conversation_id"]
        # Asked twice: high priority, BERT is used although the worker is saturated.
        status, again = server.json(
            "POST", "/api/v1/chat", {"message": question, "conversation_id": conversation}
        )
        assert status == 200, again
        for turn in (first, again):
            if turn["status"] == "answered":
                status, _ = server.json(
                    "POST", f"/api/v1/messages/{turn['message_id']}/feedback", {"helpful": False}
                )
                assert status == 200
        assert server.request("GET", f"/api/v1/conversations/{conversation}")[0] == 200
        # Once more in a new conversation: from the cache (this worker's or, through Redis,
        # the other's) when the repeat's answer went out.
        assert server.json("POST", "/api/v1/chat", {"message": question})[0] == 200
    status, _ = server.json("POST", "/api/v1/chat", {"message": "talk to a person"})
    assert status == 200


@pytest.mark.slow
def test_prometheus_scrapes_tierdesk_and_every_expression_returns_data(
    tmp_path, db_url, redis_url, redis_prefix, redis_client, nlp_content, trained_models_dir
):
    from fixtures_nlp import import_content, private_models_dir

    prometheus, _ = _tools()
    import_content(db_url, *nlp_content)
    models = private_models_dir(trained_models_dir, tmp_path / "models")
    server = Server(
        db_url=db_url,
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        models_dir=models,
        var_dir=tmp_path / "var",
        workers=2,
        # Pressure 1 from the smallest busy share: first questions are shed, repeats are not.
        env={"TIERDESK_BERT_SHED_BUSY_LOW": "0.0", "TIERDESK_BERT_SHED_BUSY_HIGH": "0.0001"},
    )
    prom_port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(ALERTS)],
                "scrape_configs": [
                    {
                        "job_name": "tierdesk",
                        "metrics_path": "/metrics",
                        "static_configs": [{"targets": [f"127.0.0.1:{server.port}"]}],
                    }
                ],
            }
        )
    )
    with server:
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # scraped at least once before the traffic
                try:
                    up = _query(prom_port, 'up{job="tierdesk"}')
                    if (
                        up.get("data", {}).get("result")
                        and up["data"]["result"][0]["value"][1] == "1"
                    ):
                        break
                except OSError:
                    pass
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                time.sleep(0.5)
            else:
                pytest.fail("Prometheus never scraped tierdesk")
            _traffic(server)
            time.sleep(4)  # a few scrapes after the traffic
            expressions = dashboard_expressions() + [
                (name, THRESHOLD.sub("", expr)) for name, expr in alert_expressions()
            ]
            empty, broken = [], []
            for name, expr in expressions:
                answer = _query(prom_port, expr)
                if answer.get("status") != "success":
                    broken.append((name, expr, answer.get("error")))
                elif not answer["data"]["result"]:
                    empty.append((name, expr))
            assert not broken, broken
            assert not empty, empty
            with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/rules") as r:
                rules = json.loads(r.read())["data"]["groups"][0]["rules"]
            assert {rule["health"] for rule in rules} == {"ok"}, rules
            assert len(rules) == len(alert_expressions())
        finally:
            proc.terminate()
            proc.wait(timeout=30)
