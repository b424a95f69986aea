"""The console's handoff pages and endpoints, on the console blueprint: live events, typing,
hand back, resolve, internal notes, canned replies, deliveries, and the background threads
(outbox delivery, conversations left with a person, first-response warnings).

Everything here needs a logged-in reviewer and, for POSTs, the CSRF token (the blueprint's
guard in console.py).
"""

from __future__ import annotations

import logging
import threading

import redis
from flask import (
    current_app,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from sqlalchemy import select
from werkzeug.exceptions import NotFound

from app.db import get_session, row_id, session_scope
from app.live.bus import console_channel
from app.live.stream import event_stream, get_hub, streams_supported
from app.models import CannedReply, Conversation, Delivery, Message, ReviewItem, ReviewNote, utcnow
from app.review import handoff, service
from app.review.console import bp
from app.services import get_review_queue
from app.vocab import ReviewStatus

log = logging.getLogger(__name__)

MAX_NOTE_CHARS = 4000
MAX_CANNED_TITLE = 200
BACKGROUND_KEY = "tierdesk.handoff_background"
_background_lock = threading.Lock()


def _item_or_404(item_id: int) -> ReviewItem:
    item = get_session().get(ReviewItem, item_id)
    if item is None:
        raise NotFound("No such review item.")
    return item


def item_context(db, item: ReviewItem) -> dict:
    """What the item page shows beyond the review itself."""
    conversation = db.get(Conversation, item.conversation_id)
    notes = db.scalars(
        select(ReviewNote).where(ReviewNote.item_id == item.id).order_by(ReviewNote.id)
    ).all()
    canned = db.scalars(select(CannedReply).order_by(CannedReply.title)).all()
    return {
        "conversation": conversation,
        "handoff_state": conversation.status if conversation else None,
        "notes": notes,
        "canned": canned,
        "agent_name": handoff.agent_name(g.reviewer.email),
    }


# -- live ---------------------------------------------------------------------------------------


@bp.get("/events")
def events():
    if not streams_supported():
        return jsonify(error={"code": "live_unavailable", "message": "Poll instead."}), 503
    return event_stream([console_channel(current_app.config["REDIS_PREFIX"])])


@bp.get("/queue.json")
def queue_json():
    """Open items with their waiting time: the console's polling fallback and breach check."""
    db = get_session()
    now = utcnow()
    items = db.scalars(
        select(ReviewItem)
        .where(ReviewItem.status.in_((ReviewStatus.PENDING, ReviewStatus.CLAIMED)))
        .order_by(ReviewItem.created_at)
        .limit(500)
    ).all()
    return jsonify(
        first_response_target_s=current_app.config.get("FIRST_RESPONSE_TARGET_SECONDS", 300),
        items=[
            {
                "id": i.id,
                "status": i.status,
                "reason": i.reason,
                "waited_s": int((now - i.created_at).total_seconds()),
            }
            for i in items
        ],
    )


@bp.get("/items/<int:item_id>/messages.json")
def item_messages(item_id: int):
    """The conversation's messages after ``after`` (a seq): live updates of the item page."""
    item = _item_or_404(item_id)
    after = row_id(request.args.get("after"))
    after = -1 if after is None else after
    db = get_session()
    rows = db.scalars(
        select(Message)
        .where(Message.conversation_id == item.conversation_id, Message.seq > after)
        .order_by(Message.seq)
        .limit(200)
    ).all()
    conversation = db.get(Conversation, item.conversation_id)
    return jsonify(
        state=conversation.status if conversation else None,
        messages=[
            {
                "id": m.id,
                "seq": m.seq,
                "role": m.role,
                "status": m.status,
                "text": m.text,
                "created_at": m.created_at.strftime("%Y-%m-%d %H:%M"),
            }
            for m in rows
        ],
    )


@bp.post("/items/<int:item_id>/typing")
def typing(item_id: int):
    item = _item_or_404(item_id)
    if item.status == ReviewStatus.CLAIMED and item.claimed_by == g.reviewer.id:
        get_hub().to_conversation(
            item.conversation_id,
            {"type": "typing", "agent": handoff.agent_name(g.reviewer.email)},
        )
    return "", 204


# -- hand back, resolve -------------------------------------------------------------------------


def _finish(item_id: int, action, message: str):
    db = get_session()
    item = _item_or_404(item_id)
    try:
        action(db, item, g.reviewer.id, queue=get_review_queue())
    except (service.ReviewError, handoff.HandoffError) as exc:
        db.rollback()
        flash(str(exc), "error")
        return redirect(url_for("console.item", item_id=item_id))
    flash(message)
    return redirect(url_for("console.queue"))


@bp.post("/items/<int:item_id>/handback")
def hand_back(item_id: int):
    return _finish(item_id, service.hand_back, "The bot answers this conversation again.")


@bp.post("/items/<int:item_id>/resolve")
def resolve(item_id: int):
    return _finish(item_id, service.resolve, "Conversation resolved.")


# -- notes and canned replies -------------------------------------------------------------------


@bp.post("/items/<int:item_id>/notes")
def add_note(item_id: int):
    db = get_session()
    item = _item_or_404(item_id)
    try:
        text = service.clean_text(request.form.get("text"), MAX_NOTE_CHARS, "note")
    except service.ReviewError as exc:
        flash(str(exc), "error")
    else:
        db.add(ReviewNote(item_id=item.id, author_id=g.reviewer.id, text=text))
        db.commit()
        flash("Note saved (reviewers only).")
    return redirect(url_for("console.item", item_id=item_id) + "#notes")


@bp.get("/canned")
def canned():
    replies = get_session().scalars(select(CannedReply).order_by(CannedReply.title)).all()
    return render_template("console/canned.html", replies=replies)


@bp.post("/canned")
def add_canned():
    db = get_session()
    try:
        title = service.clean_text(request.form.get("title"), MAX_CANNED_TITLE, "title")
        body = service.clean_text(request.form.get("body"), service.MAX_REPLY_CHARS, "reply")
    except service.ReviewError as exc:
        flash(str(exc), "error")
        return redirect(url_for("console.canned"))
    existing = db.scalar(select(CannedReply).where(CannedReply.title == title))
    if existing is not None:
        existing.body = body
        flash(f"Updated “{title}”.")
    else:
        db.add(CannedReply(title=title, body=body, created_by=g.reviewer.id))
        flash(f"Saved “{title}”.")
    db.commit()
    back = request.form.get("back_to_item")
    if (item_id := row_id(back)) is not None:
        return redirect(url_for("console.item", item_id=item_id))
    return redirect(url_for("console.canned"))


@bp.post("/canned/<int:reply_id>/delete")
def delete_canned(reply_id: int):
    db = get_session()
    reply = db.get(CannedReply, reply_id)
    if reply is not None:
        db.delete(reply)
        db.commit()
        flash("Canned reply deleted.")
    return redirect(url_for("console.canned"))


# -- deliveries ---------------------------------------------------------------------------------


@bp.get("/deliveries")
def deliveries():
    rows = get_session().scalars(select(Delivery).order_by(Delivery.id.desc()).limit(200)).all()
    return render_template("console/deliveries.html", deliveries=rows)


@bp.post("/deliveries/<int:delivery_id>/retry")
def retry_delivery(delivery_id: int):
    from app.notify.outbox import retry

    if retry(get_session(), delivery_id):
        flash(f"Delivery #{delivery_id} will be tried again.")
    return redirect(url_for("console.deliveries"))


# -- background work ----------------------------------------------------------------------------


def warn_breaches(db_url: str, client: redis.Redis, prefix: str, config) -> int:
    """Queue one ``review.breach_warning`` (Slack, webhooks) per item that has waited longer
    than ``FIRST_RESPONSE_TARGET_SECONDS`` without a reply; returns how many."""
    from datetime import timedelta

    from app.notify.outbox import record_event

    target = int(config.get("FIRST_RESPONSE_TARGET_SECONDS", 300))
    if target <= 0:
        return 0
    now = utcnow()
    warned = 0
    with session_scope(db_url) as session:
        late = session.scalars(
            select(ReviewItem).where(
                ReviewItem.status == ReviewStatus.PENDING,
                ReviewItem.reply_message_id.is_(None),
                ReviewItem.created_at < now - timedelta(seconds=target),
            )
        ).all()
        for item in late:
            try:
                first = client.set(f"{prefix}review:breach_warned:{item.id}", 1, nx=True, ex=86400)
            except redis.RedisError:
                return warned
            if not first:
                continue
            record_event(
                session,
                config,
                "review.breach_warning",
                {
                    "review_item_id": item.id,
                    "conversation_id": item.conversation_id,
                    "waited_s": int((now - item.created_at).total_seconds()),
                    "target_s": target,
                },
            )
            warned += 1
    return warned


class HandoffWorker:
    """Every ``interval`` seconds: return conversations whose person let go of them to the
    queue, and warn about items past the first-response target."""

    def __init__(self, app, interval: float) -> None:
        self.app = app
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="handoff-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def run_once(self) -> None:
        app = self.app
        config = app.config
        with app.app_context():
            handoff.sweep(config["SQLALCHEMY_DATABASE_URI"], get_review_queue(), get_hub(), config)
            from app.services import get_redis

            warn_breaches(
                config["SQLALCHEMY_DATABASE_URI"], get_redis(), config["REDIS_PREFIX"], config
            )

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.run_once()
            except Exception:  # noqa: BLE001 - keep the thread alive through hiccups
                log.exception("handoff sweep failed; retrying")


def start_background(app) -> None:
    """Start the outbox deliverer and the handoff worker once per serving process."""
    from app.notify.outbox import Deliverer

    with _background_lock:
        if BACKGROUND_KEY in app.extensions:
            return
        deliverer = Deliverer(app.config["SQLALCHEMY_DATABASE_URI"], app.config)
        deliverer.start()
        worker = HandoffWorker(app, interval=15.0)
        worker.start()
        app.extensions[BACKGROUND_KEY] = (deliverer, worker)
