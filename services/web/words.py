"""What the pages say in words where the record holds a code: a card's
name as a screen reader speaks it, a setting's name as a person reads it."""

from __future__ import annotations

RANKS = {"A": "ace", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven", "8": "eight",
         "9": "nine", "T": "ten", "J": "jack", "Q": "queen", "K": "king"}
SUITS = {"S": "spades", "H": "hearts", "D": "diamonds", "C": "clubs"}
FACE_DOWN = "??"


def card(code: str) -> str:
    """``4D``: "four of diamonds"; ``??``: "a face-down card"; anything else, read leniently, as it is."""
    if code == FACE_DOWN:
        return "a face-down card"
    rank, suit = RANKS.get(code[:-1]), SUITS.get(code[-1:])
    return f"{rank} of {suit}" if rank and suit else f"a card recorded as {code!r}"
