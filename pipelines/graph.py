"""A server-side SVG of a pipeline's graph: nodes in layers (longest path from `start`), edges
with their branch. No JavaScript; every piece that carries data is built with `format_html`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 170, 48, 60, 24, 16
COLORS = {
    "start": "#e8f5e9",
    "http-request": "#e3f2fd",
    "set-status": "#fff8e1",
    "emit-event": "#f3e5f5",
    "condition": "#fce4ec",
}
STATUS_STROKES = {"SUCCEEDED": "#2e7d32", "FAILED": "#c62828", "RUNNING": "#f9a825"}


def layout(definition: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """node id -> (layer, row). Layer: the longest path from a root; rows in definition order.
    Works on invalid definitions too (cycles, dangling edges): what cannot be placed goes last."""
    nodes = [n["id"] for n in _nodes(definition)]
    edges = [(a, b) for a, b, _ in _edges(definition) if a in nodes and b in nodes]
    layer = dict.fromkeys(nodes, 0)
    for _ in range(len(nodes)):  # Bellman-Ford style relaxation; bounded for cycles
        changed = False
        for a, b in edges:
            if layer[b] < layer[a] + 1 and layer[a] + 1 < len(nodes):
                layer[b] = layer[a] + 1
                changed = True
        if not changed:
            break
    rows: dict[int, int] = {}
    placed: dict[str, tuple[int, int]] = {}
    for node_id in nodes:
        column = layer[node_id]
        placed[node_id] = (column, rows.get(column, 0))
        rows[column] = rows.get(column, 0) + 1
    return placed


EMPTY = SafeString(
    '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40" role="img">'
    '<text x="8" y="24" font-size="13">No nodes.</text></svg>'
)
ARROW = SafeString(
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
    'fill="#555"/></marker></defs>'
)


def render_svg(
    definition: Mapping[str, Any], statuses: Mapping[str, str] | None = None
) -> SafeString:
    """The graph as an SVG document; `statuses` (node id -> step status) colours the borders."""
    nodes = _nodes(definition)
    if not nodes:
        return EMPTY
    placed = layout(definition)
    width = PAD * 2 + (max(c for c, _ in placed.values()) + 1) * (NODE_W + GAP_X) - GAP_X
    height = PAD * 2 + (max(r for _, r in placed.values()) + 1) * (NODE_H + GAP_Y) - GAP_Y
    parts = [
        *(_edge(placed, *edge) for edge in _edges(definition) if {*edge[:2]} <= placed.keys()),
        *(_node(placed, node, (statuses or {}).get(node["id"], "")) for node in nodes),
    ]
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" class="pipeline-graph" width="{w}" '
        'height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="pipeline graph" '
        'style="max-width:100%;height:auto;font-family:sans-serif">{arrow}{body}</svg>',
        w=width,
        h=height,
        arrow=ARROW,
        body=format_html_join("", "{}", ((part,) for part in parts)),
    )


def _box(placed: Mapping[str, tuple[int, int]], node_id: str) -> tuple[int, int]:
    column, row = placed[node_id]
    return PAD + column * (NODE_W + GAP_X), PAD + row * (NODE_H + GAP_Y)


def _edge(
    placed: Mapping[str, tuple[int, int]], source: str, target: str, branch: str | None
) -> SafeString:
    x1, y1 = _box(placed, source)
    x2, y2 = _box(placed, target)
    sx, sy, tx, ty = x1 + NODE_W, y1 + NODE_H // 2, x2, y2 + NODE_H // 2
    if x2 <= x1:  # a back edge (an invalid cycle): drawn under the boxes
        sx, tx, sy, ty = x1 + NODE_W // 2, x2 + NODE_W // 2, y1 + NODE_H, y2 + NODE_H
    line = format_html(
        '<line class="edge" data-from="{}" data-to="{}" x1="{}" y1="{}" x2="{}" y2="{}" '
        'stroke="#555" stroke-width="1.5" stroke-dasharray="{}" marker-end="url(#arrow)"/>',
        source,
        target,
        sx,
        sy,
        tx,
        ty,
        "5,3" if branch in ("failure", "false") else "none",
    )
    if not branch:
        return line
    return format_html(
        '{}<text x="{}" y="{}" font-size="11" text-anchor="middle" fill="#333">{}</text>',
        line,
        (sx + tx) // 2,
        (sy + ty) // 2 - 4,
        branch,
    )


def _node(
    placed: Mapping[str, tuple[int, int]], node: Mapping[str, Any], status: str
) -> SafeString:
    node_id, node_type = node["id"], str(node.get("type", "?"))
    x, y = _box(placed, node_id)
    return format_html(
        '<g class="node" data-node="{id}"><rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" '
        'fill="{fill}" stroke="{stroke}" stroke-width="2"/><text x="{tx}" y="{y1}" '
        'font-size="13" font-weight="bold">{label}</text><text x="{tx}" y="{y2}" '
        'font-size="11" fill="#444">{kind}</text></g>',
        id=node_id,
        x=x,
        y=y,
        w=NODE_W,
        h=NODE_H,
        fill=COLORS.get(node_type, "#eeeeee"),
        stroke=STATUS_STROKES.get(status, "#777"),
        tx=x + 8,
        y1=y + 19,
        y2=y + 37,
        label=_short(node_id),
        kind=_short(node_type),
    )


def _short(text: str, limit: int = 22) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _nodes(definition: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = definition.get("nodes") if isinstance(definition, Mapping) else None
    seen: set[str] = set()
    found = []
    for node in raw if isinstance(raw, list) else []:
        if isinstance(node, Mapping) and isinstance(node.get("id"), str) and node["id"] not in seen:
            seen.add(node["id"])
            found.append(dict(node))
    return found


def _edges(definition: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    raw = definition.get("edges") if isinstance(definition, Mapping) else None
    return [
        (e["from"], e["to"], e.get("branch") if isinstance(e.get("branch"), str) else None)
        for e in (raw if isinstance(raw, list) else [])
        if isinstance(e, Mapping)
        and isinstance(e.get("from"), str)
        and isinstance(e.get("to"), str)
    ]
