"""A .zip is imported as the folder it holds (app/kb/archives.py): real archives written with
zipfile, the real importer."""

from __future__ import annotations

import struct
import tempfile
import zipfile
from pathlib import Path

import pytest
from fixtures_kb import articles, rejected, run_import, snapshot
from test_kb_confluence import export

from app.kb import archives


def _zip(path: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return path


def _zip_folder(folder: Path, path: Path) -> Path:
    return _zip(
        path,
        {
            str(p.relative_to(folder.parent)): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        },
    )


@pytest.fixture
def own_tmp(tmp_path, monkeypatch) -> Path:
    """The folder the import unpacks into, to see that it is gone afterwards."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_zipped_export_imports_as_its_folder_and_again_unchanged(db_url, tmp_path, own_tmp):
    folder = export(tmp_path / "export" / "NH")
    (folder / "styles").mkdir()
    (folder / "styles" / "site.css").write_text("body { margin: 0 }")
    (folder / "attachments").mkdir()
    (folder / "attachments" / "limits.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    zipped = _zip_folder(folder, tmp_path / "NH.zip")

    report = run_import(db_url, [zipped])
    assert report.problems == []
    assert report.warnings == [
        f"{zipped}/NH/Cards_65540.html:1: a page of links to other pages (4 links, 100% of its "
        "text), not an answer: skipped",
        f"{zipped}/NH/index.html:1: the table of contents of a Confluence space's export, not "
        "an answer: skipped",
    ]
    stored = articles(db_url)
    assert sorted(stored) == [
        "card-limits",
        "contactless-payments",
        "lost-or-stolen-cards",
        "northwind-help-home",
        "reset-your-pin",
    ]
    assert stored["card-limits"].source == f"{zipped}/NH/Card-limits_65544.html"
    assert list(own_tmp.iterdir()) == []  # the unpacked pages are gone

    before = snapshot(db_url)
    report = run_import(db_url, [zipped])
    assert (report.created, report.updated, report.unchanged) == (0, 0, 5)
    assert snapshot(db_url) == before


def test_links_between_pages_of_an_archive_lead_to_their_articles(db_url, tmp_path):
    zipped = _zip(
        tmp_path / "docs.zip",
        {
            "docs/billing/refunds.md": "# Refunds\n\nRefunds take 5 days. See [fees](fees.md).\n",
            "docs/billing/fees.md": "# Fees\n\nTransfers in euros are free.\n",
            "docs/README.md": "# About these docs\n",
            "__MACOSX/docs/billing/._refunds.md": b"\x00\x05\x16\x07 resource fork",
            "docs/.git/HEAD.md": "# not a page\n",
        },
    )
    report = run_import(db_url, [zipped])
    assert (report.created, report.problems, report.warnings) == (2, [], [])
    assert "[fees](/kb/fees)" in articles(db_url)["refunds"].body


def test_a_member_outside_the_archive_is_not_unpacked(db_url, tmp_path):
    zipped = _zip(
        tmp_path / "evil.zip",
        {
            "../escaped.md": "# Escaped\n\nWritten outside.\n",
            "/etc/rooted.md": "# Rooted\n\nWritten at the root.\n",
            "site/ok.md": "# Fine\n\nA page.\n",
        },
    )
    report = run_import(db_url, [zipped])
    assert report.warnings == [
        f"{zipped}/../escaped.md:1: a path outside the archive: not unpacked",
        f"{zipped}//etc/rooted.md:1: a path outside the archive: not unpacked",
    ]
    assert sorted(articles(db_url)) == ["fine"]
    assert not (tmp_path / "escaped.md").exists()


def test_archives_that_cannot_be_read_reject_the_import(db_url, tmp_path, monkeypatch):
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(b"PK\x03\x04 not really a zip")
    assert rejected(db_url, [damaged]) == [
        f"{damaged}:1: not a zip archive, or a damaged one: File is not a zip file"
    ]
    data = _zip(tmp_path / "data.zip", {"faq.csv": "title,body\nFees,Free\n"})
    assert rejected(db_url, [data]) == [
        f"{data}:1: archive has no Markdown (.md), HTML (.html), Word (.docx) or PDF (.pdf) files"
    ]
    big = _zip(tmp_path / "big.zip", {"a.md": "# A\n\n" + "text " * 400})
    monkeypatch.setattr(archives, "MAX_UNPACKED_BYTES", 1024)
    assert rejected(db_url, [big]) == [
        f"{big}:1: its pages unpack to 2.0 KiB, more than the 1.0 KiB an import unpacks: "
        "unpack it yourself and import the folder"
    ]
    assert articles(db_url) == {}


def _damaged(path: Path, member: str, content: str) -> Path:
    """An archive whose one member's compressed data is broken, its headers intact."""
    _zip(path, {member: content})
    data = bytearray(path.read_bytes())
    (info,) = zipfile.ZipFile(path).infolist()
    name, extra = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    start = info.header_offset + 30 + name + extra
    data[start : start + 4] = b"\xff\xff\xff\xff"
    path.write_bytes(bytes(data))
    return path


def test_a_member_that_cannot_be_unpacked_is_named_and_nothing_is_read_of_it(db_url, tmp_path):
    zipped = _damaged(tmp_path / "site.zip", "site/a.md", "# A\n\n" + "words " * 200)
    assert rejected(db_url, [zipped]) == [
        f"{zipped}/site/a.md:1: cannot unpack: Error -3 while decompressing data: invalid block "
        "type"
    ]
