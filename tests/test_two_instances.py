"""Two tierdesk servers (gunicorn, on two ports) sharing one PostgreSQL database and one Redis:
a conversation started on one continues on the other, an escalation made through one is
claimed in the other's console and the reply reaches the customer, and a KB import is seen by
both within seconds."""

from __future__ import annotations

import http.cookiejar
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from urllib.parse import quote

import pytest
from ops_servers import Server

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
PARROT = """---
title: Can I bring my parrot to the branch?
slug: parrot-policy
questions:
  - Are parrots allowed in your branches?
  - May I come in with my pet bird?
---
Assistance animals only, sorry: parrots wait at home.
"""


PARROT_QUESTION = "Are parrots allowed in your branches?"


def _offers(turn: dict, slug: str) -> bool:
    article = (turn.get("answer") or {}).get("article") or {}
    return article.get("slug") == slug or any(s["slug"] == slug for s in turn["suggestions"])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 302 is an answer to look at, not to follow


class Browser:
    """A reviewer's browser: cookies kept, redirects returned as they come (stdlib only)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), _NoRedirect()
        )

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=30) as response:
            return response.read().decode()

    def post(self, path: str, data: dict) -> tuple[int, str, str]:
        """(status, Location header, body) of a form post."""
        body = urllib.parse.urlencode(data).encode()
        try:
            with self.opener.open(self.base + path, data=body, timeout=30) as response:
                return (
                    response.status,
                    response.headers.get("Location", ""),
                    response.read().decode(),
                )
        except urllib.error.HTTPError as exc:  # 302 (not followed) and errors
            return exc.code, exc.headers.get("Location", ""), exc.read().decode()


def _console(server: Server, email: str, password: str) -> tuple[Browser, str]:
    web = Browser(f"http://127.0.0.1:{server.port}/console")
    token = CSRF.search(web.get("/login")).group(1)
    status, _, body = web.post(
        "/login", {"csrf_token": token, "email": email, "password": password}
    )
    assert status == 302, body
    return web, CSRF.search(web.get("/")).group(1)


@pytest.mark.slow
def test_two_instances_share_conversations_reviews_and_the_kb(
    tmp_path, pg_url, redis_url, redis_prefix, redis_client, nlp_content, trained_models_dir
):
    from fixtures_nlp import import_content, private_models_dir

    import_content(pg_url, *nlp_content)
    models = private_models_dir(trained_models_dir, tmp_path / "models")
    common = dict(db_url=pg_url, redis_url=redis_url, redis_prefix=redis_prefix, workers=1)
    one = Server(models_dir=models, var_dir=tmp_path / "var1", **common)
    two = Server(models_dir=models, var_dir=tmp_path / "var2", **common)
    with one, two:
        # A conversation started on one instance continues on the other.
        status, first = one.json("POST", "/api/v1/chat", {"message": "my card has not arrived"})
        assert status == 200, first
        conversation = first["conversation_id"]
        status, second = two.json(
            "POST",
            "/api/v1/chat",
            {"message": "and how do I change my PIN?", "conversation_id": conversation},
        )
        assert status == 200, second
        assert second["conversation_id"] == conversation
        status, history = one.json("GET", f"/api/v1/conversations/{conversation}")
        texts = [m["text"] for m in history["messages"] if m["role"] == "customer"]
        assert texts == ["my card has not arrived", "and how do I change my PIN?"]

        # An escalation through one is claimed in the other's console; the reply reaches the
        # customer through the first.
        status, handoff = one.json(
            "POST",
            "/api/v1/chat",
            {"message": "I need a person about my card", "conversation_id": conversation},
        )
        assert status == 200 and handoff["status"] == "pending_review", handoff
        added = two.cli(
            "reviewer", "add", "ana@example.com", "--password-stdin", stdin="s3cret-pw\n"
        )
        assert added.returncode == 0, added.stdout + added.stderr
        web, csrf = _console(two, "ana@example.com", "s3cret-pw")
        status, location, body = web.post("/claim", {"csrf_token": csrf})
        assert status == 302, body
        item = re.search(r"/console/items/(\d+)$", location).group(1)
        assert "I need a person about my card" in web.get(f"/items/{item}")
        status, _, body = web.post(
            f"/items/{item}/reply",
            {"csrf_token": csrf, "text": "Hello, Ana here: your card ships today."},
        )
        assert status == 302, body
        status, history = one.json("GET", f"/api/v1/conversations/{conversation}")
        last = history["messages"][-1]
        assert (last["role"], last["text"]) == ("agent", "Hello, Ana here: your card ships today.")
        assert not history["awaiting_person"]

        # A KB import (the CLI, on the shared database) is seen by both within seconds: each
        # reports the new KB revision in /readyz (its router was rebuilt from the new KB).
        before = {s.port: s.json("GET", "/readyz")[1]["serving"]["kb_revision"] for s in (one, two)}
        (tmp_path / "kb").mkdir()
        (tmp_path / "kb" / "parrot.md").write_text(PARROT)
        imported = one.cli("kb", "import", str(tmp_path / "kb"))
        assert imported.returncode == 0, imported.stdout + imported.stderr
        t0 = time.monotonic()
        seen: dict[int, float] = {}
        while len(seen) < 2 and time.monotonic() - t0 < 30:
            for server in (one, two):
                status, ready = server.json("GET", "/readyz")
                if (
                    server.port not in seen
                    and ready["serving"]["kb_revision"] > before[server.port]
                ):
                    seen[server.port] = time.monotonic() - t0
            time.sleep(0.2)
        assert len(seen) == 2, f"seen by {len(seen)} of 2 instances in 30 s"
        assert max(seen.values()) < 15, seen
        for server in (one, two):  # and both go on answering
            status, turn = server.json("POST", "/api/v1/chat", {"message": PARROT_QUESTION})
            assert status == 200, turn
            offered = _offers(turn, "parrot-policy") or turn["status"] == "pending_review"
            assert offered, turn
        status, page = two.request("GET", f"/kb/{quote('parrot-policy')}")
        assert status == 200 and b"parrots wait at home" in page
