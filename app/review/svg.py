"""Tiny server-side SVG charts for the console (no JavaScript, no library, no CDN).

Every label is escaped; the returned ``Markup`` is safe to put in a template as is.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

AXIS = "#6b7280"
LINE = "#2563eb"
BAR = "#0f766e"


def _fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def line_chart(
    points: Sequence[tuple[str, float]],
    *,
    title: str,
    width: int = 640,
    height: int = 200,
    unit: str = "",
) -> Markup:
    """A step-free polyline of ``(x label, value)`` points with min/max and first/last labels."""
    pad_left, pad_right, pad_top, pad_bottom = 44, 12, 12, 28
    inner_w, inner_h = width - pad_left - pad_right, height - pad_top - pad_bottom
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="100%" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    if not points:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" '
            f'fill="{AXIS}">no data yet</text></svg>'
        )
        return Markup("".join(parts))
    top = max(max(v for _, v in points), 1.0)
    step = inner_w / max(len(points) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return pad_left + i * step, pad_top + inner_h - (v / top) * inner_h

    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, (_, v) in enumerate(points)))
    base = pad_top + inner_h
    parts += [
        f'<line x1="{pad_left}" y1="{base}" x2="{width - pad_right}" y2="{base}" stroke="{AXIS}"/>',
        f'<line x1="{pad_left}" y1="{pad_top}" x2="{pad_left}" y2="{base}" stroke="{AXIS}"/>',
        f'<text x="{pad_left - 6}" y="{pad_top + 4}" text-anchor="end" font-size="11" '
        f'fill="{AXIS}">{escape(_fmt(top))}{escape(unit)}</text>',
        f'<text x="{pad_left - 6}" y="{base}" text-anchor="end" font-size="11" '
        f'fill="{AXIS}">0</text>',
        f'<polyline fill="none" stroke="{LINE}" stroke-width="2" points="{coords}"/>',
        f'<text x="{pad_left}" y="{height - 8}" font-size="11" fill="{AXIS}">'
        f"{escape(points[0][0])}</text>",
        f'<text x="{width - pad_right}" y="{height - 8}" text-anchor="end" font-size="11" '
        f'fill="{AXIS}">{escape(points[-1][0])}</text>',
    ]
    for i, (label, value) in enumerate(points):
        x, y = xy(i, value)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{LINE}">'
            f"<title>{escape(label)}: {escape(_fmt(value))}{escape(unit)}</title>"
            "</circle>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def bar_chart(
    rows: Sequence[tuple[str, float, str]],
    *,
    title: str,
    width: int = 640,
    max_value: float | None = None,
) -> Markup:
    """Horizontal bars of ``(label, value, annotation)``; the annotation is printed at the end."""
    bar_h, gap, label_w, note_w = 16, 6, 200, 110
    height = max(len(rows), 1) * (bar_h + gap) + gap
    inner_w = width - label_w - note_w
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="100%" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    if not rows:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2 + 4}" text-anchor="middle" '
            f'fill="{AXIS}">no data yet</text></svg>'
        )
        return Markup("".join(parts))
    top = max_value if max_value else max((v for _, v, _ in rows), default=1.0) or 1.0
    for i, (label, value, note) in enumerate(rows):
        y = gap + i * (bar_h + gap)
        w = max(inner_w * min(value / top, 1.0), 0.0)
        short = label if len(label) <= 30 else label[:29] + "…"
        parts += [
            f'<text x="{label_w - 6}" y="{y + bar_h - 4}" text-anchor="end" font-size="12">'
            f"<title>{escape(label)}</title>{escape(short)}</text>",
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{BAR}"/>',
            f'<text x="{label_w + w + 6:.1f}" y="{y + bar_h - 4}" font-size="12" '
            f'fill="{AXIS}">{escape(note)}</text>',
        ]
    parts.append("</svg>")
    return Markup("".join(parts))
