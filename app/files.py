"""Writing files so that a reader never sees half of one: write a temporary file beside the
target, then rename it over the target (``os.replace`` is atomic on one file system)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_write(path: str | Path, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """Open a text stream whose content replaces ``path`` when the block ends without error;
    on an error the target is untouched and the temporary file is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="\n") as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    """``data`` as indented JSON with sorted keys and a final newline, written atomically."""
    with atomic_write(path) as out:
        json.dump(data, out, indent=2, sort_keys=True)
        out.write("\n")
