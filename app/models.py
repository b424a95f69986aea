"""The data model: SQLAlchemy 2 typed declarative classes.

Alembic (``migrations/``) owns the schema; ``Base.metadata.create_all`` is for tests only.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
    update,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from app.vocab import ConversationState, DeliveryStatus, ModelStatus, ReviewStatus, Role


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def new_id() -> str:
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    type_annotation_map = {dict: JSON, list: JSON}


TIERS = ("simple", "complex")
EXAMPLE_ORIGINS = ("seed", "import", "reviewer")  # what `tierdesk intents import` may record
# Examples people taught in the console: from an escalation, or from a spot check.
TAUGHT_ORIGINS = ("reviewer", "spot_check")
MESSAGE_ROLES = ("customer", "bot", "agent")
REVIEW_STATUSES = tuple(ReviewStatus)


class Article(Base):
    """A knowledge-base article: what the bot answers with."""

    __tablename__ = "articles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(200), unique=True)
    title: Mapped[str] = mapped_column(String(500))
    body: Mapped[str] = mapped_column(Text)  # Markdown (or sanitised HTML) as imported
    body_html: Mapped[str] = mapped_column(Text, default="")  # rendered and sanitised
    category: Mapped[str | None] = mapped_column(String(200), index=True)
    tags: Mapped[list] = mapped_column(JSON, default=list)
    questions: Mapped[list] = mapped_column(JSON, default=list)  # alternate questions
    # Those of ``questions`` that reviewers taught: an import of the article keeps them.
    taught_questions: Mapped[list] = mapped_column(JSON, default=list, server_default="[]")
    source: Mapped[str | None] = mapped_column(String(500))
    version: Mapped[int] = mapped_column(Integer, default=1)
    published: Mapped[bool] = mapped_column(Boolean, default=True, index=True)
    content_hash: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


class Intent(Base):
    """An intent and its routing tier (declared in intents/ or derived from validation data)."""

    __tablename__ = "intents"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    tier: Mapped[str] = mapped_column(String(16), default="simple")
    tier_source: Mapped[str] = mapped_column(String(16), default="declared")  # declared | derived
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class TrainingExample(Base):
    """One labelled utterance for the intent models."""

    __tablename__ = "training_examples"
    __table_args__ = (UniqueConstraint("text", "intent", name="uq_training_text_intent"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    text: Mapped[str] = mapped_column(String(2000))
    intent: Mapped[str] = mapped_column(String(200), index=True)
    # seed | import | reviewer (an escalation) | spot_check (an answer a reviewer judged)
    origin: Mapped[str] = mapped_column(String(16), default="import")
    # A spot check's example: the share of answered questions checked when it was drawn.
    # Calibration weighs it 1/share, as it stands for that many answers nobody reviewed
    # (app/review/spot_checks.py). None: every question of its kind is taught (escalations).
    sample_share: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    client_key: Mapped[str | None] = mapped_column(String(64))  # hashed client address
    # HMAC of the customer id a host page verified (app/privacy/identity.py); None: anonymous
    customer_ref: Mapped[str | None] = mapped_column(String(64), index=True)
    # A ConversationState; only app/review/handoff.py changes it.
    status: Mapped[str] = mapped_column(String(24), default=ConversationState.BOT.value)
    assigned_to: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"))  # with_person
    state_changed_at: Mapped[datetime | None] = mapped_column(DateTime)
    customer_email: Mapped[str | None] = mapped_column(String(320))  # e-mail follow-up
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime, default=utcnow, onupdate=utcnow, index=True
    )

    messages: Mapped[list[Message]] = relationship(
        back_populates="conversation", order_by="Message.seq"
    )


class Message(Base):
    """A customer question, a bot answer or a human agent's reply, with its routing trace."""

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_conversation_seq", "conversation_id", "seq"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"))
    seq: Mapped[int] = mapped_column(Integer, default=0)
    role: Mapped[str] = mapped_column(String(16))  # customer | bot | agent
    text: Mapped[str] = mapped_column(Text)
    html: Mapped[str | None] = mapped_column(Text)
    article_slug: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str | None] = mapped_column(String(24))  # answered | pending_review
    confidence: Mapped[float | None] = mapped_column(Float)
    route: Mapped[str | None] = mapped_column(String(24))
    intent: Mapped[str | None] = mapped_column(String(200))
    trace: Mapped[dict | None] = mapped_column(JSON)
    in_reply_to: Mapped[str | None] = mapped_column(String(32))
    author_id: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    conversation: Mapped[Conversation] = relationship(back_populates="messages")


class Feedback(Base):
    __tablename__ = "feedback"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    message_id: Mapped[str] = mapped_column(ForeignKey("messages.id"), index=True)
    helpful: Mapped[bool] = mapped_column(Boolean)
    comment: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Reviewer(Base):
    __tablename__ = "reviewers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(300))
    role: Mapped[str] = mapped_column(String(16), default=Role.REVIEWER.value)  # admin | reviewer
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    last_login_at: Mapped[datetime | None] = mapped_column(DateTime)


class ReviewItem(Base):
    """Something a human must look at. The database row is the source of truth; Redis is the
    work queue and can always be rebuilt from the rows that are pending."""

    __tablename__ = "review_items"
    __table_args__ = (Index("ix_review_items_status_created", "status", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    message_id: Mapped[str] = mapped_column(ForeignKey("messages.id"))  # the customer's message
    draft_message_id: Mapped[str | None] = mapped_column(String(32))  # the bot's draft, if any
    reason: Mapped[str] = mapped_column(
        String(64)
    )  # below_threshold | ambiguous | ... | asked_for_human
    priority: Mapped[int] = mapped_column(Integer, default=0)
    intent: Mapped[str | None] = mapped_column(String(200))
    route: Mapped[str | None] = mapped_column(String(24))
    status: Mapped[str] = mapped_column(String(16), default=ReviewStatus.PENDING.value)
    claimed_by: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    resolution: Mapped[str | None] = mapped_column(String(24))  # reply | article | discard
    resolution_note: Mapped[str | None] = mapped_column(Text)
    reply_message_id: Mapped[str | None] = mapped_column(String(32))
    draft_unchanged: Mapped[bool | None] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime)


class SpotCheck(Base):
    """An answered turn drawn at random (``SPOT_CHECK_SHARE``) for a person to judge
    afterwards (app/review/spot_checks.py). The customer already has the answer; the verdict
    teaches the models and measures the answered accuracy customers get."""

    __tablename__ = "spot_checks"
    __table_args__ = (Index("ix_spot_checks_verdict_created", "verdict", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    message_id: Mapped[str] = mapped_column(String(32))  # the customer's message
    answer_message_id: Mapped[str] = mapped_column(String(32))  # the bot's answer
    intent: Mapped[str | None] = mapped_column(String(200))  # the intent the bot answered
    article_slug: Mapped[str | None] = mapped_column(String(200))
    route: Mapped[str | None] = mapped_column(String(24))
    confidence: Mapped[float | None] = mapped_column(Float)
    sample_share: Mapped[float] = mapped_column(Float)  # SPOT_CHECK_SHARE when it was drawn
    verdict: Mapped[str | None] = mapped_column(String(16))  # None (waiting) | right | wrong
    correct_intent: Mapped[str | None] = mapped_column(String(200))
    reviewer_id: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    judged_at: Mapped[datetime | None] = mapped_column(DateTime)


class PiiRef(Base):
    """A keyed digest (HMAC-SHA256 with SECRET_KEY) of an e-mail address a customer typed in a
    conversation: the text itself is stored masked, and this lets ``tierdesk privacy export
    --email`` find the conversation without keeping the address."""

    __tablename__ = "pii_refs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # email
    digest: Mapped[str] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class AuditEvent(Base):
    """Who did what and when: every admin action and every reviewer reply (app/review/audit.py).
    ``actor`` keeps the e-mail as it was, so the log reads the same after an account changes;
    ``detail`` never holds customer text (an erasure records its counts, not what was erased)."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"))
    actor: Mapped[str] = mapped_column(String(320))  # e-mail, or "cli" / "scheduler"
    action: Mapped[str] = mapped_column(String(48), index=True)
    target: Mapped[str | None] = mapped_column(String(200))
    detail: Mapped[dict | None] = mapped_column(JSON)


class ReviewNote(Base):
    """A reviewer's internal note on a review item: never shown to the customer."""

    __tablename__ = "review_notes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("review_items.id"), index=True)
    author_id: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CannedReply(Base):
    """A saved reply reviewers insert into their answers."""

    __tablename__ = "canned_replies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    title: Mapped[str] = mapped_column(String(200), unique=True)
    body: Mapped[str] = mapped_column(Text)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("reviewers.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Delivery(Base):
    """One outgoing webhook call, Slack notification or e-mail (the outbox).

    Written in the transaction of the change it reports, so nothing is lost across a crash or
    restart; app/notify/outbox.py delivers it with retries and backoff."""

    __tablename__ = "deliveries"
    __table_args__ = (Index("ix_deliveries_status_next", "status", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel: Mapped[str] = mapped_column(String(16))  # webhook | slack | email
    # The conversation it is about, so that erasure and retention can remove it too.
    conversation_id: Mapped[str | None] = mapped_column(String(32), index=True)
    target: Mapped[str] = mapped_column(String(2000))  # URL or e-mail address
    event: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)  # the exact bytes sent (JSON, or the e-mail text)
    status: Mapped[str] = mapped_column(String(16), default=DeliveryStatus.PENDING.value)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    locked_until: Mapped[datetime | None] = mapped_column(DateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime)


class SystemState(Base):
    """Small key/value facts shared by all processes (for example the KB revision)."""

    __tablename__ = "system_state"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


class ModelVersion(Base):
    """A trained model version in the registry (app/nlp/registry.py): its status, manifest and
    the digest of its published artifacts."""

    __tablename__ = "model_versions"

    version: Mapped[str] = mapped_column(String(100), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default=ModelStatus.CANDIDATE.value)
    # canary: share of conversations; shadow: share of questions sampled
    traffic_share: Mapped[float] = mapped_column(Float, default=0.0)
    manifest: Mapped[dict] = mapped_column(JSON, default=dict)
    digest: Mapped[str | None] = mapped_column(String(64))  # SHA-256 of the artifacts
    size_bytes: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    status_changed_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ModelEvent(Base):
    """One status change of a model version (its history)."""

    __tablename__ = "model_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(ForeignKey("model_versions.version"), index=True)
    from_status: Mapped[str | None] = mapped_column(String(16))
    to_status: Mapped[str] = mapped_column(String(16))
    traffic_share: Mapped[float] = mapped_column(Float, default=0.0)
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(200), default="cli")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ModelArtifact(Base):
    """A version's packed folder in chunks: the store every host fetches from."""

    __tablename__ = "model_artifacts"

    version: Mapped[str] = mapped_column(ForeignKey("model_versions.version"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class ShadowComparison(Base):
    """A live question answered by the shadow version in the background, next to the active
    version's answer (app/nlp/shadow.py)."""

    __tablename__ = "shadow_comparisons"
    __table_args__ = (Index("ix_shadow_comparisons_version_created", "version", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(100))  # the shadow version
    active_version: Mapped[str | None] = mapped_column(String(100))
    conversation_id: Mapped[str | None] = mapped_column(String(32))
    query: Mapped[str] = mapped_column(Text)
    active_intent: Mapped[str | None] = mapped_column(String(200))
    shadow_intent: Mapped[str | None] = mapped_column(String(200))
    active_slug: Mapped[str | None] = mapped_column(String(200))
    shadow_slug: Mapped[str | None] = mapped_column(String(200))
    active_route: Mapped[str | None] = mapped_column(String(24))
    shadow_route: Mapped[str | None] = mapped_column(String(24))
    active_confidence: Mapped[float | None] = mapped_column(Float)
    shadow_confidence: Mapped[float | None] = mapped_column(Float)
    active_escalated: Mapped[bool] = mapped_column(Boolean, default=False)
    shadow_escalated: Mapped[bool] = mapped_column(Boolean, default=False)
    kl: Mapped[float | None] = mapped_column(Float)  # KL(active || shadow) over intents
    disagrees: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


def next_seq(session: Session, conversation_id: str) -> int:
    """The position of the next message in a conversation (0 for its first).

    It first writes the conversation's ``updated_at`` (a new message is activity), which locks
    the conversation's row, or on SQLite the database, until the caller commits: two requests
    adding to one conversation at once take turns, and the second reads the first's messages
    instead of taking the same position."""
    session.execute(
        update(Conversation)
        .where(Conversation.id == conversation_id)
        .values(updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    current = session.scalar(
        select(func.max(Message.seq)).where(Message.conversation_id == conversation_id)
    )
    return 0 if current is None else current + 1
