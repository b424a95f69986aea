"""``tierdesk privacy export|erase``: a customer's data out as JSON, then gone everywhere."""

from __future__ import annotations

import json

import pytest
from fixtures_privacy import database_dump, redis_dump
from sqlalchemy import func, select

from app.cli import main
from app.db import session_scope
from app.models import AuditEvent, Conversation, ReviewItem
from app.state import ERASURE_REVISION, get_revision

EMAIL = "lea.bauer@example.org"


def _chat(client, message: str, conversation_id: str | None = None) -> dict:
    body = {"message": message}
    if conversation_id:
        body["conversation_id"] = conversation_id
    response = client.post("/api/v1/chat", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _conversation(app, *messages: str) -> str:
    client = app.test_client()
    cid = _chat(client, messages[0])["conversation_id"]
    for message in messages[1:]:
        _chat(client, message, cid)
    return cid


def test_export_then_erase_a_conversation_leaves_nothing(app, runner, redis_client, redis_prefix):
    cid = _conversation(app, f"my card never came, write to {EMAIL}", "talk to a person")
    other = _conversation(app, "how do I change my PIN")
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        item_ids = list(
            session.scalars(select(ReviewItem.id).where(ReviewItem.conversation_id == cid))
        )
    assert item_ids  # no models loaded: the questions went to review, queued in Redis
    meta = redis_client.hkeys(f"{redis_prefix}review:meta")
    assert {str(i) for i in item_ids} <= set(meta)

    exported = runner.invoke(main, ["privacy", "export", "--conversation", cid])
    assert exported.exit_code == 0, exported.output
    document = json.loads(exported.output)
    (conversation,) = document["conversations"]
    assert conversation["id"] == cid
    texts = [m["text"] for m in conversation["messages"] if m["role"] == "customer"]
    assert texts == ["my card never came, write to [email ***@example.org]", "talk to a person"]
    assert {i["id"] for i in conversation["review_items"]} == set(item_ids)
    assert "client_key" not in conversation and "customer_ref" not in conversation

    erased = runner.invoke(main, ["privacy", "erase", "--conversation", cid, "--yes"])
    assert erased.exit_code == 0, erased.output
    assert "erased 1 conversations, 4 messages" in erased.output

    dump = database_dump(app.config["SQLALCHEMY_DATABASE_URI"])
    assert cid not in dump
    assert other in dump  # only this customer's data went
    keys = redis_dump(redis_client, redis_prefix)
    assert not any(f"'{i}'" in keys for i in item_ids), keys
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert get_revision(session, ERASURE_REVISION) == 1  # servers drop cached answers
        (event,) = session.scalars(select(AuditEvent).where(AuditEvent.action == "erase"))
        assert event.actor == "cli" and event.detail["conversations"] == 1
        assert cid not in json.dumps(event.detail) and event.target is None
        assert session.scalars(select(AuditEvent).where(AuditEvent.action == "export")).all()

    again = runner.invoke(main, ["privacy", "export", "--conversation", cid])
    assert again.exit_code == 1 and f"nothing is stored for conversation {cid}" in again.output


def test_export_and_erase_by_email_find_every_conversation_that_mentions_it(app, runner, tmp_path):
    first = _conversation(app, f"I am {EMAIL.upper()} and my card is lost")
    second = _conversation(app, "hello", f"my address changed to {EMAIL}")
    unrelated = _conversation(app, "write to someone.else@example.org")
    out = tmp_path / "export.json"
    result = runner.invoke(main, ["privacy", "export", "--email", EMAIL, "--out", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert [c["id"] for c in document["conversations"]] == [first, second]
    result = runner.invoke(main, ["privacy", "erase", "--email", f" {EMAIL} ", "--yes"])
    assert result.exit_code == 0, result.output
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        left = set(session.scalars(select(Conversation.id)))
    assert left == {unrelated}


@pytest.mark.parametrize(
    "args",
    [
        ["privacy", "export"],
        ["privacy", "export", "--conversation", "x", "--email", "a@b.cd"],
        ["privacy", "erase"],
    ],
)
def test_selector_errors_are_clear(runner, args):
    result = runner.invoke(main, args)
    assert result.exit_code == 2
    assert "give exactly one of --conversation ID and --email ADDRESS" in result.output


def test_erase_asks_before_deleting(app, runner):
    cid = _conversation(app, "hello there")
    result = runner.invoke(main, ["privacy", "erase", "--conversation", cid], input="n\n")
    assert result.exit_code == 1 and "Aborted" in result.output
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert session.get(Conversation, cid) is not None


@pytest.mark.slow
def test_erasure_drops_cached_answers_in_every_server(trained_app):
    """Two servers on one database answer the same question from their caches; erasing it
    through one empties both caches (the other at its next revision check)."""
    from app import create_app
    from app.privacy import erasure
    from app.services import get_engine, get_review_queue

    other_server = create_app({**trained_app.config, "TESTING": True})
    question = "my card has not arrived yet, I am at lea@example.org"
    cid = _chat(trained_app.test_client(), question)["conversation_id"]
    _chat(other_server.test_client(), question)
    engines = [
        trained_app.extensions["tierdesk.engine"],
        other_server.extensions["tierdesk.engine"],
    ]
    assert all(e.status()["cache_entries"] == 1 for e in engines)
    with (
        trained_app.app_context(),
        session_scope(trained_app.config["SQLALCHEMY_DATABASE_URI"]) as s,
    ):
        erasure.erase(s, [cid], queue=get_review_queue(), engine=get_engine(), actor="test")
    assert engines[0].status()["cache_entries"] == 0
    engines[1].check_for_updates(wait=True)
    assert engines[1].status()["cache_entries"] == 0


def test_erasure_takes_notes_deliveries_and_the_follow_up_address_with_it(any_db_url, make_app):
    """What handoff adds to a conversation (a reviewer's internal note, queued webhook and
    e-mail deliveries, the address left for follow-up) goes with it, on SQLite and PostgreSQL."""
    from app.models import Delivery, ReviewNote
    from app.privacy.erasure import delete_conversations, find_conversations

    app = make_app(
        SQLALCHEMY_DATABASE_URI=any_db_url,
        WEBHOOK_URLS=["http://127.0.0.1:9/hook"],
        SMTP_HOST="127.0.0.1",
    )
    cid = _conversation(app, "talk to a person please")
    kept = _conversation(app, "talk to a person too")
    client = app.test_client()
    assert (
        client.post(f"/api/v1/conversations/{cid}/email", json={"email": EMAIL}).status_code == 200
    )
    with session_scope(any_db_url) as session:
        item = session.scalars(select(ReviewItem).where(ReviewItem.conversation_id == cid)).one()
        session.add(ReviewNote(item_id=item.id, text="called back, no answer"))
        session.add(
            Delivery(channel="email", target=EMAIL, event="email", body="x", conversation_id=cid)
        )
        session.commit()
        assert find_conversations(session, "test-secret", email=EMAIL.upper()) == [cid]
        assert session.scalar(
            select(func.count(Delivery.id)).where(Delivery.conversation_id == kept)
        )
        report, _ = delete_conversations(session, [cid])
        session.commit()
        assert report.review_notes == 1 and report.deliveries >= 2  # the webhook and the e-mail
        assert session.scalar(select(func.count(ReviewNote.id))) == 0
        assert (
            session.scalar(select(func.count(Delivery.id)).where(Delivery.conversation_id == cid))
            == 0
        )
        assert session.scalar(
            select(func.count(Delivery.id)).where(Delivery.conversation_id == kept)
        )
        assert set(session.scalars(select(Conversation.id))) == {kept}
