"""The shoe service's side of a table with a card-reading shoe (docs/readers.md):
the order its shuffling machine reports, kept secret as the service's own
shuffles are (and replaceable until the shoe's first card, each replacement
recorded), each card the shoe reads, checked as it leaves the shoe against
the shoe's composition, the order committed to, and whether the coup's
rules call for a card now, and the shoe ended at once by a supervisor's
ruling where it has left its order."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from msgspec.structs import replace

from casino.protocol.commands import SHUFFLING_MACHINE, EndShoeNow, Reply, ShoeStatus, ShuffleMade, TakeRead, Waiting
from casino.rules import shoe as dealing_shoe
from casino.rules.cards import full_set, same_cards
from casino.rules.errors import RuleViolation
from casino.store import subjects
from services.shoe.carrying import carries, give, given_of
from services.shoe.held import refused_why

if TYPE_CHECKING:
    from services.shoe.held import TableShoe
    from services.shoe.shoes import Shoes

REPORT = "report"  # a report taken in a shoe no longer in play: answered, and nothing more taken
# What each of the shoe's records of a report makes of it, as the reply names it.
INCIDENTS: dict[type, str] = {dealing_shoe.CardBurned: "burned", dealing_shoe.CardMisdrawn: "misdrawn",
                              dealing_shoe.CardRefused: "refused", dealing_shoe.CutCardReached: "cut card",
                              dealing_shoe.CutCardMisplaced: "cut card misplaced"}
RULED = (dealing_shoe.CardMisdrawn, dealing_shoe.CardRefused, dealing_shoe.CutCardMisplaced)


def _answer(t: TableShoe, read: str) -> Reply | None:
    """What report ``read`` was taken as, in the shoe in play or the one
    before it (the same id sent again, whenever): the coup it was drawn for,
    the card and its position, and what else it was (``incident``), with the
    ruling the house rules call for on an incident."""
    events = t.reads.get(read) or t.reads_before.get(read)
    if not events:
        return None
    answer = Reply(True, shoe=events[0].shoe_id)
    if read in t.given:  # the coup's append carries the shoe's record of it
        answer = replace(answer, carried=given_of(t, read))
    for e in events:
        match e:
            case dealing_shoe.CardDrawn():
                answer = replace(answer, coup=e.coup_id, cards=(e.card,), positions=(e.position,))
            case dealing_shoe.CardMisdrawn():
                answer = replace(answer, coup=e.coup_id, reason=e.clause)
            case dealing_shoe.CardRefused():
                answer = replace(answer, coup=e.coup_id, reason=e.why, clause=e.clause)
            case dealing_shoe.CutCardMisplaced():
                answer = replace(answer, reason=_misplaced(e), clause=e.clause)
            case dealing_shoe.CutCardReached() if not answer.incident:
                answer = replace(answer, clause=e.clause)
        if (kind := INCIDENTS.get(type(e))) is not None and not answer.incident:
            answer = replace(answer, incident=kind)
        if isinstance(e, RULED):
            answer = replace(answer, house_rule=dealing_shoe.house_rule(t.rules, t.state, e))
    return answer


def _coup_given(t: TableShoe, read: str) -> str:
    return next((e.coup_id for e in t.reads.get(read, ()) if isinstance(e, dealing_shoe.CardDrawn)), "")


def _misplaced(e: dealing_shoe.CutCardMisplaced) -> str:
    if e.reported:
        return (f"the cut card came out at card {e.position}; the penetration puts it at card {e.cut_index}: it is "
                f"reckoned there")
    return (f"card {e.position} came out from behind the cut card, which the penetration puts at card "
            f"{e.cut_index}, and the cut card was not reported: it is reckoned reached")


async def take(shoes: Shoes, cmd: TakeRead) -> Reply:
    """Record what a card-reading shoe reported: a burn card where one is
    due, the card the coup's rules call for (``due``), a misdraw where none is,
    or a card refused (the coup it came in, or the next, is held by the
    dealer-policy). A report taken before is answered as it was taken.

    A card due (with the round's end, where it completes a run) is given for
    the coup's append to carry (``Reply.carried``), not recorded here: the
    shoe moves on with it, and takes no further report of the coup until the
    coup's record holds it (``TakeRead.after``), answering first with it
    (``Reply.earlier``) for the dealer-policy to record. The shoe never records a card it gave itself: a
    dealer-policy that took it may still record it."""
    t = await shoes.confirmed(cmd.table, await shoes.table(cmd.table, cmd.ruleset), cmd.after, cmd.after_digest)
    if (answered := _answer(t, cmd.read)) is not None:
        return answered
    if t.pending and cmd.coup == _coup_given(t, t.pending):
        return Reply(True, coup=cmd.coup, shoe=t.state.shoe_id or "", earlier=t.pending)
    t = await shoes.settled(cmd.table, t)  # given in a coup that has moved on: in its record, or never
    if not cmd.cut and (t.state.reshuffle == "now" or (t.state.round is not None and not t.state.active)):
        # 003 7.9: the cut card came out first in the round, and the cards are reshuffled before it goes on:
        # the shoe ended and a new one filled with the order the machine made (refused until it reports it).
        await shoes.reshuffle(cmd.table, t, cmd.coup or subjects.NO_COUP, cmd.id)
    if not t.state.active:
        raise t.orders.none_in_play(cmd.table)
    if not t.state.read:
        raise RuleViolation("shoe", f"table {cmd.table}'s shoe in play is the shoe service's own: it takes no card-"
                                    "reading shoe's cards")
    shoe, coup = t.state.shoe_id or "", cmd.coup or subjects.NO_COUP
    events: list[dealing_shoe.AnyShoeEvent]
    if cmd.cut:
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.CutCardOut(), t.document)
    elif (why := refused_why(t, cmd.card)) is not None:
        events = [dealing_shoe.CardRefused(shoe, cmd.coup, cmd.card, cmd.read, why[1], why[0])]
    elif t.state.burns_due:
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.Burn(cmd.card, cmd.read), t.document)
    elif cmd.due:
        if t.state.round != cmd.coup:
            raise RuleViolation(dealing_shoe.ROUND, f"coup {cmd.coup} is not the round being dealt")
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.Draw(cmd.coup, cmd.card, cmd.read), t.document)
        # The coup's last card, of a run: the round ends with it, in the same append.
        events += shoes.run_ended(t, t.state, cmd.coup, cmd.run, cmd.first, cmd.count, cmd.next, drawn=events)
        if carries(t, events):  # the coup's append records it: one durable step a card
            give(t, cmd.read, events, cmd.id)
            answered = _answer(t, cmd.read)
            assert answered is not None
            return answered
    else:
        events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.Misdraw(cmd.coup, cmd.card, cmd.read, cmd.clause),
                                     t.document)
    ack = await shoes.commit(cmd.table, t, events, coup, f"{cmd.table}:read:{cmd.read}", cmd.id)
    if any(isinstance(e, dealing_shoe.RoundEnded) for e in events):
        await shoes.reshuffled_after(cmd.table, t, cmd.id)
    answered = _answer(t, cmd.read)
    if answered is not None and t.state.reshuffle == "now":
        # 003 7.9: the cards are reshuffled now, and the round goes on once the machine reports their order.
        answered = replace(answered, waiting=await awaited(shoes, t, cmd.table))
    if answered is None and ack.duplicate:  # taken in a shoe that has ended since
        raise RuleViolation(REPORT, f"report {cmd.read} was taken in an earlier shoe of table {cmd.table}: nothing "
                                    "more is taken for it")
    if answered is None:  # recorded by another instance as something else: read back above
        raise RuleViolation("concurrency", f"report {cmd.read} was recorded meanwhile: ask again")
    return answered


async def shuffle_made(shoes: Shoes, cmd: ShuffleMade) -> Reply:
    """Keep the order a recognised shuffling machine reports, out of the
    public stream until its shoe ends: the shoe's that waits for one (filled
    with it at once, committed to), else the next shoe's. Until a shoe's
    first card is drawn its order may be replaced: each replacement is
    recorded (``shoe.order_replaced``; a shoe filled already is ended, its
    order revealed, and the next filled). The same order again is answered
    as kept. A table shuffled by hand, or by the service, takes no order."""
    t = shoes.tables.get(cmd.table)
    if t is None:
        raise RuleViolation(SHUFFLING_MACHINE, f"table {cmd.table}'s shoe is not held here yet: its dealer opens a "
                                               "coup first")
    t.orders.takes_orders(cmd.table)
    if not same_cards(cmd.cards, full_set(t.rules.decks)):
        raise RuleViolation(SHUFFLING_MACHINE, f"the order reported is not one full set of the shoe's "
                                               f"{t.rules.decks} decks")
    order, shoe = tuple(cmd.cards), t.state.shoe_id or ""
    if t.state.active and t.state.position == 0 and t.order is not None:  # filled, and no card out of it yet
        if t.order[0] == order:
            return Reply(True, shoe=shoe)
        await shoes.secrets.replace(cmd.table, subjects.shoe_id(cmd.table, t.shuffles + 1),
                                      (order, secrets.token_hex(16)))
        ended = dealing_shoe.decide(t.rules, t.state, dealing_shoe.EndShoe(*t.order), t.document)
        await shoes.commit(cmd.table, t, [dealing_shoe.OrderReplaced(shoe, cmd.id), *ended], subjects.NO_COUP,
                              f"{shoe}:replaced:{cmd.id}", cmd.id)
        await shoes.reshuffle(cmd.table, t, subjects.NO_COUP, cmd.id)
        return Reply(True, shoe=t.state.shoe_id or "", incident="replaced")
    new = subjects.shoe_id(cmd.table, t.shuffles + 1)
    kept = await shoes.secrets.get(cmd.table, new)
    replaced = kept is not None and kept[0] != order
    if kept is None:
        await shoes.secrets.put(cmd.table, new, (order, secrets.token_hex(16)))
    elif replaced:
        await shoes.secrets.replace(cmd.table, new, (order, secrets.token_hex(16)))
    waiting = not t.state.active or t.state.reshuffle == "now" or (t.state.reshuffle and t.state.round is None)
    if waiting:  # the table waits for this order: its shoe filled with it now
        await shoes.reshuffle(cmd.table, t, subjects.NO_COUP, cmd.id, cmd.id if replaced else "")
    elif replaced:  # the next shoe's order, replaced before that shoe is filled
        await shoes.commit(cmd.table, t, [dealing_shoe.OrderReplaced(new, cmd.id)], subjects.NO_COUP,
                              f"{new}:replaced:{cmd.id}", cmd.id)
    return Reply(True, shoe=new, incident="replaced" if replaced else "")


async def end_now(shoes: Shoes, cmd: EndShoeNow) -> Reply:
    """End the shoe ``cmd.shoe`` (or the one report ``cmd.read`` was taken in)
    now, by a supervisor's ruling or the table's closing (docs/readers.md):
    the void coup's cards picked up, the order revealed, and the next shoe
    filled once the machine reports its order (at once where shuffled by
    hand). Asked again once it has ended, it is answered as done."""
    t = await shoes.settled(cmd.table, await shoes.table(cmd.table, cmd.ruleset))
    # Else its shoe has ended (every report of the shoe in play is held).
    in_play = t.state.shoe_id == cmd.shoe if cmd.shoe else cmd.read in t.reads
    if in_play and t.state.active:
        if t.state.reshuffle != "now":
            events = dealing_shoe.decide(t.rules, t.state, dealing_shoe.EndNow(cmd.clause), t.document)
            await shoes.commit(cmd.table, t, events, cmd.coup or subjects.NO_COUP,
                                  f"{t.state.shoe_id}:end-now", cmd.id)
        await _reshuffled(shoes, t, cmd.table, cmd.coup or subjects.NO_COUP, cmd.id)
    return Reply(True, coup=cmd.coup, shoe=t.state.shoe_id or "", waiting=await awaited(shoes, t, cmd.table))


async def status(shoes: Shoes, cmd: ShoeStatus) -> Reply:
    """The shoe in play, and whether the table waits for its machine's order (``awaited``)."""
    t = await shoes.table(cmd.table, cmd.ruleset)
    return Reply(True, shoe=t.state.shoe_id or "", waiting=await awaited(shoes, t, cmd.table))


async def awaited(shoes: Shoes, t: TableShoe, table: str) -> Waiting | None:
    """``Waiting`` ``shuffle`` where the table's recognised shuffling machine's
    order of the next shoe is awaited: the shoe in play has ended or must be
    reshuffled now, and no order is kept for the next."""
    if t.state.active and t.state.reshuffle != "now":
        return None
    return await t.orders.awaited(shoes.secrets, table, subjects.shoe_id(table, t.shuffles + 1))


async def _reshuffled(shoes: Shoes, t: TableShoe, table: str, coup: str, causation: str) -> None:
    """The shoe in play ended and the next filled (``_reshuffle``), unless
    the next waits for its shuffling machine's order (``awaited``)."""
    try:
        await shoes.reshuffle(table, t, coup, causation)
    except RuleViolation as exc:
        if exc.clause != SHUFFLING_MACHINE:
            raise
