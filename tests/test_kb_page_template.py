"""A saved site's theme text around each article is taken off (app/kb/page_template.py): pages
written as a help-centre theme writes them, imported for real."""

from __future__ import annotations

from fixtures_kb import articles, run_import, snapshot

from app.kb.page_template import strip_site_titles, strip_theme

ARTICLES = {
    "pin": ("Reset your PIN", "<p>Open <b>Security</b> and choose <i>Change PIN</i>.</p>"),
    "limits": ("Card limits", "<p>You can spend 5,000 EUR a month.</p>"),
    "lost": ("Lost cards", "<p>Freeze the card in the app at once.</p>"),
    "travel": ("Travelling abroad", "<p>Cards work in 150 countries.</p>"),
    "fees": ("Card fees", "<p>Payments in euros are free.</p>"),
}


def _page(slug: str, title: str, body: str, related: list[str]) -> str:
    """An article page as a help-centre theme writes it: the article's own header, votes in
    its footer, then related articles and comments inside the <article>."""
    links = "".join(f'<li><a href="{r}.html">{ARTICLES[r][0]}</a></li>' for r in related)
    return (
        f"<html><head><title>{title} – Acme Help</title></head><body>"
        "<header class=site><h1>Acme</h1><a href='/requests'>Submit a request</a></header>"
        "<main><nav><ol><li><a href='/'>Acme Help</a></li><li><a href='.'>Cards</a></li></ol>"
        f"</nav><article><header class=article-header><h1>{title}</h1>"
        "<span>Updated 3 months ago</span></header>"
        f"<p>Follow this article for updates.</p>{body}"
        "<h2>Steps</h2><p>Steps differ by app version: " + slug + ".</p>"
        "<footer><h2>Was this article helpful?</h2><button>Yes</button></footer>"
        "<p>Have more questions? <a href='/requests/new'>Submit a request</a></p>"
        f"<h2>Related articles</h2><ul>{links}</ul>"
        "<h2>Comments</h2><p>0 comments</p><p>Please <a href='/signin'>sign in</a> to leave a "
        "comment.</p></article></main><footer>© Acme</footer></body></html>"
    )


def _site(write_kb_file, slugs=tuple(ARTICLES)):
    path = None
    for slug in slugs:
        title, body = ARTICLES[slug]
        related = [s for s in ARTICLES if s != slug][:2]
        path = write_kb_file(f"site/cards/{slug}.html", _page(slug, title, body, related))
    return path.parent.parent


def test_the_theme_around_each_article_is_taken_off_and_the_article_kept(db_url, write_kb_file):
    run_import(db_url, [_site(write_kb_file)])
    stored = articles(db_url)
    assert sorted(a.title for a in stored.values()) == sorted(t for t, _ in ARTICLES.values())
    pin = stored["reset-your-pin"]
    # the theme's lead ("Follow this article") and its trailing votes, request callout,
    # related articles and comments are gone; the article's own "Steps" section, whose
    # heading every page shares but whose text is its own, stays
    assert pin.body == (
        "<p>Open <b>Security</b> and choose <i>Change PIN</i>.</p>\n"
        "<h2>Steps</h2>\n<p>Steps differ by app version: pin.</p>"
    )
    for article in stored.values():
        for gone in ("Related articles", "Comments", "sign in", "Submit a request", "Follow"):
            assert gone not in article.body, (article.slug, gone)


def test_reimporting_a_themed_site_changes_nothing(db_url, write_kb_file):
    site = _site(write_kb_file)
    run_import(db_url, [site])
    before = snapshot(db_url)
    report = run_import(db_url, [site])
    assert (report.created, report.updated, report.unchanged) == (0, 0, len(ARTICLES))
    assert snapshot(db_url) == before


def test_a_page_imported_alone_later_is_trimmed_by_the_theme_its_site_taught(db_url, write_kb_file):
    site = _site(write_kb_file)
    run_import(db_url, [site])
    title, body = ARTICLES["pin"]
    page = write_kb_file(
        "site/cards/pin.html", _page("pin", title, body.replace("Security", "Settings"), ["fees"])
    )
    report = run_import(db_url, [page])
    assert (report.created, report.updated) == (0, 1)
    assert articles(db_url)["reset-your-pin"].body == (
        "<p>Open <b>Settings</b> and choose <i>Change PIN</i>.</p>\n"
        "<h2>Steps</h2>\n<p>Steps differ by app version: pin.</p>"
    )


def test_too_few_pages_to_tell_a_theme_keep_their_text(db_url, write_kb_file):
    run_import(db_url, [_site(write_kb_file, ("pin", "limits", "lost"))])
    pin = articles(db_url)["reset-your-pin"]
    assert "Follow this article" in pin.body and "<h2>Comments</h2>" in pin.body


def test_only_the_lead_and_the_tail_are_taken_off():
    theme = "<p>Was this article helpful?</p>"
    bodies = [
        f"{theme}\n<p>Own text {n}.</p>\n{theme}\n<p>More of {n}.</p>\n{theme}" for n in range(4)
    ]
    assert strip_theme(bodies)[0] == [
        f"<p>Own text {n}.</p>\n{theme}\n<p>More of {n}.</p>" for n in range(4)
    ]


def test_a_section_is_the_themes_only_when_its_heading_is_and_the_rest_is_links_or_theme():
    def body(n: int, related: str) -> str:
        return f"<p>Answer {n}.</p>\n<h2>Related articles</h2>\n<ul>\n{related}</ul>"

    links = [f'<li><a href="a{n}.html">Article {n}</a></li>\n' for n in range(5)]
    own = "<li>Call us on 0800 123 456</li>\n"  # a list of the article's own words
    bodies = [body(n, links[n]) for n in range(4)] + [body(4, own)]
    assert strip_theme(bodies)[0] == [f"<p>Answer {n}.</p>" for n in range(4)] + [bodies[4]]


def test_a_body_that_is_only_the_theme_and_bodies_without_any_stay_as_they_are():
    shared = "<p>Was this article helpful?</p>"
    bodies = [shared, *(f"<p>Own text {n}.</p>\n{shared}" for n in range(4))]
    assert strip_theme(bodies)[0] == [shared, *(f"<p>Own text {n}.</p>" for n in range(4))]
    plain = [f"<p>Own text {n}.</p>" for n in range(6)]
    assert strip_theme(plain) == (plain, frozenset())


def test_the_sites_name_that_most_titles_carry_is_taken_off_them():
    titles = [
        "Acme Help : Card limits",
        "Acme Help : Reset your PIN",
        "Acme Help : Step 1: order - or renew - a card",
        "Travel | Acme Help",  # at either end, whatever joins it
        "Acme Help",  # the name alone stays a title
        "Acme Help Home",  # words of the name, not a part of the title
    ]
    trimmed, learnt = strip_site_titles(titles)
    assert trimmed == [
        "Card limits",
        "Reset your PIN",
        "Step 1: order - or renew - a card",
        "Travel",
        "Acme Help",
        "Acme Help Home",
    ]
    # a page imported alone later is trimmed by what its site taught
    assert strip_site_titles(["Acme Help : Fees"], learnt) == (["Fees"], frozenset())


def test_a_title_part_on_too_few_pages_is_the_articles_own():
    # on fewer than half the pages, or on fewer than 4 of them
    titles = ["Cards - Limits", "Cards - PIN", "Cards - Fees", "Cards - Travel"] + [
        f"Transfers {n}" for n in range(5)
    ]
    assert strip_site_titles(titles) == (titles, frozenset())
    few = ["Acme : Limits", "Acme : PIN", "Acme : Fees"]
    assert strip_site_titles(few) == (few, frozenset())
    # words joined without spaces are one part ("E-mail", "Step 1:")
    joined = ["E-mail: limits", "E-mail: PIN", "E-mail: fees", "E-mail: travel"]
    assert strip_site_titles(joined) == (joined, frozenset())


def test_markdown_files_keep_a_footer_they_share(db_url, write_kb_file):
    for n in range(5):
        path = write_kb_file(
            f"md/a{n}.md", f"# Article {n}\n\nAnswer {n}.\n\nWas this article helpful?\n"
        )
    run_import(db_url, [path.parent])
    assert all("helpful" in a.body for a in articles(db_url).values())
