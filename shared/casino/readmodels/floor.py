"""A picture of the casino floor dashboard's figures, drawn from the live read
models (the same figures the Grafana floor dashboard shows from Prometheus)."""

from __future__ import annotations

from html import escape

from casino.readmodels.projections import ShoeStats, TableStatus, Takings


def render_floor(status: list[TableStatus], shoes: dict[str, ShoeStats], takings: dict[str, Takings]) -> str:
    """One row per table: coups dealt, house net, shoe penetration, last result."""
    rows = sorted(status, key=lambda s: s.table)
    w, row_h = 980, 70
    h = 110 + row_h * len(rows)
    biggest = max([abs(t.house_net) for t in takings.values()] + [1])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="Helvetica, Arial, sans-serif">',
           f'<rect width="{w}" height="{h}" fill="#161b22"/>',
           '<text x="20" y="36" font-size="22" fill="#e6edf3">Casino floor</text>',
           '<text x="20" y="80" font-size="13" fill="#8b949e">table</text>',
           '<text x="170" y="80" font-size="13" fill="#8b949e">coups</text>',
           '<text x="250" y="80" font-size="13" fill="#8b949e">house net (minor units)</text>',
           '<text x="560" y="80" font-size="13" fill="#8b949e">shoe penetration</text>',
           '<text x="780" y="80" font-size="13" fill="#8b949e">last result</text>']
    for i, s in enumerate(rows):
        y = 100 + i * row_h
        t = takings.get(s.table, Takings(s.table))
        shoe = shoes.get(s.shoe)
        pen = shoe.penetration if shoe else 0.0
        bar = 130 * abs(t.house_net) / biggest
        colour = "#3fb950" if t.house_net >= 0 else "#f85149"
        x_bar = 400 if t.house_net >= 0 else 400 - bar
        out += [
            f'<rect x="10" y="{y}" width="{w - 20}" height="{row_h - 10}" rx="6" fill="#0d1117" stroke="#30363d"/>',
            f'<text x="20" y="{y + 36}" font-size="17" fill="#e6edf3">{escape(s.table)}</text>',
            f'<text x="170" y="{y + 36}" font-size="17" fill="#e6edf3">{s.coups}</text>',
            f'<line x1="400" y1="{y + 8}" x2="400" y2="{y + row_h - 18}" stroke="#30363d"/>',
            f'<rect x="{x_bar:.0f}" y="{y + 18}" width="{bar:.0f}" height="22" fill="{colour}"/>',
            f'<text x="{400 + bar + 6 if t.house_net >= 0 else 400 - bar - 6:.0f}" y="{y + 35}" font-size="13" '
            f'fill="#e6edf3" text-anchor="{"start" if t.house_net >= 0 else "end"}">{t.house_net:+,}</text>',
            f'<rect x="560" y="{y + 18}" width="180" height="22" fill="#21262d"/>',
            f'<rect x="560" y="{y + 18}" width="{180 * pen:.0f}" height="22" fill="#d29922"/>',
            f'<text x="745" y="{y + 35}" font-size="13" fill="#e6edf3">{100 * pen:.0f}%</text>',
            f'<text x="780" y="{y + 36}" font-size="14" fill="#e6edf3">{escape(s.last_result)}</text>',
        ]
    out.append("</svg>")
    return "\n".join(out) + "\n"
