"""A table's cards from a card-reading shoe (docs/readers.md), beside the
shoe service's own draws: each card the shoe reads is checked as it leaves
the shoe, by the coup's rules (is a card due now, for whom) and by the shoe
service (the shoe's composition, the order committed to), and recorded as
what happened: dealt, burned, misdrawn or refused. A coup a card could not
go into is held until a supervisor rules on it, by the house rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from casino.protocol import commands
from casino.rules.errors import RuleViolation
from casino.store import subjects
from casino.store.envelope import CardIncident, CoupRuled

if TYPE_CHECKING:
    from services.dealer_policy.service import DealerPolicyService
    from services.dealer_policy.table import TableCoup

READ = "read:"  # a report's causation in the coup, and its TakeRead's id at the shoe: the device's id follows
CARD_SOURCE = "card source"
UNREAD = "unread card"
# Where a player holds the shoe and draws, a card drawn is drawn "only at the instruction of the dealer".
HOLDER_DRAWS = {"method_c": "000 8.19", "method_d": "000 8.28"}
SETTINGS = {"misdrawn": "shoe.misdraw", "refused": "shoe.refused"}


async def report(svc: DealerPolicyService, t: TableCoup, cmd: commands.CardRead | commands.CutCardRead) -> None:
    """Take one report of the table's card-reading shoe, once however often it is sent."""
    if not t.config.source:
        raise RuleViolation(CARD_SOURCE, f"table {t.name} is dealt from the shoe service's own shuffle: it takes "
                                         "no card-reading shoe's reports (the tables file says cards = \"shuffled\")")
    cause = READ + cmd.id
    if cause in t.applied:  # the same report again, taken into the coup already: one card
        return
    if isinstance(cmd, commands.CardRead) and not cmd.card:
        raise RuleViolation(UNREAD, f"report {cmd.id}: the shoe could not read the card; nothing is recorded and "
                                    "the coup waits for the card")
    dealing = t.state is not None and not t.finished
    waits = t.game.waiting(t.rules, t.state) if dealing else None
    due = waits is not None and waits.kind == "card"
    procedure = t.game.procedure(t.state) if t.state is not None else ""
    reply = await svc.peer.must(subjects.command(t.name, "shoe"), commands.TakeRead(
        cause, t.name, t.coup if dealing else "", t.config.ruleset, cmd.id,
        cmd.card if isinstance(cmd, commands.CardRead) else "", isinstance(cmd, commands.CutCardRead), due,
        HOLDER_DRAWS.get(procedure, "setting shoe.misdraw")))
    if reply.incident in SETTINGS and dealing:
        await _incident(svc, t, cmd, reply)
    elif due and not reply.incident and waits is not None:
        deal = t.game.deal(reply.cards[0], reply.positions[0], waits.seat)
        svc.stage(t, svc._decide(t, deal), commands.write_id(t.coup, cause), cause, commands.digest(cmd))
        await svc.advance(t)
    # Else a burn card, the cut card, or a card out between coups: the shoe's record alone holds it.


async def _incident(svc: DealerPolicyService, t: TableCoup, cmd: commands.CardRead | commands.CutCardRead,
                    reply: commands.Reply) -> None:
    """The coup held for a card it could not take, as the shoe recorded it."""
    kind, setting = reply.incident, SETTINGS[reply.incident]
    card = cmd.card if isinstance(cmd, commands.CardRead) else ""
    if kind == "misdrawn":
        clause, what = reply.reason, f"{card} out of the shoe when no card was due ({reply.reason})"
    else:
        clause, what = reply.clause, f"{card} refused: {reply.reason}"
    house_rule = getattr(t.rules.shoe, setting.split(".")[1])
    await svc.commit(t, [CardIncident(t.name, t.coup, kind, card, cmd.id, clause, what, setting, house_rule)],
                      commands.write_id(t.coup, READ + cmd.id), READ + cmd.id, commands.digest(cmd))
    if svc.metrics is not None:
        svc.metrics.card_incidents.labels(kind).inc()


async def rule(svc: DealerPolicyService, t: TableCoup, cmd: commands.Rule) -> None:
    """A supervisor's ruling on the coup held for a card incident: the house
    rule applied (``go_on``: dealt on; ``void``: nothing more dealt, every stake returned)."""
    incident = t.incident
    if cmd.coup != t.coup or incident is None:
        if t.recorded(cmd):
            return
        raise RuleViolation(commands.HELD, f"coup {cmd.coup} waits for no ruling at table {t.name}")
    if cmd.ruling != incident.house_rule:
        raise RuleViolation(f"setting {incident.setting}", f"the house rule for a card {incident.kind} is "
                            f"{incident.house_rule!r} (ruleset setting {incident.setting}), not {cmd.ruling!r}")
    await svc.commit(t, [CoupRuled(t.name, t.coup, incident.read, cmd.ruling, cmd.supervisor, incident.setting)],
                      commands.write_id(t.coup, cmd.id), cmd.id, commands.digest(cmd))
    if cmd.ruling == "go_on":
        await svc.advance(t)
