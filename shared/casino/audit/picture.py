"""A picture of the layout at the end of a coup, as SVG."""

from __future__ import annotations

import math
from html import escape

from casino.audit.replay import CoupReplay
from casino.config import rulesets
from casino.rules.text import escaped, money

W, H = 960, 600
SUITS = {"S": ("♠", "#111"), "C": ("♣", "#111"), "H": ("♥", "#c00"), "D": ("♦", "#c00")}


def _card(x: float, y: float, code: str, face_up: bool = True) -> str:
    if not face_up:
        return f'<rect x="{x:.0f}" y="{y:.0f}" width="34" height="48" rx="4" fill="#345" stroke="#fff"/>'
    rank = "10" if code[0] == "T" else code[0]
    suit, colour = SUITS[code[1]]
    return (f'<rect x="{x:.0f}" y="{y:.0f}" width="34" height="48" rx="4" fill="#fff" stroke="#333"/>'
            f'<text x="{x + 17:.0f}" y="{y + 21:.0f}" font-size="14" text-anchor="middle" fill="{colour}">{rank}</text>'
            f'<text x="{x + 17:.0f}" y="{y + 40:.0f}" font-size="16" text-anchor="middle" fill="{colour}">{suit}</text>')


def _text(x: float, y: float, s: str, size: int = 13, colour: str = "#fff", anchor: str = "middle") -> str:
    return f'<text x="{x:.0f}" y="{y:.0f}" font-size="{size}" text-anchor="{anchor}" fill="{colour}">{escape(escaped(s, keep_newlines=False))}</text>'


def render_svg(r: CoupReplay) -> str:
    """The table from above, the dealer at the top: seats from the dealer's left
    (on the viewer's right) round to the dealer's right, each seat's wagers,
    the cards of each hand, and markers for whoever held cards or the shoe."""
    seats = list(rulesets.load(r.ruleset).seats)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             'font-family="Helvetica, Arial, sans-serif">',
             f'<rect width="{W}" height="{H}" fill="#1f1f1f"/>',
             f'<path d="M 60 90 A 420 420 0 0 0 {W - 60} 90 Z" fill="#0b6b3a" stroke="#c9a227" stroke-width="6"/>',
             _text(W / 2, 40, f"{r.table}  {r.coup}  ({r.ruleset}, {r.procedure or r.game})", 16),
             _text(W / 2, 75, "dealer", 13, "#c9a227")]
    spots: dict[int, tuple[float, float]] = {}
    holders: dict[int, list[str]] = {}
    for h in r.holders:
        what, _, who = h.partition(": ")
        if who.startswith("seat"):
            holders.setdefault(int(who.split()[1]), []).append(what)
    for i, seat in enumerate(seats):
        # From the dealer's left (viewer's right) round to the dealer's right (viewer's left).
        angle = math.pi * (0.1 + 0.8 * i / max(1, len(seats) - 1))
        x, y = W / 2 + 390 * math.cos(angle), 90 + 390 * math.sin(angle)
        spots[seat] = (W / 2 + 290 * math.cos(angle), 90 + 290 * math.sin(angle))
        parts.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="26" fill="#0f4d2b" stroke="#c9a227"/>')
        parts.append(_text(x, y + 5, str(seat), 15))
        bets = [f"{w.bet} {money(w.amount, r.currency)}" for w in r.wagers if w.seat == seat]
        for k, b in enumerate(bets):
            parts.append(_text(x, y + 44 + 15 * k, b, 12, "#ffd"))
        for k, m in enumerate(holders.get(seat, [])):
            parts.append(f'<rect x="{x - 34:.0f}" y="{y - 58 - 20 * k:.0f}" width="68" height="17" rx="8" fill="#c9a227"/>')
            parts.append(_text(x, y - 45 - 20 * k, m.upper(), 11, "#111"))
    groups: dict[str, list[tuple[str, bool]]] = {}
    for c in r.cards:
        groups.setdefault(c.to, []).append((c.card, True))
    for g, (name, cards) in enumerate(sorted(groups.items(), key=lambda kv: (kv[0] != "dealer", kv[0]))):
        if name.startswith("seat "):  # a blackjack box: its hands in front of its seat
            _, box, _, hand = name.split()
            sx, sy = spots[int(box)]
            x0, y0 = sx - 19 * len(cards) + 30 * (int(hand) - 1), sy - 60 + 56 * (int(hand) - 1)
            label = f"hand {hand}"  # as the replay names it: counted from 1
        else:  # the dealer's cards, Player's and Banker's hands, across the middle
            x0, y0 = 250 + 250 * (g % 3), 120 + 95 * (g // 3)
            label = name
        parts.append(_text(x0, y0 - 6, label, 12, "#ffd", "start"))
        for k, (code, up) in enumerate(cards):
            parts.append(_card(x0 + 38 * k, y0, code, up))
    result = r.result
    if result:
        if r.game == "baccarat":
            line = f"{result['winner'].upper()} wins: player {result['player_points']}, banker {result['banker_points']}"
        else:
            line = f"dealer {'blackjack' if result['dealer_blackjack'] else result['dealer_total']}"
        parts.append(_text(W / 2, 330 if r.game == "baccarat" else 205, line, 18, "#ffd"))
    parts.append(_text(W / 2, 355 if r.game == "baccarat" else 230,
                       f"house net {money(r.house_net, r.currency, signed=True)}" if r.settled else "not settled", 14))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
