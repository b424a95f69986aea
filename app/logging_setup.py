"""Plain or JSON log lines (one JSON object per line for log shippers)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
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
