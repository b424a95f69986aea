"""Fixtures of the chat area, shared with other tests through pytest_plugins.

- ``sample_articles``: three published articles (and one unpublished) in the test database.
- ``add_article`` / ``add_message``: write rows the way the KB import and the console do.
- ``chat`` / ``rows`` / ``api_error``: post a chat message, read rows back, check a JSON error.
- ``serve_app(app)``: a context manager serving ``app`` on a free loopback port in a thread,
  yielding its base URL (for browser tests).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import func, select
from werkzeug.serving import make_server

from app.db import session_scope
from app.models import Article, Message


def chat(client, message, **extra):
    """POST ``message`` (and ``extra`` fields) to the chat API."""
    return client.post("/api/v1/chat", json={"message": message, **extra})


def rows(db_url, model, **where):
    """Every row of ``model`` matching ``where`` (detached from the session)."""
    with session_scope(db_url) as session:
        query = select(model)
        for key, value in where.items():
            query = query.where(getattr(model, key) == value)
        found = session.scalars(query).all()
        session.expunge_all()
        return found


def api_error(resp, status, code):
    """``resp`` is the API's JSON error ``code`` with ``status`` and a message."""
    assert resp.status_code == status, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def add_article(
    db_url: str,
    slug: str,
    title: str,
    body_html: str,
    *,
    category: str | None = None,
    questions: list[str] | None = None,
    published: bool = True,
) -> None:
    with session_scope(db_url) as session:
        session.add(
            Article(
                slug=slug,
                title=title,
                body=body_html,
                body_html=body_html,
                category=category,
                tags=[],
                questions=questions or [],
                published=published,
            )
        )


def add_message(db_url: str, conversation_id: str, role: str, text: str, **fields) -> str:
    """Append a message to a conversation (as the console does for a reviewer's reply)."""
    with session_scope(db_url) as session:
        seq = session.scalar(
            select(func.max(Message.seq)).where(Message.conversation_id == conversation_id)
        )
        message = Message(
            conversation_id=conversation_id, seq=(seq or 0) + 1, role=role, text=text, **fields
        )
        session.add(message)
        session.flush()
        return message.id


SAMPLE_ARTICLES = [
    (
        "card-arrival",
        "Where is my new card?",
        "<p>New cards arrive within <strong>5 working days</strong>.</p>"
        "<p>If it has not come after 7 days, freeze it in the app and order another.</p>",
        "card_arrival",
        ["My card has not come yet", "How long does card delivery take?"],
    ),
    (
        "exchange-rate",
        "Which exchange rate do you use?",
        "<p>We use the interbank rate, updated every minute, plus a small fee at weekends.</p>",
        "exchange_rate",
        ["What rate do I get abroad?"],
    ),
    (
        "top-up-by-card",
        "Top up with a card",
        "<ul><li>Open the app</li><li>Choose <em>Add money</em></li></ul>",
        "top_up_by_card_charge",
        ["How do I add money with my card?"],
    ),
]


@pytest.fixture
def sample_articles(db_url) -> list[str]:
    for slug, title, body, category, questions in SAMPLE_ARTICLES:
        add_article(db_url, slug, title, body, category=category, questions=questions)
    add_article(
        db_url,
        "draft-article",
        "Unreleased card feature",
        "<p>Not yet.</p>",
        category="card_arrival",
        published=False,
    )
    return [a[0] for a in SAMPLE_ARTICLES]


@contextmanager
def serve_app(app) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 at a free port in a background thread; yields the base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="test-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
