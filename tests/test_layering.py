"""The packages' layering, read from the source: chat -> nlp -> data, review beside chat.

The NLP core never imports the web layers; the review package and the chat package do not
import each other's modules except where chat hands an escalation to review
(``app.review.service.escalate``), reads or moves the conversation's handoff state
(``app.review.handoff``, the one place that changes it) and draws an answered turn for a spot
check (``app.review.spot_checks``); the training stages import nothing of the web layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.config import PROJECT_ROOT

APP = PROJECT_ROOT / "app"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def imports_of(package: str) -> dict[str, set[str]]:
    folder = APP / package
    return {str(p.relative_to(PROJECT_ROOT)): imported_modules(p) for p in folder.rglob("*.py")}


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("review", ("app.chat",)),
        ("nlp", ("app.chat", "app.review", "app.web")),
        ("kb", ("app.chat", "app.review", "app.web", "app.nlp")),
    ],
)
def test_a_package_does_not_import_the_layers_it_must_not_know(package, forbidden):
    offenders = {
        f"{module} imports {name}"
        for module, names in imports_of(package).items()
        for name in names
        if name.startswith(forbidden)
    }
    assert not offenders, sorted(offenders)


def test_chat_reaches_review_only_to_escalate_for_the_handoff_state_and_spot_checks():
    uses = {
        f"{module}: {name}"
        for module, names in imports_of("chat").items()
        for name in names
        if name.startswith("app.review")
    }
    assert uses == {
        "app/chat/service.py: app.review.service",
        "app/chat/service.py: app.review.handoff",
        "app/chat/service.py: app.review.spot_checks",
    }


def test_the_checker_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from app.chat.text import clean_message\n")
    assert imported_modules(source) == {"app.chat.text"}


def test_the_command_line_starts_without_torch():
    """Every `tierdesk` command imports the CLI; only training and serving need torch (about
    190 MiB and most of a second to load): `tierdesk kb import` or `review stats` must not."""
    import subprocess
    import sys

    probe = "import sys, app.cli; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=PROJECT_ROOT, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout
