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
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from app.vocab import ModelStatus, ReviewStatus


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def new_id() -> str:
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    type_annotation_map = {dict: JSON, list: JSON}


TIERS = ("simple", "complex")
EXAMPLE_ORIGINS = ("seed", "import", "reviewer")
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
    origin: Mapped[str] = mapped_column(String(16), default="import")  # seed | import | reviewer
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    client_key: Mapped[str | None] = mapped_column(String(64))  # hashed client address
    status: Mapped[str] = mapped_column(String(24), default="open")  # open | pending_review
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)

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
    """The position of the next message in a conversation (0 for its first)."""
    current = session.scalar(
        select(func.max(Message.seq)).where(Message.conversation_id == conversation_id)
    )
    return 0 if current is None else current + 1
