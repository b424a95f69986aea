"""The demo home page, the public article pages and the KB search."""

from __future__ import annotations

import pytest
from fixtures_chat import add_article


def test_home_page_embeds_the_widget_with_one_script_tag(client, sample_articles):
    page = client.get("/")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "Northwind Bank" in html
    assert html.count("/static/widget/widget.js") == 1
    assert 'data-tierdesk-url="http://localhost"' in html
    assert 'href="/kb/card-arrival"' in html  # popular topics link to articles


def test_widget_files_are_served(client):
    js = client.get("/static/widget/widget.js")
    css = client.get("/static/widget/widget.css")
    assert js.status_code == 200 and "javascript" in js.mimetype
    assert css.status_code == 200 and css.mimetype == "text/css"
    source = js.get_data(as_text=True)
    # No way to parse strings as HTML into the page: text goes in through textContent only.
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML(", "document.write(", "eval("):
        assert sink not in source


def test_article_page_shows_the_sanitised_body_and_related_articles(
    client, db_url, sample_articles
):
    add_article(
        db_url,
        "card-delivery-abroad",
        "Card delivery abroad",
        "<p>Abroad: 10 days.</p>",
        category="card_arrival",
    )
    page = client.get("/kb/card-arrival")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "<h1>Where is my new card?</h1>" in html
    assert "<strong>5 working days</strong>" in html
    assert 'href="/kb/card-delivery-abroad"' in html
    assert "Unreleased card feature" not in html  # unpublished articles are never linked


@pytest.mark.parametrize("slug", ["no-such-article", "draft-article", "%3Cscript%3E"])
def test_missing_or_unpublished_articles_are_404(client, sample_articles, slug):
    assert client.get(f"/kb/{slug}").status_code == 404


def test_search_ranks_title_matches_first_and_hides_unpublished(client, sample_articles):
    html = client.get("/kb?q=card").get_data(as_text=True)
    assert html.index("Where is my new card?") < html.index("Top up with a card")
    assert "Unreleased card feature" not in html
    assert "2 articles" in html


def test_search_matches_alternate_questions_and_reports_no_results(client, sample_articles):
    assert "Which exchange rate do you use?" in client.get("/kb?q=abroad").get_data(as_text=True)
    assert "0 articles" in client.get("/kb?q=zzzzqqq").get_data(as_text=True)


@pytest.mark.parametrize(
    "query",
    [
        "<script>alert(1)</script>",
        "100%_",
        "' OR 1=1 --",
        "\\",
        "x" * 5000,
        "\x00",
        "🙂",
        " ",
    ],
)
def test_search_is_robust_and_escapes_the_query(client, sample_articles, query):
    page = client.get("/kb", query_string={"q": query})
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in html


def test_search_treats_like_wildcards_literally(client, db_url, sample_articles):
    add_article(db_url, "fees-100", "Fees of 100% explained", "<p>Fees.</p>")
    html = client.get("/kb?q=100%25").get_data(as_text=True)
    assert "Fees of 100% explained" in html and "1 article " in html


@pytest.mark.parametrize("path", ["/", "/kb", "/kb/card-arrival"])
def test_demo_pages_declare_an_inline_svg_favicon(client, sample_articles, path):
    """Without a declared icon browsers ask for /favicon.ico, a 404 here."""
    import re
    from urllib.parse import unquote
    from xml.etree import ElementTree

    page = client.get(path)
    [href] = re.findall(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)"', page.text)
    assert href.startswith("data:image/svg+xml,")
    svg = ElementTree.fromstring(unquote(href.split(",", 1)[1]))
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert "img-src 'self' data:" in page.headers["Content-Security-Policy"]  # not blocked
