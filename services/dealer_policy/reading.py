"""A table's cards from a card-reading shoe (docs/readers.md), beside the
shoe service's own draws: each card the shoe reads is checked as it leaves
the shoe, by the coup's rules (is a card due now, for whom) and by the shoe
service (the shoe's composition, the order committed to), and recorded as
what happened: dealt, burned, misdrawn or refused. A card the coup could not
take is an incident, and every report, key, ruling and reopening is decided
by the incidents' rules (casino.rules.incidents): it holds the coup until a
supervisor rules on it, each further incident in turn; one out between coups
holds the next coup's opening, and is recorded in that coup's record before
it opens, under the shoe the card came from. A card the shoe could not read
is keyed in by the dealer on duty and confirmed by a supervisor, then taken
as the shoe's report would have been. A report is taken once, whenever it is
sent again: the shoe answers what it was taken as, and a card drawn for one
coup is never dealt into another. A table its incidents close takes no
report (each is counted) until a supervisor reopens it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from casino.protocol import commands
from casino.rules import incidents
from casino.rules.errors import RuleViolation
from casino.rules.incidents import UNREAD, CardIncident, TableClosed
from casino.rules.shoe import ROUND
from casino.store import subjects
from casino.store.envelope import KEYED, READ, AnyEvent, CoupHeld
from services.dealer_policy import table
from services.dealer_policy.dealing import Dealing

if TYPE_CHECKING:
    from services.dealer_policy.table import TableCoup

# Where a player holds the shoe and draws, a card drawn is drawn "only at the instruction of the dealer".
HOLDER_DRAWS = {"method_c": "000 8.19", "method_d": "000 8.28"}
# What the shoe's answer names an incident, as the coup records it (casino.rules.incidents.KINDS).
INCIDENTS = {"misdrawn": "misdrawn", "refused": "refused", "cut card misplaced": "cut_card"}
MOST_COUNTED = 10_000  # reports told apart by id while a table is closed: the count its reopening records, at most


async def report(w: Dealing, cmd: commands.CardRead | commands.CutCardRead) -> commands.Reply | None:
    """Take one report of the table's card-reading shoe, once however often it
    is sent: the shoe's answer (what the card was taken as: the coup it was
    drawn for, its ``incident`` and ``clause``), None where it is recorded
    already where a card now goes, or holds the coup as a card the shoe could
    not read. A closed table counts the report and takes nothing."""
    t = w.t
    t.cards.reports(t.name)  # refused where the table takes no card-reading shoe's reports
    await w.caught_up()  # what the card is taken as depends on what the coup waits for: as recorded
    cause = READ + cmd.id
    if t.taken(cause):  # the same report again, taken where a card now goes already: one card
        return None
    if t.incidents.closed and cmd.id not in t.while_closed:
        if len(t.while_closed) < MOST_COUNTED:
            t.while_closed.add(cmd.id)
        count(w, "while_closed")
    incidents.reports_taken(t.incidents, t.name)
    if isinstance(cmd, commands.CardRead) and not cmd.card:
        shoe = await _shoe_in_play(w)
        await _incident(w, incidents.Report(
            t.name, _coup_of(t), "unread", "", cmd.id, UNREAD, f"report {cmd.id}: the shoe could not read the card "
            "drawn; the dealer keys it in, and a supervisor confirms it", shoe), cause, commands.digest(cmd))
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


async def _shoe_in_play(w: Dealing) -> str:
    """The shoe a card now comes from, as the shoe service names it (refused where none is in play)."""
    t = w.t
    reply = await w.ask_shoe(commands.ShoeStatus(f"{t.name}:shoe-status", t.name, t.config.ruleset))
    if not reply.shoe or (reply.waiting is not None and reply.waiting.kind == "shuffle"):
        raise RuleViolation(commands.SHUFFLING_MACHINE, f"table {t.name} has no shoe in play: its shuffling "
                                                        "machine's order of the next is awaited")
    return reply.shoe


async def _incident(w: Dealing, report: incidents.Report, cause: str, command: str) -> CardIncident:
    """Record an incident as the incidents' rules decide it (the table closed
    with it, where they say so: the coup in play held for compliance, and the
    shoe ended), filed under the shoe its card came from."""
    t = w.t
    events = incidents.decide(t.rules.shoe, t.incidents, report)
    closed = next((e for e in events if isinstance(e, TableClosed)), None)
    held = [CoupHeld(t.name, t.coup, 0, f"the table was closed: {closed.reason}")] if closed and closed.coup else []
    await w.commit([*events, *held], commands.write_id(t.place(), cause), cause, command, shoe=report.shoe)
    count(w, report.kind)
    if closed is not None:
        if w.metrics is not None:
            w.metrics.tables_closed.labels(t.name, closed.clause).inc()
        await end_shoe(w)
    return next(e for e in events if isinstance(e, CardIncident))


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
    if not t.in_play and not t.stopped and t.state is not None:  # between coups: the last round's cards picked up
        await w.end_round()
    step = t.game.next_step(t.rules, t.state) if t.in_play and (confirmed or not t.finished) else None
    due = step is not None and step.kind == "draw"
    take = commands.TakeRead(READ + read, t.name, here, t.config.ruleset, read, card, cut, due,
                             HOLDER_DRAWS.get(t.procedure, "setting shoe.misdraw"), after=t.last_read,
                             after_digest=t.after_digest)
    if due and step is not None and step.run is not None:  # a run's card: the coup's last may end its round
        take = msgspec.structs.replace(take, run=step.run, first=step.first, count=step.due, next=t.next_coup)
    reply = await _at_the_shoe(w, take)
    if reply.earlier:  # a card the shoe gave the coup before, not in its record: recorded first, then this one
        await _take(w, reply.earlier, "", False, READ + reply.earlier)
        return await _take(w, read, card, cut, cause, command, confirmed)
    if reply.coup and reply.coup != here:  # taken before, in another coup (a report sent again late)
        return reply
    # The shoe's record of the card, where the coup's append carries it, and the card dealt: one append.
    steps: list[AnyEvent] = list(reply.carried)
    if reply.cards and due and step is not None:
        steps += w.decide(t.game.deal(reply.cards[0], reply.positions[0], step.waiting.seat))
    if steps:
        w.stage(steps, commands.write_id(here, cause), cause, command)
    if (kind := INCIDENTS.get(reply.incident)) is not None:
        incident = await _incident(w, incidents.Report(
            t.name, _coup_of(t), kind, card, read, reply.reason if kind == "misdrawn" else reply.clause,
            _what(kind, card, reply.reason), reply.shoe, reply.house_rule, due), cause, command)
        return msgspec.structs.replace(reply, house_rule=incident.house_rule)
    if reply.cards and due:  # the dealer's steps after it, or, where it finished the coup, the round's end asked
        await w.advance()
    # Else a burn card, the cut card where it belongs, or a card taken before: the shoe's record holds it.
    await w.flush()
    return reply


async def _at_the_shoe(w: Dealing, take: commands.TakeRead) -> commands.Reply:
    """The shoe's check of a card: a round it does not deal for a card due is a fault, held for compliance."""
    try:
        return await w.ask_shoe(take)
    except RuleViolation as exc:
        if exc.clause == ROUND and take.due:
            table.refused(w.t, f"the shoe refused the coup's card: {exc.reason}")
        raise


def _what(kind: str, card: str, reason: str) -> str:
    """An incident in words, as the shoe's answer gives its reason."""
    if kind == "misdrawn":
        return f"{card} out of the shoe when no card was due ({reason})"
    return f"{card} refused: {reason}" if kind == "refused" else f"the cut card: {reason}"


def count(w: Dealing, kind: str) -> None:
    if w.metrics is not None:
        w.metrics.card_incidents.labels(w.t.name, kind).inc()


async def key(w: Dealing, cmd: commands.KeyCard) -> None:
    """The dealer on duty keys in the card the shoe could not read (keyed again, the latest stands until confirmed)."""
    t = w.t
    if t.recorded(cmd) or t.taken(cmd.id):
        return
    if not _names(t, cmd.coup):
        raise RuleViolation(UNREAD, f"coup {cmd.coup} waits for no card the shoe could not read at table {t.name}")
    events = incidents.decide(t.rules.shoe, t.incidents, incidents.Key(t.name, _coup_of(t), cmd.card,
                                                                       cmd.dealer or t.dealer))
    first = t.incident
    await w.commit(list(events), commands.write_id(t.place(), cmd.id), cmd.id, commands.digest(cmd),
                   shoe=first.shoe if first is not None else "")


async def rule(w: Dealing, cmd: commands.Rule) -> None:
    """A supervisor's ruling on the first incident the coup (or, between
    coups, the next coup's opening) is held for, as the incidents' rules
    allow it (``go_on``: dealt on; ``void``: nothing more dealt, every stake
    returned, whatever is queued behind it; ``end_shoe``: void, and the shoe
    ended), or the card keyed in for one the shoe could not read, confirmed
    and taken as the shoe's report would have been."""
    t = w.t
    if t.recorded(cmd) or t.taken(cmd.id):
        return
    if not _names(t, cmd.coup):
        raise RuleViolation(incidents.IN_TURN, f"coup {cmd.coup} waits for no ruling at table {t.name}")
    first, here, in_coup = t.incident, t.place(), t.in_play
    events = incidents.decide(t.rules.shoe, t.incidents, incidents.Rule(t.name, _coup_of(t), cmd.ruling,
                                                                        cmd.supervisor, cmd.card, cmd.read))
    assert first is not None  # else refused: nothing awaits a ruling
    if cmd.ruling in ("void", "end_shoe") and in_coup and t.state is not None and t.state.phase == "betting":
        # The stakes a void returns are those placed before it: the book is closed first.
        await w.peer.must(subjects.command(t.name, "book"), commands.CloseBook(f"{t.coup}:close-book", t.name, t.coup,
                                                                               void=True))
    w.stage(list(events), commands.write_id(here, cmd.id), cmd.id, commands.digest(cmd), shoe=first.shoe)
    if cmd.ruling == "confirm":
        await _take(w, first.read, cmd.card, False, KEYED + first.read, confirmed=True)
    elif in_coup and not t.finished:  # dealt on, where nothing else holds it
        await w.advance()
    await w.flush()
    if cmd.ruling == "end_shoe":
        if w.metrics is not None:
            w.metrics.shoes_ended.labels(t.name).inc()
        await end_shoe(w)


async def reopen(w: Dealing, cmd: commands.ReopenTable) -> None:
    """A supervisor reopens the table its incidents closed: recorded with the
    count of the reports it took meanwhile, once its shoe is ended (the
    table then waits for the next shoe's order)."""
    t = w.t
    if t.recorded(cmd) or t.taken(cmd.id):
        return
    await end_shoe(w)
    events = incidents.decide(t.rules.shoe, t.incidents, incidents.Reopen(t.name, cmd.supervisor,
                                                                          len(t.while_closed)))
    await w.commit(list(events), commands.write_id(t.place(), cmd.id), cmd.id, commands.digest(cmd),
                   shoe=t.incidents.closed_shoe)
    t.while_closed = set()


async def end_shoe(w: Dealing) -> None:
    """The shoe a ruling or the table's closing ended (``Incidents.to_end``)
    ended at the shoe service, asked until it is (again at the next opening,
    where a first asking failed): the table then waits for the next shoe's order."""
    t = w.t
    to_end = t.incidents.to_end
    if to_end is None or to_end == t.end_asked:
        return
    await w.ask_shoe(commands.EndShoeNow(
        f"{t.name}:end-shoe:{to_end.read or to_end.shoe}", t.name, t.coup if t.stopped else "", t.config.ruleset,
        to_end.read, to_end.clause, to_end.shoe))
    t.end_asked = to_end


async def shuffled(w: Dealing) -> None:
    """Whether the machine's order has come since the table last waited for
    one: the shoe service is the one to know (asked only where it waited,
    and not already in this unit of work). Asked before every answer that
    would say the table waits for it: an instance that learnt so long ago,
    while another dealt on since (the table moved between them), would
    otherwise have the devices shuffle a shoe in the middle of a coup."""
    t = w.t
    if t.shuffling and not w.shoe_heard:
        await w.ask_shoe(commands.ShoeStatus(f"{t.name}:shoe-status", t.name, t.config.ruleset))


def answered(taken: commands.Reply, now: commands.Reply) -> commands.Reply:
    """The device's answer: what its report was taken as (the coup, the card
    and its position, the incident), and what the table waits for now."""
    return msgspec.structs.replace(now, coup=taken.coup or now.coup, shoe=taken.shoe or now.shoe, cards=taken.cards,
                                   positions=taken.positions, incident=taken.incident, clause=taken.clause,
                                   house_rule=taken.house_rule)
