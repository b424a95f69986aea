"""Business hours: ``TIERDESK_BUSINESS_HOURS`` such as ``mon-fri 09:00-17:00 Europe/Berlin``
(UTC without a zone; empty: people always answer). Outside them the widget says when a person
will be back. Parsed when the configuration loads, so a typo stops the start, not a request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


@dataclass(frozen=True)
class BusinessHours:
    days: frozenset[int]  # 0 = Monday
    opens: time
    closes: time
    zone: ZoneInfo

    def is_open(self, moment: datetime) -> bool:
        local = moment.astimezone(self.zone)
        return local.weekday() in self.days and self.opens <= local.time() < self.closes

    def next_opening(self, moment: datetime) -> datetime:
        local = moment.astimezone(self.zone)
        for offset in range(8):
            day = (local + timedelta(days=offset)).date()
            start = datetime.combine(day, self.opens, self.zone)
            if day.weekday() in self.days and start > local:
                return start.astimezone(UTC)
        return moment


def parse_business_hours(spec: str | None) -> BusinessHours | None:
    """``"mon-fri 09:00-17:00 [Zone/Name]"`` (UTC without a zone); None: always staffed."""
    if not spec:
        return None
    match = re.fullmatch(
        r"\s*([a-z]{3})(?:-([a-z]{3}))?\s+(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})(?:\s+(\S+))?\s*",
        spec.lower(),
    )
    if not match or match.group(1) not in DAYS or (match.group(2) or "mon") not in DAYS:
        raise ValueError(f"TIERDESK_BUSINESS_HOURS: expected 'mon-fri 09:00-17:00', got {spec!r}")
    first = DAYS.index(match.group(1))
    last = DAYS.index(match.group(2)) if match.group(2) else first
    days = {d % 7 for d in range(first, last + 1 if last >= first else last + 8)}
    try:
        zone = ZoneInfo(spec.split()[-1]) if match.group(7) else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"TIERDESK_BUSINESS_HOURS: unknown time zone in {spec!r}") from None
    opens = time(int(match.group(3)), int(match.group(4)))
    closes = time(int(match.group(5)), int(match.group(6)))
    return BusinessHours(frozenset(days), opens, closes, zone)


def availability(config, now: datetime | None = None) -> dict:
    """``{"people_available", "back_at"}`` for the widget."""
    hours = parse_business_hours(config.get("BUSINESS_HOURS"))
    now = now or datetime.now(UTC)
    if hours is None or hours.is_open(now):
        return {"people_available": True, "back_at": None}
    back = hours.next_opening(now)
    return {"people_available": False, "back_at": back.isoformat(timespec="minutes")}
