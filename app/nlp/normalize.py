"""Text normalisation and tokenisation shared by every tier.

``normalize`` produces the canonical form of a customer message: the FastText input and the
answer-cache key. ``tokenize`` turns text into the terms the BM25 index uses.

Both are pure Python with regexes compiled once at import; on ASCII input the Unicode steps are
skipped, so a typical chat message costs a few microseconds.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

# Bump when tokenize() output changes: indexes saved with another version must be rebuilt.
TOKENIZER_VERSION = "1"

# Zero-width (non-)joiners shape emoji sequences and Persian/Indic words; tag characters
# (U+E0020..E007F) spell emoji subdivision flags. They are format characters, but meaningful.
_KEEP_FORMAT = {0x200C, 0x200D, *range(0xE0020, 0xE0080)}
# Code point ranges scanned at import for control/format/mark characters (Cf and marks also
# live in the supplementary planes; everything that matters is below U+20000 or in plane 14).
_SCAN_RANGES = ((0, 0x20000), (0xE0000, 0xE1000))
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})


def _build_classes() -> tuple[str, str]:
    """Regex character classes: invisible characters to drop, and combining marks."""
    drop: list[int] = []
    marks: list[int] = []
    for start, stop in _SCAN_RANGES:
        codes = range(start, stop)
        for code, category in zip(codes, map(unicodedata.category, map(chr, codes)), strict=True):
            if category[0] == "M":
                marks.append(code)
            elif category in _INVISIBLE_CATEGORIES and code not in _KEEP_FORMAT:
                drop.append(code)
    drop = [code for code in drop if not chr(code).isspace()]
    return _ranges_class(drop), _ranges_class(marks)


def _ranges_class(codes: list[int]) -> str:
    """Compact ``[...]`` body for a sorted list of code points."""
    parts: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], sys.maxunicode + 2]:
        if code == prev + 1:
            prev = code
            continue
        if start == prev:
            parts.append(re.escape(chr(start)))
        else:
            parts.append(f"{re.escape(chr(start))}-{re.escape(chr(prev))}")
        start = prev = code
    return "".join(parts)


_DROP_CLASS, _MARK_CLASS = _build_classes()
_INVISIBLE_RE = re.compile(f"[{_DROP_CLASS}]")
_ASCII_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")
_WHITESPACE_RE = re.compile(r"\s+")

# Ideographs and kana carry no spaces between words: each becomes its own term.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RE = re.compile(f"([{_CJK}])")
_WORD_RE = re.compile(f"[\\w{_MARK_CLASS}]+")
# Apostrophes are dropped ("don't" -> "dont", "card's" -> "cards"); elsewhere they would only
# separate words, which the surrounding spaces or punctuation already do.
_APOSTROPHE_TABLE = dict.fromkeys(map(ord, "'\u2019\u02bc"))
# ASCII shortcut as a byte table: lowercase letters, every character but letters, digits and "_"
# (the ASCII part of \w) becomes a space, apostrophes and non-space control characters vanish.
_ASCII_TOKEN_TABLE = bytes(
    ord(chr(c).lower()) if chr(c).isalnum() or chr(c) == "_" else ord(" ") for c in range(256)
)
_ASCII_TOKEN_DELETE = bytes([*range(0x00, 0x09), *range(0x0E, 0x1C), 0x7F, ord("'")])
# tokenize_many joins texts with this control character, which its table keeps as is.
_SEPARATOR = "\x1e"
_BULK_TOKEN_TABLE = _ASCII_TOKEN_TABLE[:0x1E] + b"\x1e" + _ASCII_TOKEN_TABLE[0x1F:]

# A deliberately tiny English stop-word list: function words that never identify an article.
# Question words and negations ("how", "why", "not") are kept, they separate intents.
STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from as into about than then so
    is are was were be been being am do does did i me my mine we us our you your it its
    this that these those there here he she they them their his her can could would should
    will shall may might must have has had just also please hi hello thanks thank""".split()
)

DEFAULT_STEM = True
DEFAULT_DROP_STOPWORDS = True


def normalize(text: str) -> str:
    """Canonical form: NFKC, no control/format characters, case-folded, single spaces.

    Letters of every script, digits, punctuation and emoji (including ZWJ sequences and flag
    tags) are kept; only invisible characters are dropped. The result is a fixed point
    (``normalize(normalize(x)) == normalize(x)``). Case folding is full Unicode
    lowercasing (``"Straße"`` -> ``"strasse"``), so variants of one message share a cache key.
    """
    if text.isascii():
        text = _ASCII_CONTROL_RE.sub("", text).lower()
    else:
        # NFKC again after case folding, which can leave a few characters unnormalised.
        text = _INVISIBLE_RE.sub("", unicodedata.normalize("NFKC", text)).casefold()
        text = unicodedata.normalize("NFKC", text)
    return _WHITESPACE_RE.sub(" ", text).strip()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Cheap English suffix stripping (plurals, -ing, -ed, -ly); other scripts pass unchanged.

    Conservative on purpose: it conflates inflected forms of one word and leaves words of four
    letters or fewer alone ("bus", "was", "atm"). A final "e" is dropped so that "charge",
    "charged" and "charging" share one stem.
    """
    if len(word) <= 4 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 5:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            root = word[: -len(suffix)]
            if len(root) >= 2 and root[-1] == root[-2] and root[-1] not in "lsz":
                root = root[:-1]  # "stopped" -> "stop"
            return root[:-1] if root.endswith("e") else root
    if word.endswith("ly") and len(word) > 5:
        return word[:-2]
    if word.endswith("e") and len(word) > 4:
        return word[:-1]  # "charge", "charged", "charging" -> "charg"
    return word


class _TermCache(dict):
    """word -> BM25 term ("" for a stop word), filled on first sight; bounded in size."""

    MAX_SIZE = 200_000

    def __init__(self, stem_words: bool, drop_stopwords: bool) -> None:
        super().__init__()
        self.stem_words = stem_words
        self.drop_stopwords = drop_stopwords

    def __missing__(self, word: str) -> str:
        if self.drop_stopwords and word in STOPWORDS:
            term = ""
        else:
            term = stem(word) if self.stem_words else word
        if len(self) >= self.MAX_SIZE:
            self.clear()
        self[word] = term
        return term


_TERM_CACHES = {(s, d): _TermCache(s, d) for s in (False, True) for d in (False, True)}


def tokenize(
    text: str, *, stem_words: bool = DEFAULT_STEM, drop_stopwords: bool = DEFAULT_DROP_STOPWORDS
) -> list[str]:
    """BM25 terms: words of ``normalize(text)``, CJK characters one by one, optionally stemmed.

    Punctuation and emoji separate words and are not terms themselves; apostrophes are dropped
    ("can't" -> "cant"). Plain ASCII text takes a shortcut with the same result.
    """
    if text.isascii():
        raw = text.encode("ascii").translate(_ASCII_TOKEN_TABLE, _ASCII_TOKEN_DELETE)
        words = raw.decode("ascii").split()
    else:
        text = _CJK_RE.sub(r" \1 ", normalize(text)).translate(_APOSTROPHE_TABLE)
        words = _WORD_RE.findall(text)
    if not (stem_words or drop_stopwords):
        return words
    return list(filter(None, map(_TERM_CACHES[stem_words, drop_stopwords].__getitem__, words)))


def tokenize_many(
    texts: Iterable[str],
    *,
    stem_words: bool = DEFAULT_STEM,
    drop_stopwords: bool = DEFAULT_DROP_STOPWORDS,
) -> list[list[str]]:
    """``[tokenize(t) for t in texts]``, faster for index builds.

    ASCII texts are translated in one pass, joined by a record separator that the byte table
    keeps (texts containing it, and non-ASCII texts, take the one-by-one path).
    """
    texts = list(texts)
    result: list[list[str] | None] = [None] * len(texts)
    batch = [i for i, text in enumerate(texts) if text.isascii() and _SEPARATOR not in text]
    joined = _SEPARATOR.join(texts[i] for i in batch).encode("ascii")
    chunks = joined.translate(_BULK_TOKEN_TABLE, _ASCII_TOKEN_DELETE).decode("ascii")
    if batch:
        if stem_words or drop_stopwords:
            term = _TERM_CACHES[stem_words, drop_stopwords].__getitem__
            for i, chunk in zip(batch, chunks.split(_SEPARATOR), strict=True):
                result[i] = list(filter(None, map(term, chunk.split())))
        else:
            for i, chunk in zip(batch, chunks.split(_SEPARATOR), strict=True):
                result[i] = chunk.split()
    options = {"stem_words": stem_words, "drop_stopwords": drop_stopwords}
    return [
        tokenize(text, **options) if words is None else words
        for text, words in zip(texts, result, strict=True)
    ]
