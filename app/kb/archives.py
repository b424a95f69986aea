"""A ``.zip`` is read as the folder it holds.

Help centres and wikis hand their content over zipped: a Confluence space exported to HTML, a
Notion workspace, a docs folder or a saved site sent by e-mail. Importing the archive is
importing the folder inside it: the members a folder import would read (Markdown and HTML
pages and Word documents, by their extension, or pages without one of ours by their first
bytes) are unpacked into a
folder of the import's own, which is deleted with it, and each is named in messages and kept as
its article's ``source`` as ``archive.zip/its/path.html``, so that links between its pages and a
later import of the same archive find them again.

Nothing outside that folder is written: a member whose path climbs out of the archive
(``../``), starts at a root or names a drive is left out with a warning, and so are hidden
members (macOS's ``__MACOSX/``, ``.git/``). An archive that would unpack to more than
``MAX_UNPACKED_BYTES``, or to more than the disk has free, is refused before anything is
unpacked; a damaged or encrypted archive is an error naming it.
"""

from __future__ import annotations

import shutil
import zipfile
import zlib
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path, PurePosixPath
from typing import Protocol

from app.kb.textfiles import Problems

MAX_UNPACKED_BYTES = 4 * 1024**3
# What reading a damaged, encrypted or foreign zip raises: a bad header or CRC, a broken deflate
# stream, a stream cut short, an encryption or compression this Python cannot read.
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,
    RuntimeError,
    OSError,
)
# How much of a member without one of our extensions is read to tell whether it is a page.
HEAD_BYTES = 4096


class Progress(Protocol):
    """A progress bar, as far as unpacking uses one (tqdm's)."""

    def update(self, n: float) -> object: ...


def _member_path(name: str) -> PurePosixPath | None:
    """The member's path inside the archive, or None when it would land outside it."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        return None
    return path


def _size(count: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} bytes"


def unpack_zip(
    path: Path,
    display: str,
    into: Path,
    wanted: Callable[[str, Callable[[], bytes]], bool],
    problems: Problems,
    progress: Callable[[int], AbstractContextManager[Progress]] | None = None,
) -> Path | None:
    """Unpack the members of the archive at ``path`` that ``wanted(file name, head)``
    accepts (``head()`` reads the member's first bytes) into the new folder ``into``; returns
    it, or None when the archive cannot be read (the problem is added, named ``display``).
    ``progress(total bytes)`` gives a bar to update as bytes are written."""
    try:
        archive = zipfile.ZipFile(path)
    except ZIP_ERRORS as exc:
        problems.add(display, 1, f"not a zip archive, or a damaged one: {exc}")
        return None
    with archive:
        chosen: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
        for info in archive.infolist():
            if info.is_dir():
                continue
            member = _member_path(info.filename)
            if member is None:
                problems.warn(
                    f"{display}/{info.filename}", 1, "a path outside the archive: not unpacked"
                )
                continue
            if any(part.startswith((".", "_")) for part in member.parts):
                continue

            def head(info: zipfile.ZipInfo = info) -> bytes:
                with archive.open(info) as fh:
                    return fh.read(HEAD_BYTES)

            try:
                if wanted(member.name, head):
                    chosen.append((info, member))
            except ZIP_ERRORS as exc:
                problems.add(f"{display}/{member}", 1, f"cannot unpack: {exc}")
        total = sum(info.file_size for info, _ in chosen)
        if total > MAX_UNPACKED_BYTES:
            problems.add(
                display,
                1,
                f"its pages unpack to {_size(total)}, more than the {_size(MAX_UNPACKED_BYTES)} "
                "an import unpacks: unpack it yourself and import the folder",
            )
            return None
        into.mkdir(parents=True)
        free = shutil.disk_usage(into).free
        if total > free:
            problems.add(
                display, 1, f"its pages unpack to {_size(total)}; {into} has {_size(free)} free"
            )
            return None
        with progress(total) if progress else nullcontext(None) as bar:
            for info, member in chosen:
                target = into.joinpath(*member.parts)
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(info) as source, target.open("wb") as out:
                        shutil.copyfileobj(source, out)
                except ZIP_ERRORS as exc:
                    target.unlink(missing_ok=True)  # not read as the page it is not
                    problems.add(f"{display}/{member}", 1, f"cannot unpack: {exc}")
                if bar is not None:
                    bar.update(info.file_size)
    return into
