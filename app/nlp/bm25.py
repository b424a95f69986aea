"""Simple-route retriever: fielded BM25 over the knowledge base.

Scoring is rank-bm25's ``BM25Okapi`` (k1, b, and its idf floor: terms found in more than half
of a field's rows get ``epsilon * average idf``), applied to four fields indexed separately:

* ``title``: one row per article;
* ``questions``: every alternate question is its own row and an article takes the best of its
  questions (a short customer query is often closest to one phrasing);
* ``question_pool``: all alternate questions of an article pooled into one row (evidence spread
  over several phrasings adds up);
* ``body``: one row per passage of the article's body (``app/nlp/passages.py``); an article
  takes its best passage, so a question answered deep inside a long article still finds it
  (a short body is one passage: one row per article).

Measured on BANKING77 (one article per category, held-out queries) best question + pool beats
either alone; ``bench/bench_bm25.py --quality`` prints the figures.

An article's score is the weighted sum of its field scores. Two backends compute exactly the same
numbers: ``rank_bm25`` calls ``BM25Okapi.get_scores`` (which visits every row, linear in the KB)
and ``sparse`` precomputes every row's BM25 term weight into column-compressed matrices, so a
query only reads the postings of its own terms. Both are built once, in the constructor or in
``load``, never per query.

``confidence`` is ``match * sqrt(margin)``, in [0, 1]. ``match`` is the top article's raw score
divided by the score of an ideal article whose every field is exactly the query (each query term
once, average length), clipped to [0, 1]; query terms unknown to a field count in that ideal with
the highest idf the field can give, so queries in words the KB never uses get a low match.
``margin`` is the top score's relative lead over the second. On held-out BANKING77 queries the
margin alone separates right from wrong answers best and the match alone separates in-scope from
out-of-scope queries best; the product keeps most of both (AUROC within 0.01 of the margin's for
right/wrong, 0.94-0.96 against the margin's 0.78-0.84 for in-scope/out-of-scope). The router
calibrates it into a probability.

Okapi idf caveat, kept for identical semantics: a term found in half of a field's rows has idf
0 and one in more than half gets the small floor, so a tiny KB (two title-only articles) matches
nothing; real articles have several alternate questions, which give the questions field enough
rows. An ``intent`` restriction ranks within that intent's articles with the global statistics.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import time
import zipfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi
from scipy import sparse

from app.nlp.normalize import (
    DEFAULT_DROP_STOPWORDS,
    DEFAULT_STEM,
    TOKENIZER_VERSION,
    tokenize,
    tokenize_many,
)
from app.nlp.passages import split_passages
from app.nlp.topk import top_indices
from app.nlp.types import Candidate, TierResult

FIELDS = ("title", "questions", "question_pool", "body")
BACKENDS = ("sparse", "rank_bm25")
DEFAULT_FIELD_WEIGHTS: Mapping[str, float] = {
    "title": 0.5,
    "questions": 1.0,
    "question_pool": 1.0,
    "body": 0.3,
}
# rank-bm25's BM25Okapi default for the idf floor; part of the scoring semantics.
IDF_EPSILON = 0.25
# An article's score is multiplied by (1 + intent_boost * P(article's intent)).
DEFAULT_INTENT_BOOST = 1.0
FORMAT_VERSION = 2
# Fields with several rows per article; an article scores as its best row.
MULTI_ROW_FIELDS = ("questions", "body")
# Multi-term queries on the many-rows field switch to a dense row-score array when their
# postings cover more than 1/_DENSE_FRACTION of the rows (sorting them would cost more).
_DENSE_FRACTION = 8


@dataclass
class BM25Doc:
    """One knowledge-base article as the retriever sees it."""

    slug: str
    title: str
    questions: list[str] = field(default_factory=list)
    body: str = ""
    intent: str | None = None


@dataclass(frozen=True)
class _Settings:
    k1: float
    b: float
    field_weights: dict[str, float]
    stem: bool
    drop_stopwords: bool
    intent_boost: float

    def tokens(self, text: str) -> list[str]:
        return tokenize(text, stem_words=self.stem, drop_stopwords=self.drop_stopwords)

    def tokens_many(self, texts: Iterable[str]) -> list[list[str]]:
        return tokenize_many(texts, stem_words=self.stem, drop_stopwords=self.drop_stopwords)


def _field_rows(
    docs: Sequence[BM25Doc], settings: _Settings
) -> dict[str, tuple[list[list[str]], np.ndarray]]:
    """Token lists of each field's rows and the article index of each row.

    Title and the question pool give one row per article (even when empty, as rank-bm25
    would count it); the body one row per passage (one empty row for an empty body); questions
    one row per non-empty question. Each text is tokenized once.
    """
    wanted = {name for name, weight in settings.field_weights.items() if weight > 0}
    articles = np.arange(len(docs), dtype=np.int64)
    fields: dict[str, tuple[list[list[str]], np.ndarray]] = {}
    if "title" in wanted:
        fields["title"] = (settings.tokens_many(doc.title for doc in docs), articles)
    if "body" in wanted:
        passages = [split_passages(doc.body) or [""] for doc in docs]
        owners = np.repeat(articles, [len(p) for p in passages])
        fields["body"] = (settings.tokens_many(chain.from_iterable(passages)), owners)
    if wanted & {"questions", "question_pool"}:
        counts = [len(doc.questions) for doc in docs]
        tokenized = settings.tokens_many(q for doc in docs for q in doc.questions)
        owner_of_question = np.repeat(articles, counts)
        if "questions" in wanted:
            kept = [i for i, tokens in enumerate(tokenized) if tokens]
            fields["questions"] = ([tokenized[i] for i in kept], owner_of_question[kept])
        if "question_pool" in wanted:
            ends = np.cumsum(counts).tolist()
            starts = [0, *ends][:-1]
            pooled = [
                list(chain.from_iterable(tokenized[a:b])) for a, b in zip(starts, ends, strict=True)
            ]
            fields["question_pool"] = (pooled, articles)
    return fields


def okapi_idf(doc_freq: np.ndarray, n_rows: int) -> np.ndarray:
    """rank-bm25 BM25Okapi idf, including its floor for terms in more than half of the rows."""
    idf = np.log(n_rows - doc_freq + 0.5) - np.log(doc_freq + 0.5)
    floor = IDF_EPSILON * float(idf.mean()) if len(idf) else 0.0
    return np.where(idf < 0, floor, idf)


class _FieldIndex:
    """One field of the index: scores rows, knows idf for the confidence's ideal score."""

    per_article: bool  # one row per article (title, pool) rather than many (questions, body)
    row_article: np.ndarray
    n_articles: int
    n_rows: int

    def idf(self, term: str) -> float | None:
        raise NotImplementedError

    def article_scores(self, query: list[str]) -> np.ndarray:
        raise NotImplementedError

    def max_idf(self) -> float:
        """The idf of a term no row contains: what an unknown query word weighs in the ideal."""
        return math.log(self.n_rows + 0.5) - math.log(0.5)

    def _max_per_article(self, scores: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Best row score of each article (0 when none of its rows has a positive score), from
        ``scores`` of the ``rows`` given (of every row when None).

        One ``np.maximum.at`` over the rows' articles: rows are grouped by article, so its
        indices are sorted, and it is faster than ``np.maximum.reduceat`` over the articles'
        segments, most of all where articles have one or two rows each (``docs/benchmarks.md``,
        BM25 at scale).
        """
        best = np.zeros(self.n_articles)
        np.maximum.at(best, self.row_article if rows is None else self.row_article[rows], scores)
        return best


class _RankBM25Field(_FieldIndex):
    """A field scored by rank-bm25 itself (every row visited per query)."""

    def __init__(self, rows, row_article, n_articles, per_article, settings: _Settings) -> None:
        self.per_article = per_article
        self.row_article = row_article
        self.n_articles = n_articles
        self.n_rows = len(rows)
        self.model = BM25Okapi(rows, k1=settings.k1, b=settings.b, epsilon=IDF_EPSILON)

    def idf(self, term: str) -> float | None:
        return self.model.idf.get(term)

    def article_scores(self, query: list[str]) -> np.ndarray:
        row_scores = self.model.get_scores(query)
        return row_scores if self.per_article else self._max_per_article(row_scores)


class _SparseField(_FieldIndex):
    """A field as a term x row CSC matrix of precomputed BM25 term weights."""

    def __init__(
        self,
        vocab: dict[str, int],
        matrix: sparse.csc_matrix,
        idf: np.ndarray,
        row_article: np.ndarray,
        n_articles: int,
        per_article: bool,
    ) -> None:
        self.vocab = vocab
        self.matrix = matrix
        self.idf_values = idf
        self.row_article = row_article
        self.n_articles = n_articles
        self.n_rows = matrix.shape[0]
        self.per_article = per_article

    @classmethod
    def build(cls, rows, row_article, n_articles, per_article, settings: _Settings):
        """Vectorised build: term ids for every token, then (row, term) pairs counted by sort."""
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = list(chain.from_iterable(rows))
        vocab = {term: i for i, term in enumerate(dict.fromkeys(flat))}
        term_of_token = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
        del flat
        row_of_token = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
        n_terms = max(len(vocab), 1)
        pairs, tf = np.unique(row_of_token * n_terms + term_of_token, return_counts=True)
        row_index, column_index = np.divmod(pairs, n_terms)
        del term_of_token, row_of_token, pairs
        doc_len = lengths.astype(np.float64)
        avgdl = doc_len.mean()
        idf = okapi_idf(np.bincount(column_index, minlength=len(vocab)), len(rows))
        length_norm = settings.k1 * (1 - settings.b + settings.b * doc_len[row_index] / avgdl)
        weights = idf[column_index] * (tf * (settings.k1 + 1) / (tf + length_norm))
        matrix = sparse.csc_matrix(
            (weights, (row_index, column_index)), shape=(len(rows), len(vocab))
        )
        return cls(vocab, matrix, idf, row_article, n_articles, per_article)

    def idf(self, term: str) -> float | None:
        column = self.vocab.get(term)
        return None if column is None else float(self.idf_values[column])

    def _postings(self, query: list[str]) -> tuple[np.ndarray, np.ndarray, int] | None:
        """Rows and weights of the query terms' postings (repeated terms count again)."""
        columns = Counter(self.vocab[t] for t in query if t in self.vocab)
        if not columns:
            return None
        indptr, indices, data = self.matrix.indptr, self.matrix.indices, self.matrix.data
        rows, weights = [], []
        for column, count in columns.items():
            start, stop = indptr[column], indptr[column + 1]
            rows.append(indices[start:stop])
            weights.append(data[start:stop] if count == 1 else count * data[start:stop])
        if len(rows) == 1:
            return rows[0], weights[0], 1
        return np.concatenate(rows), np.concatenate(weights), len(columns)

    def article_scores(self, query: list[str]) -> np.ndarray:
        postings = self._postings(query)
        if postings is None:
            return np.zeros(self.n_articles)
        rows, weights, n_columns = postings
        if self.per_article:
            return np.bincount(rows, weights, minlength=self.n_articles)
        if n_columns == 1:  # each row at most once
            return self._max_per_article(weights, rows)
        if len(rows) * _DENSE_FRACTION < self.n_rows:
            rows, where = np.unique(rows, return_inverse=True)
            return self._max_per_article(np.bincount(where, weights), rows)
        return self._max_per_article(np.bincount(rows, weights, minlength=self.n_rows))


class BM25Retriever:
    """Fielded BM25 over knowledge-base articles; see the module docstring for the scoring."""

    def __init__(
        self,
        docs: Sequence[BM25Doc],
        *,
        backend: str = "sparse",
        field_weights: Mapping[str, float] | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        stem: bool = DEFAULT_STEM,
        drop_stopwords: bool = DEFAULT_DROP_STOPWORDS,
        intent_boost: float = DEFAULT_INTENT_BOOST,
    ) -> None:
        self.backend = backend
        self.settings = _validated_settings(
            backend, field_weights, k1, b, stem, drop_stopwords, intent_boost
        )
        self.docs = list(docs)
        _check_docs(self.docs)
        self._version = _content_hash(self.docs, self.settings)
        self._init_lookup()
        self.fields: dict[str, _FieldIndex] = {}
        for name, (rows, owners) in _field_rows(self.docs, self.settings).items():
            if any(rows):  # rank-bm25 cannot index a field with no tokens at all
                self.fields[name] = self._build_field(rows, owners, name)

    def _build_field(self, rows, owners, name: str) -> _FieldIndex:
        per_article = name not in MULTI_ROW_FIELDS
        cls = _SparseField.build if self.backend == "sparse" else _RankBM25Field
        return cls(rows, owners, len(self.docs), per_article, self.settings)

    def _init_lookup(self) -> None:
        self._intent_rows: dict[str, np.ndarray] = {}
        for index, doc in enumerate(self.docs):
            if doc.intent:
                self._intent_rows.setdefault(doc.intent, []).append(index)
        self._intent_rows = {k: np.asarray(v) for k, v in self._intent_rows.items()}

    @property
    def version(self) -> str:
        """Hash of the indexed content and the scoring settings."""
        return self._version

    def __len__(self) -> int:
        return len(self.docs)

    def run(
        self,
        query: str,
        k: int = 5,
        *,
        intent: str | None = None,
        intent_probs: Sequence[tuple[str, float]] | None = None,
    ) -> TierResult:
        """Best ``k`` articles for ``query``.

        ``intent`` restricts the candidates to that intent's articles (all articles when it has
        none); ``intent_probs`` (e.g. FastText's top-k) multiplies each article's score by
        ``1 + intent_boost * P(its intent)``. Only articles with a positive score are returned.
        """
        started = time.perf_counter()
        tokens = self.settings.tokens(query)
        result = TierResult(tier="bm25", model_version=self._version)
        if tokens and self.fields and k > 0:
            raw = self._raw_scores(tokens)
            ranked = self._boosted(raw, intent_probs)
            allowed = self._intent_rows.get(intent) if intent else None
            if allowed is not None:
                mask = np.full(len(self.docs), -np.inf)
                mask[allowed] = 0.0
                ranked = ranked + mask
            top = _top_k(ranked, k)
            result.candidates = [self._candidate(i, ranked[i]) for i in top]
            if len(top):
                runner_up = ranked[top[1]] if len(top) > 1 else 0.0
                result.confidence = self.confidence(tokens, raw[top[0]], ranked[top[0]], runner_up)
            if allowed is not None:
                result.signals = self._restriction_signals(raw, top)
        result.ms = (time.perf_counter() - started) * 1000
        return result

    def _restriction_signals(self, raw: np.ndarray, top: np.ndarray) -> dict[str, float]:
        """How the intent-restricted answer compares with BM25 over the whole KB (free, the
        raw scores of every article are at hand): ``unrestricted_agrees`` is 1 when the best
        article overall has the restricted answer's intent, ``share_of_best`` the restricted
        answer's raw score over the best overall. Both flag a confident but wrong intent: on
        held-out BANKING77 they raised the simple calibrator's AUROC from 0.84 to 0.91."""
        best = int(np.argmax(raw)) if len(raw) else -1
        if best < 0 or raw[best] <= 0 or not len(top):
            return {"unrestricted_agrees": 0.0, "share_of_best": 0.0}
        answer = int(top[0])
        agrees = self.docs[best].intent == self.docs[answer].intent
        return {
            "unrestricted_agrees": 1.0 if agrees else 0.0,
            "share_of_best": float(min(1.0, max(0.0, raw[answer] / raw[best]))),
        }

    def _raw_scores(self, tokens: list[str]) -> np.ndarray:
        total = np.zeros(len(self.docs))
        for name, index in self.fields.items():
            total += self.settings.field_weights[name] * index.article_scores(tokens)
        return total

    def _boosted(self, raw: np.ndarray, intent_probs) -> np.ndarray:
        if not intent_probs or self.settings.intent_boost == 0:
            return raw
        factor = np.ones(len(self.docs))
        for name, probability in intent_probs:
            rows = self._intent_rows.get(name)
            if rows is not None:
                factor[rows] += self.settings.intent_boost * max(0.0, float(probability))
        return raw * factor

    def _candidate(self, index: int, score: float) -> Candidate:
        doc = self.docs[index]
        return Candidate(slug=doc.slug, title=doc.title, score=float(score), intent=doc.intent)

    def ideal_score(self, tokens: list[str]) -> float:
        """Score of an article whose every field is exactly the query (see module docstring)."""
        total = 0.0
        for name, index in self.fields.items():
            unknown = index.max_idf()
            idfs = (index.idf(t) for t in tokens)
            field_ideal = sum(unknown if idf is None else max(0.0, idf) for idf in idfs)
            total += self.settings.field_weights[name] * field_ideal
        return total

    def confidence(self, tokens: list[str], top_raw: float, top: float, runner_up: float) -> float:
        """``match * sqrt(margin)``: how fully the best article matches, times how clearly it wins.

        match = top article's raw score / ideal score, clipped to [0, 1]; margin = relative lead
        of the top ranked score over the second, (top - runner_up) / top.
        """
        ideal = self.ideal_score(tokens)
        if ideal <= 0 or top <= 0:
            return 0.0
        match = min(1.0, max(0.0, top_raw / ideal))
        margin = min(1.0, max(0.0, (top - runner_up) / top))
        return float(match * math.sqrt(margin))

    def save(self, path: Path) -> None:
        """Write the index to one ``.npz`` file (no pickle), atomically."""
        path = Path(path)
        arrays: dict[str, np.ndarray] = {}
        meta = {
            "format": FORMAT_VERSION,
            "tokenizer": TOKENIZER_VERSION,
            "backend": self.backend,
            "version": self._version,
            "settings": asdict(self.settings),
            "docs": [_doc_record(d, full=self.backend != "sparse") for d in self.docs],
            "fields": {},
        }
        if self.backend == "sparse":
            for name, index in self.fields.items():
                meta["fields"][name] = {"vocab": list(index.vocab), "n_rows": index.n_rows}
                arrays[f"{name}.indptr"] = index.matrix.indptr
                arrays[f"{name}.indices"] = index.matrix.indices
                arrays[f"{name}.data"] = index.matrix.data
                arrays[f"{name}.idf"] = index.idf_values
                arrays[f"{name}.row_article"] = index.row_article
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(buffer.getvalue())
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> BM25Retriever:
        """Read an index written by ``save``; a rank_bm25 index is rebuilt from its articles.

        A missing file raises ``FileNotFoundError``; anything else unreadable, or written by
        another format or tokenizer version, raises ``ValueError`` (rebuild the index).
        """
        try:
            with np.load(Path(path), allow_pickle=False) as archive:
                meta = json.loads(archive["meta"].tobytes())
                if (meta.get("format"), meta.get("tokenizer")) != (
                    FORMAT_VERSION,
                    TOKENIZER_VERSION,
                ):
                    raise ValueError("index written by another version, rebuild it")
                arrays = {name: archive[name] for name in archive.files if name != "meta"}
            settings = meta["settings"]
            docs = [BM25Doc(**record) for record in meta["docs"]]
            if meta["backend"] != "sparse":
                return cls(docs, backend=meta["backend"], **settings)
            return cls._from_arrays(meta, docs, _Settings(**settings), arrays)
        except FileNotFoundError:
            raise
        except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{path}: not a usable BM25 index: {exc}") from exc

    @classmethod
    def _from_arrays(cls, meta: dict, docs: list[BM25Doc], settings: _Settings, arrays: dict):
        self = cls.__new__(cls)
        self.backend = "sparse"
        self.settings = settings
        self.docs = docs
        self._version = meta["version"]
        self._init_lookup()
        self.fields = {}
        for name, info in meta["fields"].items():
            vocab = {term: i for i, term in enumerate(info["vocab"])}
            matrix = sparse.csc_matrix(
                (arrays[f"{name}.data"], arrays[f"{name}.indices"], arrays[f"{name}.indptr"]),
                shape=(info["n_rows"], len(vocab)),
            )
            self.fields[name] = _SparseField(
                vocab,
                matrix,
                arrays[f"{name}.idf"],
                arrays[f"{name}.row_article"],
                len(docs),
                per_article=name not in MULTI_ROW_FIELDS,
            )
        return self


def _validated_settings(
    backend, field_weights, k1, b, stem, drop_stopwords, intent_boost
) -> _Settings:
    if backend not in BACKENDS:
        raise ValueError(f"unknown BM25 backend {backend!r}; expected one of {BACKENDS}")
    if not (isinstance(k1, int | float) and math.isfinite(k1) and k1 >= 0):
        raise ValueError(f"k1 must be a finite number >= 0, got {k1!r}")
    if not (isinstance(b, int | float) and 0 <= b <= 1):
        raise ValueError(f"b must be between 0 and 1, got {b!r}")
    if not (math.isfinite(intent_boost) and intent_boost >= 0):
        raise ValueError(f"intent_boost must be >= 0, got {intent_boost!r}")
    weights = dict(DEFAULT_FIELD_WEIGHTS if field_weights is None else field_weights)
    unknown = set(weights) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown BM25 fields {sorted(unknown)}; expected some of {FIELDS}")
    if any(not math.isfinite(w) or w < 0 for w in weights.values()):
        raise ValueError(f"field weights must be finite and >= 0, got {weights}")
    if not any(w > 0 for w in weights.values()):
        raise ValueError("at least one field weight must be positive")
    weights = {name: float(weights.get(name, 0.0)) for name in FIELDS}
    return _Settings(float(k1), float(b), weights, bool(stem), bool(drop_stopwords), intent_boost)


def _check_docs(docs: list[BM25Doc]) -> None:
    seen: set[str] = set()
    for doc in docs:
        if not doc.slug:
            raise ValueError(f"article without a slug: {doc.title!r}")
        if doc.slug in seen:
            raise ValueError(f"duplicate article slug {doc.slug!r}")
        seen.add(doc.slug)


def _content_hash(docs: list[BM25Doc], settings: _Settings) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([TOKENIZER_VERSION, asdict(settings)], sort_keys=True).encode())
    for doc in docs:
        digest.update(json.dumps(_doc_record(doc, full=True), sort_keys=True).encode())
    return digest.hexdigest()[:16]


def _doc_record(doc: BM25Doc, *, full: bool) -> dict:
    record = {"slug": doc.slug, "title": doc.title, "intent": doc.intent}
    if full:
        record.update(questions=list(doc.questions), body=doc.body)
    return record


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest positive scores, best first (ties: lower index first)."""
    positive = np.flatnonzero(scores > 0)
    return positive[top_indices(scores[positive], k)]
