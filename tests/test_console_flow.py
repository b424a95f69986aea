"""Working the queue in the console: claim, read, reply, send an article, discard, teach."""

from __future__ import annotations

import re

import pytest
from fixtures_kb import run_import
from fixtures_review import SAMPLE_TRACE, item_row
from markupsafe import escape
from sqlalchemy import select

from app.db import session_scope
from app.models import Article, Conversation, Message, ReviewItem, TrainingExample
from app.state import KB_REVISION, get_revision


def _db(app):
    return session_scope(app.config["SQLALCHEMY_DATABASE_URI"])


@pytest.fixture
def kb(console_kb):
    """A small KB and intent list for the forms (``fixtures_review.console_kb``)."""


def _claim(console) -> int:
    response = console.post("/console/claim")
    assert response.status_code == 302
    match = re.search(r"/console/items/(\d+)$", response.headers["Location"])
    assert match, response.headers["Location"]
    return int(match.group(1))


def test_queue_page_shows_depth_and_filters(console, escalate_message):
    escalate_message("card?", route="simple", intent="card_arrival")
    escalate_message("refund?", route="complex", intent="request_refund", reason="ambiguous")
    html = console.get("/console/").get_data(as_text=True)
    assert 'id="depth">2<' in html
    assert "card?" in html and "refund?" in html
    filtered = console.get("/console/?reason=ambiguous").get_data(as_text=True)
    assert "refund?" in filtered and "card?" not in filtered
    assert '<option value="request_refund"' in filtered


def test_claim_next_respects_filters(console, escalate_message):
    escalate_message("card?", route="simple", intent="card_arrival")
    refund = escalate_message("refund?", route="complex", intent="request_refund")
    response = console.post("/console/claim", data={"intent": "request_refund"})
    assert response.headers["Location"].endswith(f"/console/items/{refund}")
    response = console.post("/console/claim", data={"intent": "request_refund"})
    assert response.headers["Location"].startswith("/console/")
    assert "Nothing is waiting" in console.get("/console/").get_data(as_text=True)


def test_item_page_shows_conversation_draft_candidates_and_trace(
    app, console, escalate_message, kb
):
    first = escalate_message("hello there", draft_text="Hi! How can I help?")
    conversation_id = item_row(app, first).conversation_id
    item_id = escalate_message("my card never came", conversation_id=conversation_id)
    html = console.get(f"/console/items/{item_id}").get_data(as_text=True)
    assert "hello there" in html and "my card never came" in html  # the conversation so far
    assert "Cards arrive within 5 working days." in html  # the draft
    for tier in SAMPLE_TRACE["stages"]:
        assert f"<h3>{tier}</h3>" in html
    assert "card_delivery_estimate" in html and "0.310" in html  # fastText's second intent
    assert "7.250" in html and "0.810" in html  # BM25 and BERT candidate scores
    assert "Where is my new card?" in html
    assert "below_threshold" in html  # routing trace summary
    assert "Claim this item" in html  # not held yet: no answer forms
    assert 'name="text"' in html and "Send reply" not in html


def test_candidates_named_by_slug_only_get_their_titles(console, escalate_message, kb):
    trace = {"stages": {"bert": {"candidates": [{"slug": "card-arrival", "score": 0.9}]}}}
    item_id = escalate_message(trace=trace)
    html = console.get(f"/console/items/{item_id}").get_data(as_text=True)
    assert "Where is my new card?" in html and "0.900" in html


def test_edit_and_send_reply_reaches_the_conversation(app, console, escalate_message):
    item_id = escalate_message("my card never came")
    assert _claim(console) == item_id
    page = console.get(f"/console/items/{item_id}").get_data(as_text=True)
    assert "Send reply" in page and "You hold this item" in page
    response = console.post(
        f"/console/items/{item_id}/reply", data={"text": "Sorry! Your card ships tomorrow."}
    )
    assert response.status_code == 302
    with _db(app) as session:
        item = session.get(ReviewItem, item_id)
        reply = session.get(Message, item.reply_message_id)
        customer = session.get(Message, item.message_id)
        conversation = session.get(Conversation, item.conversation_id)
        assert item.status == "resolved" and item.resolution == "reply"
        assert item.draft_unchanged is False and item.resolved_at is not None
        assert reply.role == "agent" and reply.text == "Sorry! Your card ships tomorrow."
        assert reply.in_reply_to == customer.id and reply.author_id == item.claimed_by
        assert reply.seq == 2 and reply.html is None  # after the question (0) and draft (1)
        assert conversation.status == "bot"  # handed back to the bot
    queue = app.extensions["tierdesk.review_queue"]
    assert queue.queued_ids() == [] and queue.leased_ids() == []
    if "chat.conversation" in app.view_functions or any(
        r.rule.startswith("/api/v1/conversations") for r in app.url_map.iter_rules()
    ):
        body = console.client.get(f"/api/v1/conversations/{item.conversation_id}").get_json()
        assert body["messages"][-1]["text"] == "Sorry! Your card ships tomorrow."
        assert body["messages"][-1]["role"] == "agent"


def test_unchanged_draft_is_counted(app, console, escalate_message):
    item_id = escalate_message(draft_text="Cards arrive within 5 working days.")
    _claim(console)
    console.post(
        f"/console/items/{item_id}/reply",
        data={"text": "  Cards arrive within 5 working days.\r\n"},
    )
    assert item_row(app, item_id).draft_unchanged is True


def test_reply_with_an_article(app, console, escalate_message, kb):
    item_id = escalate_message()
    _claim(console)
    assert (
        console.post(f"/console/items/{item_id}/article", data={"slug": "no-such"}).status_code
        == 302
    )
    assert item_row(app, item_id).status == "claimed"  # refused, explained by a flash
    console.post(f"/console/items/{item_id}/article", data={"slug": "card-arrival"})
    with _db(app) as session:
        item = session.get(ReviewItem, item_id)
        reply = session.get(Message, item.reply_message_id)
        assert item.resolution == "article" and item.draft_unchanged is True
        assert reply.article_slug == "card-arrival" and "<strong>5</strong>" in reply.html
        assert "Cards arrive in 5 days." in reply.text


def test_discard_with_a_reason(app, console, escalate_message):
    item_id = escalate_message()
    _claim(console)
    console.post(f"/console/items/{item_id}/discard", data={"reason": "spam"})
    item = item_row(app, item_id)
    assert item.status == "discarded" and item.resolution_note == "spam"
    with _db(app) as session:
        assert session.get(Conversation, item.conversation_id).status == "bot"
        assert not session.scalars(select(Message).where(Message.role == "agent")).all()


def test_empty_reply_is_refused(app, console, escalate_message):
    item_id = escalate_message()
    _claim(console)
    response = console.post(f"/console/items/{item_id}/reply", data={"text": "   "})
    assert response.status_code == 400  # the item page, with the error beside the reply
    assert "The reply is empty." in response.get_data(as_text=True)
    assert item_row(app, item_id).status == "claimed"


def test_a_refused_reply_comes_back_as_typed(app, console, escalate_message, make_reviewer):
    """A reply the server refuses is not lost: in the form while the item is held, to copy
    when it is not (another reviewer took it while this one wrote a long answer)."""
    from fixtures_review import ConsoleClient, csrf_from, login

    item_id = escalate_message()
    _claim(console)
    long_reply = "Dear customer,\n" + "your new card is on its way. " * 140  # over 4,000
    response = console.post(f"/console/items/{item_id}/reply", data={"text": long_reply})
    page = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "longer than 4000 characters" in page
    assert '<textarea id="reply-text"' in page and escape(long_reply) in page
    other = make_reviewer("bo@example.com")
    client = app.test_client()
    login(client, other.email, other.password)
    bo = ConsoleClient(client, csrf_from(client.get("/console/").get_data(as_text=True)))
    response = bo.post(f"/console/items/{item_id}/reply", data={"text": "My answer."})
    page = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "Your reply was not sent" in page and '<textarea id="reply-text"' not in page
    assert "readonly>My answer.</textarea>" in page
    with _db(app) as session:
        assert not session.scalars(select(Message).where(Message.role == "agent")).all()


def test_another_reviewer_cannot_act_on_a_held_item(app, console, escalate_message, make_reviewer):
    from fixtures_review import ConsoleClient, csrf_from, login

    item_id = escalate_message()
    _claim(console)
    other = make_reviewer("bo@example.com")
    client = app.test_client()
    login(client, other.email, other.password)
    bo = ConsoleClient(client, csrf_from(client.get("/console/").get_data(as_text=True)))
    page = bo.get(f"/console/items/{item_id}").get_data(as_text=True)
    assert "Claimed by ana@example.com" in page and "Send reply" not in page
    bo.post(f"/console/items/{item_id}/claim")
    bo.post(f"/console/items/{item_id}/reply", data={"text": "mine now"})
    assert item_row(app, item_id).status == "claimed"


def test_claiming_an_item_i_still_hold_renews_it(app, console, escalate_message):
    """ "Claim it again" (shown when the page's countdown ran out) on a lease that is still
    mine, renewed from another tab or with the browser's clock ahead, is not "not free"."""
    item_id = escalate_message()
    assert _claim(console) == item_id
    before = item_row(app, item_id).lease_expires_at
    response = console.post(f"/console/items/{item_id}/claim")
    assert response.headers["Location"].endswith(f"/console/items/{item_id}")
    page = console.get(f"/console/items/{item_id}").get_data(as_text=True)
    assert "not free" not in page and "You hold this item" in page
    assert item_row(app, item_id).lease_expires_at >= before


def test_release_puts_the_item_back(app, console, escalate_message):
    item_id = escalate_message()
    _claim(console)
    console.post(f"/console/items/{item_id}/release")
    assert item_row(app, item_id).status == "pending"
    assert _claim(console) == item_id


def test_teach_intent_writes_a_reviewer_training_example(app, console, escalate_message, kb):
    item_id = escalate_message("where's my plastic")
    data = {"kind": "intent", "text": "where's my plastic", "intent": "card_arrival"}
    console.post(f"/console/items/{item_id}/teach", data=data)
    console.post(f"/console/items/{item_id}/teach", data=data)  # twice: stored once
    console.post(f"/console/items/{item_id}/teach", data={**data, "intent": "made_up"})
    with _db(app) as session:
        rows = session.scalars(select(TrainingExample)).all()
    assert [(r.text, r.intent, r.origin) for r in rows] == [
        ("where's my plastic", "card_arrival", "reviewer")
    ]


def test_teach_alternate_question_bumps_versions(app, console, escalate_message, kb):
    item_id = escalate_message("where's my plastic")
    with _db(app) as session:
        revision = get_revision(session, KB_REVISION)
        version = session.scalar(select(Article.version).where(Article.slug == "card-arrival"))
    console.post(
        f"/console/items/{item_id}/teach",
        data={"kind": "question", "text": "where's my plastic", "slug": "card-arrival"},
    )
    with _db(app) as session:
        article = session.scalar(select(Article).where(Article.slug == "card-arrival"))
        assert article.questions == ["card not here", "where's my plastic"]
        assert article.version == version + 1
        assert get_revision(session, KB_REVISION) == revision + 1


def test_a_taught_question_outlives_imports_of_its_article(
    app, console, escalate_message, kb, tmp_path
):
    """The content owner imports the article again, from a file without the question a reviewer
    taught: the article keeps it, whether the file changed the article or not."""
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    item_id = escalate_message("where's my plastic")
    console.post(
        f"/console/items/{item_id}/teach",
        data={"kind": "question", "text": "Where's   my plastic", "slug": "card-arrival"},
    )
    source = tmp_path / "kb.csv"

    def stored() -> tuple[list[str], list[str], str]:
        with _db(app) as session:
            article = session.scalar(select(Article).where(Article.slug == "card-arrival"))
            return article.questions, article.taught_questions, article.body

    # The article as it was before the reviewer taught it: nothing to change.
    source.write_text(
        "slug,title,body,category,questions\n"
        "card-arrival,Where is my new card?,Cards arrive in **5** days.,card_arrival,"
        "card not here\n"
    )
    assert run_import(url, [source]).unchanged == 1
    source.write_text(
        "slug,title,body,questions\n"
        'card-arrival,Where is my new card?,Cards arrive in 4 days.,"card not here|card late"\n'
    )
    assert run_import(url, [source]).updated == 1
    assert stored() == (
        ["card not here", "card late", "Where's my plastic"],
        ["Where's my plastic"],
        "Cards arrive in 4 days.",
    )
    assert run_import(url, [source]).unchanged == 1  # nothing changed since
    # The file lists it now, in its own case: once, where the file has it; or as the title.
    source.write_text(
        "slug,title,body,questions\n"
        "card-arrival,Where is my new card?,Cards arrive in 4 days.,WHERE'S MY PLASTIC\n"
    )
    assert run_import(url, [source]).updated == 1
    assert stored()[0] == ["WHERE'S MY PLASTIC"]
    source.write_text("slug,title,body\ncard-arrival,where's my plastic,Cards arrive in 4 days.\n")
    run_import(url, [source])
    assert stored()[0] == []


def test_teach_new_article(app, console, escalate_message, kb):
    item_id = escalate_message("can I freeze my card from the app?")
    console.post(
        f"/console/items/{item_id}/teach",
        data={
            "kind": "article",
            "text": "can I freeze my card from the app?",
            "title": "Freezing your card",
            "body": "Open **Cards** and tap *Freeze*.",
            "category": "",
        },
    )
    with _db(app) as session:
        article = session.scalar(select(Article).where(Article.slug == "freezing-your-card"))
        assert article is not None and article.published
        assert article.questions == ["can I freeze my card from the app?"]
        # taught: a file that later gives an article of this slug keeps the question
        assert article.taught_questions == article.questions
        assert "<strong>Cards</strong>" in article.body_html
        assert get_revision(session, KB_REVISION) >= 1
    response = console.post(
        f"/console/items/{item_id}/teach",
        data={"kind": "article", "text": "again", "title": "Freezing your card", "body": "x"},
    )
    assert response.status_code == 400  # refused politely: the slug exists
    assert "exists" in response.get_data(as_text=True)


def test_an_article_a_reviewer_wrote_outlives_an_import_replacing_the_kb(
    app, console, escalate_message, kb, tmp_path
):
    """``kb import --replace`` unpublishes the imported articles its files no longer hold, not
    what reviewers wrote, and says so."""
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    item_id = escalate_message("can I freeze my card from the app?")
    data = {"kind": "article", "text": "can I freeze my card?", "title": "Freezing your card"}
    console.post(f"/console/items/{item_id}/teach", data={**data, "body": "Tap *Freeze*."})
    source = tmp_path / "kb.csv"
    source.write_text("title,body\nHow do I pay?,By card.\n")
    report = run_import(url, [source], replace=True)
    assert (report.created, report.unpublished) == (1, 1)
    assert report.changes == [("create", "how-do-i-pay"), ("unpublish", "card-arrival")]
    assert report.notes == [
        "1 article written in the reviewer console stays published (freezing-your-card): "
        "--replace unpublishes imported articles only"
    ]
    with _db(app) as session:
        published = session.scalars(select(Article.slug).where(Article.published)).all()
    assert sorted(published) == ["freezing-your-card", "how-do-i-pay"]


def test_a_refused_teach_form_comes_back_as_typed_and_nothing_is_stored(
    app, console, escalate_message, kb
):
    """A refused form was answered with a redirect to the item page: the title, answer and
    question the reviewer had typed were gone."""
    item_id = escalate_message("where's my plastic")
    with _db(app) as session:
        revision = get_revision(session, KB_REVISION)
    typed = {
        "kind": "article",
        "text": "is my <b>plastic</b> lost?",
        "title": "Card arrival",  # its slug, card-arrival, is taken
        "body": "Line one & two\n\n**three**",
        "category": "request_refund",
    }
    response = console.post(f"/console/items/{item_id}/teach", data=typed)
    assert response.status_code == 400
    html = response.get_data(as_text=True)
    assert "An article with the slug &#39;card-arrival&#39; exists" in html
    assert 'value="is my &lt;b&gt;plastic&lt;/b&gt; lost?"' in html
    assert 'name="title" value="Card arrival"' in html
    assert ">Line one &amp; two\n\n**three**</textarea>" in html
    assert '<option value="request_refund" selected>' in html

    response = console.post(
        f"/console/items/{item_id}/teach",
        data={"kind": "intent", "text": "my plastic, where?", "intent": "made_up"},
    )
    assert response.status_code == 400
    html = response.get_data(as_text=True)
    assert "Unknown intent &#39;made_up&#39;." in html
    assert 'value="my plastic, where?"' in html
    assert html.count("where&#39;s my plastic") == 3  # the other forms still offer the question
    with _db(app) as session:
        assert session.scalars(select(TrainingExample)).all() == []
        assert session.scalar(select(Article.slug).where(Article.slug != "card-arrival")) is None
        assert get_revision(session, KB_REVISION) == revision


def test_stats_page_draws_svg_charts(app, console, escalate_message):
    for i in range(3):
        escalate_message(f"q{i}", route="simple" if i else "complex")
    item_id = _claim(console)
    console.post(f"/console/items/{item_id}/reply", data={"text": "answer"})
    html = console.get("/console/stats").get_data(as_text=True)
    assert html.count("<svg") == 4
    assert "Escalation rate by route" in html and "<polyline" in html
    assert 'id="taught-pending">0<' in html
