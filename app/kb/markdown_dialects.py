"""Markdown as documentation tools write it, brought to the CommonMark the renderer reads.

- MDX (Docusaurus): ``import`` and ``export`` lines are JavaScript for the site's build and are
  left out (a statement whose braces span several lines, all of it); components (``<Tabs>``)
  are tags like any other, unwrapped by the allow-list with their text kept.
- Admonitions: Docusaurus's ``:::tip Good to know`` ... ``:::`` and MkDocs's ``!!! note "Heads
  up"`` (or ``???`` for a collapsible one) followed by an indented block. The fences go; the
  title stays in bold (the type's name, "Tip", when there is none), and MkDocs's indented block
  is moved back to the margin so that it is not read as code.

- Template tags alone on their line: GitBook's and Jekyll's ``{% hint style="info" %}`` ...
  ``{% endhint %}``, Hugo's shortcodes ``{{< notice tip >}}`` and ``{{% /notice %}}``. The tags
  go and what they wrap stays; a tag inside a sentence is left as written.

Lines inside code blocks are left alone, and each changed line stays one line (empty when it
goes) so that line numbers in messages stay true.
"""

from __future__ import annotations

import re

_MDX_STATEMENT = re.compile(r"(?:import|export)\s")
_FENCE = re.compile(r" {0,3}(```|~~~)")
_COLON_ADMONITION = re.compile(r" {0,3}:::+\s*([A-Za-z][\w-]*)?\s*(.*?)\s*$")
_MKDOCS_ADMONITION = re.compile(r"(?:!!!|\?\?\?\+?)\s+([A-Za-z][\w-]*)(?:\s+\"(.*)\")?\s*$")
_INDENT = "    "
_TEMPLATE_TAG = re.compile(r"\s*(?:\{%.*%\}|\{\{[<%].*[>%]\}\})\s*$")


def _title(kind: str | None, title: str | None) -> str:
    if title is not None and title.strip():
        return f"**{title.strip()}**"
    return f"**{kind.replace('-', ' ').capitalize()}**" if kind else ""


def plain_markdown(body: str, mdx: bool = False) -> str:
    """``body`` with the dialects above turned into plain Markdown; ``mdx`` for an ``.mdx``
    page (its statements)."""
    lines = body.split("\n")
    fence = None
    depth = 0  # open braces of an MDX statement spread over several lines
    indented = False  # inside an MkDocs admonition's block
    for number, line in enumerate(lines):
        if depth > 0 or (mdx and fence is None and _MDX_STATEMENT.match(line)):
            depth = max(0, depth + line.count("{") - line.count("}"))
            lines[number] = ""
            continue
        if indented and line.startswith(_INDENT):
            lines[number] = line = line[len(_INDENT) :]
        elif indented and line.strip():
            indented = False
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        if _TEMPLATE_TAG.match(line):
            lines[number] = ""
            continue
        colon = _COLON_ADMONITION.match(line)
        if colon:
            lines[number] = _title(colon.group(1), colon.group(2))
            continue
        mkdocs = _MKDOCS_ADMONITION.match(line)
        if mkdocs:
            lines[number] = _title(mkdocs.group(1), mkdocs.group(2))
            indented = True
    return "\n".join(lines)
