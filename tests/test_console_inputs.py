"""Console requests a reviewer's browser (or a hand-edited URL) may send with values the
database cannot hold or headers cannot carry: each is a 404 or a refusal, never a 500."""

from __future__ import annotations

import pytest
from fixtures_review import REVIEWER_PASSWORD, csrf_from

from app.db import row_id

HUGE = str(2**63)  # one past the widest id SQLite and PostgreSQL store


@pytest.mark.parametrize(
    ("text", "expected"),
    [("42", 42), ("-1", -1), (str(2**63 - 1), 2**63 - 1), (HUGE, None), ("²", None),
     ("4 2", None), ("", None), (None, None), ("0x10", None)],
)  # fmt: skip
def test_row_ids_are_ascii_digits_the_database_can_hold(text, expected):
    assert row_id(text) == expected


@pytest.mark.parametrize(
    "path",
    [
        f"/console/items/{HUGE}",
        f"/console/items/{HUGE}/messages.json",
        "/console/items/{item}/messages.json?after=" + HUGE,
        "/console/items/{item}/messages.json?after=-" + HUGE,
        "/console/spot-checks?after=" + HUGE,
    ],
)
def test_ids_and_positions_too_large_to_store_are_not_found_or_ignored(
    console, escalate_message, path
):
    item = escalate_message()
    response = console.get(path.format(item=item))
    assert response.status_code in (200, 404), response.get_data(as_text=True)[:300]


@pytest.mark.parametrize(
    "path",
    [f"/console/items/{HUGE}/claim", f"/console/canned/{HUGE}/delete",
     f"/console/deliveries/{HUGE}/retry", f"/console/spot-checks/{HUGE}/right"],
)  # fmt: skip
def test_posts_to_ids_too_large_to_store_are_not_found(console, path):
    assert console.post(path).status_code == 404


def test_a_canned_reply_back_link_that_is_no_id_goes_to_the_list(console):
    response = console.post(
        "/console/canned", data={"title": "t", "body": "b", "back_to_item": "²"}
    )
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/console/canned")


def test_a_next_address_with_a_line_break_is_not_followed(app, reviewer):
    client = app.test_client()
    token = csrf_from(client.get("/console/login").get_data(as_text=True))
    response = client.post(
        "/console/login",
        data={
            "csrf_token": token,
            "email": reviewer.email,
            "password": REVIEWER_PASSWORD,
            "next": "/console/\nx",
        },
    )
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/console/")
