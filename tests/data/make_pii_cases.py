"""Writes pii_cases.jsonl: the PII test set of tests/test_privacy_pii.py and bench/bench_pii.py.

Each line is ``{"text": ..., "pii": [[kind, original], ...]}``: a chat message and the PII it
really contains. Look-alikes (Luhn-failing card numbers, IBANs with wrong check digits, dates,
amounts, order numbers, IP addresses, versions, "name at domain dot com") are in messages with
an empty or shorter ``pii`` list. Run ``python tests/data/make_pii_cases.py`` to rebuild it
(the seed is fixed, so the file is reproducible).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

rng = random.Random(16)


def luhn_digit(partial: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(partial)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def card(prefix: str, length: int) -> str:
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    return body + luhn_digit(body)


def bad_card(prefix: str, length: int) -> str:
    good = card(prefix, length)
    return good[:-1] + str((int(good[-1]) + rng.randint(1, 9)) % 10)


def group(number: str, sizes: list[int], sep: str) -> str:
    out, i = [], 0
    for size in sizes:
        out.append(number[i : i + size])
        i += size
    if i < len(number):
        out.append(number[i:])
    return sep.join(p for p in out if p)


IBAN_FORMATS = {"DE": 18, "GB": None, "FR": 23, "NL": None, "ES": 20, "IT": None, "BE": 12}


def bban(country: str) -> str:
    if country == "GB":
        return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4)) + digits(14)
    if country == "NL":
        return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4)) + digits(10)
    if country == "IT":
        return rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") + digits(10) + digits(12)
    return digits(IBAN_FORMATS[country])


def digits(n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def iban(country: str, valid: bool = True) -> str:
    body = bban(country)
    number = "".join(str(int(ch, 36)) for ch in body + country + "00")
    check = 98 - int(number) % 97
    if not valid:
        check = (check + rng.randint(1, 96)) % 97 or 1
        if check == 98 - int(number) % 97:
            check = (check + 1) % 97
    return f"{country}{check:02d}{body}"


def spaced(value: str) -> str:
    return " ".join(value[i : i + 4] for i in range(0, len(value), 4))


NAMES = ["anna.schmidt", "j.doe", "mario_rossi", "lea+bank", "tom", "nguyen.van.a", "o.brien"]
DOMAINS = ["example.com", "mail.example.co.uk", "web.de", "posteo.net", "example.org"]

CARD_TEMPLATES = [
    "my card number is {}",
    "I was charged twice on {} yesterday",
    "card {} got declined at the shop",
    "Please block {} it was stolen",
    "{} is the card, why is it frozen?",
]
IBAN_TEMPLATES = [
    "send it to my account {}",
    "IBAN: {} please refund there",
    "the transfer to {} has not arrived",
    "is {} correct for the direct debit?",
]
EMAIL_TEMPLATES = [
    "my email is {}",
    "please write to {} instead",
    "I never got the letter at {}, can you resend",
    "contact: {}",
]
PHONE_TEMPLATES = [
    "call me on {}",
    "my number changed to {}",
    "you can reach me at {} after 5pm",
    "phone {} is the one on file",
]
LOOKALIKE = [
    f"my order number is {digits(10)}",
    f"the reference was {digits(16)}",
    "I paid 1,250.00 EUR on 01/12/2026",
    "transaction 2026-11-30 at 10:30 for 49.99",
    "my postcode is 10115 and the app version is 8.12.3",
    "the IP was 192.168.0.1 when it failed",
    f"tracking code {digits(12)} still says in transit",
    "you can write me at anna dot schmidt at example dot com",
    "follow us @northwindbank for news",
    "customer number 0000 1234",
    "I tried 3 times between 9:00 and 17:30",
    "limit raised to 5000 on 2026-12-01 then 10000",
]


def main() -> None:
    rows: list[dict] = []

    def add(text: str, pii: list[list[str]]) -> None:
        rows.append({"text": text, "pii": pii})

    card_kinds = [
        ("4", 16, [4, 4, 4, 4]),
        ("51", 16, [4, 4, 4, 4]),
        ("2221", 16, [4, 4, 4, 4]),
        ("37", 15, [4, 6, 5]),
        ("6011", 16, [4, 4, 4, 4]),
        ("35", 16, [4, 4, 4, 4]),
        ("4", 13, [4, 4, 5]),
        ("62", 19, [4, 4, 4, 4, 3]),
    ]
    for i in range(60):
        prefix, length, sizes = card_kinds[i % len(card_kinds)]
        number = card(prefix, length)
        shown = group(number, sizes, [" ", "-", ""][i % 3])
        add(CARD_TEMPLATES[i % len(CARD_TEMPLATES)].format(shown), [["card", shown]])
    for i in range(60):
        prefix, length, sizes = card_kinds[i % len(card_kinds)]
        shown = group(bad_card(prefix, length), sizes, [" ", "-", ""][i % 3])
        add(CARD_TEMPLATES[i % len(CARD_TEMPLATES)].format(shown), [])
    countries = list(IBAN_FORMATS)
    for i in range(50):
        value = iban(countries[i % len(countries)])
        shown = spaced(value) if i % 2 else value
        shown = shown.lower() if i % 7 == 0 else shown
        add(IBAN_TEMPLATES[i % len(IBAN_TEMPLATES)].format(shown), [["iban", shown]])
    for i in range(50):
        value = iban(countries[i % len(countries)], valid=False)
        shown = spaced(value) if i % 2 else value
        add(IBAN_TEMPLATES[i % len(IBAN_TEMPLATES)].format(shown), [])
    for i in range(50):
        address = f"{NAMES[i % len(NAMES)]}{i}@{DOMAINS[i % len(DOMAINS)]}"
        if i % 5 == 0:
            address = address.upper()
        add(EMAIL_TEMPLATES[i % len(EMAIL_TEMPLATES)].format(address), [["email", address]])
    phones = []
    for _ in range(10):
        phones.append(f"+44 20 {digits(4)} {digits(4)}")
        phones.append(f"+49 30 {digits(7)}")
        phones.append(f"0{rng.randint(30, 89)} {digits(7)}")
        phones.append(f"07700 {digits(6)}")
        phones.append(f"({rng.randint(201, 989)}) {digits(3)}-{digits(4)}")
        phones.append(f"{rng.randint(201, 989)}-{digits(3)}-{digits(4)}")
        phones.append(f"+33 6 {digits(2)} {digits(2)} {digits(2)} {digits(2)}")
        phones.append(f"0049{digits(10)}")
    for i, phone in enumerate(phones):
        add(PHONE_TEMPLATES[i % len(PHONE_TEMPLATES)].format(phone), [["phone", phone]])
    for text in LOOKALIKE * 3:
        add(text, [])
    # Several kinds in one message.
    for i in range(20):
        number = card("4", 16)
        address = f"{NAMES[i % len(NAMES)]}@{DOMAINS[i % len(DOMAINS)]}"
        phone = f"+44 7700 {digits(6)}"
        value = spaced(iban("DE"))
        add(
            f"card {number}, mail {address}, phone {phone}, refund to {value}",
            [["card", number], ["email", address], ["phone", phone], ["iban", value]],
        )
    # Known hard cases, kept so the figures show the detectors' limits: forms they do not
    # catch (a US number without separators, a card written with dots) and look-alikes they
    # cannot tell apart (a 16-digit reference that happens to pass the Luhn check).
    for _ in range(5):
        phone = f"{rng.randint(201, 989)}{digits(7)}"
        add(f"text me at {phone}", [["phone", phone]])
        number = card("4", 16)
        dotted = group(number, [4, 4, 4, 4], ".")
        add(f"card {dotted} was charged", [["card", dotted]])
        add(f"payment reference {card('4', 16)} on the statement", [])
    path = Path(__file__).with_name("pii_cases.jsonl")
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} messages -> {path}")


if __name__ == "__main__":
    main()
