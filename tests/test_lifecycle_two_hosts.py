"""The acceptance test of the model lifecycle: two real servers (``tierdesk serve`` processes)
with models folders of their own and no shared disk, one PostgreSQL database, one Redis.

train v2 (``tierdesk train --candidate``) -> shadow -> canary 10% -> promote -> rollback: at
every step both hosts follow within seconds without a restart (the second host fetches and
verifies the artifacts from the registry), no chat request fails, and the step is visible in
``tierdesk models list``, the per-version metrics and the console's models page.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from fixtures_nlp import import_content
from sqlalchemy import select

from app.config import PROJECT_ROOT
from app.db import dispose_engine, session_scope
from app.models import Message, ShadowComparison
from app.nlp import registry
from app.nlp.registry import conversation_bucket
from app.nlp.store import current_version, digest, version_folder
from app.vocab import ModelStatus

QUESTIONS = (
    "my card has not arrived yet",
    "how do I change my pin",
    "what exchange rate do you use",
    "there is a payment I did not make",
    "when do you open on saturday",
    "I forgot my password",
)
FOLLOW_SECONDS = 90  # what "within seconds" may take on a loaded 2-core machine, at most


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Host:
    """One ``tierdesk serve`` process with its own models folder and var folder."""

    def __init__(self, name: str, folder: Path, env: dict) -> None:
        self.name, self.models = name, folder / "models"
        self.models.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = (folder / "server.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from app.cli import main; main()", "serve"],
            cwd=PROJECT_ROOT,
            env={
                **env,
                "TIERDESK_MODELS_DIR": str(self.models),
                "TIERDESK_VAR_DIR": str(folder / "var"),
                "TIERDESK_PORT": str(self.port),
            },
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def serving(self) -> dict | None:
        try:
            response = requests.get(f"{self.base}/readyz", timeout=5)
        except requests.RequestException:
            return None
        return response.json().get("serving") if response.status_code == 200 else None

    def chat(self, message: str, conversation_id: str | None = None) -> dict:
        body = {
            "message": message,
            **({"conversation_id": conversation_id} if conversation_id else {}),
        }
        response = requests.post(f"{self.base}/api/v1/chat", json=body, timeout=30)
        assert response.status_code == 200, (self.name, response.status_code, response.text)
        reply = response.json()
        assert reply["status"] in ("answered", "pending_review"), reply
        return reply

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _wait_for(hosts, check, what: str, timeout: float = FOLLOW_SECONDS) -> float:
    """Seconds until ``check(serving)`` holds on every host."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        states = [h.serving() for h in hosts]
        if all(s is not None and check(s) for s in states):
            return time.monotonic() - started
        for h in hosts:
            assert h.proc.poll() is None, f"{h.name} exited: see {h.log.name}"
        time.sleep(0.5)
    raise AssertionError(f"not every host {what} within {timeout}s: {states}")


def _answered_by(url: str, message_id: str) -> str:
    with session_scope(url) as session:
        return session.get(Message, message_id).trace["versions"]["models"]


@pytest.mark.slow
def test_full_cycle_on_two_hosts(
    tmp_path, pg_url, redis_url, redis_client, redis_prefix, nlp_content, trained_models_dir
):
    from app import create_app
    from app.cli import main

    url = pg_url
    intents_dir, kb_dir = nlp_content
    import_content(url, intents_dir, kb_dir)
    # Host A has v1 on its disk, as `tierdesk train` left it; host B has nothing.
    a_dir, b_dir = tmp_path / "host-a", tmp_path / "host-b"
    v1 = current_version(trained_models_dir)
    shutil.copytree(trained_models_dir, a_dir / "models", symlinks=False)
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_ROOT),
        "DATABASE_URL": url,
        "REDIS_URL": redis_url,
        "TIERDESK_REDIS_PREFIX": redis_prefix,
        "SECRET_KEY": "two-hosts",
        "TIERDESK_RATE_LIMIT": "off",
        "TIERDESK_INTENTS_DIR": str(intents_dir),
        "TIERDESK_KB_DIR": str(kb_dir),
        "TIERDESK_LOAD_MODELS": "1",
        "TIERDESK_CANARY_CHECK_SECONDS": "3600",  # this test rolls back by hand
        "TIERDESK_BERT_FINETUNE_EPOCHS": "0",
        "OMP_NUM_THREADS": "1",
    }
    cli_app = create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": url,
            "REDIS_CLIENT": redis_client,
            "REDIS_PREFIX": redis_prefix,
            "VAR_DIR": a_dir / "var",
            "MODELS_DIR": a_dir / "models",
            "INTENTS_DIR": intents_dir,
            "KB_DIR": kb_dir,
            "LOAD_MODELS": False,
            "SECRET_KEY": "two-hosts",
            "BERT_FINETUNE_EPOCHS": 0,
        }
    )
    runner = cli_app.test_cli_runner()

    def tierdesk(*args) -> str:
        result = runner.invoke(main, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    with session_scope(url) as session:
        registry.register(session, a_dir / "models", v1, status=ModelStatus.ACTIVE)
    hosts = [Host("A", a_dir, env), Host("B", b_dir, env)]
    try:
        _wait_for(hosts, lambda s: s["active"] == v1, "served v1", timeout=300)
        # B fetched v1 from the registry's store and verified it
        assert digest(version_folder(b_dir / "models", v1)) == digest(
            version_folder(a_dir / "models", v1)
        )
        for host in hosts:
            assert _answered_by(url, host.chat(QUESTIONS[0])["message_id"]) == v1

        # 1. train v2 as a candidate on host A: nobody is answered by it yet
        out = tierdesk("train", "--candidate", "--quiet")
        v2 = out.strip().splitlines()[-1].split()[1]
        assert v2 != v1 and f"{v2}  candidate" in tierdesk("models", "list")
        for host in hosts:
            assert _answered_by(url, host.chat(QUESTIONS[1])["message_id"]) == v1

        # 2. shadow: every question is answered again by v2 in the background, on both hosts
        tierdesk("models", "promote", v2, "--to", "shadow", "--share", "1.0")
        shadow_s = _wait_for(hosts, lambda s: (s["shadow"] or {}).get("version") == v2, "shadowed")
        for host in hosts:
            for question in QUESTIONS:
                assert _answered_by(url, host.chat(question)["message_id"]) == v1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with session_scope(url) as session:
                compared = session.scalars(
                    select(ShadowComparison).where(ShadowComparison.version == v2)
                ).all()
            if len(compared) >= 2 * len(QUESTIONS):
                break
            time.sleep(0.5)
        assert len(compared) >= 2 * len(QUESTIONS)
        assert "shadow 100%" in tierdesk("models", "list")

        # 3. canary on 10% of conversations, sticky
        tierdesk("models", "promote", v2, "--share", "0.1")
        canary_s = _wait_for(hosts, lambda s: (s["canary"] or {}).get("version") == v2, "canaried")
        served = {v1: 0, v2: 0}
        for i in range(40):
            host = hosts[i % 2]
            first = host.chat(QUESTIONS[i % len(QUESTIONS)])
            cid = first["conversation_id"]
            second = hosts[(i + 1) % 2].chat(QUESTIONS[(i + 1) % len(QUESTIONS)], cid)
            expected = v2 if conversation_bucket(cid) < 0.1 else v1
            assert _answered_by(url, first["message_id"]) == expected
            assert _answered_by(url, second["message_id"]) == expected  # sticky across hosts
            served[expected] += 1
        assert served[v1] > served[v2] and "canary 10%" in tierdesk("models", "list")

        # 4. promote: v2 answers everyone on both hosts
        tierdesk("models", "promote", v2)
        promote_s = _wait_for(hosts, lambda s: s["active"] == v2 and not s["canary"], "promoted")
        for host in hosts:
            assert _answered_by(url, host.chat(QUESTIONS[2])["message_id"]) == v2
        assert digest(version_folder(b_dir / "models", v2)) == digest(
            version_folder(a_dir / "models", v2)
        )

        # 5. rollback: v1 again everywhere
        assert f"rolled back: {v1} is active" in tierdesk("models", "rollback")
        rollback_s = _wait_for(hosts, lambda s: s["active"] == v1, "rolled back")
        for host in hosts:
            assert _answered_by(url, host.chat(QUESTIONS[3])["message_id"]) == v1

        listed = tierdesk("models", "list")
        assert f"* {v1}  active" in listed and f"  {v2}  retired" in listed
        shown = tierdesk("models", "show", v2)
        for step in (
            "- -> candidate",
            "candidate -> shadow 100%",
            "shadow -> canary 10%",
            "canary -> active",
            "active -> retired   by",
        ):
            assert step in shown, shown
        live = shown.split("live        ")[1].split()[0]
        assert int(live) > 0  # v2's answers as canary and active are counted

        from fixtures_review import login

        from app.review.auth import add_reviewer

        with session_scope(url) as session:
            add_reviewer(session, "lead@example.com", "correct horse battery")
        console = cli_app.test_client()
        assert login(console, "lead@example.com", "correct horse battery").status_code == 302
        page = console.get("/console/models").get_data(as_text=True)
        assert f"<code>{v2}</code> shadow → canary 10.0%" in page
        assert f"<code>{v2}</code> active → retired" in page
        page = console.get(f"/console/models?shadow={v2}").get_data(as_text=True)
        assert "compared questions" in page
        print(
            f"hosts followed: shadow {shadow_s:.1f}s, canary {canary_s:.1f}s, promote "
            f"{promote_s:.1f}s, rollback {rollback_s:.1f}s"
        )
    finally:
        for host in hosts:
            host.stop()
        dispose_engine(url)
