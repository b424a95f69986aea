"""``tierdesk kb import``: all or nothing, upsert by slug, then tell the servers.

The import runs in two phases. First every file is read and every record validated without
touching the database (what it needs from earlier imports, the files their articles were read
from and the site theme they learnt, is read beforehand); any problem raises ``ImportRejected``
carrying every ``file:line: reason``. Slugs are settled then too: two articles giving the same
slug is an error, except when a slug derived from a title meets another article's, which gets
``-2``, ``-3``... in file order (an explicit slug keeps its own) with a warning. A question
listed on two articles is a warning as well. Saved pages lose their site's theme and name
(``app/kb/page_template``) and links between imported files lead to the articles' pages
(``app/kb/cross_links``); a zip archive is read as the folder it holds (``app/kb/archives``).
Only a clean import reaches the second phase, which looks existing articles up by slug in
chunks and writes creates, updates and (with ``replace``) unpublishes with executemany inside
the caller's transaction, then bumps the KB revision that running servers watch to rebuild
their retrieval indexes.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session
from tqdm import tqdm

from app.kb.cross_links import ArticleLinks, LinkedArticle, stored_file
from app.kb.html_pages import LINK_LIST_SHARE, link_share, links_could_make, parse_html
from app.kb.page_template import strip_site_titles, strip_theme
from app.kb.qna import question_key
from app.kb.readers import bytes_to_read, expand_paths, read_rows
from app.kb.records import (
    InvalidArticle,
    PreparedArticle,
    content_hash,
    prepare_record,
    record_from_fields,
)
from app.kb.slugs import slugify, unique_slug
from app.kb.store import (
    CONSOLE_SOURCE,
    ExistingArticle,
    change_of,
    find_existing,
    insert_articles,
    refresh_statistics,
    unpublish_articles,
    update_articles,
    with_taught,
)
from app.kb.textfiles import Problems
from app.models import Article, SystemState
from app.state import KB_REVISION, bump_revision
from app.vocab import counted, listed

# Progress bars appear when the input is at least this large (small imports stay quiet).
PROGRESS_MIN_BYTES = 1024 * 1024
PROGRESS_MIN_ARTICLES = 1000
# A PDF is slow to lay out again: a bar from this many bytes of PDFs (a manual of 126 pages,
# 219 KB, takes 11 s on 2 cores; 128 KiB is 2 to 6 s).
PROGRESS_MIN_PDF_BYTES = 128 * 1024
# Imports writing at least this many rows refresh the planner statistics (PostgreSQL).
ANALYZE_MIN_ROWS = 1000
# The site theme the last import of saved pages learnt (app/kb/page_template.py).
PAGE_THEME = "page_theme"


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    unpublished: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. ignored columns; not errors
    warnings: list[str] = field(default_factory=list)  # slug suffixes, shared questions
    changes: list[tuple[str, str]] = field(default_factory=list)  # (action, slug)
    dry_run: bool = False
    revision: int | None = None  # the KB revision after a write, None when nothing changed

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.unpublished)

    def summary(self) -> str:
        text = (
            f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.unpublished} unpublished, {self.rejected} rejected"
        )
        if self.problems:
            return f"{text}; import rejected, nothing was changed"
        if self.dry_run:
            return f"{text} (dry run: nothing was written)"
        return text


class ImportRejected(Exception):
    """The import had invalid records; the database was not touched."""

    def __init__(self, report: ImportReport):
        super().__init__(f"{len(report.problems)} problem(s); nothing was imported")
        self.report = report


def _bar(total: int, enabled: bool, **kwargs) -> tqdm:
    return tqdm(total=total, disable=not enabled, leave=False, mininterval=0.5, **kwargs)


@dataclass(slots=True)
class _Checked:
    article: PreparedArticle
    file: str
    line: int
    question_lines: dict[str, int] | None  # question_key -> line (grouped question rows)
    page: bool = False  # a whole saved HTML page

    def line_of(self, question: str) -> int:
        lines = self.question_lines
        return lines.get(question_key(question), self.line) if lines else self.line


def _stored_files(session: Session) -> list[LinkedArticle]:
    """The published articles that were imported from files, as link targets."""
    rows = session.execute(select(Article.slug, Article.source).where(Article.published.is_(True)))
    return [found for slug, source in rows if (found := stored_file(slug, source))]


def _validate(
    paths: list[Path],
    progress: bool,
    stored: list[LinkedArticle] | None = None,
    known: frozenset[int] = frozenset(),
) -> tuple[dict[str, PreparedArticle], Problems, frozenset[int]]:
    """Phase one: read and check everything; nothing touches the database (``stored``: the
    articles earlier imports read from files, which links may lead to; ``known``: the site
    theme the last import learnt). Returns the articles, the problems and the site theme this
    import learnt (empty when it has too few pages to tell)."""
    with tempfile.TemporaryDirectory(prefix="tierdesk-import-") as unpacked:
        return _validate_files(paths, Path(unpacked), progress, stored or [], known)


def _validate_files(
    paths: list[Path],
    unpack_to: Path,
    progress: bool,
    stored: list[LinkedArticle],
    known: frozenset[int],
) -> tuple[dict[str, PreparedArticle], Problems, frozenset[int]]:
    problems = Problems()
    files = expand_paths(
        paths,
        problems,
        unpack_to,
        lambda size: _bar(
            size,
            progress and size >= PROGRESS_MIN_BYTES,
            desc="unpacking",
            unit="B",
            unit_scale=True,
        ),
    )
    sizes = {path: bytes_to_read(path) for path, _ in files}
    total = sum(sizes.values())
    pdf_bytes = sum(size for path, size in sizes.items() if path.suffix.lower() == ".pdf")
    checked: list[_Checked] = []
    explicit: dict[str, str] = {}  # slug given in the files -> where
    origins: dict[str, str] = {}  # a record's id in its export -> where it was first read
    slow = total >= PROGRESS_MIN_BYTES or pdf_bytes >= PROGRESS_MIN_PDF_BYTES
    with _bar(total, progress and slow, desc="reading", unit="B", unit_scale=True) as bar:
        for row in read_rows(files, problems, bar.update, sizes):
            if row.origin is not None:  # overlapping pages of an export list a record twice
                first = origins.setdefault(row.origin, f"{row.file}:{row.line}")
                if first != f"{row.file}:{row.line}":
                    problems.warn(
                        row.file, row.line, row.reason(f"the same record as at {first}; read once")
                    )
                    continue
            try:
                article = prepare_record(record_from_fields(row.fields))
            except InvalidArticle as exc:
                for reason in exc.reasons:
                    problems.add(row.file, row.line, row.reason(reason))
                continue
            if not article.slug_derived:
                if article.slug in explicit:
                    problems.add(
                        row.file,
                        row.line,
                        row.reason(
                            f"duplicate slug {article.slug!r}; first used at "
                            f"{explicit[article.slug]}"
                        ),
                    )
                    continue
                explicit[article.slug] = f"{row.file}:{row.line}"
            checked.append(_Checked(article, row.file, row.line, row.question_lines, row.page))
    checked = _without_pages_of_links(checked, stored, problems)
    site_names = _strip_site_titles(checked, known)
    prepared = _settle_slugs(checked, explicit, problems)
    theme = site_names | _strip_page_theme(checked, progress, known)
    _link_articles(checked, stored)
    _warn_shared_questions(checked, problems)
    return prepared, problems, theme


def _without_pages_of_links(
    checked: list[_Checked], stored: list[LinkedArticle], problems: Problems
) -> list[_Checked]:
    """Saved pages whose words are mostly links to other imported pages (a section that lists
    one article, which a page's own reading cannot tell from an answer that is one link to a
    document) are left out with a warning."""
    if not any(item.page for item in checked):
        return checked
    links = ArticleLinks(
        [LinkedArticle(item.file, item.article.source, item.article.slug) for item in checked],
        stored,
    )
    kept = []
    for item in checked:
        if item.page and links_could_make(item.article.body, LINK_LIST_SHARE):

            def leads(href: str, file: str = item.file) -> bool:
                return links.leads_elsewhere(href, file)

            count, share = link_share(parse_html(item.article.body), leads)
            if count and share >= LINK_LIST_SHARE:
                problems.warn(
                    item.file,
                    item.line,
                    f"a page of links to other imported pages ({counted(count, 'link')}, "
                    f"{share:.0%} of its text), not an answer: skipped",
                )
                continue
        kept.append(item)
    return kept


def _rehash(article: PreparedArticle) -> None:
    article.content_hash = content_hash(
        article.title,
        article.body,
        article.category,
        article.tags,
        article.questions,
        article.source,
    )


def _set_body(article: PreparedArticle, body: str) -> None:
    if body != article.body:
        article.body = body
        _rehash(article)


def _strip_site_titles(checked: list[_Checked], known: frozenset[int]) -> frozenset[int]:
    """Saved pages' titles lose the site's name that most of them carry
    (``app/kb/page_template``), and a slug derived from a title is derived again; returns the
    names learnt."""
    pages = [item.article for item in checked if item.page]
    titles, learnt = strip_site_titles([a.title for a in pages], known)
    for article, title in zip(pages, titles, strict=True):
        if title != article.title:
            article.title = title
            if article.slug_derived:
                article.slug = slugify(title)
            _rehash(article)
    return learnt


def _strip_page_theme(
    checked: list[_Checked], progress: bool, known: frozenset[int]
) -> frozenset[int]:
    """Saved pages lose the text their site's theme wrote around each article
    (``app/kb/page_template``); returns the theme learnt from them (``known``: the last
    import's, for too few pages to tell)."""
    pages = [item.article for item in checked if item.page]
    with _bar(len(pages), progress and len(pages) >= PROGRESS_MIN_ARTICLES, desc="site theme",
              unit="page") as bar:  # fmt: skip
        bodies, learnt = strip_theme([a.body for a in pages], known, bar.update)
    for article, body in zip(pages, bodies, strict=True):
        _set_body(article, body)
    return learnt


def _known_theme(session: Session) -> frozenset[int]:
    value = session.scalar(select(SystemState.value).where(SystemState.key == PAGE_THEME))
    try:
        return frozenset(int(key) for key in json.loads(value or "[]"))
    except (ValueError, TypeError):  # written by hand or by another version: learn it again
        return frozenset()


def _keep_theme(session: Session, theme: frozenset[int]) -> None:
    row = session.get(SystemState, PAGE_THEME)
    value = json.dumps(sorted(theme))
    if row is None:
        session.add(SystemState(key=PAGE_THEME, value=value))
    elif row.value != value:
        row.value = value


def _link_articles(checked: list[_Checked], stored: list[LinkedArticle]) -> None:
    """Links between the imported files, and to files of earlier imports, lead to the
    articles' pages (``app/kb/cross_links``)."""
    links = ArticleLinks(
        [LinkedArticle(item.file, item.article.source, item.article.slug) for item in checked],
        stored,
    )
    for item in checked:
        _set_body(item.article, links.rewrite(item.article.body, item.file))


def _settle_slugs(
    checked: list[_Checked], explicit: dict[str, str], problems: Problems
) -> dict[str, PreparedArticle]:
    """Articles by slug; a derived slug already taken gets the first free ``-2``, ``-3``..."""
    used = dict(explicit)  # slug -> where it was first used
    prepared: dict[str, PreparedArticle] = {}
    for item in checked:
        article = item.article
        if article.slug_derived:
            base = article.slug
            if base in used:
                article.slug = unique_slug(base, used)
                problems.warn(
                    item.file,
                    item.line,
                    f"slug {base!r} (derived from the title) is already used at {used[base]}; "
                    f"this article gets {article.slug!r}",
                )
            used[article.slug] = f"{item.file}:{item.line}"
        prepared[article.slug] = article
    return prepared


def _warn_shared_questions(checked: list[_Checked], problems: Problems) -> None:
    """Warn once per article about each question (title or alternate) another article has."""
    first: dict[str, tuple[int, str]] = {}  # question_key -> (article index, where)
    for index, item in enumerate(checked):
        for question in (item.article.title, *item.article.questions):
            key = question_key(question)
            seen = first.get(key)
            if seen is None:
                first[key] = (index, f"{item.file}:{item.line_of(question)}")
            elif seen[0] != index:
                first[key] = (index, seen[1])  # one warning per article, naming the first
                problems.warn(
                    item.file,
                    item.line_of(question),
                    f"question {question!r} is also listed at {seen[1]}, under another "
                    "answer; both articles keep it",
                )


def _published_absent(
    session: Session, keep: dict[str, PreparedArticle]
) -> tuple[list[tuple[str, int]], list[str]]:
    """The published articles an import replacing the knowledge base does not hold: (slug, id)
    of those it unpublishes, and the slugs of those reviewers wrote, which it keeps."""
    rows = session.execute(
        select(Article.slug, Article.id, Article.source).where(Article.published.is_(True))
    )
    absent = sorted((slug, id_, source) for slug, id_, source in rows if slug not in keep)
    kept = [slug for slug, _, source in absent if source == CONSOLE_SOURCE]
    return [(slug, id_) for slug, id_, source in absent if source != CONSOLE_SOURCE], kept


def import_paths(
    session: Session,
    paths: list[Path],
    *,
    dry_run: bool = False,
    replace: bool = False,
    progress: bool = False,
) -> ImportReport:
    """Import articles from files and folders; see the module docstring.

    Raises ``ImportRejected`` (database untouched) when any record is invalid. Does not commit:
    the caller's ``session_scope`` commits the whole import as one transaction.
    """
    report = ImportReport(dry_run=dry_run)
    # with --replace, what this import does not hold is unpublished: nothing to link to
    stored = [] if replace else _stored_files(session)
    known = _known_theme(session)
    prepared, problems, theme = _validate([Path(p) for p in paths], progress, stored, known)
    report.notes = problems.notes
    report.warnings = problems.warnings
    if problems:
        report.problems = problems.messages
        report.rejected = len(problems.locations)
        raise ImportRejected(report)

    creates, updates, absent = _plan(session, prepared, replace, report)
    if dry_run:
        return report
    if theme and theme != known:
        _keep_theme(session, theme)
    if not report.changed:
        return report

    written = len(creates) + len(updates)
    with _bar(written, progress and written >= PROGRESS_MIN_ARTICLES, desc="writing",
              unit="article") as bar:  # fmt: skip
        insert_articles(session, creates, on_row=bar.update)
        update_articles(session, updates, on_row=bar.update)
    unpublish_articles(session, [id_ for _, id_ in absent])
    if written >= ANALYZE_MIN_ROWS:
        refresh_statistics(session)
    report.revision = bump_revision(session, KB_REVISION)
    return report


def _plan(
    session: Session, prepared: dict[str, PreparedArticle], replace: bool, report: ImportReport
):
    """Compare with the database (read only): what to create, update and unpublish."""
    existing = find_existing(session, list(prepared))
    creates: list[PreparedArticle] = []
    updates: list[tuple[PreparedArticle, ExistingArticle]] = []
    for slug, article in prepared.items():
        found = existing.get(slug)
        article = with_taught(article, found)
        change = change_of(article, found)
        if change == "created":
            creates.append(article)
        elif change == "updated":
            updates.append((article, existing[slug]))
        else:
            report.unchanged += 1
        if change != "unchanged":
            report.changes.append((change[:-1], slug))  # "create" / "update"
    absent, written = _published_absent(session, prepared) if replace else ([], [])
    if written:
        report.notes.append(
            f"{counted(len(written), 'article')} written in the reviewer console "
            f"{'stays' if len(written) == 1 else 'stay'} published ({listed(written)}): "
            "--replace unpublishes imported articles only"
        )
    report.changes.extend(("unpublish", slug) for slug, _ in absent)
    report.created, report.updated, report.unpublished = len(creates), len(updates), len(absent)
    return creates, updates, absent
