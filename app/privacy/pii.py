"""PII detectors and masking: what a customer types is masked before anything stores it.

Each detector finds one kind of personal data and replaces it with a bracketed token that keeps
what a reviewer needs and nothing that identifies the customer:

- ``card``: payment card numbers, 13 to 19 digits (spaces or dashes allowed), starting with 2-6
  and passing the Luhn checksum -> ``[card ****1234]`` (the last four digits);
- ``iban``: IBANs, a country code, two check digits and 11 to 30 letters or digits, passing the
  ISO 7064 mod-97 check -> ``[iban DE**1234]`` (country and last four);
- ``email``: e-mail addresses -> ``[email ***@example.com]`` (the domain);
- ``phone``: telephone numbers in international (``+44 20 7946 0958``, ``0044...``), national
  trunk (``030 1234567``, ``07700 900123``) and North American (``(555) 123-4567``) forms with 8
  to 15 digits -> ``[phone ***58]`` (the last two digits);
- custom patterns from ``TIERDESK_PII_PATTERNS`` (a JSON object ``{"label": "regex"}``) ->
  ``[label]``.

A number that only looks like a card or an IBAN (the checksum fails) is left as typed: order
numbers and references stay readable. Masking is idempotent (a token is never masked again) and
a text without a run of seven digits or an ``@`` costs two scans in C.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DETECTORS = ("iban", "card", "email", "phone")  # the order they run in


# -- checksums --------------------------------------------------------------------------------


def luhn_ok(digits: str) -> bool:
    """True when the digit string passes the Luhn (mod 10) checksum."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban_ok(iban: str) -> bool:
    """True when ``iban`` (upper case, no spaces) passes the ISO 13616 mod-97 check."""
    if not 15 <= len(iban) <= 34 or not iban[:2].isalpha() or not iban[2:4].isdigit():
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


# -- detectors --------------------------------------------------------------------------------

# A run of digits with single spaces or dashes between them; not part of a longer number or of
# a dashed identifier that goes on with letters (a model version 20261205-090610-c9608824).
_CARD_RE = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w]|-\w)")
# Country, check digits, then groups of four (the last one shorter) or one unbroken run.
_IBAN_RE = re.compile(
    r"(?<![\w])[A-Za-z]{2}\d{2}(?:(?: [A-Za-z0-9]{4}){2,7}(?: [A-Za-z0-9]{1,4})?|[A-Za-z0-9]{11,30})(?![\w])"
)
_EMAIL_RE = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24})(?![\w-])"
)
_SEP = r"[ .\-/]?"
_PHONE_RE = re.compile(
    r"(?<![\w+\-])(?:"
    # international: +CC or 00CC, optional (0) or (area), then digits with separators
    rf"(?:\+|00)[1-9]\d{{0,2}}{_SEP}(?:\(\d{{1,4}}\){_SEP})?\d(?:{_SEP}\d){{5,13}}"
    # national trunk prefix 0: 030 1234567, 07700 900123, 06 12 34 56 78, (030) 1234567
    rf"|\(?0[1-9]\d{{0,3}}\)?{_SEP}\d(?:{_SEP}\d){{5,10}}"
    # North American: (555) 123-4567, 555-123-4567, 555.123.4567
    r"|(?:\(\d{3}\) ?|\d{3}[-. ])\d{3}[-. ]\d{4}"
    r")(?![\w])"
)
# Tokens this module writes: never masked again.
_TOKEN_RE = re.compile(r"\[(?:card|iban|email|phone|[A-Za-z0-9_-]{1,40})(?: [^\[\]\s]{1,80})?\]")
# Just before a match: the start of an IBAN-shaped run ("ES37 5029 " or a longer number), so
# the digits are part of something longer (a look-alike IBAN or card), not a phone or card.
_LONGER_BEFORE = re.compile(r"(?:[A-Za-z]{2}\d{2}(?: [A-Za-z0-9]{4})*|\d)[ .-]$")


# Every card, IBAN and phone has at least 7 digits with little in between: a text without such
# a run skips those detectors after one scan in C.
_NUMBER_HINT = re.compile(r"\d(?:\D{0,3}\d){6}")


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _part_of_longer(match: re.Match) -> bool:
    start = match.start()
    if match.string[start] in "+(":
        return False  # "+44 ..." or "(030) ..." starts a number of its own
    return bool(_LONGER_BEFORE.search(match.string[max(0, start - 40) : start]))


def _card(match: re.Match) -> tuple[str, int] | None:
    digits = _digits(match.group(0))
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456" or not luhn_ok(digits):
        return None
    if _part_of_longer(match):
        return None
    return f"[card ****{digits[-4:]}]", len(match.group(0))


def _iban(match: re.Match) -> tuple[str, int] | None:
    raw = match.group(0)
    # A spaced IBAN may run on into the next word ("... 4239 then"): try the longest run of
    # groups that passes the check.
    groups = raw.split(" ")
    for end in range(len(groups), 0, -1):
        candidate = "".join(groups[:end]).upper()
        if len(candidate) < 15:
            break
        if iban_ok(candidate):
            used = len(" ".join(groups[:end]))
            return f"[iban {candidate[:2]}**{candidate[-4:]}]", used
    return None


def _email(match: re.Match) -> tuple[str, int] | None:
    return f"[email ***@{match.group(1).lower()}]", len(match.group(0))


_DATE_RE = re.compile(r"\d{1,4}[./-]\d{1,2}[./-]\d{1,4}")


def _phone(match: re.Match) -> tuple[str, int] | None:
    raw = match.group(0)
    digits = _digits(raw)
    if not 8 <= len(digits) <= 15 or _DATE_RE.fullmatch(raw) or _part_of_longer(match):
        return None
    if raw.isdigit() and raw.startswith("0") and not raw.startswith("00") and len(raw) > 11:
        return None  # an unbroken 12+ digit number with a trunk 0: a reference, not a phone
    return f"[phone ***{digits[-2:]}]", len(raw)


@dataclass(frozen=True)
class Detector:
    name: str
    pattern: re.Pattern
    # (token, characters of the match it replaces), or None for a look-alike (kept as typed)
    replace: Callable[[re.Match], tuple[str, int] | None]
    needs_digit: bool = True
    needs_at: bool = False

    def apply(self, text: str, found: list[tuple[str, str]] | None = None) -> str:
        def sub(match: re.Match) -> str:
            if _inside_token(text, match.start()):
                return match.group(0)
            out = self.replace(match)
            if out is None:
                return match.group(0)
            token, used = out
            original = match.group(0)
            if found is not None:
                found.append((self.name, original[:used]))
            return token + original[used:]

        return self.pattern.sub(sub, text)


def _inside_token(text: str, pos: int) -> bool:
    opening = text.rfind("[", 0, pos)
    if opening < 0 or text.rfind("]", opening, pos) >= 0:
        return False
    return bool(_TOKEN_RE.match(text, opening))


BUILTIN = {
    "iban": Detector("iban", _IBAN_RE, _iban),
    "card": Detector("card", _CARD_RE, _card),
    "email": Detector("email", _EMAIL_RE, _email, needs_digit=False, needs_at=True),
    "phone": Detector("phone", _PHONE_RE, _phone),
}


class PatternError(ValueError):
    """``TIERDESK_PII_PATTERNS`` or ``TIERDESK_PII_DETECTORS`` is not valid."""


def parse_detectors(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"card,iban,email,phone"`` (the default), a subset, or ``off``/``none``."""
    if spec is None:
        return DETECTORS
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip().lower() for n in names if n.strip()]
    if names in (["off"], ["none"]):
        return ()
    unknown = [n for n in names if n not in BUILTIN]
    if unknown:
        raise PatternError(
            f"TIERDESK_PII_DETECTORS: unknown detector(s) {', '.join(unknown)}; "
            f"choose from {', '.join(DETECTORS)} or 'off'"
        )
    return tuple(n for n in DETECTORS if n in names)


def parse_patterns(spec: str | Mapping[str, str] | None) -> dict[str, re.Pattern]:
    """``{"label": "regex", ...}`` (JSON text or a mapping) compiled; errors name the setting."""
    if not spec:
        return {}
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise PatternError(f"TIERDESK_PII_PATTERNS is not JSON: {exc}") from None
    if not isinstance(spec, Mapping):
        raise PatternError('TIERDESK_PII_PATTERNS must be a JSON object {"label": "regex"}')
    out: dict[str, re.Pattern] = {}
    for label, regex in spec.items():
        if not isinstance(regex, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", str(label)):
            raise PatternError(
                f"TIERDESK_PII_PATTERNS: {label!r} needs a label of letters, digits, _ or - "
                "and a regular expression as a string"
            )
        try:
            out[label] = re.compile(regex)
        except re.error as exc:
            raise PatternError(f"TIERDESK_PII_PATTERNS: {label!r}: {exc}") from None
    return out


@dataclass
class Masker:
    """The enabled detectors, applied in a fixed order: IBANs first (they contain runs of
    digits), then cards (a card number is also a long run of digits), e-mails, phones."""

    detectors: tuple[str, ...] = DETECTORS
    patterns: dict[str, re.Pattern] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._chain = [BUILTIN[name] for name in self.detectors]
        self._custom = [
            Detector(
                label,
                pattern,
                lambda m, label=label: (f"[{label}]", len(m.group(0))),
                needs_digit=False,
            )
            for label, pattern in self.patterns.items()
        ]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Masker:
        return cls(
            parse_detectors(config.get("PII_DETECTORS")),
            parse_patterns(config.get("PII_PATTERNS")),
        )

    def mask(self, text: str | None, found: list[tuple[str, str]] | None = None) -> str | None:
        """``text`` with every enabled kind of PII replaced by its token; ``found`` collects
        (detector, original text) of each replacement."""
        if not text:
            return text
        has_digit = _NUMBER_HINT.search(text) is not None
        has_at = "@" in text
        for detector in self._chain:
            if (detector.needs_digit and not has_digit) or (detector.needs_at and not has_at):
                continue
            text = detector.apply(text, found)
        for detector in self._custom:
            text = detector.apply(text, found)
        return text

    def mask_value(self, value: Any) -> Any:
        """Every string in a JSON-like value masked (keys too); other values unchanged.
        Strings that cannot hold PII (no seven-digit run, no ``@``) are returned as they are
        without a call per string: a routing trace holds a hundred short strings."""
        if isinstance(value, str):
            return self._mask_str(value)
        if isinstance(value, dict):
            return {
                (self._mask_str(k) if isinstance(k, str) else k): self.mask_value(v)
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.mask_value(v) for v in value]
        return value

    def _mask_str(self, text: str) -> str:
        if self._custom or "@" in text or _NUMBER_HINT.search(text):
            return self.mask(text)
        return text

    def find(self, text: str) -> list[tuple[str, str]]:
        """(detector, original text) of every span ``mask`` replaces in ``text``."""
        found: list[tuple[str, str]] = []
        self.mask(text, found)
        return found

    def emails(self, text: str) -> list[str]:
        """The e-mail addresses in ``text`` (lower case), whether or not masking is on."""
        return [m.group(0).lower() for m in _EMAIL_RE.finditer(text or "")]
