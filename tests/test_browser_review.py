"""The human-review loop in real headless Chromium: a customer in the widget, a reviewer in the
console, and (slow) the learning loop through ``tierdesk train``.

Two browser contexts stand for two people: the customer on the demo page and the reviewer in
the console. The app is served from a thread on a free loopback port.

Set TIERDESK_UPDATE_SCREENSHOT=1 to rewrite docs/console.png from the item page of the slow test.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from fixtures_chat import serve_app
from fixtures_review import REVIEWER_PASSWORD, build_app
from sqlalchemy import select

from app.db import session_scope
from app.models import Article, Message, ReviewItem, TrainingExample
from app.services import get_review_queue

pytestmark = pytest.mark.browser

TIMEOUT_MS = 20_000
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "console.png"
# Escalated as out of scope by models trained on the tiny bank FAQ; one taught example fixes it.
TEACHABLE_QUESTION = "where is the plastic thing you promised"


@pytest.fixture
def customer(browser):
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    context.close()


@pytest.fixture
def reviewer_page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    context.close()


def _add_reviewer(db_url: str, email: str = "ana@example.com") -> str:
    from app.review.auth import add_reviewer

    with session_scope(db_url) as session:
        add_reviewer(session, email, REVIEWER_PASSWORD)
    return email


def _ask(page, url: str, text: str, *, open_widget: bool = True) -> None:
    if open_widget:
        page.goto(url)
        page.click("#tierdesk-launcher")
        page.wait_for_selector("#tierdesk-panel:not([hidden])")
    page.fill("#tierdesk-input", text)
    page.keyboard.press("Enter")


def _log_in(page, url: str, email: str) -> None:
    page.goto(f"{url}/console/")
    assert "/console/login" in page.url  # no session: the login page
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", REVIEWER_PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("button:has-text('Claim next')")


def _claim_next(page) -> None:
    page.click("button:has-text('Claim next')")
    page.wait_for_selector("text=You hold this item")


def test_reviewer_claims_edits_and_the_customer_sees_the_reply(
    customer, reviewer_page, app, db_url
):
    """No models here, so every question waits for a person ("models_unavailable")."""
    email = _add_reviewer(db_url)
    hostile = 'card gone <script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'
    with serve_app(app) as url:
        _ask(customer, url, hostile)
        customer.wait_for_selector(".td-pending:not([hidden])")

        _log_in(reviewer_page, url, email)
        assert reviewer_page.text_content("#depth") == "1"
        _claim_next(reviewer_page)
        # The customer's message is shown as text in the console and runs nothing there.
        question = reviewer_page.locator(".msg.customer .text").first
        assert question.text_content() == hostile
        assert reviewer_page.locator(".msg.customer img").count() == 0
        reply = "Sorry about that! Your card was posted today and arrives within 3 days."
        reviewer_page.fill("#reply-text", reply)
        reviewer_page.click("button:has-text('Send reply')")
        reviewer_page.wait_for_selector("text=Reply sent to the customer.")
        assert reviewer_page.evaluate("window.__pwned") is None

        agent = customer.wait_for_selector(".td-msg--agent .td-text")  # the widget polls
        assert agent.text_content() == reply
        customer.wait_for_selector(".td-pending", state="hidden")
        assert customer.evaluate("window.__pwned") is None
    with session_scope(db_url) as session:
        [item] = session.scalars(select(ReviewItem)).all()
        assert item.status == "resolved" and item.resolution == "reply"
        agent_row = session.get(Message, item.reply_message_id)
        assert agent_row.role == "agent" and agent_row.in_reply_to == item.message_id


def test_a_message_whose_event_comes_during_a_read_is_read_after_it(reviewer_page, app, db_url):
    """The console reads a conversation's new messages one request at a time. Here its first
    read (on connecting) is answered before the customer's follow-up is stored and reaches the
    page only after the follow-up's event did: the console must read again, not drop it."""
    email = _add_reviewer(db_url)
    client = app.test_client()
    first = client.post("/api/v1/chat", json={"message": "my card has not arrived"}).get_json()
    assert first["status"] == "pending_review"
    follow_up = "it was posted two weeks ago"
    held: list[int] = []

    def hold_the_first_read(route):
        if held:
            route.continue_()
            return
        response = route.fetch()  # the server answers now, without the follow-up
        sent = client.post(
            "/api/v1/chat",
            json={"message": follow_up, "conversation_id": first["conversation_id"]},
        )
        held.append(sent.status_code)
        time.sleep(1.5)  # meanwhile the follow-up's event reaches the page
        route.fulfill(response=response)

    with serve_app(app) as url:
        _log_in(reviewer_page, url, email)
        reviewer_page.route(re.compile(r"/console/items/\d+/messages\.json"), hold_the_first_read)
        _claim_next(reviewer_page)
        reviewer_page.wait_for_selector(
            f"#conversation li.msg.customer.live:has-text({follow_up!r})"
        )
    assert held == [200]


def test_a_multi_line_question_is_taught_with_its_words_apart(
    reviewer_page, app, db_url, console_kb, escalate_message
):
    """A text input drops line breaks from its value: "my card\nis lost" was offered (and
    taught) as "my cardis lost"."""
    email = _add_reviewer(db_url)
    item_id = escalate_message("my card\nis lost\n\nplease help")
    with serve_app(app) as url:
        _log_in(reviewer_page, url, email)
        reviewer_page.goto(f"{url}/console/items/{item_id}")
        texts = reviewer_page.locator("section.teach input[name=text]")
        assert texts.count() == 3
        for i in range(3):
            assert texts.nth(i).input_value() == "my card is lost please help"
        teach = reviewer_page.locator("form:has(input[name=kind][value=intent])")
        teach.locator("select[name=intent]").select_option("card_arrival")
        teach.locator("button").click()
        reviewer_page.wait_for_selector("text=Saved as a training example of card_arrival.")
    with session_scope(db_url) as session:
        taught = session.scalars(select(TrainingExample.text)).all()
    assert taught == ["my card is lost please help"]


def test_an_article_body_cannot_outgrow_what_the_server_takes(
    reviewer_page, app, db_url, console_kb, escalate_message
):
    """The new article's body had no length limit in the page: a body over the server's
    20,000 characters was refused after the submit, and the title and body typed were gone."""
    email = _add_reviewer(db_url)
    item_id = escalate_message("when does a card arrive")
    with serve_app(app) as url:
        _log_in(reviewer_page, url, email)
        reviewer_page.goto(f"{url}/console/items/{item_id}")
        form = reviewer_page.locator("form:has(input[name=kind][value=article])")
        form.locator("input[name=title]").fill("Card delivery times")
        form.locator("textarea[name=body]").fill("Cards arrive in five days. " * 1000)
        assert len(form.locator("textarea[name=body]").input_value()) == 20_000
        form.locator("button").click()
        reviewer_page.wait_for_selector("text=Created the article “Card delivery times”.")
    with session_scope(db_url) as session:
        article = session.scalar(select(Article).where(Article.title == "Card delivery times"))
    assert article is not None and len(article.body) <= 20_000


def test_a_refused_new_article_keeps_what_the_reviewer_typed(
    reviewer_page, app, db_url, console_kb, escalate_message
):
    """A new article whose slug exists was refused with a redirect to the item page: the
    title and answer typed were gone. Now the form comes back filled, with the error."""
    email = _add_reviewer(db_url)
    item_id = escalate_message("when does a card arrive")
    body = "Cards arrive within five working days.\n\nTrack yours under **Cards**."
    with serve_app(app) as url:
        _log_in(reviewer_page, url, email)
        reviewer_page.goto(f"{url}/console/items/{item_id}")
        form = reviewer_page.locator("form:has(input[name=kind][value=article])")
        form.locator("input[name=text]").fill("when will my card come")
        form.locator("input[name=title]").fill("Card arrival")  # slug card-arrival: taken
        form.locator("textarea[name=body]").fill(body)
        form.locator("button").click()
        form.locator("[role=alert]:has-text('card-arrival')").wait_for()
        assert form.locator("input[name=text]").input_value() == "when will my card come"
        assert form.locator("input[name=title]").input_value() == "Card arrival"
        assert form.locator("textarea[name=body]").input_value() == body
        assert reviewer_page.evaluate("document.activeElement.name") == "title"
    with session_scope(db_url) as session:
        assert session.scalars(select(Article.slug)).all() == ["card-arrival"]


def test_an_expired_lease_says_the_item_went_back_and_offers_to_claim_it(
    reviewer_page, make_app, db_url
):
    """The countdown said "reload to renew" once the lease ran out; but an expired claim is
    free for anyone and goes back to the queue, and reloading then offered "Claim this item"."""
    from fixtures_review import escalate_in

    app = make_app(REVIEW_LEASE_SECONDS=3)
    email = _add_reviewer(db_url)
    item_id = escalate_in(app, "my card has not arrived")
    with serve_app(app) as url:
        _log_in(reviewer_page, url, email)
        _claim_next(reviewer_page)
        assert reviewer_page.locator("form.reclaim").is_hidden()
        reviewer_page.wait_for_selector(".countdown:has-text('lease expired')", timeout=10_000)
        countdown = reviewer_page.text_content(".countdown")
        assert "went back to the queue" in countdown and "reload" not in countdown
        reviewer_page.click("form.reclaim button:has-text('Claim it again')")
        reviewer_page.wait_for_selector(".countdown:has-text('s left')")
        assert f"/console/items/{item_id}" in reviewer_page.url
        assert reviewer_page.locator("form.reclaim").is_hidden()
    with session_scope(db_url) as session:
        item = session.get(ReviewItem, item_id)
        assert item.status == "claimed" and item.claimed_by is not None


def test_back_shows_the_item_as_it_is_now_not_as_the_browser_kept_it(
    reviewer_page, app, db_url, make_reviewer, escalate_message
):
    """Console pages were kept by the browser (no Cache-Control): Back to an item that another
    reviewer had claimed meanwhile still offered "Claim this item". After logging out, Back
    must not show the customer's messages either."""
    email = _add_reviewer(db_url)
    other = make_reviewer("bo@example.com")
    item_id = escalate_message("my card has not arrived")
    with serve_app(app) as url:
        _log_in(reviewer_page, url, email)
        reviewer_page.goto(f"{url}/console/items/{item_id}")
        reviewer_page.wait_for_selector("button:has-text('Claim this item')")
        reviewer_page.click("nav >> text=Stats")
        reviewer_page.wait_for_selector("h1:has-text('Review stats')")
        with app.app_context():
            assert get_review_queue().claim_item(item_id, other.id) is not None
        reviewer_page.go_back()
        reviewer_page.wait_for_selector("text=Claimed by bo@example.com")
        assert reviewer_page.locator("button:has-text('Claim this item')").count() == 0

        reviewer_page.click("button:has-text('Log out')")
        reviewer_page.wait_for_selector("text=You are logged out.")
        reviewer_page.go_back()
        reviewer_page.wait_for_selector("button:has-text('Log in')")
        assert "my card has not arrived" not in reviewer_page.content()


def test_the_queue_fits_a_tablet_without_scrolling_sideways(browser, app, db_url, escalate_message):
    """At 768 px (a tablet held upright) the queue's table was 9 px wider than the window, and
    its "Customer asked" column was squeezed to a word or two per line."""
    email = _add_reviewer(db_url)
    for text in ("I want to talk to a person about my card " * 3, "verylongwordwithoutspaces" * 8):
        escalate_message(text, reason="asked_for_human", intent="lost_or_stolen_card")
    context = browser.new_context(viewport={"width": 768, "height": 1024})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        with serve_app(app) as url:
            _log_in(page, url, email)
            width, window = page.evaluate(
                "[document.documentElement.scrollWidth, window.innerWidth]"
            )
            assert width <= window
            excerpt = page.locator("td.excerpt").first.bounding_box()
            assert excerpt["width"] >= 200
    finally:
        context.close()


def test_wide_tables_scroll_in_their_box_not_the_page(browser, app, db_url):
    """The models page's ten-column table was 898 px wide at 768 px and the whole page
    scrolled sideways (912-917 px); now the table scrolls in a box of its own."""
    from app.models import ModelVersion

    email = _add_reviewer(db_url)
    manifest = {
        "trained_at": "2024-05-01T12:00:00+00:00",
        "metrics": {"router": {"val_accuracy": 0.91}},
    }
    with session_scope(db_url) as session:
        session.add(
            ModelVersion(version="20240501-120000-abcdef", status="active", manifest=manifest)
        )
    context = browser.new_context(viewport={"width": 768, "height": 1024})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        with serve_app(app) as url:
            _log_in(page, url, email)
            page.goto(f"{url}/console/models")
            width, window = page.evaluate(
                "[document.documentElement.scrollWidth, window.innerWidth]"
            )
            assert width <= window
            box = page.locator(".scroll-x:has(#versions)")
            inner, outer = box.evaluate("b => [b.scrollWidth, b.clientWidth]")
            assert inner > outer  # the whole table is there, scrolled within its box
            assert box.get_attribute("tabindex") == "0"  # and the keyboard can scroll it
    finally:
        context.close()


@pytest.fixture
def tiny_trained_app(tmp_path, db_url, redis_client, redis_prefix):
    """The app on the tiny bank FAQ with models trained for this test alone (it trains again,
    so it must not share a models folder)."""
    from fixtures_nlp import _write_tiny_content, import_content

    from app.nlp.training import train_models

    intents_dir, kb_dir = _write_tiny_content(tmp_path / "content")
    import_content(db_url, intents_dir, kb_dir)
    config = {
        "SQLALCHEMY_DATABASE_URI": db_url,
        "MODELS_DIR": tmp_path / "models",
        "INTENTS_DIR": intents_dir,
        "BERT_PATH": None,
        "BERT_QUANTIZE": True,
    }
    train_models(config, progress=False)
    app = build_app(
        db_url,
        redis_client,
        redis_prefix,
        tmp_path,
        LOAD_MODELS=True,
        MODELS_DIR=tmp_path / "models",
        INTENTS_DIR=intents_dir,
        KB_DIR=kb_dir,
    )
    assert app.extensions["tierdesk.engine"].ready
    return app


@pytest.mark.slow
def test_teach_then_train_and_the_bot_answers(customer, reviewer_page, tiny_trained_app, db_url):
    """Acceptance: an unclear question waits for a person; the reviewer edits the bot's draft
    and sends it, teaches the question to an intent; after ``tierdesk train`` the bot answers
    the same question itself (no restart)."""
    from app.cli import main

    app = tiny_trained_app
    engine = app.extensions["tierdesk.engine"]
    email = _add_reviewer(db_url)
    with serve_app(app) as url:
        _ask(customer, url, TEACHABLE_QUESTION)
        customer.wait_for_selector(".td-pending:not([hidden])")

        _log_in(reviewer_page, url, email)
        _claim_next(reviewer_page)
        draft = reviewer_page.input_value("#reply-text")
        assert draft  # the bot's proposed answer, held back for review
        assert reviewer_page.locator(".draft h3").count() >= 1  # per-tier candidates
        if os.environ.get("TIERDESK_UPDATE_SCREENSHOT") == "1":
            SCREENSHOT.parent.mkdir(exist_ok=True)
            reviewer_page.screenshot(path=str(SCREENSHOT))
        edited = draft + " I have also checked: yours was posted yesterday."
        reviewer_page.fill("#reply-text", edited)
        reviewer_page.click("button:has-text('Send reply')")
        reviewer_page.wait_for_selector("text=Reply sent to the customer.")
        agent = customer.wait_for_selector(".td-msg--agent .td-text")
        assert agent.text_content() == edited

        # Teach from the (resolved) item: the question is an example of card_arrival.
        with session_scope(db_url) as session:
            item_id = session.scalar(select(ReviewItem.id))
        reviewer_page.goto(f"{url}/console/items/{item_id}")
        teach = reviewer_page.locator("form:has(input[name=kind][value=intent])")
        assert teach.locator("input[name=text]").input_value() == TEACHABLE_QUESTION
        teach.locator("select[name=intent]").select_option("card_arrival")
        teach.locator("button").click()
        reviewer_page.wait_for_selector("text=Saved as a training example of card_arrival.")
        reviewer_page.goto(f"{url}/console/stats")
        assert reviewer_page.text_content("#taught-pending") == "1"

        result = app.test_cli_runner().invoke(main, ["train", "--quiet"])
        assert result.exit_code == 0, result.output
        engine.check_for_updates(wait=True)  # what a serving process does on its next request
        assert engine.trained_at is not None

        _ask(customer, url, TEACHABLE_QUESTION, open_widget=False)
        customer.locator(".td-msg--bot .td-source").first.wait_for()
        link = customer.locator(".td-msg--bot .td-source").last
        assert link.get_attribute("href").endswith("/kb/card-arrival")
        reviewer_page.goto(f"{url}/console/stats")
        assert reviewer_page.text_content("#taught-pending") == "0"
    with session_scope(db_url) as session:
        example = session.scalar(
            select(TrainingExample).where(TrainingExample.text == TEACHABLE_QUESTION)
        )
        assert example.intent == "card_arrival" and example.origin == "reviewer"
        assert session.scalar(select(ReviewItem.status)) == "resolved"
        answered = session.scalars(
            select(Message).where(Message.role == "bot", Message.status == "answered")
        ).all()
        assert [m.article_slug for m in answered] == ["card-arrival"]
