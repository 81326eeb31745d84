"""A table's cards from a card-reading shoe (docs/readers.md), beside the
shoe service's own draws: each card the shoe reads is checked as it leaves
the shoe, by the coup's rules (is a card due now, for whom) and by the shoe
service (the shoe's composition, the order committed to), and recorded as
what happened: dealt, burned, misdrawn or refused. A coup a card could not
go into is held until a supervisor rules on it, by the house rule; a card
the shoe could not read is keyed in by the dealer and confirmed by a
supervisor, then taken as the shoe's report would have been."""

from __future__ import annotations

from typing import TYPE_CHECKING

from casino.protocol import commands
from casino.rules.errors import RuleViolation
from casino.store import subjects
from casino.store.envelope import KEYED, CardIncident, CardKeyed, CoupRuled

if TYPE_CHECKING:
    from services.dealer_policy.service import DealerPolicyService
    from services.dealer_policy.table import TableCoup

READ = "read:"  # a report's causation in the coup, and its TakeRead's id at the shoe: the device's id follows
CARD_SOURCE = "card source"
UNREAD = "unread card"
# Where a player holds the shoe and draws, a card drawn is drawn "only at the instruction of the dealer".
HOLDER_DRAWS = {"method_c": "000 8.19", "method_d": "000 8.28"}
SETTINGS = {"misdrawn": "shoe.misdraw", "refused": "shoe.refused"}
KINDS = (*SETTINGS, "unread")  # the card incidents a coup is held for


async def report(svc: DealerPolicyService, t: TableCoup,
                 cmd: commands.CardRead | commands.CutCardRead) -> commands.Reply | None:
    """Take one report of the table's card-reading shoe, once however often it
    is sent: the shoe's answer (what the card was taken as: its ``incident``
    and ``clause``, a burn or the cut card where it came), None where the
    coup took it before or holds it as a card the shoe could not read."""
    if not t.config.source:
        raise RuleViolation(CARD_SOURCE, f"table {t.name} is dealt from the shoe service's own shuffle: it takes "
                                         "no card-reading shoe's reports (the tables file says cards = \"shuffled\")")
    await svc.caught_up(t)  # what the card is taken as depends on what the coup waits for: as recorded
    cause = READ + cmd.id
    if cause in t.applied:  # the same report again, taken into the coup already: one card
        return None
    if isinstance(cmd, commands.CardRead) and not cmd.card:
        if t.state is None or t.finished:
            raise RuleViolation(UNREAD, f"report {cmd.id}: the shoe could not read a card, and no coup is being "
                                        "dealt: nothing is recorded")
        await svc.commit(t, [CardIncident(
            t.name, t.coup, "unread", "", cmd.id, UNREAD, f"report {cmd.id}: the shoe could not read the card "
            "drawn; the dealer keys it in, and a supervisor confirms it", "", "confirm")],
            commands.write_id(t.coup, cause), cause, commands.digest(cmd))
        _count(svc, t, "unread")
        return None
    return await _take(svc, t, cmd.id, cmd.card if isinstance(cmd, commands.CardRead) else "",
                isinstance(cmd, commands.CutCardRead), cause, commands.digest(cmd))


async def _take(svc: DealerPolicyService, t: TableCoup, read: str, card: str, cut: bool, cause: str,
                command: str = "") -> commands.Reply:
    """The card (or the cut card) of report ``read`` checked at the shoe (asked
    as the report, however often) and taken into the coup as what it was,
    caused by ``cause``, with the steps staged before it."""
    dealing = t.state is not None and not t.finished
    waits = t.game.waiting(t.rules, t.state) if dealing else None
    due = waits is not None and waits.kind == "card"
    procedure = t.game.procedure(t.state) if t.state is not None else ""
    reply = await svc.peer.must(subjects.command(t.name, "shoe"), commands.TakeRead(
        READ + read, t.name, t.coup if dealing else "", t.config.ruleset, read, card, cut, due,
        HOLDER_DRAWS.get(procedure, "setting shoe.misdraw"), t.config.source))
    if reply.incident in SETTINGS and dealing:
        kind, setting = reply.incident, SETTINGS[reply.incident]
        clause, what = ((reply.reason, f"{card} out of the shoe when no card was due ({reply.reason})")
                        if kind == "misdrawn" else (reply.clause, f"{card} refused: {reply.reason}"))
        house_rule = getattr(t.rules.shoe, setting.split(".")[1])
        svc.stage(t, [CardIncident(t.name, t.coup, kind, card, read, clause, what, setting, house_rule)],
                  commands.write_id(t.coup, cause), cause, command)
        _count(svc, t, kind)
    elif due and not reply.incident and waits is not None:
        deal = t.game.deal(reply.cards[0], reply.positions[0], waits.seat)
        svc.stage(t, svc.decide(t, deal), commands.write_id(t.coup, cause), cause, command)
        await svc.advance(t)
    # Else a burn card, the cut card, or a card out between coups: the shoe's record alone holds it.
    await svc.flush(t)
    return reply


def _count(svc: DealerPolicyService, t: TableCoup, kind: str) -> None:
    if svc.metrics is not None:
        svc.metrics.card_incidents.labels(t.name, kind).inc()


async def key(svc: DealerPolicyService, t: TableCoup, cmd: commands.KeyCard) -> None:
    """The dealer keys in the card the shoe could not read (keyed again, the latest stands until confirmed)."""
    if cmd.coup != t.coup or t.incident is None or t.incident.kind != "unread":
        if t.recorded(cmd):
            return
        raise RuleViolation(UNREAD, f"coup {cmd.coup} waits for no card the shoe could not read at table {t.name}")
    await svc.commit(t, [CardKeyed(t.name, t.coup, t.incident.read, cmd.card, t.dealer)],
                     commands.write_id(t.coup, cmd.id), cmd.id, commands.digest(cmd))


async def rule(svc: DealerPolicyService, t: TableCoup, cmd: commands.Rule) -> None:
    """A supervisor's ruling on the coup held for a card incident: the house
    rule applied (``go_on``: dealt on; ``void``: nothing more dealt, every
    stake returned); or the card keyed in for one the shoe could not read,
    confirmed and taken as the shoe's report would have been."""
    incident = t.incident
    if cmd.coup != t.coup or incident is None:
        if t.recorded(cmd):
            return
        raise RuleViolation(commands.HELD, f"coup {cmd.coup} waits for no ruling at table {t.name}")
    if cmd.ruling != incident.house_rule:
        raise RuleViolation(f"setting {incident.setting}" if incident.setting else UNREAD,
                            f"a card {incident.kind} is ruled {incident.house_rule!r}"
                            + (f" (the house rule, ruleset setting {incident.setting})" if incident.setting else "")
                            + f", not {cmd.ruling!r}")
    if cmd.ruling == "confirm" and (not t.keyed or cmd.card != t.keyed):
        raise RuleViolation(UNREAD, f"the dealer has keyed in {t.keyed or 'no card'} for report {incident.read}, "
                                    f"not {cmd.card or 'no card'}: the supervisor confirms the card keyed in")
    svc.stage(t, [CoupRuled(t.name, t.coup, incident.read, cmd.ruling, cmd.supervisor, incident.setting)],
              commands.write_id(t.coup, cmd.id), cmd.id, commands.digest(cmd))
    if cmd.ruling == "confirm":
        await _take(svc, t, incident.read, cmd.card, False, KEYED + incident.read)
    elif cmd.ruling == "go_on":
        await svc.advance(t)
    await svc.flush(t)
