"""Roles and the audit log: admins manage reviewers, retention, erasure and models from the
console; reviewers work the queue; every admin action and every reply is audited."""

from __future__ import annotations

import json

import pytest
from fixtures_review import REVIEWER_PASSWORD, ConsoleClient, csrf_from, escalate_in, login
from sqlalchemy import select, update

from app.db import session_scope
from app.models import AuditEvent, Conversation, Reviewer
from app.privacy.retention import effective_settings

ADMIN_PAGES = ["/console/admin/", "/console/admin/audit"]
ADMIN_POSTS = [
    "/console/admin/reviewers",
    "/console/admin/retention",
    "/console/admin/purge",
    "/console/admin/erase",
    "/console/admin/export",
    "/console/admin/models/activate",
]


def _events(app, action: str | None = None) -> list[AuditEvent]:
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        query = select(AuditEvent).order_by(AuditEvent.id)
        if action:
            query = query.where(AuditEvent.action == action)
        events = list(session.scalars(query))
        session.expunge_all()
        return events


@pytest.fixture
def admin(app, make_reviewer) -> ConsoleClient:
    account = make_reviewer("boss@example.com")
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        session.execute(update(Reviewer).where(Reviewer.id == account.id).values(role="admin"))
    client = app.test_client()
    assert login(client, account.email, REVIEWER_PASSWORD).status_code == 302
    return ConsoleClient(client, csrf_from(client.get("/console/admin/").get_data(as_text=True)))


def test_reviewers_cannot_reach_admin_pages(console):
    for path in ADMIN_PAGES:
        response = console.get(path)
        assert response.status_code == 403
        assert "This page is for admins." in response.get_data(as_text=True)
    for path in ADMIN_POSTS:
        assert console.post(path, data={"email": "x@example.com"}).status_code == 403
    assert "Admin</a>" not in console.get("/console/").get_data(as_text=True)


def test_admin_manages_reviewers_and_every_change_is_audited(app, admin, reviewer):
    page = admin.get("/console/admin/")
    assert page.status_code == 200 and reviewer.email in page.get_data(as_text=True)
    added = admin.post(
        "/console/admin/reviewers",
        data={"email": "Neu@Example.com", "password": "long enough pw", "role": "reviewer"},
    )
    assert added.status_code == 302
    bad = admin.post(
        "/console/admin/reviewers", data={"email": "nope", "password": "x", "role": "reviewer"}
    )
    assert bad.status_code == 302
    assert "Not added: not an e-mail address" in admin.get("/console/admin/").get_data(as_text=True)
    promoted = admin.post(
        f"/console/admin/reviewers/{reviewer.id}", data={"role": "admin", "active": "on"}
    )
    assert promoted.status_code == 302
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert session.get(Reviewer, reviewer.id).role == "admin"
        me = session.scalar(select(Reviewer).where(Reviewer.email == "boss@example.com"))
        assert (
            session.scalar(select(Reviewer.role).where(Reviewer.email == "neu@example.com"))
            == "reviewer"
        )
    # An admin cannot lock themselves out.
    admin.post(f"/console/admin/reviewers/{me.id}", data={"role": "reviewer", "active": "on"})
    assert "cannot demote or disable your own account" in admin.get("/console/admin/").get_data(
        as_text=True
    )
    events = [(e.actor, e.action, e.target) for e in _events(app)]
    assert ("boss@example.com", "reviewer_add", "reviewer:neu@example.com") in events
    assert ("boss@example.com", "reviewer_update", f"reviewer:{reviewer.email}") in events
    assert len([e for e in events if e[1].startswith("reviewer")]) == 2  # refusals are not changes
    audit_page = admin.get("/console/admin/audit").get_data(as_text=True)
    assert "reviewer_update" in audit_page and "boss@example.com" in audit_page


def test_replies_and_discards_are_audited_with_who(app, console, reviewer):
    first = escalate_in(app, "my card never came")
    second = escalate_in(app, "spam spam")
    console.post(f"/console/items/{first}/claim")
    console.post(f"/console/items/{first}/reply", data={"text": "It is on its way."})
    console.post(f"/console/items/{second}/discard", data={"reason": "spam"})
    events = _events(app)
    assert [(e.actor, e.actor_id, e.action, e.target) for e in events] == [
        (reviewer.email, reviewer.id, "reply", f"review_item:{first}"),
        (reviewer.email, reviewer.id, "discard", f"review_item:{second}"),
    ]
    assert all(e.at is not None for e in events)
    assert "It is on its way" not in json.dumps([e.detail for e in events])


def test_admin_exports_and_erases_a_conversation_from_the_console(app, admin):
    item_id = escalate_in(app, "my card never came")
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        cid = session.scalar(select(Conversation.id))
    exported = admin.post("/console/admin/export", data={"conversation_id": cid})
    assert exported.status_code == 200 and exported.mimetype == "application/json"
    assert "attachment" in exported.headers["Content-Disposition"]
    assert json.loads(exported.data)["conversations"][0]["review_items"][0]["id"] == item_id
    unconfirmed = admin.post("/console/admin/erase", data={"conversation_id": cid})
    assert unconfirmed.status_code == 302
    assert "tick the confirmation" in admin.get("/console/admin/").get_data(as_text=True)
    erased = admin.post("/console/admin/erase", data={"conversation_id": cid, "confirm": "yes"})
    assert erased.status_code == 302
    assert "Erased 1 conversations" in admin.get("/console/admin/").get_data(as_text=True)
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert session.get(Conversation, cid) is None
    (event,) = _events(app, "erase")
    assert event.actor == "boss@example.com" and cid not in json.dumps(event.detail)
    missing = admin.post("/console/admin/erase", data={"conversation_id": cid, "confirm": "yes"})
    assert missing.status_code == 302
    assert "Nothing is stored for this customer" in admin.get("/console/admin/").get_data(
        as_text=True
    )


def test_admin_sets_retention_and_purges(app, admin):
    response = admin.post("/console/admin/retention", data={"days": "30", "training_days": "10"})
    assert response.status_code == 302
    assert "must be at least TIERDESK_RETENTION_DAYS" in admin.get("/console/admin/").get_data(
        as_text=True
    )
    admin.post("/console/admin/retention", data={"days": "30", "training_days": "400"})
    assert effective_settings(app.config) == {"RETENTION_DAYS": 30, "TRAINING_RETENTION_DAYS": 400}
    admin.post("/console/admin/retention", data={"days": "ten", "training_days": "400"})
    assert "whole number of days" in admin.get("/console/admin/").get_data(as_text=True)
    # a cutoff a million days back is before year 1: refused, not a purge that fails
    admin.post("/console/admin/retention", data={"days": "1000000", "training_days": "1000000"})
    assert "at most 36500 days" in admin.get("/console/admin/").get_data(as_text=True)
    admin.post("/console/admin/purge", data={"dry_run": "1"})
    assert "Preview: would delete 0 conversation(s)" in admin.get("/console/admin/").get_data(
        as_text=True
    )
    (event,) = _events(app, "retention_set")
    assert event.detail == {"retention_days": 30, "training_retention_days": 400}


def test_model_activation_of_an_unknown_version_is_explained(admin):
    response = admin.post("/console/admin/models/activate", data={"version": "nope"})
    assert response.status_code == 302
    assert "no model version &#39;nope&#39;" in admin.get("/console/admin/").get_data(as_text=True)
