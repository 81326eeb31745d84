"""A coup as a compliance officer reads it, rebuilt from the event store.

``replay_coup`` gathers every event of one coup from all four services, in
stream order, into a ``CoupReplay`` (whose JSON is the stable schema
``casino.replay.coup/1``, see docs/replay.md); ``render_text`` prints it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextvars import ContextVar
from datetime import datetime
from typing import Any

import msgspec

from casino import games
from casino.rules import settlement, shoe, wagerbook
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.incidents import CardIncident, CardKeyed, CoupRuled, TableClosed, TableReopened
from casino.rules.text import money
from casino.rules.wagers import Wager
from casino.store import subjects
from casino.store.envelope import (
    KEYED,
    READ,
    CoupConfigured,
    CoupHeld,
    Envelope,
    RulesetRecorded,
    encode,
)
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
    data: Any = None  # the event itself: its fields as they are recorded
    by: str = ""  # who caused it (``caused_by``)


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
    held: str = ""
    unreadable: list[str] = []
    casino: str = ""
    record_made: str = ""
    replayed: str = ""
    currency: str = ""
    house_net: int = 0
    supervisors: list[str] = []
    dealer: str = ""
    dealer_before: str = ""
    record_digest: str = ""  # ``record_digest`` of the coup's messages: what a print or a replay is checked by


def record_digest(stored: list[Stored]) -> str:
    """The sha256 (hex) of a coup's messages in the order stored: each one's
    sequence, subject and batch as this release encodes it (an unreadable
    one's bytes as stored). Two readers of one record get one digest; a
    message altered, added or taken away changes it."""
    h = hashlib.sha256()
    for m in sorted(stored, key=lambda m: m.seq):
        h.update(f"{m.seq} {m.subject}\n".encode())
        h.update(m.raw if m.unreadable else encode(m.batch))
        h.update(b"\n")
    return h.hexdigest()


# The events that record a command given at the table (each game's ``command_of``): those a terminal's
# command caused are the terminal's, but a card dealt (from the shoe) and the cards passed (the dealer's own
# step). What the rules decide beside them in the same decision (a result, a hand completed) is the
# deciding service's.
COMMANDED = frozenset(kind for game in games.GAMES.values() for kind in game.command_of) - games.CARD_DEALT - {
    baccarat_messages.CardsPassed}


def caused_by(env: Envelope) -> str:
    """Who caused a recorded step: a supervisor (a ruling, a direction); the
    dealer keying in a card the shoe could not read (and that card, once
    confirmed); the card-reading shoe (a card it reported, an incident it
    caused); a terminal (the command it gave, a wager); else the service
    that decided it."""
    e = env.data
    if supervisor := getattr(e, "supervisor", ""):
        return f"supervisor {supervisor}"
    if isinstance(e, CardKeyed) or (type(e) in games.CARD_DEALT and env.causation.startswith(KEYED)):
        dealer = str(getattr(e, "dealer", "") or "")
        return f"dealer {dealer} (keyed in)" if dealer else "dealer (keyed in)"
    if isinstance(e, CardIncident) or (env.causation.startswith(READ) and (
            type(e) in games.CARD_DEALT or isinstance(e, shoe.ShoeEvent))):
        return "card-reading shoe"
    if env.command and (type(e) in COMMANDED or env.producer != "dealer-policy"):
        return "terminal"
    return env.producer


def replay_coup(stored: list[Stored]) -> CoupReplay:
    """The replay of the coup whose events (from every service) are ``stored``;
    a message of it that cannot be read is said to be there, with why and
    what it holds, never passed over in silence."""
    ordered = sorted(stored, key=lambda m: m.seq)
    envs = [(m.seq, e) for m in ordered for e in m.batch.events]
    configured = next((e.data for _, e in envs if isinstance(e.data, CoupConfigured)), None)
    unreadable = [f"seq {m.seq}: {m.unreadable}" + ("" if m.msg_id else "; written by no service of ours "
                                                    "(no message id)") + f"; as stored: {m.raw[:160]!r}"
                  for m in ordered if m.unreadable]
    if configured is None:
        if not unreadable:
            raise LookupError("no such coup in the store")
        table, shoe_, coup, _ = subjects.tokens(ordered[0].subject)
        return CoupReplay(SCHEMA, table, coup, shoe_, "", "", "", unreadable=unreadable)
    first = next(e for _, e in envs if isinstance(e.data, CoupConfigured))
    r = CoupReplay(SCHEMA, configured.table, first.coup, first.shoe, configured.game, configured.ruleset,
                   configured.ruleset_digest, unreadable=unreadable, currency=configured.currency,
                   supervisors=list(configured.supervisors), dealer=configured.dealer,
                   dealer_before=configured.dealer_before, record_digest=record_digest(ordered))
    handlers: dict[str, str] = {}
    shown = CURRENCY.set(configured.currency)
    try:
        for seq, env in envs:
            e = env.data
            clause = str(getattr(e, "clause", "") or "")
            if clause and clause not in r.clauses:
                r.clauses.append(clause)
            r.steps.append(Step(seq, env.at, env.producer, env.type, describe(e), clause, e, caused_by(env)))
            _collect(r, seq, e, handlers)
    finally:
        CURRENCY.reset(shown)
    return r


# The currency a replay's sentences show money in: the coup's (``coup.configured``), none for a
# record made before it was recorded.
CURRENCY: ContextVar[str] = ContextVar("currency", default="")


def _money(minor: int, signed: bool = False) -> str:
    return money(minor, CURRENCY.get(), signed)


def _card(position: int) -> str:
    """A shoe position as a person counts the cards from the top: from 1."""
    return f"card {position + 1} of the shoe"


def _who(by: int | None) -> str:
    return "dealer" if by is None else f"seat {by}"


def _collect(r: CoupReplay, seq: int, e: object, handlers: dict[str, str]) -> None:
    """Gather ``e`` into the replay's summary (procedure, offers, cards, counts, book, result)."""
    gather = _COLLECT.get(type(e))
    if gather is not None:
        gather(r, seq, e, handlers)


def _opening(r: CoupReplay, seq: int, e: baccarat_messages.CoupOpened, handlers: dict[str, str]) -> None:
    r.procedure, r.procedure_clause = e.procedure, e.clause
    r.approvals = [f"{a.what} by {a.by} ({a.reference}" + (f"; conditions: {a.conditions}" if a.conditions else "")
                   + (f"; granted {a.granted}" if a.granted else "") + ")" for a in e.approvals]


def _holder(r: CoupReplay, seq: int, e: baccarat_messages.HolderAssigned, handlers: dict[str, str]) -> None:
    r.holders.append(f"{e.offer}: {_who(e.seat)}" + (f" ({e.player})" if e.player else "")
                     + (f" plays {e.plays}" if e.offer == "shoe" and e.plays else ""))
    if e.seat is not None and e.offer != "shoe":
        handlers[e.offer] = f"seat {e.seat}"
    elif e.seat is not None:
        handlers[e.plays or "banker"] = f"seat {e.seat}"


def _blackjack_card(r: CoupReplay, seq: int, e: blackjack_messages.CardDealt, handlers: dict[str, str]) -> None:
    r.cards.append(Card(e.position, e.card, _seat_hand(e.seat, e.hand), e.face_up, "dealer", "dealer", seq))


def _settled(r: CoupReplay, seq: int, e: settlement.CoupSettled, handlers: dict[str, str]) -> None:
    r.payouts, r.settled, r.house_net = list(e.payouts), True, e.staked - e.returned


_COLLECT: dict[type, Callable[[CoupReplay, int, Any, dict[str, str]], None]] = {
    baccarat_messages.CoupOpened: _opening,
    baccarat_messages.ProcedureFellBack: lambda r, seq, e, h: setattr(r, "fell_back_to", e.procedure),
    baccarat_messages.OfferAnswered: lambda r, seq, e, h: r.offers.append(
        Offer(e.offer, e.seat, "accepted" if e.accepted else "refused", "", seq)),
    baccarat_messages.HolderAssigned: _holder,
    baccarat_messages.CardDealt: lambda r, seq, e, h: r.cards.append(
        Card(e.position, e.card, e.hand, e.face_up, _who(e.by), h.get(e.hand, "dealer"), seq)),
    blackjack_messages.CardDealt: _blackjack_card,
    baccarat_messages.CountAnnounced: lambda r, seq, e, h: r.announcements.append(Announcement(e.hand, e.points, e.clause, seq)),
    blackjack_messages.TotalAnnounced: lambda r, seq, e, h: r.announcements.append(
        Announcement(_seat_hand(e.seat, e.hand), e.total, e.clause, seq)),
    wagerbook.BookClosed: lambda r, seq, e, h: setattr(r, "wagers", list(e.wagers)),
    wagerbook.ExtraPlaced: lambda r, seq, e, h: r.extras.append(
        f"{_seat_hand(e.seat, e.hand)}: {e.kind} {_money(e.amount)}"),
    baccarat_messages.CoupResulted: lambda r, seq, e, h: setattr(r, "result", msgspec.to_builtins(e)),
    blackjack_messages.CoupResulted: lambda r, seq, e, h: setattr(r, "result", msgspec.to_builtins(e)),
    baccarat_messages.CardsPickedUp: lambda r, seq, e, h: setattr(r, "pickup", list(e.cards)),
    blackjack_messages.CardsPickedUp: lambda r, seq, e, h: setattr(r, "pickup", list(e.cards)),
    settlement.CoupSettled: _settled,
    CoupHeld: lambda r, seq, e, h: setattr(r, "held", e.reason),
}


def describe(e: object) -> str:
    """One line a compliance officer can read."""
    line = _DESCRIBE.get(type(e))
    return type(e).__name__ if line is None else line(e)


def _opened(e: baccarat_messages.CoupOpened) -> str:
    extra = f", approvals: {', '.join(a.what + ' by ' + a.by for a in e.approvals)}" if e.approvals else ""
    held = f", shoe kept by seat {e.shoe_holder}" if e.shoe_holder is not None else ""
    directed = (f", directed by {e.supervisor}"
                + (f" in place of {e.in_force.replace('_', ' ')}" if e.in_force != e.procedure else "")
                if e.supervisor else "")
    return f"opened, dealt by {e.procedure.replace('_', ' ')}{directed}{extra}{held}"


def _offer_order(e: baccarat_messages.OfferOrder) -> str:
    if not e.seats:
        return f"nobody has a wager to be offered the {e.offer}"
    return f"the {e.offer} will be offered in this order: seats {', '.join(map(str, e.seats))}"


def _seat_hand(seat: int | None, hand: int, dealer: str = "dealer") -> str:
    """A blackjack box's hand as people count them: seat 3 hand 1, its second after a split hand 2."""
    return dealer if seat is None else f"seat {seat} hand {hand + 1}"


def _baccarat_result(e: baccarat_messages.CoupResulted) -> str:
    pairs = " ".join(p for p, on in (("player pair", e.player_pair), ("banker pair", e.banker_pair)) if on)
    return (f"result: {e.winner}, player {e.player_points} banker {e.banker_points}"
            f"{' natural' if e.natural else ''}{' ' + pairs if pairs else ''}")


def _blackjack_result(e: blackjack_messages.CoupResulted) -> str:
    hands = "; ".join(f"{_seat_hand(h.seat, h.hand)} {h.outcome} ({h.total})" for h in e.hands)
    return f"result: dealer {'blackjack' if e.dealer_blackjack else e.dealer_total}; {hands}"


def _betting_closed(e: baccarat_messages.BettingClosed | blackjack_messages.BettingClosed) -> str:
    return "betting closed: " + ", ".join(f"seat {w.seat} {w.bet} {_money(w.amount)}" for w in e.wagers)


def _picked_up(e: baccarat_messages.CardsPickedUp | blackjack_messages.CardsPickedUp) -> str:
    return "cards picked up in order: " + " ".join(e.cards)


# One line per event type, found by lookup: a replay describes every event.
_DESCRIBE: dict[type, Callable[[Any], str]] = {
    CoupConfigured: lambda e: (f"coup {e.coup_number} of table {e.table}: {e.game} under ruleset {e.ruleset} "
                               f"({e.ruleset_digest})" + (f", dealt by {e.dealer}" if e.dealer else "")
                               + (f", who takes over from {e.dealer_before or 'nobody signed in'}"
                                  if e.dealer != e.dealer_before else "")),
    baccarat_messages.CoupOpened: _opened,
    blackjack_messages.CoupOpened: lambda e: "opened " + ("with a hole card" if e.hole_card else "with no hole card"),
    baccarat_messages.BettingClosed: _betting_closed,
    blackjack_messages.BettingClosed: _betting_closed,
    baccarat_messages.OfferOrder: _offer_order,
    baccarat_messages.OfferMade: lambda e: f"the {e.offer} offered to seat {e.seat}",
    baccarat_messages.OfferAnswered: lambda e: (f"seat {e.seat} {'accepts' if e.accepted else 'refuses'} the {e.offer}"
                                 + (f" to play {e.plays}" if e.offer == "shoe" and e.accepted else "")),
    baccarat_messages.HolderAssigned: lambda e: (f"the dealer keeps the {e.offer}" if e.seat is None
                                  else f"marker for the {e.offer} placed before seat {e.seat}"
                                  + (f" ({e.player})" if e.player else "")),
    baccarat_messages.ProcedureFellBack: lambda e: f"dealt by {e.procedure.replace('_', ' ')} instead",
    baccarat_messages.CardDealt: lambda e: (f"{e.card} ({_card(e.position)}) to {e.hand}'s hand, "
                             f"{'face up' if e.face_up else 'face down'}, drawn by {_who(e.by)}"),
    blackjack_messages.CardDealt: lambda e: (f"{e.card} ({_card(e.position)}) to {_seat_hand(e.seat, e.hand, 'the dealer')}, "
                             f"{'face up' if e.face_up else 'face down'}"),
    baccarat_messages.CardsPassed: lambda e: f"{e.hand}'s cards passed face down to seat {e.seat}",
    baccarat_messages.HandExposed: lambda e: f"seat {e.seat} exposes {e.hand}'s hand",
    baccarat_messages.CardsReturned: lambda e: f"seat {e.seat} returns {e.hand}'s cards unexposed",
    baccarat_messages.HandlingBreachReported: lambda e: f"cards of {e.hand}'s hand left full view at seat {e.seat}: {e.note}",
    baccarat_messages.CardsTurnedOver: lambda e: (f"the dealer turns over {e.hand}'s cards, cards "
                                   f"{', '.join(str(p + 1) for p in e.positions)} of the shoe"),
    baccarat_messages.CountAnnounced: lambda e: f"announced: {e.hand} {e.points}",
    blackjack_messages.TotalAnnounced: lambda e: f"announced: {_seat_hand(e.seat, e.hand)} {'soft ' if e.soft else ''}{e.total}",
    blackjack_messages.DecisionTaken: lambda e: (f"{_seat_hand(e.seat, e.hand)}: {e.action}"
                                                 + (f" {_money(e.amount)}" if e.amount else "")),
    blackjack_messages.HandCompleted: lambda e: f"{_seat_hand(e.seat, e.hand)} complete: {e.reason.replace('_', ' ')}",
    blackjack_messages.HoleCardTurned: lambda e: f"hole card {e.card} ({_card(e.position)}) turned face up",
    baccarat_messages.CoupResulted: _baccarat_result,
    blackjack_messages.CoupResulted: _blackjack_result,
    baccarat_messages.CardsPickedUp: _picked_up,
    blackjack_messages.CardsPickedUp: _picked_up,
    baccarat_messages.ShoeGivenUp: lambda e: (f"seat {e.seat}{f' ({e.player})' if e.player else ''} gives up the "
                                              f"shoe ({e.reason.replace('_', ' ')}"
                               + (f", directed by {e.supervisor})" if e.supervisor else ")")),
    wagerbook.BookOpened: lambda e: "betting opened" + (", seated: " + ", ".join(f"seat {s} {p}" for s, p in e.seated)
                                                        if e.seated else ""),
    wagerbook.WagerPlaced: lambda e: (f"wager: seat {e.wager.seat} {e.wager.bet} {_money(e.wager.amount)}"
                                      + (f" by {e.wager.player}" if e.wager.player else "")
                                      + (" (a back bet)" if e.wager.back else "")),
    wagerbook.WagerCancelled: lambda e: f"wager cancelled: seat {e.seat} {e.bet}" + (f" by {e.player}" if e.player else ""),
    RulesetRecorded: lambda e: f"ruleset {e.name} recorded at table {e.table} in full (digest {e.digest})",
    CoupHeld: lambda e: f"held for compliance: {e.reason}",
    wagerbook.PlayerSeated: lambda e: f"{e.player} sits at seat {e.seat}",
    wagerbook.PlayerLeft: lambda e: f"{e.player} leaves seat {e.seat}",
    wagerbook.BookClosed: lambda e: "book closed with " + str(len(e.wagers)) + " wagers",
    wagerbook.ExtraPlaced: lambda e: f"extra wager: {_seat_hand(e.seat, e.hand)} {e.kind} {_money(e.amount)}",
    settlement.CoupSettled: lambda e: (f"settled: staked {_money(e.staked)}, returned {_money(e.returned)}, "
                                       f"house net {_money(e.staked - e.returned, signed=True)}"),
    shoe.RoundStarted: lambda e: "round started at the shoe",
    shoe.CardDrawn: lambda e: f"{_card(e.position)}: {e.card} drawn" + (f" (report {e.read})" if e.read else ""),
    shoe.CardMisdrawn: lambda e: (f"{_card(e.position)}: {e.card} out of the shoe when no card was due (report "
                                  f"{e.read}): to the discard rack"),
    shoe.CardRefused: lambda e: f"{e.card} reported (report {e.read}) and refused: {e.why}",
    CardIncident: lambda e: (("between coups, " if not e.coup else "") + f"held for a supervisor's ruling: {e.what}"
                             + (f"; house rule {e.setting.replace('_', ' ')} = {e.house_rule.replace('_', ' ')}" if e.setting else "")),
    CardKeyed: lambda e: f"{e.card} keyed in by {e.dealer or 'nobody named'} for report {e.read}, to be confirmed",
    CoupRuled: lambda e: ("ruled" + (f" by {e.setting.replace('_', ' ')}" if e.setting else "") + ": " + {
        "go_on": "the card stays out, the coup is dealt on" if e.coup else "the card stays out, the table goes on",
        "void": "the coup is void, every stake returned",
        "end_shoe": ("the coup is void, every stake returned, and " if e.coup else "") + "the shoe is ended",
        "confirm": f"confirms the card keyed in for report {e.read}"}.get(e.ruling, e.ruling.replace("_", " "))),
    TableClosed: lambda e: (f"the table closed ({e.clause}): {e.reason}; {e.awaiting} incidents closed with it"
                            + (", the coup held for compliance" if e.coup else "") + f", shoe {e.shoe} ended"),
    TableReopened: lambda e: (f"the table reopened by {e.supervisor}; {e.reported} cards reported while it was "
                              "closed, counted and not taken"),
    shoe.CutCardReached: lambda e: (f"cut card reached before {_card(e.position)}"
                                    + (" as the first card of the round" if e.first_of_round else "")),
    shoe.ReshuffleRequired: lambda e: f"reshuffle required ({e.when.replace('_', ' ')})",
    shoe.RoundEnded: lambda e: "round ended at the shoe: cards to the discard rack as picked up",
    shoe.ShoeShuffled: lambda e: (f"new shoe {e.shoe_id} shuffled: {e.decks} decks, "
                                  + ("by hand: no order known, none committed to" if e.source == "hand" else
                                     f"commitment {e.commitment[:16]}..."
                                     + (" to the order its shuffling machine reported" if e.source else ""))),
    shoe.CardBurned: lambda e: f"burn card {e.card} ({_card(e.position)})",
    shoe.ShoeEnded: lambda e: f"shoe {e.shoe_id} ended; order and salt revealed",
    shoe.CutCardMisplaced: lambda e: (f"the cut card out at {_card(e.position)}" if e.reported else
                                      f"{_card(e.position)} came out from behind the cut card, which was not reported")
                                     + f": outside the tolerance of {_card(e.cut_index)}, where it is reckoned",
    shoe.OrderReplaced: lambda e: f"the order kept for shoe {e.shoe_id} replaced by the machine's report {e.read}",
}


def render_text(r: CoupReplay) -> str:
    """The replay as text."""
    out = [f"Coup {r.coup} at table {r.table} ({r.game}), shoe {r.shoe}",
           f"Ruleset {r.ruleset} (digest {r.ruleset_digest})"]
    if r.procedure:
        why = f" ({r.procedure_clause})" + (f"; approvals: {'; '.join(r.approvals)}" if r.approvals else "")
        out.append(f"Dealt by {r.procedure.replace('_', ' ')}{why}"
                   + (f"; fell back to {r.fell_back_to.replace('_', ' ')}" if r.fell_back_to else ""))
    if r.dealer or r.dealer_before:
        out.append(f"Dealer: {r.dealer or 'nobody signed in'}" + (
            f" (took over from {r.dealer_before or 'nobody signed in'})" if r.dealer != r.dealer_before else ""))
    if r.supervisors:
        out.append(f"Supervisors on the casino's roster: {', '.join(r.supervisors)}")
    out.append(f"Clauses applied: {', '.join(r.clauses)}")
    out.append("")
    out.append("  seq  time (UTC)               by                     what" + " " * 60 + "clause")
    for s in r.steps:
        at = f"{s.at:%Y-%m-%d %H:%M:%S.%f}"[:23]
        out.append(f"{s.seq:>5}  {at}  {s.by or s.producer:<21}  {s.text:<63} {s.clause}")
    out.append("")
    if r.wagers:
        out.append("Wagers:   " + "; ".join(f"seat {w.seat} {w.bet} {money(w.amount, r.currency)}" for w in r.wagers))
    if r.extras:
        out.append("Extras:   " + "; ".join(r.extras))
    out.append("Cards:    " + "; ".join(
        f"#{c.position + 1} {c.card} to {c.to} {'up' if c.face_up else 'down'} by {c.dealt_by}"
        + (f", handled by {c.handled_by}" if c.handled_by != "dealer" else "") for c in r.cards))
    if r.payouts:
        out.append("Payouts:  " + "; ".join(
            f"seat {p.seat} {p.bet}{f' hand {p.hand + 1}' if p.bet == 'box' else ''} staked "
            f"{money(p.stake, r.currency)} returned {money(p.returned, r.currency)}" for p in r.payouts))
        out.append(f"House net: {money(r.house_net, r.currency, signed=True)} (what was staked less what was "
                   "returned: + the house won)")
    out.append("Pick-up:  " + " ".join(r.pickup))
    for line in r.unreadable:
        out.append(f"CANNOT BE READ: {line}")
    if r.held:
        out.append(f"HELD FOR COMPLIANCE: {r.held}")
    out.append("Settled" if r.settled else "NOT SETTLED")
    if r.record_digest:
        out.append(f"Record digest: {r.record_digest} (sha256 of its messages as stored)")
    return "\n".join(out)



ORDER_LINE = 26  # the revealed order's cards on a line: half a deck


def render_shoe(stored: list[Stored], sealed: str = "") -> list[str]:
    """A shoe as `casino replay shoe` prints it, from its own events (its
    cards numbered from 1, as a person counts them from the top): its
    decks and cut card, the commitment published at its shuffle, every burn,
    the cut card reached, and once it has ended (sealed or not) the order
    and salt it revealed and whether they hash to the commitment; ``sealed``
    is its seal's hash in the archive, if it is sealed. A message that cannot
    be read is named, never raised."""
    out: list[str] = []
    shuffled: shoe.ShoeShuffled | None = None
    drawn, rounds = 0, 0
    for m in stored:
        if m.unreadable:
            out.append(f"CANNOT BE READ: event seq {m.seq}: {m.unreadable}")
            continue
        for e in m.batch.events:
            d, at = e.data, f"{e.at:%Y-%m-%d %H:%M:%S} UTC"
            if isinstance(d, shoe.ShoeShuffled):
                shuffled = d
                cut = "no cut card" if d.cut_index is None else f"the cut card before card {d.cut_index + 1}"
                burns = f"{d.burns_due} to burn" + (", as many as the first card's value" if d.burn_by_value else "")
                out += [f"Shuffled {at}: {d.decks} deck{'s' if d.decks != 1 else ''}, {d.cards} cards, {cut}, {burns}",
                        f"Commitment {d.commitment} (sha256 of the salt and the order, both revealed at its end)"]
            elif isinstance(d, shoe.CardBurned):
                out.append(f"Burned card {d.position + 1}, {d.card}, face {'up' if d.face_up else 'down'} "
                           f"({d.clause or 'no clause recorded'})")
            elif isinstance(d, shoe.CutCardReached):
                out.append(f"Cut card reached before card {d.position + 1}"
                           + (" as the first card of a round" if d.first_of_round else "") + f" ({d.clause})")
            elif isinstance(d, shoe.ReshuffleRequired):
                out.append(f"Reshuffle required {d.when.replace('_', ' ')} ({d.clause})")
            elif isinstance(d, shoe.RoundStarted):
                rounds += 1
            elif isinstance(d, shoe.CardDrawn):
                drawn += 1
            elif isinstance(d, shoe.ShoeEnded):
                held = shuffled is not None and shoe.commitment(d.order, d.salt) == shuffled.commitment
                out.append(f"Ended {at}: {drawn} cards drawn in {rounds} rounds; order revealed, salt {d.salt}: "
                           + ("it hashes to the commitment" if held else "IT DOES NOT HASH TO THE COMMITMENT"))
                out += [f"  {i + 1:>4}: {' '.join(d.order[i:i + ORDER_LINE])}" for i in range(0, len(d.order), ORDER_LINE)]
    if not any(line.startswith("Ended ") for line in out):
        out.append(f"In play: {drawn} cards drawn in {rounds} rounds; its order stays the shoe service's until it ends")
    if shuffled is None:
        out.insert(0, "NO SHUFFLE RECORDED: nothing to hold its cards to")
    if sealed:
        out.append(f"Sealed in the archive: seal hash {sealed}")
    return out
