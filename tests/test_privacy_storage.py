"""Acceptance: PII sent through the chat API and the console is masked everywhere it is kept.

Messages with every kind of PII go in as a customer would type them (questions, a "talk to a
person" request, a feedback comment) and as a reviewer would (a reply that repeats them, a
taught example, a discard reason); then every column of every table, every Redis key and
value under the test's prefix, and every captured log line are searched for the originals.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from fixtures_privacy import database_dump, redis_dump

from app.chat.service import stored_trace
from app.db import session_scope
from app.models import Message, PiiRef, ReviewItem
from app.privacy.pii import Masker
from app.privacy.refs import digest

CARD = "4111 1111 1111 1111"
CARD_DASHED = "5500-0000-0000-0004"
IBAN = "DE89 3704 0044 0532 0130 00"
IBAN_COMPACT = "GB82WEST12345698765432"
EMAIL = "anna.schmidt@example.com"
PHONE = "+44 20 7946 0958"
PHONE_US = "(415) 555-0132"
ORIGINALS = [CARD, CARD_DASHED, IBAN, IBAN_COMPACT, EMAIL, PHONE, PHONE_US]


def _forms(value: str) -> set[str]:
    """The ways an original could show up: as typed, without separators, lower case."""
    compact = re.sub(r"[ \-()]", "", value)
    return {value, value.lower(), compact, compact.lower()}


NEEDLES = set().union(*(_forms(v) for v in ORIGINALS)) | {"anna.schmidt", "79460958"}


def _leaks(blob: str) -> list[str]:
    return sorted(n for n in NEEDLES if n in blob)


def test_pii_through_api_and_console_is_stored_masked(
    app, console, redis_client, redis_prefix, caplog, sample_articles
):
    caplog.set_level(logging.DEBUG)
    api = app.test_client()
    first = api.post(
        "/api/v1/chat",
        json={"message": f"my card {CARD} was charged twice, mail me at {EMAIL}"},
    ).get_json()
    conversation_id = first["conversation_id"]
    for message in (
        f"refund to {IBAN} or {IBAN_COMPACT} please",
        f"call me on {PHONE} or {PHONE_US}, card {CARD_DASHED}",
    ):
        response = api.post(
            "/api/v1/chat", json={"message": message, "conversation_id": conversation_id}
        )
        assert response.status_code == 200
    api.post(
        "/api/v1/chat",
        json={"message": f"talk to a person, {EMAIL}", "conversation_id": conversation_id},
    )
    # Logs of the app's own code path see the original too (the router may): still masked.
    logging.getLogger("app.test").warning("customer wrote %s and %s", CARD, EMAIL)

    # The reviewer answers the first item, repeating the PII; teaches and discards others.
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        items = session.query(ReviewItem).order_by(ReviewItem.id).all()
        item_ids = [i.id for i in items]
    # No models loaded: the first message went to review and the others joined its item.
    assert len(item_ids) == 1
    page = console.get(f"/console/items/{item_ids[0]}")
    assert page.status_code == 200
    shown = page.get_data(as_text=True)
    assert "[card ****1111]" in shown and "[email ***@example.com]" in shown
    assert not _leaks(shown)
    console.post(f"/console/items/{item_ids[0]}/claim")
    reply = console.post(
        f"/console/items/{item_ids[0]}/reply",
        data={"text": f"We blocked {CARD} and wrote to {EMAIL}; call {PHONE} if needed."},
    )
    assert reply.status_code == 302
    # Back with the bot, the customer's next message is a review item of its own.
    api.post(
        "/api/v1/chat",
        json={"message": f"and the refund to {IBAN}?", "conversation_id": conversation_id},
    )
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        item_ids = [i.id for i in session.query(ReviewItem).order_by(ReviewItem.id)]
    assert len(item_ids) == 2
    console.post(f"/console/items/{item_ids[1]}/claim")
    console.post(
        f"/console/items/{item_ids[1]}/teach",
        data={"kind": "intent", "text": f"refund to {IBAN} please", "intent": "card_arrival"},
    )
    console.post(
        f"/console/items/{item_ids[1]}/discard", data={"reason": f"duplicate of {IBAN_COMPACT}"}
    )
    # The customer's feedback on the reply, with a comment full of PII.
    history = api.get(f"/api/v1/conversations/{conversation_id}").get_json()
    agent = [m for m in history["messages"] if m["role"] == "agent"]
    assert agent and "[card ****1111]" in agent[0]["text"]
    vote = api.post(
        f"/api/v1/messages/{agent[0]['id']}/feedback",
        json={"helpful": True, "comment": f"thanks, my other card is {CARD_DASHED}, {PHONE_US}"},
    )
    assert vote.status_code == 200

    db_text = database_dump(app.config["SQLALCHEMY_DATABASE_URI"])
    assert "[iban DE**3000]" in db_text and "[phone ***58]" in db_text  # masked, kept useful
    assert "[card ****0004]" in db_text and "[email ***@example.com]" in db_text
    assert _leaks(db_text) == []
    assert _leaks(redis_dump(redis_client, redis_prefix)) == []
    assert _leaks(caplog.text) == []
    assert _leaks("\n".join(r.getMessage() for r in caplog.records)) == []

    # The address is findable by its keyed digest only.
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        refs = session.query(PiiRef).filter_by(conversation_id=conversation_id).all()
        assert {r.digest for r in refs} == {digest("test-secret", "email", EMAIL)}
        texts = [m.text for m in session.query(Message).filter_by(role="customer")]
    assert (
        texts[0] == "my card [card ****1111] was charged twice, mail me at [email ***@example.com]"
    )


def test_detectors_can_be_switched_off(make_app):
    app = make_app(PII_DETECTORS="email", PII_PATTERNS='{"customer_no": "CN-\\\\d{6}"}')
    api = app.test_client()
    api.post("/api/v1/chat", json={"message": f"{CARD} {EMAIL} CN-123456"})
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        (stored,) = [m.text for m in session.query(Message).filter_by(role="customer")]
    assert stored == f"{CARD} [email ***@example.com] [customer_no]"


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("PII_DETECTORS", "card,passport", "TIERDESK_PII_DETECTORS"),
        ("PII_PATTERNS", "{not json", "TIERDESK_PII_PATTERNS"),
        ("PII_PATTERNS", '{"x": "("}', "TIERDESK_PII_PATTERNS"),
    ],
)
def test_bad_masking_settings_stop_the_start_naming_the_setting(make_app, setting, value, named):
    from app.privacy import PatternError

    with pytest.raises(PatternError, match=named):
        make_app(**{setting: value})


def test_log_records_are_masked_for_every_handler(app, caplog):
    caplog.set_level(logging.INFO)
    log = logging.getLogger("werkzeug")
    log.info('127.0.0.1 - - "GET /kb?q=card+4111+1111+1111+1111 HTTP/1.1" 200 -')
    try:
        raise ValueError(f"bad input {IBAN}")
    except ValueError:
        logging.getLogger("app.x").exception("failed for %s", PHONE)
    assert _leaks(caplog.text) == []
    assert "[card ****1111]" in caplog.text and "[iban DE**3000]" in caplog.text


def test_stored_trace_masks_customer_text_but_not_version_ids():
    # 20261201-145707 passes the card checks: a version trained at 14:57:07 that day, which
    # free text masks unless letters go on after a dash (a full id, ...-3872fadf)
    version = "20261201-145707"
    trace = {
        "versions": {"models": version, "bert": "minilm"},
        "experiment": {"name": "shorter answers", "arm": "b"},
        "stages": {"note": f"card 4111111111111111, model {version}, id {version}-3872fadf"},
        "confidence": np.float32(0.5),
    }
    stored = stored_trace(trace, "below_threshold", Masker())
    assert stored["versions"] == {"models": version, "bert": "minilm"}
    assert stored["experiment"] == {"name": "shorter answers", "arm": "b"}
    assert stored["stages"]["note"] == (
        f"card [card ****1111], model [card ****5707], id {version}-3872fadf"
    )
    assert stored["escalation_reason"] == "below_threshold"
    assert stored["confidence"] == 0.5 and "versions" in trace  # the caller's trace is intact
