"""Plain or JSON log lines (one JSON object per line for log shippers), PII masked.

``mask_log_records`` installs a log record factory: every record any logger creates (the
app's, Werkzeug's and gunicorn's access lines, SQLAlchemy's errors with their parameters) has
its message and its exception text masked when it is made, so every handler (files, stderr,
pytest's capture, a log shipper) receives only the masked text.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

_BASE_FACTORY = logging.getLogRecordFactory()
_FORMATTER = logging.Formatter()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(as_json: bool, level: str) -> None:
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter()
        if as_json
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    # Replace only handlers we installed before, so pytest's capture handlers stay.
    for h in list(root.handlers):
        if getattr(h, "_tierdesk", False):
            root.removeHandler(h)
    handler._tierdesk = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())


def _mask_message(masker: Any, message: str) -> str:
    masked = masker.mask(message)
    if "%" in message or "+" in message:
        # Request lines carry URL-encoded text (/kb?q=4111+1111+...): mask the decoded form
        # when it holds something the encoded form hid.
        decoded = unquote_plus(masked)
        masked_decoded = masker.mask(decoded)
        if masked_decoded != decoded:
            return masked_decoded
    return masked


def mask_log_records(masker: Any | None) -> None:
    """Mask every log record created from now on with ``masker`` (None: stop masking)."""
    if masker is None:
        logging.setLogRecordFactory(_BASE_FACTORY)
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = _BASE_FACTORY(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: keep the record as logging would
            return record
        record.msg, record.args = _mask_message(masker, message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = masker.mask(_FORMATTER.formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = masker.mask(record.stack_info)
        return record

    logging.setLogRecordFactory(factory)
