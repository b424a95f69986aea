"""The knowledge base as each tier indexes it, with held-out texts left out when asked.

Training builds BM25 and the BERT index once per held-out fold *without* that fold's queries
(an indexed held-out question would leak its answer) and once on everything for serving; the
engine builds them the same way when the KB changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.nlp.bm25 import BM25Doc
from app.nlp.passages import split_passages
from app.nlp.pipeline.data import KbArticle

if TYPE_CHECKING:
    from app.nlp.bert import BertTier, KbEntry

# The BERT index embeds the first BERT_PASSAGES passages of each body, fewer per article (down
# to the first one) when the KB would exceed BERT_PASSAGE_BUDGET passages: embedding a passage
# costs about 3 ms of CPU, a title under 1 ms.
BERT_PASSAGES = 4
BERT_PASSAGE_BUDGET = 40_000


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


def bert_passage_limit(counts: Sequence[int]) -> int:
    """Passages per article the BERT index embeds, from each body's passage count: up to
    BERT_PASSAGES, fewer (at least the first) when the bodies would exceed BERT_PASSAGE_BUDGET
    passages in all (BM25 indexes every passage)."""
    limit = BERT_PASSAGES
    while limit > 1 and sum(min(c, limit) for c in counts) > BERT_PASSAGE_BUDGET:
        limit -= 1
    return limit


def kb_entries(
    articles: Sequence[KbArticle], drop: set[str] | None = None, passages: int | None = None
) -> list[KbEntry]:
    """BERT's view of the KB (texts in ``drop`` left out, as in ``bm25_docs``); ``passages``
    overrides the per-article passage limit."""
    from app.nlp.bert import KbEntry  # torch loads only when BERT is used

    drop = drop or set()
    bodies = [split_passages(a.body) for a in articles]
    limit = bert_passage_limit([len(b) for b in bodies]) if passages is None else passages
    return [
        KbEntry(
            a.slug,
            a.title,
            a.intent,
            [q for q in a.questions if q not in drop],
            [p for p in body[:limit] if p not in drop],
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
