"""Retention: conversations with no activity for ``TIERDESK_RETENTION_DAYS`` are deleted with
their messages, feedback, review items and digests; examples taught by reviewers (stored
masked) are kept longer, ``TIERDESK_TRAINING_RETENTION_DAYS``. 0 keeps them for ever.

The job deletes in batches of ``BATCH`` conversations, one short transaction each, so that the
chat path never waits long for a lock (SQLite has one writer). It runs in every serving process
every ``TIERDESK_RETENTION_INTERVAL_SECONDS`` (a Redis lock lets one process at a time do the
work) and as ``tierdesk privacy purge``; each run reports and audits what it removed.

A conversation's age is its last message (or its creation when it has none): a conversation
started long ago and still going is kept. An admin may override both settings from the console
(``system_state`` rows, read at every run); the environment gives the defaults.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, exists, func, select

from app.db import session_scope
from app.models import TAUGHT_ORIGINS, Conversation, Message, TrainingExample, utcnow
from app.privacy.erasure import delete_conversations, forget_in_redis
from app.review import audit
from app.state import ERASURE_REVISION, bump_revision
from app.vocab import AuditAction

log = logging.getLogger(__name__)

BATCH = 500
PAUSE_SECONDS = 0.05  # between batches: room for the chat path's writes
LOCK_KEY = "privacy:retention_lock"
OVERRIDES = {
    "RETENTION_DAYS": "retention_days",
    "TRAINING_RETENTION_DAYS": "training_retention_days",
}


class RetentionSettingsError(ValueError):
    """The retention settings contradict each other (the message names them)."""


MAX_RETENTION_DAYS = 36_500  # beyond it the cutoff date leaves the calendar: keep (0) instead


def check_settings(config: Mapping[str, Any]) -> None:
    days = int(config.get("RETENTION_DAYS") or 0)
    training = int(config.get("TRAINING_RETENTION_DAYS") or 0)
    if days < 0 or training < 0:
        raise RetentionSettingsError(
            "TIERDESK_RETENTION_DAYS and TIERDESK_TRAINING_RETENTION_DAYS must be 0 (keep) or more"
        )
    if max(days, training) > MAX_RETENTION_DAYS:
        raise RetentionSettingsError(
            f"retention is at most {MAX_RETENTION_DAYS} days (100 years); 0 keeps everything"
        )
    if days and training and training < days:
        raise RetentionSettingsError(
            f"TIERDESK_TRAINING_RETENTION_DAYS ({training}) must be at least "
            f"TIERDESK_RETENTION_DAYS ({days}): taught examples are kept longer than chats"
        )


def effective_settings(config: Mapping[str, Any]) -> dict[str, int]:
    """The retention days in force: an admin's override from the console, else the setting."""
    from app.models import SystemState

    out = {key: int(config.get(key) or 0) for key in OVERRIDES}
    with session_scope(config["SQLALCHEMY_DATABASE_URI"]) as session:
        rows = dict(
            session.execute(
                select(SystemState.key, SystemState.value).where(
                    SystemState.key.in_(list(OVERRIDES.values()))
                )
            ).all()
        )
    for key, state_key in OVERRIDES.items():
        if state_key in rows:
            out[key] = int(rows[state_key])
    return out


def set_overrides(session, days: int, training_days: int) -> None:
    """Store an admin's retention days (checked like the settings; the caller commits)."""
    from app.models import SystemState

    check_settings({"RETENTION_DAYS": days, "TRAINING_RETENTION_DAYS": training_days})
    for state_key, value in zip(OVERRIDES.values(), (days, training_days), strict=True):
        row = session.get(SystemState, state_key)
        if row is None:
            session.add(SystemState(key=state_key, value=str(value)))
        else:
            row.value = str(value)


@dataclass
class PurgeReport:
    cutoff: datetime | None = None
    training_cutoff: datetime | None = None
    dry_run: bool = False
    conversations: int = 0
    messages: int = 0
    feedback: int = 0
    review_items: int = 0
    pii_refs: int = 0
    training_examples: int = 0
    batches: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff.isoformat(timespec="seconds") + "Z" if self.cutoff else None,
            "training_cutoff": self.training_cutoff.isoformat(timespec="seconds") + "Z"
            if self.training_cutoff
            else None,
            "dry_run": self.dry_run,
            "conversations": self.conversations,
            "messages": self.messages,
            "feedback": self.feedback,
            "review_items": self.review_items,
            "pii_refs": self.pii_refs,
            "training_examples": self.training_examples,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
        }

    def summary(self) -> str:
        if self.cutoff is None and self.training_cutoff is None:
            return "retention is off (TIERDESK_RETENTION_DAYS=0): nothing deleted"
        verb = "would delete" if self.dry_run else "deleted"
        parts = [
            f"{verb} {self.conversations} conversation(s) inactive since before "
            f"{self.cutoff:%Y-%m-%d %H:%M}"
            if self.cutoff
            else "conversations kept (retention 0)",
            f"{self.messages} message(s), {self.feedback} feedback, "
            f"{self.review_items} review item(s), {self.pii_refs} digest(s)",
            f"{self.training_examples} taught example(s) from before "
            f"{self.training_cutoff:%Y-%m-%d}"
            if self.training_cutoff
            else "taught examples kept",
        ]
        return "; ".join(parts) + f" in {self.seconds:.2f} s"


def expired_query(cutoff: datetime, limit: int):
    """Ids of conversations with no message since ``cutoff`` and created before it."""
    recent = exists().where(
        Message.conversation_id == Conversation.id, Message.created_at >= cutoff
    )
    return (
        select(Conversation.id)
        .where(Conversation.created_at < cutoff, ~recent)
        .order_by(Conversation.created_at)
        .limit(limit)
    )


def purge(
    config: Mapping[str, Any],
    *,
    queue=None,
    now: datetime | None = None,
    dry_run: bool = False,
    actor: str = "scheduler",
    batch: int = BATCH,
) -> PurgeReport:
    """Delete what the retention settings say has expired; see the module docstring."""
    check_settings(config)
    started = time.perf_counter()
    now = now or utcnow()
    url = config["SQLALCHEMY_DATABASE_URI"]
    settings = effective_settings(config)
    days = settings["RETENTION_DAYS"]
    training_days = settings["TRAINING_RETENTION_DAYS"]
    report = PurgeReport(dry_run=dry_run)
    report.cutoff = now - timedelta(days=days) if days else None
    report.training_cutoff = now - timedelta(days=training_days) if training_days else None

    if report.cutoff is not None:
        if dry_run:
            with session_scope(url) as session:
                ids = list(session.scalars(expired_query(report.cutoff, 10**9)))
                report.conversations = len(ids)
                report.messages = (
                    session.scalar(
                        select(func.count(Message.id)).where(Message.conversation_id.in_(ids))
                    )
                    if ids
                    else 0
                )
        else:
            while True:
                with session_scope(url) as session:
                    ids = list(session.scalars(expired_query(report.cutoff, batch)))
                    if not ids:
                        break
                    counts, item_ids = delete_conversations(session, ids)
                    if counts.conversations:
                        bump_revision(session, ERASURE_REVISION)
                forget_in_redis(queue, item_ids, counts)
                for key in ("conversations", "messages", "feedback", "review_items", "pii_refs"):
                    setattr(report, key, getattr(report, key) + getattr(counts, key))
                report.batches += 1
                if len(ids) < batch:
                    break
                time.sleep(PAUSE_SECONDS)

    if report.training_cutoff is not None:
        taught = TrainingExample.origin.in_(TAUGHT_ORIGINS) & (
            TrainingExample.created_at < report.training_cutoff
        )
        with session_scope(url) as session:
            if dry_run:
                report.training_examples = session.scalar(
                    select(func.count(TrainingExample.id)).where(taught)
                )
            else:
                report.training_examples = (
                    session.execute(
                        delete(TrainingExample)
                        .where(taught)
                        .execution_options(synchronize_session=False)
                    ).rowcount
                    or 0
                )

    report.seconds = time.perf_counter() - started
    if not dry_run and (report.conversations or report.training_examples):
        with session_scope(url) as session:
            audit.record(session, AuditAction.PURGE, actor=actor, detail=report.as_dict())
        log.info("retention purge: %s", report.summary())
    return report


class RetentionScheduler(threading.Thread):
    """Runs ``purge`` every ``interval`` seconds in a serving process; one process at a time
    across workers and hosts (a Redis lock that expires on its own if a process dies)."""

    def __init__(self, config: Mapping[str, Any], redis_client, queue, interval: int) -> None:
        super().__init__(name="tierdesk-retention", daemon=True)
        self.config = dict(config)
        self.redis = redis_client
        self.queue = queue
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.run_once()

    def run_once(self) -> PurgeReport | None:
        key = f"{self.config['REDIS_PREFIX']}{LOCK_KEY}"
        try:
            if not self.redis.set(key, "1", nx=True, ex=max(self.interval - 1, 1)):
                return None  # another process purged within this interval
        except Exception:  # noqa: BLE001 - without Redis, every process may purge; it is idempotent
            log.warning("retention: Redis unavailable, purging without the lock")
        try:
            return purge(self.config, queue=self.queue)
        except Exception:  # noqa: BLE001 - try again at the next interval
            log.exception("retention purge failed; retrying in %ss", self.interval)
            return None

    def stop(self) -> None:
        self.stopped.set()
