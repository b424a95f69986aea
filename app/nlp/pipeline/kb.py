"""The knowledge base as each tier indexes it, with held-out texts left out when asked.

Training builds BM25 and the BERT index once per held-out fold *without* that fold's queries
(an indexed held-out question would leak its answer) and once on everything for serving; the
engine builds them the same way when the KB changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.nlp.bm25 import BM25Doc
from app.nlp.passages import PASSAGE_WORDS, split_passages
from app.nlp.pipeline.data import KbArticle

if TYPE_CHECKING:
    from app.nlp.bert import BertTier, KbEntry

# What the BERT index embeds of each body is bounded by BERT_PASSAGE_WORDS words in all, as
# embedding costs about the same per token (int8 MiniLM on 2 cores: 2.4 ms a 14-token title,
# 9.4 ms a 63-token passage): the first BERT_PASSAGES passages of each body; fewer per article
# (down to the first one) over the budget; then the first passages cut to their first words, in
# steps of PASSAGE_CUT_STEP (so that a few articles more do not change every passage's text, and
# with it every cached vector), down to MIN_PASSAGE_WORDS. Titles and alternate questions are
# always embedded, and BM25 indexes every passage whole. The budget is a count, not a time, so a
# KB gives the same index on every machine; it keeps a 100,000-article KB's training within 15
# minutes on 2 cores without AVX-512 (docs/cold_start.md has what the cut costs in accuracy).
BERT_PASSAGES = 4
BERT_PASSAGE_WORDS = 2_000_000
PASSAGE_CUT_STEP = 8
MIN_PASSAGE_WORDS = 16


@dataclass(frozen=True)
class PassageWindow:
    """What of each body the BERT index embeds: its first ``per_article`` passages, each cut
    to its first ``words`` words."""

    per_article: int = BERT_PASSAGES
    words: int = PASSAGE_WORDS

    def cut(self, body: Sequence[str]) -> list[str]:
        passages = body[: self.per_article]
        if self.words >= PASSAGE_WORDS:
            return list(passages)
        return [" ".join(p.split()[: self.words]) for p in passages]

    def describe(self) -> str:
        """In the user's terms, for ``tierdesk train``'s tier summary."""
        if self.per_article >= BERT_PASSAGES and self.words >= PASSAGE_WORDS:
            return "body passages"
        if self.per_article > 1:
            text = f"the first {self.per_article} body passages of each article"
        else:
            text = "the first body passage of each article"
        if self.words < PASSAGE_WORDS:
            text += f", its first {self.words} words"
        return text + f" (a KB of over {BERT_PASSAGE_WORDS:,} words of passages; BM25 reads all)"


def bm25_docs(articles: Sequence[KbArticle], drop: set[str] | None = None) -> list[BM25Doc]:
    """BM25's view of the KB; texts in ``drop`` (held-out queries) are not indexed, titles
    included (the document keeps its title for display only when it is indexed)."""
    drop = drop or set()
    return [
        BM25Doc(
            a.slug,
            "" if a.title in drop else a.title,
            [q for q in a.questions if q not in drop],
            a.body,
            a.intent,
        )
        for a in articles
    ]


def bert_passage_window(bodies: Sequence[Sequence[str]]) -> PassageWindow:
    """What of each body (its passages, ``split_passages``) the BERT index embeds: up to
    BERT_PASSAGES passages an article, fewer (at least the first) while the bodies would exceed
    BERT_PASSAGE_WORDS words, then the first passages cut shorter while they still would."""
    words = [[len(p.split()) for p in body] for body in bodies]
    limit = BERT_PASSAGES
    while limit > 1 and sum(sum(w[:limit]) for w in words) > BERT_PASSAGE_WORDS:
        limit -= 1
    if limit > 1:
        return PassageWindow(limit)
    first = [w[0] for w in words if w]
    cut = PASSAGE_WORDS
    while cut > MIN_PASSAGE_WORDS and sum(min(n, cut) for n in first) > BERT_PASSAGE_WORDS:
        cut = max(MIN_PASSAGE_WORDS, (cut - 1) // PASSAGE_CUT_STEP * PASSAGE_CUT_STEP)
    return PassageWindow(1, cut)


def passage_window(articles: Sequence[KbArticle]) -> PassageWindow:
    """``bert_passage_window`` of these articles' bodies."""
    return bert_passage_window([split_passages(a.body) for a in articles])


def kb_entries(
    articles: Sequence[KbArticle],
    drop: set[str] | None = None,
    window: PassageWindow | None = None,
) -> list[KbEntry]:
    """BERT's view of the KB (texts in ``drop`` left out, as in ``bm25_docs``); ``window``
    overrides what of each body is embedded (``bert_passage_window``)."""
    from app.nlp.bert import KbEntry  # torch loads only when BERT is used

    drop = drop or set()
    bodies = [split_passages(a.body) for a in articles]
    window = window or bert_passage_window(bodies)
    return [
        KbEntry(
            a.slug,
            a.title,
            a.intent,
            [q for q in a.questions if q not in drop],
            [p for p in window.cut(body) if p not in drop],
            index_title=a.title not in drop,
        )
        for a, body in zip(articles, bodies, strict=True)
    ]


def bert_with_kb(
    bert: BertTier, entries: list[KbEntry], reuse_from: BertTier | None = None
) -> BertTier:
    """``bert`` indexed on ``entries`` (``BertTier.with_kb``): the engine's KB reload."""
    return bert.with_kb(entries, reuse_from=reuse_from)


def router_over(
    articles: Sequence[KbArticle],
    *,
    fasttext,
    bert: BertTier,
    calibration,
    thresholds,
    tiers,
    version: str | None = None,
):
    """A router over ``articles`` with freshly trained parts (``bert`` already indexed on them),
    as the engine builds one for a loaded version: for training stages and benchmarks that
    route with models not yet saved."""
    from app.nlp.bm25 import BM25Retriever
    from app.nlp.router import Router, RouterModels

    return Router(
        RouterModels(
            fasttext=fasttext,
            bm25=BM25Retriever(bm25_docs(articles)),
            bert=bert,
            calibration=calibration,
            thresholds=thresholds,
            tiers=tiers,
            version=version,
        )
    )
