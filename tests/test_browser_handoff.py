"""Acceptance of the handoff in real headless Chromium, with two browser contexts (a customer in
the widget, a reviewer in the console) and real trained models:

the customer escalates, the reviewer is notified, claims, the customer's next message appears
live in the console and the bot does not answer it, the reviewer's reply appears in the widget
without polling, the reviewer hands back, and the bot answers again.
"""

from __future__ import annotations

import re
import time

import pytest
from fixtures_chat import serve_app
from fixtures_review import REVIEWER_PASSWORD
from sqlalchemy import select

from app.db import session_scope
from app.models import Article, Conversation, Message, ReviewItem

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT_MS = 20_000
# Records every browser notification the console raises (headless Chromium shows none).
RECORD_NOTIFICATIONS = """
window.__notifications = [];
(function () {
  var Real = window.Notification;
  function Recorded(title, options) {
    window.__notifications.push({ title: title, body: (options || {}).body });
    return new Real(title, options);
  }
  Recorded.requestPermission = function () { return Real.requestPermission(); };
  Object.defineProperty(Recorded, "permission", { get: function () { return Real.permission; } });
  window.Notification = Recorded;
})();
"""


def _answered_question(app) -> str:
    """A KB question the trained bot answers itself (asked once in a throwaway conversation)."""
    client = app.test_client()
    db_url = app.config["SQLALCHEMY_DATABASE_URI"]
    with session_scope(db_url) as session:
        questions = [
            q
            for a in session.scalars(select(Article).order_by(Article.slug)).all()
            for q in (a.questions or [])[:1]
        ]
    for question in questions[:40]:
        if client.post("/api/v1/chat", json={"message": question}).get_json()["status"] == (
            "answered"
        ):
            return question
    pytest.fail("the trained bot answered none of the KB's questions")


@pytest.fixture
def contexts(browser):
    customer = browser.new_context(viewport={"width": 1100, "height": 800})
    reviewer = browser.new_context(viewport={"width": 1280, "height": 900})
    reviewer.add_init_script(RECORD_NOTIFICATIONS)
    pages = customer.new_page(), reviewer.new_page()
    for page in pages:
        page.set_default_timeout(TIMEOUT_MS)
    yield customer, reviewer, pages
    customer.close()
    reviewer.close()


def test_person_takes_over_pushes_live_and_hands_back(contexts, trained_app, db_url):
    from app.review.auth import add_reviewer

    app = trained_app
    with session_scope(db_url) as session:
        add_reviewer(session, "ana@example.com", REVIEWER_PASSWORD)
    known = _answered_question(app)
    customer_ctx, reviewer_ctx, (customer, console) = contexts

    with serve_app(app) as url:
        reviewer_ctx.grant_permissions(["notifications"], origin=url)
        console.goto(f"{url}/console/")
        console.fill("input[name=email]", "ana@example.com")
        console.fill("input[name=password]", REVIEWER_PASSWORD)
        console.click("button:has-text('Log in')")
        console.wait_for_selector("#live-state.on")  # the console's event stream is open
        console.click("#notify-toggle")
        console.wait_for_selector("#notify-toggle:has-text('Notifications: on')")

        # Every request the widget makes to read its conversation (polling would show here).
        reads: list[tuple[float, str]] = []
        customer.on(
            "request",
            lambda r: (
                reads.append((time.monotonic(), r.url))
                if "/api/v1/conversations/" in r.url and r.method == "GET"
                else None
            ),
        )

        # 1. The customer asks for a person; the reviewer is notified.
        customer.goto(url)
        customer.click("#tierdesk-launcher")
        customer.click(".td-handoff")
        customer.wait_for_selector(".td-pending:not([hidden])")
        console.wait_for_selector("#console-toasts li:has-text('New question waiting')")
        notes = console.evaluate("window.__notifications")
        assert any(n["title"] == "New question waiting" for n in notes), notes
        console.wait_for_selector("#queue-live table.items tbody tr")  # the queue updated itself

        # 2. The reviewer claims; the widget shows who is answering.
        console.click("button:has-text('Claim next')")
        console.wait_for_selector("text=You hold this item")
        customer.wait_for_selector(".td-who:has-text('Ana from the')")
        assert customer.locator(".td-handoff").is_hidden()  # a person is already here

        # 3. The customer's next message appears live in the console; the bot stays silent.
        customer.fill("#tierdesk-input", known)
        customer.keyboard.press("Enter")
        console.wait_for_selector(f"#conversation li.msg.customer.live:has-text({known!r})")
        time.sleep(0.5)
        assert customer.locator(".td-msg--bot .td-source").count() == 0

        # 4. The reviewer types and replies; the widget gets both over its event stream.
        assert any(u.endswith("/events") for _, u in reads), reads
        sent_at = time.monotonic()
        console.fill("#reply-text", "Hi, this is Ana. Let me look at that for you.")
        console.type("#reply-text", " One moment.")
        customer.wait_for_selector(".td-agent-typing:has-text('Ana is typing')")
        console.click("button:has-text('Send and stay in the conversation')")
        agent = customer.wait_for_selector(".td-msg--agent .td-text")
        assert agent.text_content() == "Hi, this is Ana. Let me look at that for you. One moment."
        polled = [u for t, u in reads if t > sent_at and not u.endswith("/events")]
        assert polled == [], f"the widget polled instead of listening: {polled}"

        # 5. The reviewer hands back; the bot answers the same question again.
        console.click("button:has-text('Hand back to the bot')")
        console.wait_for_selector("text=The bot answers this conversation again.")
        customer.wait_for_selector(".td-msg--notice:has-text('assistant again')")
        assert customer.locator(".td-who").is_hidden()
        assert customer.locator(".td-handoff").is_visible()
        customer.fill("#tierdesk-input", known)
        customer.keyboard.press("Enter")
        customer.wait_for_selector(".td-msg--bot .td-source")

    with session_scope(db_url) as session:
        conversation = session.scalars(
            select(Conversation).join(ReviewItem, ReviewItem.conversation_id == Conversation.id)
        ).first()
        assert conversation.status == "bot"
        rows = session.scalars(
            select(Message).where(Message.conversation_id == conversation.id).order_by(Message.seq)
        ).all()
        roles = [(m.role, m.status) for m in rows]
        # handoff request (customer, no draft), the held message (no bot turn), the reply, the
        # question again (answered by the bot)
        assert roles[0][0] == "customer"
        held = [m for m in rows if m.role == "customer" and m.text == known]
        assert len(held) == 2
        replies_to_held = [m for m in rows if m.in_reply_to == held[0].id and m.role == "bot"]
        assert replies_to_held == []  # the bot never answered while Ana held the conversation
        assert [m.status for m in rows if m.in_reply_to == held[1].id] == ["answered"]
        assert re.search("Ana", next(m.text for m in rows if m.role == "agent"))
