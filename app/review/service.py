"""Review operations shared by the chat API, the console and the CLI.

Every operation writes the database first and commits; Redis is touched afterwards and its
errors are logged and swallowed, because the reconciler rebuilds the queue from the rows.

What a reviewer types is masked like customer text before it is stored (a reply that repeats a
card number keeps its last four digits only), and every reply and discard is audited.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app import metrics
from app.kb.plain_text import html_to_text
from app.kb.slugs import slugify
from app.kb.store import (
    CONSOLE_SOURCE,
    ArticleRecord,
    InvalidArticle,
    add_taught_question,
    upsert_article,
)
from app.live.bus import on_commit
from app.models import (
    Article,
    Conversation,
    Intent,
    Message,
    Reviewer,
    ReviewItem,
    TrainingExample,
    next_seq,
    utcnow,
)
from app.privacy import mask
from app.review import audit, handoff
from app.review.queue import ReviewQueue
from app.state import KB_REVISION, bump_revision
from app.vocab import (
    CUSTOMER_REASONS,
    OPEN_STATUSES,
    AuditAction,
    ConversationState,
    ReviewStatus,
)

log = logging.getLogger(__name__)


# Priority points: each point is a head start of REVIEW_PRIORITY_STEP_SECONDS in the queue.
PRIORITY_COMPLEX = 1  # complex intent or the complex route
PRIORITY_ASKED_AGAIN = 1  # the customer already asked something in this conversation
PRIORITY_ASKED_FOR_HUMAN = 1  # the customer explicitly asked for a person or voted "not helpful"


def _resolve(session: Session, model, value):
    return value if isinstance(value, model) else session.get(model, value)


def _intent_is_complex(session: Session, intent: str | None) -> bool:
    if not intent:
        return False
    tier = session.scalar(select(Intent.tier).where(Intent.name == intent))
    return tier == "complex"


def compute_priority(
    session: Session,
    *,
    conversation_id: str,
    reason: str,
    intent: str | None,
    route: str | None,
) -> int:
    """Urgency points of a new item; its age adds to them at claim time (see queue.py)."""
    priority = 0
    if route == "complex" or _intent_is_complex(session, intent):
        priority += PRIORITY_COMPLEX
    customer_messages = session.scalar(
        select(func.count())
        .select_from(Message)
        .where(Message.conversation_id == conversation_id, Message.role == "customer")
    )
    if (customer_messages or 0) >= 2:
        priority += PRIORITY_ASKED_AGAIN
    if reason in CUSTOMER_REASONS:
        priority += PRIORITY_ASKED_FOR_HUMAN
    return priority


def escalate(
    session: Session,
    *,
    conversation: Conversation | str,
    message: Message | str,
    reason: str,
    draft_message: Message | str | None = None,
    intent: str | None = None,
    route: str | None = None,
    queue: ReviewQueue | None,
) -> ReviewItem:
    """Record that a human must look at ``message`` and queue it on ``queue`` for the reviewers
    (``None``: no queue here; the reconciler of a serving process queues the row).

    The row is committed before Redis is touched (the database is the source of truth); when
    Redis is unavailable the error is logged and the reconciler queues the item later. An open
    item for the same customer message is returned instead of creating a second one (a "not
    helpful" vote and a "talk to a person" on the same answer make one item).
    """
    conversation = _resolve(session, Conversation, conversation)
    message = _resolve(session, Message, message)
    if conversation is None or message is None:
        raise ValueError("escalate needs an existing conversation and message")
    draft_id = draft_message.id if isinstance(draft_message, Message) else draft_message
    if draft_message is not None and (intent is None or route is None):
        draft = _resolve(session, Message, draft_message)
        if draft is not None:
            intent = intent or draft.intent
            route = route or draft.route

    existing = session.scalar(
        select(ReviewItem).where(
            ReviewItem.message_id == message.id, ReviewItem.status.in_(OPEN_STATUSES)
        )
    )
    if existing is not None:
        return existing

    item = ReviewItem(
        conversation_id=conversation.id,
        message_id=message.id,
        draft_message_id=draft_id,
        reason=(reason or "unspecified")[:64],
        intent=intent,
        route=route,
        status=ReviewStatus.PENDING,
        priority=compute_priority(
            session, conversation_id=conversation.id, reason=reason, intent=intent, route=route
        ),
    )
    session.add(item)
    session.flush()
    handoff.apply(session, conversation, "escalate", details={"reason": item.reason}, strict=False)
    hub = handoff.live_hub()
    if hub is not None:
        payload = {
            "type": "escalated",
            "item_id": item.id,
            "conversation_id": conversation.id,
            "reason": item.reason,
        }
        on_commit(session, lambda: hub.to_console(payload))
    session.commit()
    metrics.ESCALATIONS.labels(item.reason).inc()
    _enqueue(queue, item)
    return item


def _enqueue(queue: ReviewQueue | None, item: ReviewItem) -> None:
    if queue is None:
        return
    try:
        queued = queue.enqueue(item)
    except Exception:  # noqa: BLE001 - the row is committed; the reconciler will queue it
        log.exception(
            "review item %s recorded but not queued; the reconciler will queue it", item.id
        )
        return
    if not queued:
        log.warning(
            "review item %s recorded; Redis unavailable, queued by the reconciler later", item.id
        )


# -- working an item ----------------------------------------------------------------------------


class ReviewError(Exception):
    """An action the reviewer cannot take (shown to them as a message, never a 500)."""


def _close_item(
    session: Session,
    item: ReviewItem,
    reviewer_id: int,
    *,
    queue: ReviewQueue | None,
    status: str,
    resolution: str,
    note: str | None = None,
    reply: Message | None = None,
    draft_unchanged: bool | None = None,
    then: str = ConversationState.BOT,
) -> None:
    """Close ``item`` if this reviewer holds it (or nobody does); commit with the reply. The
    conversation then goes back to the bot (``then="bot"``) or is resolved, once no other item
    of it is open."""
    guard = (ReviewItem.status == ReviewStatus.PENDING) | (
        (ReviewItem.status == ReviewStatus.CLAIMED) & (ReviewItem.claimed_by == reviewer_id)
    )
    values = {
        "status": status,
        "resolution": resolution,
        "resolution_note": note,
        "resolved_at": utcnow(),
        "claimed_by": reviewer_id,
        "lease_expires_at": None,
        "reply_message_id": reply.id if reply is not None else item.reply_message_id,
        "draft_unchanged": draft_unchanged,
    }
    result = session.execute(
        update(ReviewItem)
        .where(ReviewItem.id == item.id, guard)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        session.rollback()
        raise ReviewError(
            "This item is no longer yours: it was resolved or another reviewer "
            "claimed it after your lease ran out."
        )
    still_open = session.scalar(
        select(func.count(ReviewItem.id)).where(
            ReviewItem.conversation_id == item.conversation_id,
            ReviewItem.status.in_(OPEN_STATUSES),
            ReviewItem.id != item.id,
        )
    )
    conversation = session.get(Conversation, item.conversation_id)
    if conversation is not None and not still_open:
        event = "resolve" if then == ConversationState.RESOLVED else "hand_back"
        handoff.apply(session, conversation, event, reviewer_id=reviewer_id, strict=False)
    audit.record(
        session,
        AuditAction.DISCARD if status == ReviewStatus.DISCARDED else AuditAction.REPLY,
        reviewer_id=reviewer_id,
        target=f"review_item:{item.id}",
        detail={"resolution": resolution, "conversation_id": item.conversation_id},
    )
    session.commit()
    session.refresh(item)
    _forget(queue, item.id)


def _forget(queue: ReviewQueue | None, item_id: int) -> None:
    if queue is None:
        return
    try:
        queue.complete(item_id)
    except Exception:  # noqa: BLE001 - a stale id is dropped by the next claim or reconcile
        log.exception("review item %s closed but still listed in Redis", item_id)


def draft_of(session: Session, item: ReviewItem) -> Message | None:
    return session.get(Message, item.draft_message_id) if item.draft_message_id else None


def _agent_message(
    session: Session,
    item: ReviewItem,
    reviewer_id: int,
    text: str,
    html: str | None = None,
    article_slug: str | None = None,
) -> Message:
    message = Message(
        conversation_id=item.conversation_id,
        seq=next_seq(session, item.conversation_id),
        role="agent",
        text=text,
        html=html,
        article_slug=article_slug,
        in_reply_to=item.message_id,
        author_id=reviewer_id,
    )
    session.add(message)
    session.flush()
    _announce_reply(session, item, message)
    return message


def _announce_reply(session: Session, item: ReviewItem, message: Message) -> None:
    """The reply's webhook event and e-mail (in this transaction), its live push (after it)."""
    from flask import current_app, has_app_context

    from app.message_view import public_message
    from app.notify.followup import email_reply
    from app.notify.outbox import record_event

    config = current_app.config if has_app_context() else {}
    payload = public_message(session, message)
    record_event(
        session,
        config,
        "conversation.replied",
        {
            "conversation_id": item.conversation_id,
            "review_item_id": item.id,
            "message_id": message.id,
            "text": message.text,
        },
    )
    conversation = session.get(Conversation, item.conversation_id)
    email_reply(session, config, conversation, message)
    hub = handoff.live_hub()
    if hub is not None:
        event = {"type": "message", "message": payload}
        on_commit(session, lambda: hub.to_conversation(item.conversation_id, event))


def _same_text(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").split()) == " ".join((b or "").split())


def send_reply(
    session: Session,
    item: ReviewItem,
    reviewer_id: int,
    text: str,
    *,
    queue: ReviewQueue | None,
    then: str = ConversationState.BOT,
) -> Message:
    """Send ``text`` to the customer as the reviewer's reply.

    ``then``: ``"bot"`` resolves the item and hands the conversation back to the bot (the
    classic one-shot answer), ``"resolved"`` resolves both, ``"with_person"`` keeps it: the
    reviewer stays in the conversation and the bot stays silent."""
    text = mask(clean_text(text, MAX_REPLY_CHARS, "reply"))
    draft = draft_of(session, item)
    unchanged = _same_text(text, draft.text) if draft is not None and draft.text else None
    if then == ConversationState.WITH_PERSON:
        return _reply_and_stay(session, item, reviewer_id, text, unchanged, queue)
    reply = _agent_message(session, item, reviewer_id, text)
    _close_item(
        session,
        item,
        reviewer_id,
        queue=queue,
        status=ReviewStatus.RESOLVED,
        resolution="reply",
        reply=reply,
        draft_unchanged=unchanged,
        then=then,
    )
    return reply


def _holds(item: ReviewItem, reviewer_id: int) -> bool:
    return item.status == ReviewStatus.CLAIMED and item.claimed_by == reviewer_id


def _reply_and_stay(
    session: Session,
    item: ReviewItem,
    reviewer_id: int,
    text: str,
    unchanged: bool | None,
    queue: ReviewQueue | None,
) -> Message:
    session.refresh(item)
    if not _holds(item, reviewer_id):
        raise ReviewError(_not_held(session, item))
    reply = _agent_message(session, item, reviewer_id, text)
    item.reply_message_id = reply.id
    if item.draft_unchanged is None:
        item.draft_unchanged = unchanged
    conversation = session.get(Conversation, item.conversation_id)
    handoff.apply(session, conversation, "take_over", reviewer_id=reviewer_id, strict=False)
    session.commit()
    _renew_lease(queue, item.id, reviewer_id)
    return reply


def _not_held(session: Session, item: ReviewItem) -> str:
    """Why a reviewer who does not hold ``item`` cannot answer in its conversation."""
    if item.status == ReviewStatus.CLAIMED:  # another reviewer's (see _holds)
        holder = session.get(Reviewer, item.claimed_by) if item.claimed_by else None
        who = f"Another reviewer, {holder.email}," if holder else "Another reviewer"
        return f"{who} holds this item now; your reply was not sent."
    if item.status not in OPEN_STATUSES:
        return f"This item is {item.status} already; your reply was not sent."
    return "Claim this item before you answer in the conversation."


def _renew_lease(queue: ReviewQueue | None, item_id: int, reviewer_id: int) -> None:
    if queue is None:
        return
    try:
        queue.renew(item_id, reviewer_id)
    except Exception:  # noqa: BLE001 - the reply is stored; the lease is a convenience
        log.exception("could not renew the lease of review item %s", item_id)


def take_over(session: Session, item: ReviewItem, reviewer_id: int) -> None:
    """The reviewer claimed ``item``: its conversation is now with them (the bot is silent)."""
    session.refresh(item)
    if not _holds(item, reviewer_id):
        return
    conversation = session.get(Conversation, item.conversation_id)
    handoff.apply(session, conversation, "take_over", reviewer_id=reviewer_id, strict=False)
    session.commit()


def return_to_queue(session: Session, item: ReviewItem) -> None:
    """The reviewer gave ``item`` back: its conversation waits for a person again."""
    conversation = session.get(Conversation, item.conversation_id)
    if conversation is not None:
        handoff.apply(session, conversation, "return_to_queue", strict=False)
        session.commit()


def hand_back(
    session: Session, item: ReviewItem, reviewer_id: int, *, queue: ReviewQueue | None
) -> None:
    """Close the item and give the conversation back to the bot."""
    _finish(session, item, reviewer_id, ConversationState.BOT, queue)


def resolve(
    session: Session, item: ReviewItem, reviewer_id: int, *, queue: ReviewQueue | None
) -> None:
    """Close the item and mark the conversation resolved."""
    _finish(session, item, reviewer_id, ConversationState.RESOLVED, queue)


def _finish(
    session: Session, item: ReviewItem, reviewer_id: int, then: str, queue: ReviewQueue | None
) -> None:
    session.refresh(item)
    replied = item.reply_message_id is not None
    _close_item(
        session,
        item,
        reviewer_id,
        queue=queue,
        status=ReviewStatus.RESOLVED if replied else ReviewStatus.DISCARDED,
        resolution="reply" if replied else ("handed_back" if then == "bot" else "closed"),
        draft_unchanged=item.draft_unchanged,
        then=then,
    )


def reply_with_article(
    session: Session, item: ReviewItem, reviewer_id: int, slug: str, *, queue: ReviewQueue | None
) -> Message:
    """Answer with a published KB article (its sanitised HTML) and resolve the item."""
    article = session.scalar(
        select(Article).where(Article.slug == slug, Article.published.is_(True))
    )
    if article is None:
        raise ReviewError(f"No published article with the slug {slug!r}.")
    draft = draft_of(session, item)
    unchanged = draft.article_slug == slug if draft is not None and draft.article_slug else None
    reply = _agent_message(
        session,
        item,
        reviewer_id,
        _article_text(article),
        html=article.body_html or None,
        article_slug=article.slug,
    )
    _close_item(
        session,
        item,
        reviewer_id,
        queue=queue,
        status=ReviewStatus.RESOLVED,
        resolution="article",
        reply=reply,
        draft_unchanged=unchanged,
    )
    return reply


def _article_text(article: Article) -> str:
    text = html_to_text(article.body_html) if article.body_html else ""
    return text or article.body


def discard(
    session: Session, item: ReviewItem, reviewer_id: int, reason: str, *, queue: ReviewQueue | None
) -> None:
    """Close the item without replying (spam, duplicate, already answered...)."""
    reason = mask(clean_text(reason, 500, "discard reason"))
    _close_item(
        session,
        item,
        reviewer_id,
        queue=queue,
        status=ReviewStatus.DISCARDED,
        resolution="discard",
        note=reason,
    )


def clean_text(value: str | None, limit: int, what: str) -> str:
    value = "".join(ch for ch in (value or "") if ch in "\n\t" or ch.isprintable()).strip()
    if not value:
        raise ReviewError(f"The {what} is empty.")
    if len(value) > limit:
        raise ReviewError(f"The {what} is longer than {limit} characters.")
    return value


MAX_REPLY_CHARS = 4000


# -- teaching -----------------------------------------------------------------------------------


def known_intents(session: Session) -> list[str]:
    """Declared intents plus article categories (an article's category is an intent too)."""
    names = set(session.scalars(select(Intent.name)))
    names |= {c for c in session.scalars(select(Article.category).distinct()) if c}
    return sorted(names)


def teach_intent(
    session: Session,
    text: str,
    intent: str,
    *,
    sample_share: float | None = None,
    intents: Collection[str] | None = None,
    commit: bool = True,
) -> tuple[TrainingExample, bool]:
    """Store ``text`` as a training example of ``intent``; the next ``tierdesk train`` learns
    it. Origin "reviewer", or "spot_check" with ``sample_share`` (the share of answered
    questions checked when this one was drawn, ``app.review.spot_checks``), which calibration
    weighs 1/share.
    ``intents``: the names allowed (default ``known_intents``); ``commit=False`` leaves the
    commit to the caller's transaction. Returns the example and whether it is new."""
    text = mask(clean_text(text, 2000, "example"))
    intent = (intent or "").strip()
    if intent not in (known_intents(session) if intents is None else intents):
        raise ReviewError(f"Unknown intent {intent!r}.")
    existing = session.scalar(
        select(TrainingExample).where(
            TrainingExample.text == text, TrainingExample.intent == intent
        )
    )
    if existing is not None:
        return existing, False
    example = TrainingExample(
        text=text,
        intent=intent,
        origin="reviewer" if sample_share is None else "spot_check",
        sample_share=sample_share,
    )
    session.add(example)
    if commit:
        session.commit()
    return example, True


def teach_question(session: Session, text: str, slug: str) -> tuple[Article, bool]:
    """Append ``text`` to an article's alternate questions (a new version of the article).

    Running servers rebuild their retrieval indexes when the KB revision moves; the intent
    models learn the question at the next ``tierdesk train``."""
    text = mask(clean_text(text, 2000, "question"))
    article = session.scalar(select(Article).where(Article.slug == slug))
    if article is None:
        raise ReviewError(f"No article with the slug {slug!r}.")
    known = {q.casefold().strip() for q in article.questions or []}
    if text.casefold() in known or text.casefold() == article.title.casefold():
        return article, False
    _upsert(
        session,
        ArticleRecord(
            slug=article.slug,
            title=article.title,
            body=article.body,
            category=article.category,
            tags=list(article.tags or []),
            questions=[*(article.questions or []), text],
            source=article.source,
            published=article.published,
        ),
        taught=text,
    )
    session.refresh(article)
    return article, True


def teach_article(
    session: Session, *, title: str, body: str, category: str | None, question: str
) -> Article:
    """Create a published article answering ``question`` (kept as its first alternate)."""
    title = clean_text(title, 500, "title")
    body = clean_text(body, 20000, "article body")
    question = mask(clean_text(question, 2000, "question"))
    category = (category or "").strip() or None
    slug = slugify(title)
    if session.scalar(select(Article.id).where(Article.slug == slug)) is not None:
        raise ReviewError(
            f"An article with the slug {slug!r} exists; add the question to it "
            "instead, or choose another title."
        )
    _upsert(
        session,
        ArticleRecord(
            slug=slug,
            title=title,
            body=body,
            category=category,
            questions=[question],
            source=CONSOLE_SOURCE,
        ),
        taught=question,
    )
    return session.scalar(select(Article).where(Article.slug == slug))


def _upsert(session: Session, record: ArticleRecord, taught: str | None = None) -> None:
    """Write through the KB store (same validation, rendering and hashing as an import), then
    move the KB revision so that running servers reload their indexes. ``taught``: the
    alternate question a reviewer taught, which imports keep."""
    try:
        upsert_article(session, record)
    except InvalidArticle as exc:
        session.rollback()
        raise ReviewError(f"The article is not valid: {exc}") from exc
    if taught is not None:
        add_taught_question(session, record.slug or "", taught)
    bump_revision(session, KB_REVISION)
    session.commit()
