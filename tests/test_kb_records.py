"""Slugs, the HTML sanitiser and record validation (no database)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.kb.records import MAX_TITLE, ArticleRecord, InvalidArticle, prepare_record
from app.kb.sanitize import clean_source, render_body
from app.kb.slugs import is_valid_slug, slugify, unique_slug


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Where is my new card?", "where-is-my-new-card"),
        ("Don't   charge me twice!", "dont-charge-me-twice"),
        ("Überweisung ins Ausland", "uberweisung-ins-ausland"),
        ("Fees & limits", "fees-and-limits"),
        ("  --Top up--  ", "top-up"),
    ],
)
def test_slugify_is_ascii_kebab_case(title, slug):
    assert slugify(title) == slug


def test_slugify_without_latin_letters_is_stable_and_distinct():
    first, second = slugify("カードが届かない"), slugify("暗証番号を忘れた")
    assert first == slugify("カードが届かない")
    assert first != second
    assert first.startswith("article-") and is_valid_slug(first)


def test_long_titles_are_cut_at_a_word_boundary():
    slug = slugify("word " * 60)
    assert len(slug) <= 80 and slug.endswith("word") and is_valid_slug(slug)


@given(st.text(max_size=200))
def test_every_title_gives_a_valid_slug(title):
    assert is_valid_slug(slugify(title))


def test_unique_slug_skips_taken_ones():
    assert unique_slug("fees", set()) == "fees"
    assert unique_slug("fees", {"fees", "fees-2"}) == "fees-3"


DANGEROUS = (
    '<p onclick="steal()">Hi</p><script>alert(1)</script><style>p{}</style>'
    '<a href="javascript:alert(1)">x</a><img src=x onerror=alert(1)>'
    '<iframe src="https://evil.example"></iframe>'
)


@pytest.mark.parametrize("html", [DANGEROUS, f"Some **Markdown**\n\n{DANGEROUS}"])
def test_sanitiser_removes_scripts_handlers_and_javascript_urls(html):
    for text in (clean_source(html), render_body(html)):
        lowered = text.lower()
        for banned in ("<script", "alert(1)", "onclick", "onerror", "javascript:", "<style",
                       "<iframe", "<img"):  # fmt: skip
            assert banned not in lowered, (banned, text)
    assert "Hi" in render_body(html)


def test_render_body_shows_images_as_links_to_them_never_inline():
    html = render_body(
        "The ![settings page](https://example.com/s.png) and ![](https://example.com/t.png).\n\n"
        "[![badge](https://example.com/b.png)](https://example.com/page) "
        '![logo](logo.png) <img src="javascript:alert(1)" alt="x">\n\n'
        '<img alt="raw &amp; kept" src="https://example.com/r.png">'
    )
    assert "<img" not in html and "javascript" not in html
    rel = 'rel="noopener noreferrer nofollow"'
    assert f'<a href="https://example.com/s.png" {rel}>settings page</a>' in html
    assert f'<a href="https://example.com/t.png" {rel}>Image</a>' in html
    assert f'<a href="https://example.com/page" {rel}>badge</a> logo x' in html  # in a link
    assert f'<a href="https://example.com/r.png" {rel}>raw &amp; kept</a>' in html


def test_render_body_keeps_markdown_structure_and_safe_links():
    html = render_body(
        "Use **the app**.\n\n- one\n- two\n\n[Help](https://example.com/help)\n\n"
        "| fee | amount |\n| --- | --- |\n| ATM | 1 EUR |\n\n> Note: cards expire."
    )
    assert "<strong>the app</strong>" in html
    assert "<li>one</li>" in html
    assert '<a href="https://example.com/help" rel="noopener noreferrer nofollow">' in html
    assert "<td>ATM</td>" in html
    assert "<blockquote>" in html


BODY_WITH_LINKS = (
    "See [fees](../billing/fees.md), [the form](/hc/requests/new), [steps](#steps), "
    "[refunds](/kb/refunds), [our site](https://acme.example/fees), [mail](mailto:a@b.example), "
    '![the form](img/form.png) and <a href="//cdn.acme.example/terms.pdf" title="T">terms</a>.'
)
REL = 'rel="noopener noreferrer nofollow"'


def test_links_the_widget_could_not_follow_keep_only_their_text():
    """The widget resolves addresses against tierdesk's own: a relative link would lead to a
    page tierdesk does not have."""
    assert render_body(BODY_WITH_LINKS) == (
        f'<p>See fees, the form, steps, <a href="/kb/refunds" {REL}>refunds</a>, '
        f'<a href="https://acme.example/fees" {REL}>our site</a>, '
        f'<a href="mailto:a@b.example" {REL}>mail</a>, the form and '
        f'<a href="//cdn.acme.example/terms.pdf" title="T" {REL}>terms</a>.</p>'
    )
    # read for its structure (is it a list of links?), a body keeps them as written
    assert f'<a href="../billing/fees.md" {REL}>fees</a>' in render_body(
        BODY_WITH_LINKS, as_written=True
    )


def test_relative_links_resolve_against_the_address_the_article_was_published_at():
    html = render_body(BODY_WITH_LINKS, "https://acme.example/hc/articles/7-refunds")
    for link in (
        f'<a href="https://acme.example/hc/billing/fees.md" {REL}>fees</a>',
        f'<a href="https://acme.example/hc/requests/new" {REL}>the form</a>',
        f'<a href="https://acme.example/hc/articles/7-refunds#steps" {REL}>steps</a>',
        f'<a href="/kb/refunds" {REL}>refunds</a>',
        f'<a href="https://acme.example/hc/articles/img/form.png" {REL}>the form</a>',
    ):
        assert link in html, link
    # a source that is not a web address (a file, a QnA export's "Editorial") gives no base
    assert render_body(BODY_WITH_LINKS, "billing/refunds.md") == render_body(BODY_WITH_LINKS)


def test_a_web_source_is_part_of_the_content_a_file_path_is_not():
    from app.kb.records import content_hash

    def digest(source):
        return content_hash("T", "[a](b.html)", None, [], [], source)

    assert digest("https://acme.example/a") != digest("https://acme.example/x/a")
    assert digest("site/a.html") == digest("other/a.html") == digest(None)


def test_clean_source_leaves_plain_markdown_alone_and_is_a_fixed_point():
    markdown = "> quoted & kept\n\n1 < 2 and <https://example.com>"
    assert clean_source(markdown) == markdown
    mixed = "> quote\n\nAT&T <b onmouseover=x>bold</b> a -> b &lt;tag&gt;"
    once = clean_source(mixed)
    assert once == clean_source(once)
    assert once.startswith("> quote") and "<b>bold</b>" in once and "onmouseover" not in once


_PIECES = st.sampled_from(
    list("ab <>&/=\"'\n#*-:;") + ["<b>", "</b>", "<p>", "<script>", "&amp;", "&lt;", "> "]
)


@given(st.lists(_PIECES, max_size=40).map("".join))
def test_clean_source_is_idempotent(text):
    once = clean_source(text)
    assert clean_source(once) == once


def test_prepare_record_normalises_whitespace_lists_and_line_endings():
    article = prepare_record(
        ArticleRecord(
            title="  Lost   card \n",
            body="Line one\r\nLine two\r\n",
            tags=(" cards ", "", "cards", "lost"),
            questions=("I lost my card", "I  lost my card"),
            category="  ",
        )
    )
    assert article.title == "Lost card"
    assert article.slug == "lost-card" and article.slug_derived
    assert article.body == "Line one\nLine two"
    assert article.tags == ["cards", "lost"]
    assert article.questions == ["I lost my card"]
    assert article.category is None


def test_prepare_record_reports_every_problem():
    with pytest.raises(InvalidArticle) as info:
        prepare_record(ArticleRecord(title="x" * (MAX_TITLE + 1), body="", slug="Not A Slug"))
    reasons = " | ".join(info.value.reasons)
    assert f"title is {MAX_TITLE + 1} characters" in reasons
    assert "body is empty" in reasons
    assert "slug 'Not A Slug' is not lowercase ASCII kebab-case (try 'not-a-slug')" in reasons


def test_content_hash_ignores_source_and_detects_real_change():
    base = ArticleRecord(title="Fees", body="Free.", source="a.csv")
    same = prepare_record(ArticleRecord(title="Fees", body="Free.", source="b.csv"))
    changed = prepare_record(ArticleRecord(title="Fees", body="Free!"))
    assert prepare_record(base).content_hash == same.content_hash
    assert prepare_record(base).content_hash != changed.content_hash
