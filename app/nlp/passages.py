"""Article bodies as passages: the unit BM25 and BERT match a question against.

A question answered in the fifth paragraph of a long article shares few words with the
article as a whole (BM25's length normalisation dilutes them) and nothing with its title, and a
sentence encoder reads only its first ``MAX_TOKENS`` tokens. So bodies are cut into passages of
at most ``PASSAGE_WORDS`` words: paragraphs (blank-line separated) are kept whole when they fit,
packed together while they are short, and split between sentences when they are long. An
article is then as close to a question as its closest passage.

Bodies are Markdown or HTML; both are reduced to plain words first (tags, Markdown markup and
link targets dropped), so markup never becomes a search term.
"""

from __future__ import annotations

import functools
import html
import re

# About 80 word pieces for MiniLM: within its 64-token window for most English text, and
# short enough that one paragraph's topic is not diluted by the next one's.
PASSAGE_WORDS = 60

_TAG = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]+>", re.IGNORECASE | re.DOTALL)
_BLOCK_TAG = re.compile(r"</?(p|div|li|ul|ol|h[1-6]|br|tr|table|section|article|blockquote)\b[^>]*>",
                        re.IGNORECASE)  # fmt: skip
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_MARKUP = re.compile(r"(^|\s)(#{1,6}|>|[-*+]|\d+[.)])\s+|[*_`~]{1,3}", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_SPACES = re.compile(r"[ \t\u00a0]+")
_PARAGRAPHS = re.compile(r"\n\s*\n")
# One training splits every body several times (each held-out fold's BM25 and BERT views, then
# the served ones): the passages of this many recent bodies are kept, more than the largest KB
# measured has articles (100,000, where splitting them anew each time took 35 s in all), until
# the training or the engine's load that needed them calls forget_splits().
SPLIT_CACHE = 131_072


def plain_text(body: str) -> str:
    """Words of a Markdown or HTML body, paragraphs separated by blank lines."""
    if not body:
        return ""
    text = _BLOCK_TAG.sub("\n\n", body)
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_MARKUP.sub(r"\1", text)
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _sentences(paragraph: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(paragraph) if s.strip()]


def split_passages(body: str, max_words: int = PASSAGE_WORDS) -> list[str]:
    """The body's passages, in order; ``[]`` for an empty body."""
    return list(_split(body, max_words))


def forget_splits() -> None:
    """Drop the kept passages: a process that serves would otherwise hold a second copy of
    the KB's text, and of every KB it loaded before, after the indexes are built."""
    _split.cache_clear()


@functools.lru_cache(maxsize=SPLIT_CACHE)
def _split(body: str, max_words: int) -> tuple[str, ...]:
    pieces: list[str] = []
    for paragraph in _PARAGRAPHS.split(plain_text(body)):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        if len(paragraph.split()) <= max_words:
            pieces.append(paragraph)
            continue
        for sentence in _sentences(paragraph):
            words = sentence.split()
            while len(words) > max_words:  # a run-on sentence: cut it by words
                pieces.append(" ".join(words[:max_words]))
                words = words[max_words:]
            if words:
                pieces.append(" ".join(words))
    passages: list[str] = []
    current: list[str] = []
    for piece in pieces:  # pack short neighbours together up to the word limit
        if current and len(current) + len(piece.split()) > max_words:
            passages.append(" ".join(current))
            current = []
        current.extend(piece.split())
    if current:
        passages.append(" ".join(current))
    return tuple(passages)
