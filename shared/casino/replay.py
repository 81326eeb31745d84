"""A coup as a compliance officer reads it, rebuilt from the event store.

``replay_coup`` gathers every event of one coup from all four services, in
stream order, into a ``CoupReplay`` (whose JSON is the stable schema
``casino.replay.coup/1``, see docs/replay.md); ``render_text`` prints it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from casino.rules import settlement, shoe, wagerbook
from casino.rules.baccarat import messages as bm
from casino.rules.blackjack import messages as jm
from casino.rules.wagers import Wager
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import Stored

SCHEMA = "casino.replay.coup/1"


class Step(msgspec.Struct, frozen=True):
    """One recorded event: where it sits in the stream, who wrote it, and what it says."""

    seq: int
    at: datetime
    producer: str
    type: str
    text: str
    clause: str = ""
    data: dict[str, Any] = {}


class Card(msgspec.Struct, frozen=True):
    position: int
    card: str
    to: str
    face_up: bool
    dealt_by: str
    handled_by: str
    seq: int


class Announcement(msgspec.Struct, frozen=True):
    hand: str
    total: int
    clause: str
    seq: int


class Offer(msgspec.Struct, frozen=True):
    offer: str
    seat: int
    answer: str
    clause: str
    seq: int


class CoupReplay(msgspec.Struct):
    schema: str
    table: str
    coup: str
    shoe: str
    game: str
    ruleset: str
    ruleset_digest: str
    procedure: str = ""
    procedure_clause: str = ""
    approvals: list[str] = []
    fell_back_to: str = ""
    offers: list[Offer] = []
    holders: list[str] = []
    cards: list[Card] = []
    announcements: list[Announcement] = []
    wagers: list[Wager] = []
    extras: list[str] = []
    result: dict[str, Any] = {}
    payouts: list[settlement.Payout] = []
    pickup: list[str] = []
    settled: bool = False
    clauses: list[str] = []
    steps: list[Step] = []


def replay_coup(stored: list[Stored]) -> CoupReplay:
    """The replay of the coup whose events (from every service) are ``stored``."""
    envs = [(m.seq, e) for m in sorted(stored, key=lambda m: m.seq) for e in m.batch.events]
    configured = next((e.data for _, e in envs if isinstance(e.data, CoupConfigured)), None)
    if configured is None:
        raise LookupError("no such coup in the store")
    first = next(e for _, e in envs if isinstance(e.data, CoupConfigured))
    r = CoupReplay(SCHEMA, configured.table, first.coup, first.shoe, configured.game, configured.ruleset,
                   configured.ruleset_digest)
    handlers: dict[str, str] = {}
    for seq, env in envs:
        e = env.data
        clause = str(getattr(e, "clause", "") or "")
        if clause and clause not in r.clauses:
            r.clauses.append(clause)
        r.steps.append(Step(seq, env.at, env.producer, env.type, describe(e), clause, msgspec.to_builtins(e)))
        _collect(r, seq, e, handlers)
    return r


def _who(by: int | None) -> str:
    return "dealer" if by is None else f"seat {by}"


def _collect(r: CoupReplay, seq: int, e: object, handlers: dict[str, str]) -> None:
    match e:
        case bm.CoupOpened():
            r.procedure, r.procedure_clause = e.procedure, e.clause
            r.approvals = [f"{a.what} by {a.by} ({a.reference})" for a in e.approvals]
        case bm.ProcedureFellBack():
            r.fell_back_to = e.procedure
        case bm.OfferAnswered():
            r.offers.append(Offer(e.offer, e.seat, "accepted" if e.accepted else "refused", "", seq))
        case bm.HolderAssigned():
            r.holders.append(f"{e.offer}: {_who(e.seat)}" + (f" plays {e.plays}" if e.offer == "shoe" and e.plays else ""))
            if e.seat is not None and e.offer != "shoe":
                handlers[e.offer] = f"seat {e.seat}"
            elif e.seat is not None:
                handlers[e.plays or "banker"] = f"seat {e.seat}"
        case bm.CardDealt():
            r.cards.append(Card(e.position, e.card, e.hand, e.face_up, _who(e.by), handlers.get(e.hand, "dealer"), seq))
        case jm.CardDealt():
            to = "dealer" if e.seat is None else f"seat {e.seat} hand {e.hand}"
            r.cards.append(Card(e.position, e.card, to, e.face_up, "dealer", "dealer", seq))
        case bm.CountAnnounced():
            r.announcements.append(Announcement(e.hand, e.points, e.clause, seq))
        case jm.TotalAnnounced():
            to = "dealer" if e.seat is None else f"seat {e.seat} hand {e.hand}"
            r.announcements.append(Announcement(to, e.total, e.clause, seq))
        case wagerbook.BookClosed():
            r.wagers = list(e.wagers)
        case wagerbook.ExtraPlaced():
            r.extras.append(f"seat {e.seat} hand {e.hand}: {e.kind} {e.amount}")
        case bm.CoupResulted() | jm.CoupResulted():
            r.result = msgspec.to_builtins(e)
        case bm.CardsPickedUp() | jm.CardsPickedUp():
            r.pickup = list(e.cards)
        case settlement.CoupSettled():
            r.payouts, r.settled = list(e.payouts), True


def describe(e: object) -> str:
    """One line a compliance officer can read."""
    match e:
        case CoupConfigured():
            return f"coup {e.coup_number} of table {e.table}: {e.game} under ruleset {e.ruleset} ({e.ruleset_digest})"
        case bm.CoupOpened():
            extra = f", approvals: {', '.join(a.what + ' by ' + a.by for a in e.approvals)}" if e.approvals else ""
            held = f", shoe kept by seat {e.shoe_holder}" if e.shoe_holder is not None else ""
            return f"opened, dealt by {e.procedure.replace('_', ' ')}{extra}{held}"
        case jm.CoupOpened():
            return "opened " + ("with a hole card" if e.hole_card else "with no hole card")
        case bm.BettingClosed() | jm.BettingClosed():
            return "betting closed: " + ", ".join(f"seat {w.seat} {w.bet} {w.amount}" for w in e.wagers)
        case bm.OfferOrder():
            if not e.seats:
                return f"nobody has a wager to be offered the {e.offer}"
            return f"the {e.offer} will be offered in this order: seats {', '.join(map(str, e.seats))}"
        case bm.OfferMade():
            return f"the {e.offer} offered to seat {e.seat}"
        case bm.OfferAnswered():
            plays = f" to play {e.plays}" if e.offer == "shoe" and e.accepted else ""
            return f"seat {e.seat} {'accepts' if e.accepted else 'refuses'} the {e.offer}{plays}"
        case bm.HolderAssigned():
            return (f"the dealer keeps the {e.offer}" if e.seat is None
                    else f"marker for the {e.offer} placed before seat {e.seat}")
        case bm.ProcedureFellBack():
            return f"dealt by {e.procedure.replace('_', ' ')} instead"
        case bm.CardDealt():
            return (f"{e.card} (shoe position {e.position}) to {e.hand}'s hand, "
                    f"{'face up' if e.face_up else 'face down'}, drawn by {_who(e.by)}")
        case jm.CardDealt():
            to = "the dealer" if e.seat is None else f"seat {e.seat} hand {e.hand}"
            return f"{e.card} (shoe position {e.position}) to {to}, {'face up' if e.face_up else 'face down'}"
        case bm.CardsPassed():
            return f"{e.hand}'s cards passed face down to seat {e.seat}"
        case bm.HandExposed():
            return f"seat {e.seat} exposes {e.hand}'s hand"
        case bm.CardsReturned():
            return f"seat {e.seat} returns {e.hand}'s cards unexposed"
        case bm.HandlingBreachReported():
            return f"cards of {e.hand}'s hand left full view at seat {e.seat}: {e.note}"
        case bm.CardsTurnedOver():
            return f"the dealer turns over {e.hand}'s cards at positions {', '.join(map(str, e.positions))}"
        case bm.CountAnnounced():
            return f"announced: {e.hand} {e.points}"
        case jm.TotalAnnounced():
            who = "dealer" if e.seat is None else f"seat {e.seat} hand {e.hand}"
            return f"announced: {who} {'soft ' if e.soft else ''}{e.total}"
        case jm.DecisionTaken():
            amount = f" {e.amount}" if e.amount else ""
            return f"seat {e.seat} hand {e.hand}: {e.action}{amount}"
        case jm.HandCompleted():
            return f"seat {e.seat} hand {e.hand} complete: {e.reason.replace('_', ' ')}"
        case jm.HoleCardTurned():
            return f"hole card {e.card} (position {e.position}) turned face up"
        case bm.CoupResulted():
            pairs = " ".join(p for p, on in (("player pair", e.player_pair), ("banker pair", e.banker_pair)) if on)
            return (f"result: {e.winner}, player {e.player_points} banker {e.banker_points}"
                    f"{' natural' if e.natural else ''}{' ' + pairs if pairs else ''}")
        case jm.CoupResulted():
            hands = "; ".join(f"seat {h.seat} hand {h.hand} {h.outcome} ({h.total})" for h in e.hands)
            return f"result: dealer {'blackjack' if e.dealer_blackjack else e.dealer_total}; {hands}"
        case bm.CardsPickedUp() | jm.CardsPickedUp():
            return "cards picked up in order: " + " ".join(e.cards)
        case bm.ShoeGivenUp():
            return f"seat {e.seat} gives up the shoe ({e.reason})"
        case wagerbook.BookOpened():
            return "betting opened"
        case wagerbook.WagerPlaced():
            return f"wager: seat {e.wager.seat} {e.wager.bet} {e.wager.amount}"
        case wagerbook.WagerCancelled():
            return f"wager cancelled: seat {e.seat} {e.bet}"
        case wagerbook.BookClosed():
            return "book closed with " + str(len(e.wagers)) + " wagers"
        case wagerbook.ExtraPlaced():
            return f"extra wager: seat {e.seat} hand {e.hand} {e.kind} {e.amount}"
        case settlement.CoupSettled():
            return f"settled: staked {e.staked}, returned {e.returned}, house {e.staked - e.returned:+d}"
        case shoe.RoundStarted():
            return "round started at the shoe"
        case shoe.CardDrawn():
            return f"shoe position {e.position}: {e.card} drawn"
        case shoe.CutCardReached():
            return f"cut card reached at position {e.position}" + (" as the first card of the round" if e.first_of_round else "")
        case shoe.ReshuffleRequired():
            return f"reshuffle required ({e.when.replace('_', ' ')})"
        case shoe.RoundEnded():
            return "round ended: cards to the discard rack"
        case shoe.ShoeShuffled():
            return f"new shoe {e.shoe_id} shuffled: {e.decks} decks, commitment {e.commitment[:16]}..."
        case shoe.CardBurned():
            return f"burn card {e.card} (position {e.position})"
        case shoe.ShoeEnded():
            return f"shoe {e.shoe_id} ended; order and salt revealed"
    return type(e).__name__


def render_text(r: CoupReplay) -> str:
    """The replay as text."""
    out = [f"Coup {r.coup} at table {r.table} ({r.game}), shoe {r.shoe}",
           f"Ruleset {r.ruleset} (digest {r.ruleset_digest})"]
    if r.procedure:
        why = f" ({r.procedure_clause})" + (f"; approvals: {'; '.join(r.approvals)}" if r.approvals else "")
        out.append(f"Dealt by {r.procedure.replace('_', ' ')}{why}"
                   + (f"; fell back to {r.fell_back_to.replace('_', ' ')}" if r.fell_back_to else ""))
    out.append(f"Clauses applied: {', '.join(r.clauses)}")
    out.append("")
    out.append("  seq  time (UTC)    by             what" + " " * 60 + "clause")
    for s in r.steps:
        at = f"{s.at:%H:%M:%S.%f}"[:12]
        out.append(f"{s.seq:>5}  {at}  {s.producer:<13}  {s.text:<63} {s.clause}")
    out.append("")
    if r.wagers:
        out.append("Wagers:   " + "; ".join(f"seat {w.seat} {w.bet} {w.amount}" for w in r.wagers))
    if r.extras:
        out.append("Extras:   " + "; ".join(r.extras))
    out.append("Cards:    " + "; ".join(
        f"#{c.position} {c.card} to {c.to} {'up' if c.face_up else 'down'} by {c.dealt_by}"
        + (f", handled by {c.handled_by}" if c.handled_by != "dealer" else "") for c in r.cards))
    if r.payouts:
        out.append("Payouts:  " + "; ".join(
            f"seat {p.seat} {p.bet}{f' hand {p.hand}' if p.bet == 'box' else ''} staked {p.stake} returned {p.returned}"
            for p in r.payouts))
    out.append("Pick-up:  " + " ".join(r.pickup))
    out.append("Settled" if r.settled else "NOT SETTLED")
    return "\n".join(out)

