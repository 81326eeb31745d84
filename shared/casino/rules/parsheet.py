"""Par sheets: game mathematics by exact enumeration through this library's rules.

The baccarat figures walk every ordered sequence of card values through the
same tableau the coups use (``baccarat.tableau``); the blackjack figures walk
every sequence of dealer draws through the same drawing rule
(``blackjack.hand.dealer_must_draw``). No second implementation of a rule.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

from casino.rules.baccarat import tableau
from casino.rules.blackjack import hand as bj
from casino.rules.ruleset import BaccaratRules, BlackjackRules, Ruleset

# One card standing for each value: ace, two to nine, and the ten-value cards.
_VALUE_CARDS = ("TS", "AS", "2S", "3S", "4S", "5S", "6S", "7S", "8S", "9S")
_RANK_CARDS = tuple(r + "S" for r in "A23456789TJQK")


def _value_counts(decks: int) -> list[int]:
    return [16 * decks] + [4 * decks] * 9


def baccarat_outcomes(decks: int) -> dict[str, Fraction]:
    """Exact probabilities of Banker, Player and Tie from a full shoe of ``decks``."""
    banker, player, tie, ways = _baccarat_counts(decks)
    return {"banker": Fraction(banker, ways), "player": Fraction(player, ways), "tie": Fraction(tie, ways)}


@lru_cache(maxsize=8)
def _baccarat_counts(decks: int) -> tuple[int, int, int, int]:
    counts = _value_counts(decks)
    n = sum(counts)
    # tail[k]: ways to draw the cards after the k-th, up to six, so every leaf
    # shares the denominator n (n-1) ... (n-5).
    tail = [1] * 7
    for k in range(5, -1, -1):
        tail[k] = tail[k + 1] * (n - k)
    totals = {"banker": 0, "player": 0, "tie": 0}

    def walk(player: list[str], banker: list[str], weight: int) -> None:
        due = tableau.next_hand_to_draw(player, banker)
        if due is None:
            totals[tableau.winner(player, banker)] += weight * tail[len(player) + len(banker)]
            return
        hand = player if due == "player" else banker
        for v, c in enumerate(counts):
            if c:
                counts[v] -= 1
                hand.append(_VALUE_CARDS[v])
                walk(player, banker, weight * c)
                hand.pop()
                counts[v] += 1

    walk([], [], 1)
    return totals["banker"], totals["player"], totals["tie"], tail[0]


def pair_probability(decks: int) -> Fraction:
    """Probability that a hand's first two cards are a pair (same rank)."""
    n, per_rank = 52 * decks, 4 * decks
    hits = sum(
        (per_rank * (per_rank - (a == b)))
        for a in _RANK_CARDS for b in _RANK_CARDS if tableau.is_pair((a, b))
    )
    return Fraction(hits, n * (n - 1))


def baccarat_sheet(rules: BaccaratRules) -> dict[str, Any]:
    """Outcome probabilities and the house edge of every bet the ruleset offers."""
    o = baccarat_outcomes(rules.shoe.decks)
    pb, pp, pt = o["banker"], o["player"], o["tie"]
    banker_win = Fraction(10000 - rules.commission_bp, 10000)
    edge: dict[str, Fraction] = {
        "banker": pp - pb * banker_win,
        "player": pb - pp,
        "tie": 1 - pt * (rules.tie_pays + 1),
    }
    pair = pair_probability(rules.shoe.decks)
    for bet in ("player_pair", "banker_pair"):
        edge[bet] = 1 - pair * (rules.pair_pays + 1)
    return {
        "game": "baccarat",
        "ruleset": rules.name,
        "decks": rules.shoe.decks,
        "outcomes": {k: float(v) for k, v in o.items()},
        "house_edge": {k: float(v) for k, v in edge.items() if k in rules.offered_bets},
    }


DEALER_FINALS = ("17", "18", "19", "20", "21", "blackjack", "bust")


def dealer_final(decks: int, up: int, hits_soft_17: bool) -> dict[str, Fraction]:
    """Distribution of the dealer's final hand for up-card value ``up`` (1 = ace),
    with only the up-card removed from a full shoe and no peek."""
    counts = _value_counts(decks)
    counts[up % 10] -= 1
    memo: dict[tuple[int, ...], dict[str, Fraction]] = {}

    def walk(cards: list[str]) -> dict[str, Fraction]:
        if not bj.dealer_must_draw(cards, hits_soft_17):
            t = bj.total(cards)[0]
            key = "blackjack" if bj.is_blackjack(cards) else "bust" if t > 21 else str(t)
            return {key: Fraction(1)}
        state = tuple(counts)
        if state in memo and len(cards) > 2:
            return memo[state]
        left = sum(counts)
        out: dict[str, Fraction] = {}
        for v, c in enumerate(counts):
            if c:
                counts[v] -= 1
                cards.append(_VALUE_CARDS[v])
                for k, p in walk(cards).items():
                    out[k] = out.get(k, Fraction(0)) + p * Fraction(c, left)
                cards.pop()
                counts[v] += 1
        if len(cards) > 2:
            memo[state] = out
        return out

    dist = walk([_VALUE_CARDS[up % 10]])
    return {k: dist.get(k, Fraction(0)) for k in DEALER_FINALS}


def blackjack_sheet(rules: BlackjackRules) -> dict[str, Any]:
    """The dealer's final-hand probabilities for every up-card."""
    finals = {}
    for up in range(1, 11):
        label = "A" if up == 1 else str(up)
        dist = dealer_final(rules.shoe.decks, up, rules.dealer_hits_soft_17)
        finals[label] = {k: float(v) for k, v in dist.items()}
    return {
        "game": "blackjack",
        "ruleset": rules.name,
        "decks": rules.shoe.decks,
        "dealer_hits_soft_17": rules.dealer_hits_soft_17,
        # With no peek, a dealer blackjack takes every stake, or only the original bets.
        "dealer_blackjack_takes": rules.dealer_blackjack_takes,
        "dealer_final": finals,
    }


def par_sheet(rules: Ruleset) -> dict[str, Any]:
    """The par sheet of any ruleset."""
    if isinstance(rules, BaccaratRules):
        return baccarat_sheet(rules)
    return blackjack_sheet(rules)
