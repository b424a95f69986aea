"""Data protection: PII masking before storage, export and erasure, retention, identity.

``mask(text)`` is the one function everything that stores or sends customer text calls
(messages, drafts, traces, logs, metrics labels, and anything sent out such as webhooks or live
pushes); ``mask_value(obj)`` masks every string in a JSON-like value. Both use the detectors
the app's settings turn on (``TIERDESK_PII_DETECTORS``, ``TIERDESK_PII_PATTERNS``); outside an
app they use every built-in detector.

Modules: ``pii`` (detectors), ``scoring`` (precision/recall on a labelled set), ``refs`` (keyed
digests of e-mail addresses and customer ids), ``erasure`` (export and erase), ``retention``
(the purge job), ``identity`` (signed widget identities), ``cli`` (``tierdesk privacy``).
"""

from __future__ import annotations

import threading
from typing import Any

from flask import Flask, current_app, has_app_context

from app.privacy.pii import Masker, PatternError

__all__ = ["Masker", "PatternError", "get_masker", "init_app", "mask", "mask_value"]

MASKER_KEY = "tierdesk.masker"
RETENTION_KEY = "tierdesk.retention_scheduler"
_retention_lock = threading.Lock()
_DEFAULT = Masker()


def get_masker() -> Masker:
    if has_app_context():
        masker = current_app.extensions.get(MASKER_KEY)
        if masker is not None:
            return masker
    return _DEFAULT


def mask(text: str | None) -> str | None:
    """``text`` with the enabled kinds of PII replaced by tokens (``[card ****1234]``...)."""
    return get_masker().mask(text)


def mask_value(value: Any) -> Any:
    return get_masker().mask_value(value)


def init_app(app: Flask) -> None:
    """Build the app's masker from its settings (a bad pattern stops the start, naming the
    setting) and mask every log record from now on."""
    masker = Masker.from_config(app.config)
    app.extensions[MASKER_KEY] = masker
    from app.logging_setup import mask_log_records

    mask_log_records(masker if app.config.get("PII_MASK_LOGS", True) else None)

    from app.privacy.retention import check_settings

    check_settings(app.config)
    app.before_request(_start_retention_once)


def _start_retention_once() -> None:
    """Start the retention job in a serving process at its first request (as the review
    reconciler does: not in CLI commands, not in a gunicorn master before the fork)."""
    app = current_app._get_current_object()
    if RETENTION_KEY in app.extensions:
        return
    with _retention_lock:
        if RETENTION_KEY in app.extensions:
            return
        config = app.config
        interval = int(config.get("RETENTION_INTERVAL_SECONDS") or 0)
        # Started even with retention 0: an admin may turn it on from the console.
        if app.testing or interval <= 0:
            app.extensions[RETENTION_KEY] = None
            return
        from app.privacy.retention import RetentionScheduler
        from app.services import get_redis, get_review_queue

        scheduler = RetentionScheduler(config, get_redis(), get_review_queue(), interval)
        scheduler.start()
        app.extensions[RETENTION_KEY] = scheduler
