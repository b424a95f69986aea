"""Console security: sessions, CSRF, escaping, login rate limiting, cookies, redirects."""

from __future__ import annotations

from fixtures_review import csrf_from, login

from app.db import session_scope
from app.models import Message, ReviewItem

GET_URLS = [
    "/console/",
    "/console/stats",
    "/console/spot-checks",
    "/console/items/1",
    "/console/events",
    "/console/queue.json",
    "/console/items/1/messages.json",
    "/console/canned",
    "/console/deliveries",
    "/console/admin/",
    "/console/admin/audit",
    "/console/models",
]
POST_URLS = [
    "/console/admin/reviewers",
    "/console/admin/reviewers/1",
    "/console/admin/retention",
    "/console/admin/purge",
    "/console/admin/export",
    "/console/admin/erase",
    "/console/admin/models/activate",
    "/console/items/1/typing",
    "/console/items/1/handback",
    "/console/items/1/resolve",
    "/console/items/1/notes",
    "/console/canned",
    "/console/canned/1/delete",
    "/console/deliveries/1/retry",
    "/console/claim",
    "/console/logout",
    "/console/items/1/claim",
    "/console/items/1/release",
    "/console/items/1/reply",
    "/console/items/1/article",
    "/console/items/1/discard",
    "/console/items/1/teach",
    "/console/spot-checks/1/right",
    "/console/spot-checks/1/wrong",
]


def _console_rules(app) -> set[str]:
    return {rule.rule for rule in app.url_map.iter_rules() if rule.endpoint.startswith("console.")}


def test_the_lists_cover_every_console_url(app):
    import re

    listed = set(GET_URLS + POST_URLS)
    rules = {re.sub(r"<int:\w+>", "1", rule) for rule in _console_rules(app)}
    assert rules - {"/console/login"} == listed


def test_console_urls_without_a_session_redirect_to_login(client, escalate_message):
    escalate_message()
    for url in GET_URLS:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.headers["Location"].startswith("/console/login"), url
    for url in POST_URLS:
        response = client.post(url, data={"text": "hi"})
        assert response.status_code == 302, url
        assert response.headers["Location"].startswith("/console/login"), url


def test_posts_without_a_valid_csrf_token_get_400(app, console, escalate_message):
    item_id = escalate_message()
    assert item_id == 1  # the id the URL lists use
    for url in POST_URLS:
        missing = console.client.post(url, data={"text": "hi", "reason": "x", "slug": "a"})
        wrong = console.client.post(
            url, data={"csrf_token": console.csrf[:-2] + "xx", "text": "hi"}
        )
        assert missing.status_code == 400 and wrong.status_code == 400, url
    # Nothing happened: the item is untouched and the session is still logged in.
    assert console.get("/console/").status_code == 200
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert session.get(ReviewItem, item_id).status == "pending"
        assert not session.query(Message).filter_by(role="agent").count()


def test_login_needs_a_csrf_token(client, reviewer):
    response = client.post(
        "/console/login", data={"email": reviewer.email, "password": reviewer.password}
    )
    assert response.status_code == 400


def test_login_wrong_password_then_right(client, reviewer):
    assert login(client, reviewer.email, "not the password").status_code == 401
    assert client.get("/console/").status_code == 302
    assert login(client, reviewer.email, reviewer.password).status_code == 302
    assert client.get("/console/").status_code == 200


def test_session_cookie_is_httponly_and_samesite(client, reviewer):
    response = login(client, reviewer.email, reviewer.password)
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_logout_ends_the_session(console):
    response = console.post("/console/logout")
    assert response.status_code == 302
    assert console.get("/console/").status_code == 302


def test_login_failures_are_rate_limited(app, client, reviewer, make_reviewer):
    other = make_reviewer("bo@example.com")
    limit = app.config["LOGIN_MAX_FAILURES"]
    for _ in range(limit):
        assert login(client, reviewer.email, "guess").status_code == 401
    blocked = login(client, reviewer.email, reviewer.password)  # even the right password
    assert blocked.status_code == 429
    assert int(blocked.headers["Retry-After"]) > 0
    assert "Too many failed attempts" in blocked.get_data(as_text=True)
    # Per IP and e-mail: another account from the same address may still log in.
    assert login(client, other.email, other.password).status_code == 302


def test_rate_limit_window_ends(tmp_path, db_url, redis_client, redis_prefix):
    from fixtures_review import REVIEWER_PASSWORD, build_app

    from app.review.auth import add_reviewer

    app = build_app(
        db_url, redis_client, redis_prefix, tmp_path, LOGIN_MAX_FAILURES=2, LOGIN_WINDOW_SECONDS=1
    )
    with session_scope(db_url) as session:
        add_reviewer(session, "cy@example.com", REVIEWER_PASSWORD)
    client = app.test_client()
    for _ in range(2):
        assert login(client, "cy@example.com", "nope").status_code == 401
    assert login(client, "cy@example.com", REVIEWER_PASSWORD).status_code == 429
    import time

    time.sleep(2.1)
    assert login(client, "cy@example.com", REVIEWER_PASSWORD).status_code == 302


def test_script_in_a_customer_message_is_shown_as_text(console, escalate_message):
    attack = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    item_id = escalate_message(
        attack,
        draft_text=attack,
        trace={
            "route": attack,
            "stages": [
                {"tier": attack, "candidates": [{"slug": attack, "title": attack, "score": 1}]}
            ],
        },
    )
    for url in ("/console/", f"/console/items/{item_id}"):
        html = console.get(url).get_data(as_text=True)
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(" in html


def test_login_does_not_redirect_off_site(client, reviewer):
    page = client.get("/console/login?next=//evil.example/x")
    token = csrf_from(page.get_data(as_text=True))
    for target in ("//evil.example/x", "https://evil.example/", "/elsewhere"):
        client.post("/console/logout", data={"csrf_token": token})
        page = client.get("/console/login")
        token = csrf_from(page.get_data(as_text=True))
        response = client.post(
            "/console/login",
            data={
                "csrf_token": token,
                "email": reviewer.email,
                "password": reviewer.password,
                "next": target,
            },
        )
        assert response.headers["Location"] == "/console/"
        token = csrf_from(client.get("/console/").get_data(as_text=True))


def test_login_follows_a_console_next(client, reviewer):
    page = client.get("/console/login?next=/console/stats")
    token = csrf_from(page.get_data(as_text=True))
    response = client.post(
        "/console/login",
        data={
            "csrf_token": token,
            "email": reviewer.email,
            "password": reviewer.password,
            "next": "/console/stats",
        },
    )
    assert response.headers["Location"] == "/console/stats"


def test_unknown_item_is_404_not_500(console):
    assert console.get("/console/items/424242").status_code == 404
    assert console.post("/console/items/424242/reply", data={"text": "x"}).status_code == 404


def test_passwords_are_stored_hashed(app, reviewer):
    from app.models import Reviewer

    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        stored = session.get(Reviewer, reviewer.id).password_hash
    assert reviewer.password not in stored and stored.startswith(("scrypt:", "pbkdf2:"))


def test_disabled_reviewer_loses_the_session(app, console, reviewer):
    from app.models import Reviewer

    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        session.get(Reviewer, reviewer.id).active = False
    assert console.get("/console/").status_code == 302


HOSTILE_VALUES = [
    "",
    "   ",
    "\x00\x01\x02",
    "' OR 1=1 --",
    "<script>alert(1)</script>",
    "x" * 5000,
    "😀" * 300,
    "../../etc/passwd",
    "%00",
    "9" * 40,
]


def test_hostile_form_values_never_cause_a_server_error(app, console, escalate_message):
    item_id = escalate_message()
    console.post("/console/claim")
    actions = ["reply", "article", "discard", "teach", "claim", "release"]
    for value in HOSTILE_VALUES:
        for action in actions:
            data = {
                "text": value,
                "slug": value,
                "reason": value,
                "intent": value,
                "kind": value,
                "title": value,
                "body": value,
                "category": value,
            }
            response = console.post(f"/console/items/{item_id}/{action}", data=data)
            assert response.status_code < 500, (action, value[:20])
        for kind in ("intent", "question", "article"):
            response = console.post(
                f"/console/items/{item_id}/teach",
                data={"kind": kind, "text": value, "title": value, "body": value, "slug": value},
            )
            assert response.status_code < 500, (kind, value[:20])
        assert console.get(f"/console/?intent={value}&route={value}").status_code == 200
        assert console.get(f"/console/stats?days={value}").status_code == 200
    too_big = console.post(f"/console/items/{item_id}/reply", data={"text": "x" * 70_000})
    assert too_big.status_code == 413
    # The first printable value was a valid reply and was stored verbatim, once.
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        [reply] = session.query(Message).filter_by(role="agent").all()
        assert reply.text == "' OR 1=1 --"
