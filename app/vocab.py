"""The words tierdesk's layers share: why a question went to a person, and where a review item
or a conversation stands.

One module so that the router, the chat service, the review queue and the console spell them
the same way. The members are ``StrEnum``s: they compare equal to, and are stored as, their
plain string values, so database rows and JSON bodies are unchanged.
"""

from __future__ import annotations

from enum import StrEnum

# Category names labelled data sets give to queries no intent answers (CLINC150's ``oos``, ...),
# compared ignoring case, spaces, hyphens and underscores. Such rows are never an intent: in a
# training file they are out-of-scope negatives, in a test file out-of-scope queries, and
# ``tierdesk intents import`` stores them as the data's own out-of-scope queries.
OUT_OF_SCOPE_CATEGORIES = frozenset({"oos", "outofscope", "ood", "outofdomain"})
# What labelled data sets (``text,category``) may call their category column.
LABEL_ALIASES = {"intent": "category", "label": "category"}


def is_out_of_scope_category(category: str) -> bool:
    """``oos``, ``out_of_scope``, ``Out-of-scope``, ``OOD``, ... (``OUT_OF_SCOPE_CATEGORIES``)."""
    key = "".join(ch for ch in category.casefold() if ch not in " -_")
    return key in OUT_OF_SCOPE_CATEGORIES


class Reason(StrEnum):
    """Why a message was escalated to a person (``None`` when the bot answered it)."""

    # Decided by the router (app/nlp/router.py).
    BELOW_THRESHOLD = "below_threshold"  # calibrated confidence under tau_review
    AMBIGUOUS = "ambiguous"  # top-1/top-2 margin too small on the final tier
    TIERS_DISAGREE = "tiers_disagree"  # FastText and BERT intent distributions diverge (KL)
    OUT_OF_SCOPE = "out_of_scope"  # nothing in the knowledge base fits
    DEGRADED = "degraded"  # the careful tier was unavailable or busy and the fast tier unsure
    SPARE_CAPACITY = "spare_capacity"  # over tau_review, but reviewers had budget left
    # Decided by the chat service (app/chat/service.py).
    MODELS_UNAVAILABLE = "models_unavailable"  # no trained models are loaded
    ENGINE_ERROR = "engine_error"  # the engine raised; the customer still gets a person
    NO_ANSWER = "no_answer"  # the router answered but the article is gone
    # Asked for by the customer.
    ASKED_FOR_HUMAN = "asked_for_human"  # "talk to a person"
    NOT_HELPFUL = "not_helpful"  # a thumbs-down on the bot's answer


# The reasons a router decision can carry.
ROUTER_REASONS = (
    Reason.BELOW_THRESHOLD,
    Reason.AMBIGUOUS,
    Reason.TIERS_DISAGREE,
    Reason.OUT_OF_SCOPE,
    Reason.DEGRADED,
    Reason.SPARE_CAPACITY,
)
# The customer asked for a person: such items are never drafts to approve.
CUSTOMER_REASONS = (Reason.ASKED_FOR_HUMAN, Reason.NOT_HELPFUL)


class ReviewStatus(StrEnum):
    """Where a review item stands."""

    PENDING = "pending"  # waiting for a reviewer
    CLAIMED = "claimed"  # a reviewer holds it under a lease
    RESOLVED = "resolved"  # a reply reached the customer
    DISCARDED = "discarded"  # closed without a reply


OPEN_STATUSES = (ReviewStatus.PENDING, ReviewStatus.CLAIMED)
CLOSED_STATUSES = (ReviewStatus.RESOLVED, ReviewStatus.DISCARDED)


class Role(StrEnum):
    """What a console account may do."""

    ADMIN = "admin"  # reviewers, retention, erasure and model activation, and the queue
    REVIEWER = "reviewer"  # works the queue


class AuditAction(StrEnum):
    """What the audit log records (app/review/audit.py)."""

    REPLY = "reply"  # a reviewer answered a customer (free text or an article)
    DISCARD = "discard"
    REVIEWER_ADD = "reviewer_add"
    REVIEWER_UPDATE = "reviewer_update"  # role, password or active changed
    ERASE = "erase"  # a customer's data was erased (counts only)
    EXPORT = "export"  # a customer's data was exported
    PURGE = "purge"  # the retention job deleted expired conversations
    RETENTION_SET = "retention_set"  # an admin changed the retention days
    MODEL_ACTIVATE = "model_activate"
    SPOT_CHECK = "spot_check"  # a reviewer judged an answer drawn for a spot check


class ConversationState(StrEnum):
    """Who is answering a conversation (the state machine is app/review/handoff.py)."""

    BOT = "bot"  # the bot answers
    PENDING = "pending"  # waiting for a person; the bot still answers what it is sure of
    WITH_PERSON = "with_person"  # a reviewer holds it: the bot is silent
    RESOLVED = "resolved"  # closed by a reviewer; the customer's next message reopens it (bot)


# A person has yet to let go of these conversations.
HANDED_OVER_STATES = (ConversationState.PENDING, ConversationState.WITH_PERSON)


class DeliveryStatus(StrEnum):
    """Where an outgoing webhook, Slack notification or e-mail stands (app/notify/)."""

    PENDING = "pending"  # waiting for its next attempt
    DELIVERED = "delivered"  # the receiver accepted it (2xx, or the SMTP server took it)
    FAILED = "failed"  # every attempt failed; kept with the last error, retried by hand


class ModelStatus(StrEnum):
    """Where a trained model version stands in the registry (app/nlp/registry.py)."""

    CANDIDATE = "candidate"  # trained, serves nobody
    SHADOW = "shadow"  # answers a sample of live questions in the background, never the customer
    CANARY = "canary"  # answers a share of conversations (sticky per conversation)
    ACTIVE = "active"  # answers everyone else
    RETIRED = "retired"  # ended (rolled back, superseded or retired by hand)


# The statuses whose versions a server loads.
SERVING_STATUSES = (ModelStatus.SHADOW, ModelStatus.CANARY, ModelStatus.ACTIVE)


class Verdict(StrEnum):
    """A reviewer's verdict on a spot-checked answer (``app/review/spot_checks.py``); training
    reads the wrong ones no intent answers as out-of-scope rows (``app/nlp/pipeline/data.py``)."""

    RIGHT = "right"
    WRONG = "wrong"


def counted(count: int, word: str) -> str:
    """``count`` and ``word``, plural unless the count is one: "1 article", "3 articles"."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def listed(items: list[str], most: int = 5) -> str:
    """``items`` as "a, b and c", the first ``most`` of them and then how many more: "a, b, c,
    d, e and 2 more"."""
    if len(items) > most:
        items = [*items[:most], f"{len(items) - most} more"]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
