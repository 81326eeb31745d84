"""A table's cards from a card-reading shoe (docs/readers.md), beside the
shoe service's own draws: each card the shoe reads is checked as it leaves
the shoe, by the coup's rules (is a card due now, for whom) and by the shoe
service (the shoe's composition, the order committed to), and recorded as
what happened: dealt, burned, misdrawn or refused. A card the coup could not
take holds it until a supervisor rules on it, by the house rule, each further
incident in turn; one out between coups holds the next coup's opening, and is
recorded in that coup's record before it opens. A card the shoe could not
read is keyed in by the dealer and confirmed by a supervisor, then taken as
the shoe's report would have been. A report is taken once, whenever it is
sent again: the shoe answers what it was taken as, and a card drawn for one
coup is never dealt into another."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from casino.protocol import commands
from casino.rules.errors import RuleViolation
from casino.rules.shoe import ROUND
from casino.store import subjects
from casino.store.envelope import KEYED, READ, SHOE_ENDING, CardIncident, CardKeyed, CoupRuled
from services.dealer_policy import table
from services.dealer_policy.dealing import Dealing

if TYPE_CHECKING:
    from services.dealer_policy.table import TableCoup

UNREAD = "unread card"
# Where a player holds the shoe and draws, a card drawn is drawn "only at the instruction of the dealer".
HOLDER_DRAWS = {"method_c": "000 8.19", "method_d": "000 8.28"}
# What the shoe's answer names an incident, as the coup records it: its kind, and the house rule's setting.
INCIDENTS = {"misdrawn": ("misdrawn", "shoe.misdraw"), "refused": ("refused", "shoe.refused"),
             "cut card misplaced": ("cut_card", "shoe.cut_card")}


async def report(w: Dealing, cmd: commands.CardRead | commands.CutCardRead) -> commands.Reply | None:
    """Take one report of the table's card-reading shoe, once however often it
    is sent: the shoe's answer (what the card was taken as: the coup it was
    drawn for, its ``incident`` and ``clause``), None where it is recorded
    already where a card now goes, or holds the coup as a card the shoe could
    not read."""
    t = w.t
    t.cards.reports(t.name)  # refused where the table takes no card-reading shoe's reports
    await w.caught_up()  # what the card is taken as depends on what the coup waits for: as recorded
    cause = READ + cmd.id
    if t.taken(cause):  # the same report again, taken where a card now goes already: one card
        return None
    if isinstance(cmd, commands.CardRead) and not cmd.card:
        await w.commit([CardIncident(t.name, _coup_of(t), "unread", "", cmd.id, UNREAD, f"report {cmd.id}: the "
                        "shoe could not read the card drawn; the dealer keys it in, and a supervisor confirms it", "",
                        "confirm")], commands.write_id(t.place(), cause), cause, commands.digest(cmd))
        count(w, "unread")
        return None
    return await _take(w, cmd.id, cmd.card if isinstance(cmd, commands.CardRead) else "",
                       isinstance(cmd, commands.CutCardRead), cause, commands.digest(cmd))


def _names(t: TableCoup, coup: str) -> bool:
    """Whether a command naming ``coup`` is for what the table is held for:
    the coup in play; between coups, the next coup (whose record holds the
    incidents) or the latest (``table.status`` names it)."""
    return coup == t.place() or (coup == t.coup and not t.in_play)


def _coup_of(t: TableCoup) -> str:
    """The coup an incident or ruling now names: the coup in play, or none (between coups)."""
    return t.coup if t.in_play else ""


async def _take(w: Dealing, read: str, card: str, cut: bool, cause: str, command: str = "",
                confirmed: bool = False) -> commands.Reply:
    """The card (or the cut card) of report ``read`` checked at the shoe (asked
    as the report, however often) and taken where a card now goes as what it
    was, caused by ``cause``, with the steps staged before it: due where the
    coup is dealt and calls for a card, or where it is the card the shoe
    could not read, now ``confirmed`` (it came out when due, before any
    further incident held the coup). A card the shoe drew for another coup,
    or an incident it recorded elsewhere, is answered as it was taken, and
    nothing more is recorded."""
    t = w.t
    here = t.place()
    if not t.in_play and not t.held and t.state is not None:  # between coups: the last round's cards picked up first
        await w.end_round()
    step = t.game.next_step(t.rules, t.state) if t.in_play and (confirmed or not t.finished) else None
    due = step is not None and step.kind == "draw"
    procedure = t.game.procedure(t.state) if t.state is not None else ""
    try:
        reply = await w.ask_shoe(commands.TakeRead(
            READ + read, t.name, here, t.config.ruleset, read, card, cut, due,
            HOLDER_DRAWS.get(procedure, "setting shoe.misdraw")))
    except RuleViolation as exc:
        if exc.clause == ROUND and due:  # the shoe deals no round of this coup: a fault, held for compliance
            table.refused(t, f"the shoe refused the coup's card: {exc.reason}")
        raise
    if reply.coup and reply.coup != here:  # taken before, in another coup (a report sent again late)
        return reply
    if reply.cards and due and step is not None:
        deal = t.game.deal(reply.cards[0], reply.positions[0], step.waiting.seat)
        w.stage(w.decide(deal), commands.write_id(here, cause), cause, command)
    if reply.incident in INCIDENTS:
        kind, setting = INCIDENTS[reply.incident]
        reply = msgspec.structs.replace(reply, house_rule=house_rule(t, reply.house_rule))
        what = (f"{card} out of the shoe when no card was due ({reply.reason})" if kind == "misdrawn" else
                f"{card} refused: {reply.reason}" if kind == "refused" else f"the cut card: {reply.reason}")
        clause = reply.reason if kind == "misdrawn" else reply.clause
        await w.commit([CardIncident(t.name, _coup_of(t), kind, card, read, clause, what, setting, reply.house_rule)],
                       commands.write_id(here, cause), cause, command)
        count(w, kind)
        return reply
    if reply.cards and due and not t.finished:
        await w.advance()
    # Else a burn card, the cut card where it belongs, or a card taken before: the shoe's record holds it.
    await w.flush()
    return reply


def house_rule(t: TableCoup, shoe_says: str) -> str:
    """The ruling an incident is held for: the house rule the shoe names
    (casino.rules.shoe.house_rule), but between coups no coup is voided (the
    card is set aside, and the table goes on), and the coup that would be
    the table's ``shoe.end_shoe_after``-th voided in a row ends its shoe."""
    if shoe_says == "void" and not t.in_play:
        return "go_on"
    if shoe_says == "void" and t.voids_before + 1 >= t.rules.shoe.end_shoe_after:
        return "end_shoe"
    return shoe_says


def count(w: Dealing, kind: str) -> None:
    if w.metrics is not None:
        w.metrics.card_incidents.labels(w.t.name, kind).inc()


async def key(w: Dealing, cmd: commands.KeyCard) -> None:
    """The dealer keys in the card the shoe could not read (keyed again, the latest stands until confirmed)."""
    t = w.t
    incident = t.incident
    if not _names(t, cmd.coup) or incident is None or incident.kind != "unread":
        if t.recorded(cmd) or t.taken(cmd.id):
            return
        raise RuleViolation(UNREAD, f"coup {cmd.coup} waits for no card the shoe could not read at table {t.name}")
    await w.commit([CardKeyed(t.name, _coup_of(t), incident.read, cmd.card, t.dealer)],
                   commands.write_id(t.place(), cmd.id), cmd.id, commands.digest(cmd))


async def rule(w: Dealing, cmd: commands.Rule) -> None:
    """A supervisor's ruling on the first incident the coup (or, between
    coups, the next coup's opening) is held for: the house rule applied
    (``go_on``: dealt on; ``void``: nothing more dealt, every stake returned;
    ``end_shoe``: void, and the shoe ended), a refused card's or a misplaced
    cut card's shoe ended whatever the house rule, or the card keyed in for
    one the shoe could not read, confirmed and taken as the shoe's report
    would have been."""
    t = w.t
    incident, here, in_coup = t.incident, t.place(), t.in_play
    if not _names(t, cmd.coup) or incident is None:
        if t.recorded(cmd) or t.taken(cmd.id):
            return
        raise RuleViolation(commands.HELD, f"coup {cmd.coup} waits for no ruling at table {t.name}")
    if cmd.read and cmd.read != incident.read:
        raise RuleViolation(commands.HELD, f"coup {here} waits for a ruling on report {incident.read} first, not "
                                           f"{cmd.read}: each incident is ruled in turn")
    if cmd.ruling != incident.house_rule and not (cmd.ruling == "end_shoe" and incident.kind in SHOE_ENDING):
        raise RuleViolation(f"setting {incident.setting}" if incident.setting else UNREAD,
                            f"a card {incident.kind} is ruled {incident.house_rule!r}"
                            + (f" (the house rule, ruleset setting {incident.setting})" if incident.setting else "")
                            + (" or 'end_shoe'" if incident.kind in SHOE_ENDING else "") + f", not {cmd.ruling!r}")
    if cmd.ruling == "confirm" and (not t.keyed or cmd.card != t.keyed):
        raise RuleViolation(UNREAD, f"the dealer has keyed in {t.keyed or 'no card'} for report {incident.read}, "
                                    f"not {cmd.card or 'no card'}: the supervisor confirms the card keyed in")
    if cmd.ruling in ("void", "end_shoe") and in_coup and t.state is not None and t.state.phase == "betting":
        # The stakes a void returns are those placed before it: the book is closed first.
        await w.peer.must(subjects.command(t.name, "book"), commands.CloseBook(f"{t.coup}:close-book", t.name, t.coup))
    w.stage([CoupRuled(t.name, _coup_of(t), incident.read, cmd.ruling, cmd.supervisor, incident.setting)],
              commands.write_id(here, cmd.id), cmd.id, commands.digest(cmd))
    if cmd.ruling == "confirm":
        await _take(w, incident.read, cmd.card, False, KEYED + incident.read, confirmed=True)
    elif cmd.ruling == "go_on" and in_coup:
        await w.advance()
    await w.flush()
    if cmd.ruling == "end_shoe":
        if w.metrics is not None:
            w.metrics.shoes_ended.labels(t.name).inc()
        await end_shoe(w)


async def end_shoe(w: Dealing) -> None:
    """The shoe a ruling ended (``TableCoup.ending_shoe``) ended at the shoe
    service, asked until it is (again at the next opening, where a first
    asking failed): the table then waits for the next shoe's order."""
    t = w.t
    if not t.ending_shoe:
        return
    await w.ask_shoe(commands.EndShoeNow(
        f"{t.name}:end-shoe:{t.ending_shoe}", t.name, t.coup if t.void else "", t.config.ruleset, t.ending_shoe,
        f"setting {t.ending_under}"))
    t.ending_shoe = ""


async def shuffled(w: Dealing) -> None:
    """Whether the machine's order has come since the table last waited for
    one: the shoe service is the one to know (asked only where it waited)."""
    t = w.t
    if t.shuffling:
        await w.ask_shoe(commands.ShoeStatus(f"{t.name}:shoe-status", t.name, t.config.ruleset))


def answered(taken: commands.Reply, now: commands.Reply) -> commands.Reply:
    """The device's answer: what its report was taken as (the coup, the card
    and its position, the incident), and what the table waits for now."""
    return msgspec.structs.replace(now, coup=taken.coup or now.coup, shoe=taken.shoe or now.shoe, cards=taken.cards,
                                   positions=taken.positions, incident=taken.incident, clause=taken.clause,
                                   house_rule=taken.house_rule)
