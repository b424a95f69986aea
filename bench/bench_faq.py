"""Benchmark: a knowledge base without intent data becomes a bot, as a new user would do it.

A fresh SQLite database and models folder; the real ``tierdesk kb import`` and ``tierdesk
train`` in child processes (no intents or examples are loaded: the default intents folder only
gives training its out-of-scope negatives, ``intents/out_of_scope/dev.csv``, as it does for
every user); then every query goes through ``POST
/api/v1/chat`` of the app built on that database. Reports coverage (answered without a
person), answered accuracy, automation (answered and right, over all in-scope queries), the
out-of-scope share escalated, and what ``tierdesk train`` said about its tiers.

Data sets (``--set``):

- ``demo-plain``: the demo ``knowledge_base/`` as title and body only (no alternate questions,
  no categories, no intents), asked BANKING77 TEST (``../shared/data/banking77``); an answer is
  right when its article's category in the demo KB is the query's category; out-of-scope:
  ``intents/out_of_scope/test.csv``.
- ``demo-site``: the demo ``knowledge_base/`` as a help centre saved page by page (a page per
  article inside the site's header, breadcrumbs and footer, with the site's name in every
  ``<title>``; a page per section listing its articles; a home page; the request form and
  sign-in pages every article links to), imported as a folder and asked the same queries.
- ``demo-word``: the demo ``knowledge_base/`` as one Word manual (a chapter per section of
  the help centre, a section per article), imported as the ``.docx`` and asked the same
  queries.
- ``demo-pdf``: that Word manual saved as PDF by LibreOffice (``soffice``, which it needs),
  imported as the ``.pdf`` and asked the same queries.
- ``demo-confluence``: the demo ``knowledge_base/`` as a Confluence space exported to HTML
  (``index.html`` with the space's page tree, a home page, a page per section listing its
  children, each article in the export's layout with the space's name in its title), imported
  as a folder and asked the same queries.
- ``tasklane-plain`` / ``tasklane-alternates``: ``bench/datasets/tasklane_faq`` (a project-management
  product's help centre: question and answer; with 5 alternate questions per entry), asked its
  ``queries.csv``; ``parcelpost-plain`` / ``parcelpost-alternates``: the same shapes in another
  domain, ``bench/datasets/parcelpost_faq`` (a parcel courier's, with many entries close to one
  another); ``voltwise-plain`` / ``voltwise-alternates``: a third, ``bench/datasets/voltwise_faq``
  (a home energy supplier's).
- ``chitchat``: ``bench/datasets/chitchat_qna/chitchat.tsv`` as Microsoft ships such exports.
- ``--qna FILE``: any QnA TSV export of one row per question, or a Bot Framework ``.qna`` file
  (Microsoft's chit-chat sets as shipped in either, say); a seeded 10% of each answer's
  questions (rounded down: none of an answer with fewer than 10) are left out of the import and
  asked as the queries (never an answer's first question, its title, nor a question listed
  under two answers); out-of-scope queries from ``--oos FILE`` (a CSV with a ``text`` column)
  when given.

    .venv/bin/python bench/bench_faq.py [--set NAME ...]
        [--qna FILE [--seed S] [--any-question]] [--limit N]

Every set when none is named; ``--seed S`` draws another sample of an export's questions to
ask (reported as ``<name>-seed<S>``); ``--any-question`` draws them from any of an answer's
questions, as the product's held-out split does (reported as ``<name>-any``). Writes
bench/out/faq-<set>.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from html import escape
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
BANKING77 = Path(
    os.environ.get("TIERDESK_BANKING77", ROOT.parent / "shared" / "data" / "banking77")
)
DATASETS = ROOT / "bench" / "datasets"
# wrong answers, and out-of-scope queries answered, kept in the JSON report to read
MAX_WRONG_SHOWN = 50


def _read_csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))


def _asked_banking77(
    kb: Path, key_of_category: dict[str, str], described: str
) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    """A demo-KB set: ``kb`` asked BANKING77 TEST, each query expecting the article
    ``key_of_category`` names for its category, and our out-of-scope test queries."""
    queries = [
        (r["text"], key_of_category[r["category"]])
        for r in _read_csv(BANKING77 / "test.csv")
        if r["category"] in key_of_category
    ]
    oos = [r["text"] for r in _read_csv(ROOT / "intents" / "out_of_scope" / "test.csv")]
    return kb, queries, oos, {"kb": described, "queries": "BANKING77 test"}


def demo_plain(work: Path) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    """The demo KB as slug,title,body; BANKING77 TEST keyed by the article's slug."""
    rows, slug_of_category = [], {}
    for path in sorted((ROOT / "knowledge_base").glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---", 2)
        meta = yaml.safe_load(front)
        rows.append({"slug": meta["slug"], "title": meta["title"], "body": body.strip()})
        slug_of_category[meta["category"]] = meta["slug"]
    kb = work / "kb.csv"
    with kb.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["slug", "title", "body"])
        writer.writeheader()
        writer.writerows(rows)
    return _asked_banking77(kb, slug_of_category, "knowledge_base/ as slug,title,body")


SITE = "Northwind Help Centre"
_SITE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} – {site}</title>
<link rel="stylesheet" href="{root}assets/site.css"></head>
<body><header><a href="{root}index.html">{site}</a> <a href="{root}contact.html">Contact us</a>
</header>
<nav class="breadcrumbs"><a href="{root}index.html">Home</a> › {crumbs}</nav>
<main>{main}</main>
<footer><p>© Northwind Bank. <a href="{root}privacy.html">Privacy</a></p></footer>
</body></html>
"""


def _site_page(path: Path, title: str, crumbs: str, main: str, depth: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    root = "../" * depth
    path.write_text(
        _SITE_PAGE.format(title=escape(title), site=SITE, root=root, crumbs=crumbs, main=main),
        encoding="utf-8",
    )


_ARTICLE_MAIN = """<div class="container">
<nav class="sub-nav"><ol class="breadcrumbs"><li><a href="../index.html">{site}</a></li>
<li><a href="index.html">{section}</a></li></ol></nav>
<div class="article-container">
<aside class="article-sidebar"><h2>Articles in this section</h2><ul>{siblings}</ul></aside>
<article class="article">
<header class="article-header"><h1 class="article-title">{title}</h1>
<div class="article-meta">Northwind Support <span>Updated 3 months ago</span></div>
<a class="article-subscribe" href="#">Follow</a></header>
<section class="article-info"><div class="article-body">{body}</div></section>
<footer><div class="article-votes"><h2>Was this article helpful?</h2>
<button>Yes</button><button>No</button><small>0 out of 0 found this helpful</small></div>
<div class="article-more-questions">Have more questions?
<a href="../requests/new.html">Submit a request</a></div></footer>
<section class="related-articles"><h2>Related articles</h2><ul>{related}</ul></section>
<section class="comments"><h2>Comments</h2><p>0 comments</p>
<p>Please <a href="../signin.html">sign in</a> to leave a comment.</p></section>
</article></div></div>"""


_REQUEST_FORM = """<h1>Submit a request</h1>
<div id="main-content" class="form"><form id="new_request" class="request-form"
action="/hc/en-us/requests" method="post">
<input type="hidden" name="utf8" value="&#x2713;">
<div class="form-field string required"><label for="request_email">Your email address</label>
<input type="text" name="request[anonymous_requester_email]" id="request_email"></div>
<div class="form-field string required"><label for="request_subject">Subject</label>
<input type="text" name="request[subject]" id="request_subject" maxlength="150"></div>
<div class="form-field text required"><label for="request_description">Description</label>
<textarea name="request[description]" id="request_description"></textarea>
<p id="request_description_hint">Please enter the details of your request. A member of our
support staff will respond as soon as possible.</p></div>
<div class="form-field"><label for="request-attachments">Attachments</label>
<div class="upload-dropzone"><input type="file" multiple id="request-attachments">
<span><a href="#">Add file</a> or drop files here</span></div></div>
<footer><input type="submit" name="commit" value="Submit"></footer>
</form></div>"""
_SIGN_IN = """<h1>Sign in to Northwind Help Centre</h1>
<form action="/access/login" method="post">
<label for="user_email">Email</label><input type="email" id="user_email" name="user[email]">
<label for="user_password">Password</label>
<input type="password" id="user_password" name="user[password]">
<label><input type="checkbox" name="remember_me"> Stay signed in</label>
<input type="submit" value="Sign in"></form>
<p><a href="password/reset.html">Forgot my password</a></p>
<p>New to Northwind Help Centre? <a href="registration.html">Sign up</a></p>"""


def demo_site(work: Path) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    """The demo KB as a help centre saved page by page (as ``wget --mirror
    --convert-links`` leaves it), in the layout help-centre themes share: an HTML page per
    article under its section's folder, whose ``<title>`` carries the site's name, inside the
    site's header, breadcrumbs, a sidebar of the section's articles and footer, the article's
    own header (its ``<h1>``, author, date), votes, related articles (its section's next
    five) and comments; a page per section listing its articles; the home page listing the
    sections; the request form and the sign-in page the articles link to. Asked BANKING77 TEST
    like ``demo-plain``."""
    from app.kb.sanitize import render_body

    site = work / "site"
    pages: list[tuple[str, dict, str]] = []  # (section, front matter, body)
    for path in sorted((ROOT / "knowledge_base").glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---", 2)
        meta = yaml.safe_load(front)
        pages.append(((meta.get("tags") or ["general"])[0], meta, body.strip()))
    sections: dict[str, list[tuple[str, str]]] = {}  # section -> (slug, title)
    for section, meta, _ in pages:
        sections.setdefault(section, []).append((meta["slug"], meta["title"]))
    slug_of_category: dict[str, str] = {}

    def links(articles: list[tuple[str, str]]) -> str:
        return "".join(f'<li><a href="{slug}.html">{escape(t)}</a></li>' for slug, t in articles)

    for section, meta, body in pages:
        # the answer expected is the article read from this page (its ``source``)
        slug_of_category[meta["category"]] = str(site / section / f"{meta['slug']}.html")
        siblings = sections[section]
        at = siblings.index((meta["slug"], meta["title"]))
        related = (siblings[at + 1 :] + siblings[:at])[:5]
        name = section.replace("-", " ").title()
        main = _ARTICLE_MAIN.format(
            site=SITE,
            section=escape(name),
            siblings=links(siblings),
            title=escape(meta["title"]),
            body=render_body(body),
            related=links(related),
        )
        crumbs = f'<a href="../{section}/index.html">{escape(name)}</a>'
        _site_page(site / section / f"{meta['slug']}.html", meta["title"], crumbs, main, 1)
    for section, articles in sections.items():
        name = section.replace("-", " ").title()
        count = f"{len(articles)} article" + ("s" if len(articles) > 1 else "")
        main = f"<h1>{escape(name)}</h1>\n<p>{count}</p>\n<ul>{links(articles)}</ul>"
        _site_page(site / section / "index.html", name, escape(name), main, 1)
    items = "".join(
        f'<li><a href="{s}/index.html">{escape(s.replace("-", " ").title())}</a></li>'
        for s in sections
    )
    main = f"<h1>How can we help?</h1>\n<ul>{items}</ul>"
    _site_page(site / "index.html", SITE, "", main, 0)
    # the pages every article links to that a mirror saves as well: forms to fill in
    _site_page(site / "requests" / "new.html", "Submit a request", "Submit a request",
               _REQUEST_FORM, 1)  # fmt: skip
    _site_page(site / "signin.html", f"Sign in to {SITE}", "Sign in", _SIGN_IN, 0)
    return _asked_banking77(site, slug_of_category, "knowledge_base/ as a saved help-centre site")


SPACE, SPACE_KEY = "Northwind Help", "NH"
# What closes every page of the export.
_CONFLUENCE_FOOTER = """            <div id="footer" role="contentinfo">
                <section class="footer-body">
                    <p>Document generated by Confluence on Dec 07, 2026 10:42</p>
                    <div id="footer-logo"><a href="http://www.atlassian.com/">Atlassian</a></div>
                </section>
            </div>
        </div>
    </body>
</html>
"""
_CONFLUENCE_PAGE = """<!DOCTYPE html>
<html>
    <head>
        <title>{space} : {title}</title>
        <link rel="stylesheet" href="styles/site.css" type="text/css" />
        <META http-equiv="Content-Type" content="text/html; charset=UTF-8">
    </head>
    <body class="theme-default aui-theme-default">
        <div id="page">
            <div id="main" class="aui-page-panel">
                <div id="main-header">
                    <div id="breadcrumb-section">
                        <ol id="breadcrumbs">
{crumbs}
                        </ol>
                    </div>
                    <h1 id="title-heading" class="pagetitle">
                        <span id="title-text">
                            {space} : {title}
                        </span>
                    </h1>
                </div>
                <div id="content" class="view">
                    <div class="page-metadata">
                        Created by <span class='author'> {author}</span>, last modified on {date}
                    </div>
                    <div id="main-content" class="wiki-content group">
                    {main}
                    </div>
{attachments}
                </div>
            </div>
{footer}"""
_CONFLUENCE_ATTACHMENTS = """                    <div class="pageSection group">
                        <div class="pageSectionHeader">
                            <h2 id="attachments" class="pageSectionTitle">Attachments:</h2>
                        </div>
                        <div class="greybox" align="left">
                            <img src="images/icons/bullet_blue.gif" height="8" width="8" alt=""/>
                            <a href="attachments/{page}/{file}.png">{name}.png</a> (image/png)
                            <br/>
                        </div>
                    </div>"""
_CONFLUENCE_INDEX = """<!DOCTYPE html>
<html>
    <head>
        <title>{key} ({space})</title>
        <link rel="stylesheet" href="styles/site.css" type="text/css" />
        <META http-equiv="Content-Type" content="text/html; charset=UTF-8">
    </head>
    <body class="theme-default aui-theme-default">
        <div id="page">
            <div id="main" class="aui-page-panel">
                <div id="main-header">
                    <h1 id="title-heading" class="pagetitle">
                        <span id="title-text">Space Details:</span>
                    </h1>
                </div>
                <div id="content">
                    <div id="main-content" class="pageSection">
                    <table class="confluenceTable">
                        <tr><th class="confluenceTh">Key</th><td class="confluenceTd">{key}</td></tr>
                        <tr><th class="confluenceTh">Name</th><td class="confluenceTd">{space}</td></tr>
                        <tr><th class="confluenceTh">Description</th>
                        <td class="confluenceTd">Answers for Northwind Bank customers</td></tr>
                        <tr><th class="confluenceTh">Created by</th>
                        <td class="confluenceTd">Dana Whitlock (Mar 02, 2026)</td></tr>
                    </table>
                    </div>
                    <br/>
                    <br/>
                    <div class="pageSection">
                        <div class="pageSectionHeader">
                            <h2 class="pageSectionTitle">Available Pages:</h2>
                        </div>
{tree}
                    </div>
                </div>
            </div>
{footer}"""


def _page_file(title: str, page_id: int) -> str:
    """Confluence's name for a page's file: its title's words joined by dashes, and its id."""
    words = "".join(c if c.isalnum() else " " for c in title).split()
    return f"{'-'.join(words)}_{page_id}.html"


def demo_confluence(work: Path) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    """The demo KB as a Confluence space exported to HTML (Space tools → Export → HTML), as
    Confluence Server and Data Center write it: ``index.html`` (the space's details and its
    page tree), a home page, a page per section whose content is the children macro's list,
    and a page per article in the export's layout: breadcrumbs, "Space : Title" as both
    ``<title>`` and heading, the author and date line, the body in ``#main-content``, an
    attachments list on every third page, and the "Document generated by Confluence" footer.
    Asked BANKING77 TEST like ``demo-plain``."""
    from app.kb.sanitize import render_body

    space_dir = work / SPACE_KEY
    (space_dir / "styles").mkdir(parents=True)
    (space_dir / "styles" / "site.css").write_text("body { margin: 0; }\n", encoding="utf-8")
    pages: list[tuple[str, dict, str]] = []
    for path in sorted((ROOT / "knowledge_base").glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---", 2)
        meta = yaml.safe_load(front)
        pages.append(((meta.get("tags") or ["general"])[0], meta, body.strip()))
    ids = iter(range(65537, 10**6, 7))
    home = (f"{SPACE} Home", _page_file(f"{SPACE} Home", next(ids)))
    sections: dict[str, tuple[str, str]] = {}  # section -> (title, file)
    articles: dict[str, list[tuple[str, str]]] = {}  # section -> [(title, file)]
    for section, meta, _ in pages:
        if section not in sections:
            name = section.replace("-", " ").title()
            sections[section] = (name, _page_file(name, next(ids)))
        articles.setdefault(section, []).append(
            (meta["title"], _page_file(meta["title"], next(ids)))
        )

    def crumb(links: list[tuple[str, str]]) -> str:
        first = f'<li class="first"><span><a href="index.html">{SPACE}</a></span></li>'
        rest = "".join(f'<li><span><a href="{f}">{escape(t)}</a></span></li>' for t, f in links)
        return first + rest

    def children(links: list[tuple[str, str]]) -> str:
        items = "".join(f'<li><a href="{f}">{escape(t)}</a></li>' for t, f in links)
        return f'<ul class="childpages-macro">{items}</ul>'

    def write(title: str, file: str, crumbs: str, main: str, attachments: str = "") -> None:
        (space_dir / file).write_text(
            _CONFLUENCE_PAGE.format(
                space=SPACE,
                title=escape(title),
                crumbs=crumbs,
                author="Dana Whitlock",
                date="Nov 18, 2026",
                main=main,
                attachments=attachments,
                footer=_CONFLUENCE_FOOTER,
            ),
            encoding="utf-8",
        )

    slug_of_category: dict[str, str] = {}
    for n, (section, meta, body) in enumerate(pages):
        title = meta["title"]
        file = next(f for t, f in articles[section] if t == title)
        slug_of_category[meta["category"]] = str(space_dir / file)
        attachments = ""
        if n % 3 == 0:
            page_id = file.rsplit("_", 1)[1].removesuffix(".html")
            name = meta["slug"].replace("-", "_")
            attachments = _CONFLUENCE_ATTACHMENTS.format(
                page=page_id, file=int(page_id) + 1, name=name
            )
        write(title, file, crumb([home, sections[section]]), render_body(body), attachments)
    for section, (name, file) in sections.items():
        write(name, file, crumb([home]), children(articles[section]))
    welcome = (
        f"<p>Welcome to {SPACE}, where our support team keeps the answers to what customers "
        "ask us.</p>\n" + children(list(sections.values()))
    )
    write(home[0], home[1], crumb([]), welcome)
    tree = "<ul><li>" + f'<a href="{home[1]}">{escape(home[0])}</a>'
    for section, (name, file) in sections.items():
        tree += f'<ul><li><a href="{file}">{escape(name)}</a>'
        tree += children(articles[section]).replace(' class="childpages-macro"', "")
        tree += "</li></ul>"
    tree += "</li></ul>"
    (space_dir / "index.html").write_text(
        _CONFLUENCE_INDEX.format(key=SPACE_KEY, space=SPACE, tree=tree, footer=_CONFLUENCE_FOOTER),
        encoding="utf-8",
    )
    described = "knowledge_base/ as a Confluence space's HTML export"
    return _asked_banking77(space_dir, slug_of_category, described)


_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
# Word's default look: 11 pt text with spacing after each paragraph, a 28 pt Title, bold 16 pt
# and 13 pt headings (what a PDF saved from the manual shows; the Word reader reads the names).
_WORD_STYLES = (
    '<w:docDefaults><w:rPrDefault><w:rPr><w:sz w:val="22"/></w:rPr></w:rPrDefault>'
    '<w:pPrDefault><w:pPr><w:spacing w:after="160" w:line="259" w:lineRule="auto"/></w:pPr>'
    "</w:pPrDefault></w:docDefaults>"
) + "".join(
    f'<w:style w:type="paragraph" w:styleId="{sid}"><w:name w:val="{name}"/>'
    f'<w:pPr><w:spacing w:before="{before}" w:after="80"/></w:pPr><w:rPr>{bold}'
    f'<w:sz w:val="{half_points}"/></w:rPr></w:style>'
    for sid, name, half_points, bold, before in (
        ("Title", "Title", 56, "", 0),
        ("Heading1", "heading 1", 32, "<w:b/>", 360),
        ("Heading2", "heading 2", 26, "<w:b/>", 240),
    )
)
_PACKAGE = "http://schemas.openxmlformats.org/package/2006"
_OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_WORDML = "application/vnd.openxmlformats-officedocument.wordprocessingml"


def _word_paragraphs(markdown: str) -> list[tuple[str | None, str]]:
    """(list or None, text) for each paragraph of a demo article's Markdown: its list items
    as bulleted items, its inline marks dropped."""
    paragraphs: list[tuple[str | None, str]] = []
    for block in markdown.split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        if lines and all(line.startswith(("- ", "* ")) for line in lines):
            paragraphs += [("bullet", line[2:]) for line in lines]
        elif lines:
            paragraphs.append((None, " ".join(lines)))
    return [(kind, text.replace("**", "").replace("*", "")) for kind, text in paragraphs]


def _write_word(path: Path, title: str, chapters: dict[str, list[tuple[str, str]]]) -> None:
    """A .docx as Word lays one out: a Title, a Heading 1 per chapter, a Heading 2 per
    section, its paragraphs and bulleted items."""
    import zipfile

    def para(text: str, style: str | None = None, bullet: bool = False) -> str:
        props = f'<w:pStyle w:val="{style}"/>' if style else ""
        if bullet:
            props += '<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>'
        props = f"<w:pPr>{props}</w:pPr>" if props else ""
        return f'<w:p>{props}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'

    body = [para(title, "Title")]
    for chapter, sections in chapters.items():
        body.append(para(chapter, "Heading1"))
        for heading, markdown in sections:
            body.append(para(heading, "Heading2"))
            body += [
                para(text, bullet=kind is not None) for kind, text in _word_paragraphs(markdown)
            ]
    numbering = (
        f'<w:numbering xmlns:w="{_W}"><w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0">'
        '<w:numFmt w:val="bullet"/></w:lvl></w:abstractNum><w:num w:numId="1">'
        '<w:abstractNumId w:val="0"/></w:num></w:numbering>'
    )
    parts = {"document": "document.main", "styles": "styles", "numbering": "numbering"}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml",
            f'<Types xmlns="{_PACKAGE}/content-types"><Default Extension="rels" '
            f'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            + "".join(
                f'<Override PartName="/word/{part}.xml" ContentType="{_WORDML}.{kind}+xml"/>'
                for part, kind in parts.items()
            )
            + "</Types>",
        )
        archive.writestr(
            "_rels/.rels",
            f'<Relationships xmlns="{_PACKAGE}/relationships"><Relationship Id="rId1" '
            f'Type="{_OFFICE}/officeDocument" Target="word/document.xml"/></Relationships>',
        )
        archive.writestr(
            "word/_rels/document.xml.rels",
            f'<Relationships xmlns="{_PACKAGE}/relationships">'
            + "".join(
                f'<Relationship Id="rId{n}" Type="{_OFFICE}/{part}" Target="{part}.xml"/>'
                for n, part in enumerate(("styles", "numbering"), 1)
            )
            + "</Relationships>",
        )
        archive.writestr(
            "word/document.xml",
            f'<w:document xmlns:w="{_W}"><w:body>{"".join(body)}</w:body></w:document>',
        )
        archive.writestr("word/styles.xml", f'<w:styles xmlns:w="{_W}">{_WORD_STYLES}</w:styles>')
        archive.writestr("word/numbering.xml", numbering)


def demo_word(work: Path) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    """The demo KB as one Word manual: a chapter (Heading 1) per section of the help centre,
    a section (Heading 2) per article, its paragraphs and bulleted lists. Asked BANKING77 TEST
    like ``demo-plain``; an answer is right when it is the section of the article of the
    query's category (found by its title)."""
    manual, category_of_title = _demo_manual(work)
    return _asked_banking77(manual, category_of_title, "knowledge_base/ as one Word manual")


def demo_pdf(work: Path) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    """The Word manual of ``demo-word`` saved as PDF by LibreOffice, as a company would
    publish it, and asked the same queries."""
    office = shutil.which("soffice") or shutil.which("libreoffice")
    if office is None:
        sys.exit(
            "--set demo-pdf saves the manual as PDF with LibreOffice: apt-get install "
            "libreoffice-writer-nogui"
        )
    manual, category_of_title = _demo_manual(work)
    subprocess.run(
        [office, "--headless", "--convert-to", "pdf", "--outdir", str(work), str(manual)],
        check=True,
        capture_output=True,
        env={**os.environ, "HOME": str(work)},  # its own profile, whatever else runs
    )
    pdf = manual.with_suffix(".pdf")
    manual.unlink()
    return _asked_banking77(pdf, category_of_title, "knowledge_base/ as one PDF manual")


def _demo_manual(work: Path) -> tuple[Path, dict[str, str]]:
    """The Word manual of the demo KB in ``work``, and the title of each category's section."""
    chapters: dict[str, list[tuple[str, str]]] = {}
    category_of_title: dict[str, str] = {}
    for path in sorted((ROOT / "knowledge_base").glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---", 2)
        meta = yaml.safe_load(front)
        chapter = (meta.get("tags") or ["general"])[0].replace("-", " ").title()
        chapters.setdefault(chapter, []).append((meta["title"], body.strip()))
        category_of_title[meta["category"]] = meta["title"]
    manual = work / "Northwind Help manual.docx"
    _write_word(manual, "Northwind Help manual", chapters)
    return manual, category_of_title


def faq_set(
    folder_name: str, alternates: bool
) -> Callable[[Path], tuple[Path, list[tuple[str, str]], list[str], dict]]:
    """One of our FAQ sets (``faq.csv``, ``faq_alternates.csv``, ``queries.csv``,
    ``out_of_scope.csv``) as question and answer, or with its alternate questions."""
    return lambda work: _faq(DATASETS / folder_name, alternates)


def _faq(folder: Path, alternates: bool) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    kb = folder / ("faq_alternates.csv" if alternates else "faq.csv")
    queries = [(r["text"], r["question"]) for r in _read_csv(folder / "queries.csv")]
    oos = [r["text"] for r in _read_csv(folder / "out_of_scope.csv")]
    return kb, queries, oos, {"kb": str(kb.relative_to(ROOT)), "queries": "queries.csv"}


def chitchat(work: Path) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    folder = DATASETS / "chitchat_qna"
    queries = [(r["text"], r["question"]) for r in _read_csv(folder / "queries.csv")]
    return folder / "chitchat.tsv", queries, [], {"kb": "chitchat.tsv", "queries": "queries.csv"}


def qna_export(
    work: Path,
    path: Path,
    oos_csv: Path | None,
    hold_out: float = 0.1,
    seed: int = 0,
    any_question: bool = False,
) -> tuple[Path, list[tuple[str, str]], list[str], dict]:
    """A QnA export with some of each answer's questions left out to be asked.

    The articles are the importer's own (``app.kb.readers.read_rows`` groups the rows as
    ``tierdesk kb import`` does); a left-out question is its row dropped from the copy that is
    imported. By default ``hold_out`` of each answer's questions, rounded down, never its first
    (the title); with ``any_question`` the count is rounded at random (an answer of 14
    questions gives one 40% of the time at 10%) and the first question may be asked too, the
    next one kept becoming the article's title, as the product's own held-out split draws from
    any of an intent's texts (``app.nlp.intent.stratified_split``)."""
    from app.kb.qna import question_key
    from app.kb.readers import read_rows
    from app.kb.textfiles import Problems

    problems = Problems()
    rows = read_rows([(path, str(path))], problems, lambda n: None)
    grouped = [row for row in rows if row.question_lines]
    if problems.messages:
        sys.exit("\n".join(problems.messages))
    articles_of: dict[str, int] = {}
    for row in grouped:
        for key in row.question_lines or {}:
            articles_of[key] = articles_of.get(key, 0) + 1
    rng = random.Random(seed)
    asked: dict[int, str] = {}  # line of a left-out question -> its article's title
    text_at: dict[int, str] = {}  # line -> the question listed there
    retitled: dict[int, int] = {}  # an asked title's line -> the line of the title kept instead
    for row in grouped:
        lines = row.question_lines or {}
        for question in [str(row.fields["title"]), *map(str, row.fields.get("questions") or [])]:
            if question_key(question) in lines:
                text_at.setdefault(lines[question_key(question)], question)
        if not any_question:
            candidates = [n for key, n in lines.items() if n != row.line and articles_of[key] == 1]
            for n in rng.sample(candidates, min(len(candidates), int(len(lines) * hold_out))):
                asked[n] = str(row.fields["title"])
            continue
        candidates = [n for key, n in lines.items() if articles_of[key] == 1]
        share = len(lines) * hold_out
        count = int(share) + (rng.random() < share - int(share))
        chosen = set(rng.sample(candidates, min(count, len(lines) - 1, len(candidates))))
        kept = min(n for n in lines.values() if n not in chosen)
        if row.line in chosen:
            retitled[row.line] = kept
        asked.update(dict.fromkeys(chosen, text_at[kept]))
    kb = work / path.name
    queries: list[tuple[str, str]] = []
    if path.suffix.lower() == ".qna":
        _drop_qna_lines(path, kb, asked, text_at, retitled, queries)
    else:
        _drop_tsv_rows(path, kb, asked, queries)
    oos = [r["text"] for r in _read_csv(oos_csv)] if oos_csv else []
    described = {
        "kb": f"{path.name} without the queries",
        "queries": f"{hold_out:.0%} of its questions",
    }
    return kb, queries, oos, described


def _drop_tsv_rows(
    path: Path, kb: Path, asked: dict[int, str], queries: list[tuple[str, str]]
) -> None:
    """Copy a QnA TSV without the rows that start on an asked line; those become queries."""
    with (
        path.open(newline="", encoding="utf-8-sig") as src,
        kb.open("w", newline="", encoding="utf-8") as out,
    ):
        reader = csv.reader(src, delimiter="\t")
        writer = csv.writer(out, delimiter="\t", lineterminator="\n")
        header = next(reader)
        question = [h.strip().lower() for h in header].index("question")
        writer.writerow(header)
        line = reader.line_num + 1  # the physical line the next row starts on
        for cells in reader:
            if line in asked:
                queries.append((cells[question], asked[line]))
            else:
                writer.writerow(cells)
            line = reader.line_num + 1


def _drop_qna_lines(
    path: Path,
    kb: Path,
    asked: dict[int, str],
    text_at: dict[int, str],
    retitled: dict[int, int],
    queries: list[tuple[str, str]],
) -> None:
    """Copy a Bot Framework .qna file without the asked questions' lines. An asked title's
    heading ('# ? ...') is kept, naming the question that becomes the title, and that
    question's own '- ...' line goes."""
    promoted = set(retitled.values())
    kept = []
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if number in asked:
            queries.append((text_at[number], asked[number]))
        if number in retitled:
            kept.append(f"# ? {text_at[retitled[number]]}")
        elif number not in asked and number not in promoted:
            kept.append(line)
    kb.write_text("\n".join(kept) + "\n", encoding="utf-8")


SETS = {
    "demo-plain": demo_plain,
    "demo-site": demo_site,
    "demo-confluence": demo_confluence,
    "demo-word": demo_word,
    "demo-pdf": demo_pdf,
    "tasklane-plain": faq_set("tasklane_faq", False),
    "tasklane-alternates": faq_set("tasklane_faq", True),
    "parcelpost-plain": faq_set("parcelpost_faq", False),
    "parcelpost-alternates": faq_set("parcelpost_faq", True),
    "voltwise-plain": faq_set("voltwise_faq", False),
    "voltwise-alternates": faq_set("voltwise_faq", True),
    "chitchat": chitchat,
}


def _tierdesk(env: dict, *args: str) -> str:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "tierdesk"), *args],
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode:
        sys.exit(f"tierdesk {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


def _lookup(db_url: str) -> dict[str, str]:
    from sqlalchemy import select

    from app.db import session_scope
    from app.models import Article

    lookup: dict[str, str] = {}
    with session_scope(db_url) as session:
        for article in session.scalars(select(Article)):
            texts = [article.slug, article.title, *(article.questions or []), article.source]
            for text in filter(None, texts):
                lookup.setdefault(text, article.slug)
    return lookup


def run(name: str, limit: int | None, make=None) -> dict:
    with tempfile.TemporaryDirectory(prefix="tierdesk-faq-") as tmp:
        work = Path(tmp)
        kb, queries, oos, described = (make or SETS[name])(work)
        if limit:
            queries, oos = queries[:limit], oos[:limit]
        db_url = f"sqlite:///{work / 'faq.db'}"
        env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "TIERDESK_MODELS_DIR": str(work / "models"),
            "TIERDESK_VAR_DIR": str(work / "var"),
            "SECRET_KEY": "bench",
        }
        _tierdesk(env, "db", "upgrade")
        imported = _tierdesk(env, "kb", "import", str(kb))
        started = time.perf_counter()
        trained = _tierdesk(env, "train", "--quiet")
        train_seconds = time.perf_counter() - started

        from app import create_app

        app = create_app(
            {
                "SQLALCHEMY_DATABASE_URI": db_url,
                "MODELS_DIR": work / "models",
                "VAR_DIR": work / "var",
                "RATE_LIMIT": "off",
                "SECRET_KEY": "bench",
                "LOAD_MODELS": True,
                "ANSWER_CACHE_SIZE": 0,
                # Answers, not load, are measured here (bench_loadtest.py measures load): BERT
                # is never shed or refused for time, whatever else the machine is running.
                "BERT_ADMISSION": False,
                # No review reconciler: it would outlive this set's app and keep writing to an
                # embedded Redis whose folder the set's temporary directory has removed.
                "RECONCILE_INTERVAL_SECONDS": 0,
            }
        )
        lookup = _lookup(db_url)
        client = app.test_client()
        answered = right = 0
        unknown = 0
        wrong: list[dict] = []
        for text, key in queries:
            expected = lookup.get(key)
            if expected is None:
                unknown += 1
                continue
            body = client.post("/api/v1/chat", json={"message": text}).get_json()
            if body.get("status") == "answered" and body.get("answer"):
                answered += 1
                got = body["answer"]["article"]["slug"]
                right += got == expected
                if got != expected and len(wrong) < MAX_WRONG_SHOWN:
                    wrong.append({"query": text, "expected": expected, "answered": got})
        oos_escalated = 0
        oos_answered: list[dict] = []
        for text in oos:
            body = client.post("/api/v1/chat", json={"message": text}).get_json()
            if body.get("status") != "answered":
                oos_escalated += 1
            elif len(oos_answered) < MAX_WRONG_SHOWN and body.get("answer"):
                oos_answered.append({"query": text, "answered": body["answer"]["article"]["slug"]})
        manifest = json.loads(
            (next((work / "models" / "versions").iterdir()) / "manifest.json").read_text()
        )
        # The set's embedded Redis lives in its temporary folder: stop it (saving its data)
        # before the folder goes, not at exit with the folder gone and other sets' servers.
        from app.live.bus import stop_hubs
        from app.redis_conn import stop_embedded

        stop_hubs()
        stop_embedded()
    n = len(queries) - unknown
    return {
        "set": name,
        **described,
        "queries": n,
        "queries_without_article": unknown,
        "coverage": round(answered / max(n, 1), 4),
        "answered_accuracy": round(right / max(answered, 1), 4),
        "automation": round(right / max(n, 1), 4),
        "oos_queries": len(oos),
        "oos_escalated": round(oos_escalated / max(len(oos), 1), 4) if oos else None,
        "train_seconds": round(train_seconds, 1),
        "import": imported.strip().splitlines()[-1],
        "tiers_active": manifest.get("tiers_active"),
        "held_out": manifest.get("metrics", {}).get("held_out"),
        "train_output": trained.strip().splitlines(),
        "wrong_answers": wrong,
        "out_of_scope_answered": oos_answered,
    }


def table(results: list[dict]) -> str:
    lines = [
        "| data set | queries | coverage | answered acc. | automation | out-of-scope escalated "
        "| train s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        oos = f"{r['oos_escalated']:.2%} of {r['oos_queries']}" if r["oos_queries"] else "-"
        lines.append(
            f"| {r['set']} | {r['queries']} | {r['coverage']:.2%} | {r['answered_accuracy']:.2%} "
            f"| {r['automation']:.2%} | {oos} | {r['train_seconds']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="sets", action="append", choices=sorted(SETS))
    parser.add_argument(
        "--qna", type=Path, help="a QnA TSV or .qna export; 10%% of its questions are asked"
    )
    parser.add_argument("--oos", type=Path, help="out-of-scope queries for --qna (CSV, text)")
    parser.add_argument("--limit", type=int, default=None, help="first N queries (smoke runs)")
    parser.add_argument(
        "--seed", type=int, default=0, help="which of each answer's questions --qna leaves out"
    )
    parser.add_argument(
        "--any-question",
        action="store_true",
        help="--qna may ask an answer's first question too, and rounds each count at random",
    )
    args = parser.parse_args()
    jobs = [(name, None) for name in args.sets or ([] if args.qna else list(SETS))]
    if args.qna:
        jobs.append(
            (
                args.qna.stem
                + (f"-seed{args.seed}" if args.seed else "")
                + ("-any" if args.any_question else ""),
                lambda work: qna_export(
                    work, args.qna, args.oos, seed=args.seed, any_question=args.any_question
                ),
            )
        )
    results = []
    for name, make in jobs:
        result = run(name, args.limit, make)
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"faq-{name}.json").write_text(json.dumps(result, indent=2))
        results.append(result)
        print("\n".join(result["train_output"]), file=sys.stderr)
    print(table(results))


if __name__ == "__main__":
    main()
