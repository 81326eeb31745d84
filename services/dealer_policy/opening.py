"""A table's next coup opened: an opening applied once however often it is
asked, the coup before ended at the shoe (a held coup recorded as held
first), the table's ruleset recorded where the record does not hold it yet,
and the new coup recorded: its wager book follows from the record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from casino.config import rulesets
from casino.protocol import commands
from casino.protocol.service import log
from casino.rules import incidents
from casino.rules.errors import RuleViolation
from casino.rules.shoe import ROUND
from casino.store import subjects
from casino.store.envelope import OPENINGS_KEPT, AnyEvent, CoupConfigured, CoupHeld, RulesetRecorded
from services.dealer_policy import reading, table
from services.dealer_policy.dealing import Dealing

if TYPE_CHECKING:
    from services.dealer_policy.table import TableCoup


async def open_coup(w: Dealing, cmd: commands.OpenCoup) -> None:
    """Open the table's next coup for ``cmd``, or answer a retry of the opening with the coup it opened."""
    t = w.t
    if t.state is not None and t.recorded(cmd):
        # A retry: answered with the coup it opened, even once another terminal has dealt that coup
        # to its end, never by opening another.
        return
    if (earlier := opened_earlier(t, cmd.id)) is not None:
        raise RuleViolation("command id", f"command id {cmd.id} opened coup {earlier} already, and "
                            f"{t.coup} has opened since: a new coup takes a new command id")
    if not cmd.number:
        raise RuleViolation("protocol", f"an opening names the number of the coup it opens: table {t.name}'s next "
                                        f"is {t.number + 1}")
    if cmd.number != t.number + 1:
        raise RuleViolation("coup", f"command id {cmd.id} opens coup number {cmd.number}, and the table's "
                            f"next is {t.number + 1} ({t.coup or 'no coup'} the latest): a new coup "
                            "takes a new command id")
    if t.incidents.closed:
        raise RuleViolation(incidents.CLOSED, f"table {t.name} is closed ({t.incidents.closed}): a supervisor "
                                              "reopens it (table.reopen) before its next coup")
    if not t.finished:
        raise RuleViolation("coup", f"coup {t.coup} is still being dealt")
    if (incident := t.incident) is not None:
        raise RuleViolation(commands.HELD, f"coup {t.place()} is held for a supervisor's ruling on report "
                                           f"{incident.read} ({incident.what})"
                            + ("" if t.in_play else ", a card out of the shoe before it opened"))
    await _open(w, cmd)


def opened_earlier(t: TableCoup, command_id: str) -> str | None:
    """The coup before the latest that ``command_id`` opened, among those
    the latest coup's record names (an opening is applied once, asked
    again whenever); None if it opened none of them."""
    digest_ = commands.id_digest(command_id)
    for back, opened in enumerate(t.openings[1:], start=1):
        if opened == digest_:
            return f"{t.name}-{t.number - back:06d}"
    return None


async def _open(w: Dealing, cmd: commands.OpenCoup) -> None:
    t = w.t
    if forged := [a for a in cmd.approvals if not a.held_by(t.config.approvals)]:
        # An approval is the casino's (its tables file), never a terminal's say-so.
        raise RuleViolation("approvals", f"{forged[0].what} approved by {forged[0].by} {forged[0].reference} is "
                                         f"not among table {t.name}'s approvals in the casino's configuration")
    number = t.number + 1
    coup = f"{t.name}-{number:06d}"
    carry = table.carry_from(t)
    # Refused before the shoe is asked anything, so that a refused opening writes nothing (the style
    # in force on a card shoe, 001 8.5, is checked once the round names the shoe it is dealt from).
    t.game.decide(t.rules, t.game.new(), t.game.opening(t.rules, t.config, coup, cmd.procedure, carry, "",
                                                        cmd.supervisor))
    # The last coup's round ends at the shoe before the next starts: most often the shoe started
    # this coup's round as it ended the last (docs/clauses.md, "The next round"), else it starts it now.
    await reading.end_shoe(w)  # a shoe a ruling ended, where the shoe service has not ended it yet
    ended = None
    if not t.stopped and t.state is not None:
        try:
            ended = await w.end_round()
        except RuleViolation as exc:  # the shoe refuses the round the record holds: a fault, held for compliance
            if exc.clause != ROUND:
                raise
            table.refused(t, f"the shoe refused its round's end: {exc.reason}")
    if t.stopped:  # held for compliance, or void
        await _end_held(w)
    # The round the shoe started as the last ended, unless its shoe may have ended since (a ruling, a closing,
    # or its cut card out between coups: the round is then the next shoe's, as the shoe answers asked again).
    moved = t.shuffling or t.incidents.to_end is not None or (ended is not None and ended.shoe not in ("", t.shoe_seen))
    start = ended if ended is not None and ended.coup == coup and not moved else await w.ask_shoe(
        commands.StartRound(f"{coup}:start", t.name, coup, t.config.ruleset, t.last_read, unrecorded=True,
                            after_digest=t.after_digest))
    opening = t.game.opening(t.rules, t.config, coup, cmd.procedure, carry, start.shoe, cmd.supervisor)
    recorded = await _record_ruleset(w)
    voids_before, ruled_ended = incidents.carried(t.incidents, start.shoe)
    events: list[AnyEvent] = [CoupConfigured(t.name, t.game.name, t.config.ruleset, recorded, number,
                                             t.openings[:OPENINGS_KEPT], t.config.currency,
                                             t.config.supervisors, cmd.dealer or t.dealer, t.dealer,
                                             voids_before, start.shoe, ruled_ended)]
    events += t.game.decide(t.rules, t.game.new(), opening)  # refused here: nothing has changed
    w.repository.keep(t, wide=True)  # the coup before, put back if the opening is not recorded
    table.next_coup(t)
    t.coup, t.shoe = coup, start.shoe
    if t.prelude_of != coup:
        t.prelude, t.prelude_of = {}, ""
    # The id names the table and the command, not the coup: another instance opening this number for
    # another command loses the race (the guard), and this command written once opens no other coup.
    w.repository.stage(t, events, commands.opening_id(t.name, cmd.id), cmd.id, commands.digest(cmd))
    if start is not ended and start.carried:  # the round's start at the shoe, carried in the opening's append
        w.repository.stage(t, list(start.carried), f"{coup}:started", f"{coup}:start")
    t.staged.opening = cmd.id
    # Answered once recorded: the coup's wager book follows from this record (the wager service opens it
    # with the book's first fact, services.wager), not from a request the answer would wait for.
    await w.flush()


async def _end_held(w: Dealing) -> None:
    """A held coup recorded as held (``coup.held``; a void one is recorded
    void), and its round ended at the shoe with the cards the shoe drew for
    it, in the order drawn (a house rule: docs/clauses.md, "A coup held for
    compliance"), whatever round the shoe is dealing (a round it never
    started for the coup, or an earlier coup's left open), so that the table
    goes on with its next coup."""
    t = w.t
    if t.held and not t.held_recorded:
        await w.commit([CoupHeld(t.name, t.coup, t.held_seq, t.held)], f"{t.coup}:held", f"{t.coup}:held")
    reply = await w.peer.ask(subjects.command(t.name, "shoe"), commands.EndRound(
        f"{t.coup}:end", t.name, t.coup, t.config.ruleset, (), held=True, after=t.last_read,
        after_digest=t.after_digest))
    if not reply.ok:
        log.warning("table %s: held coup %s's round not ended at the shoe (%s)", t.name, t.coup, reply.reason)


async def _record_ruleset(w: Dealing) -> str:
    """The digest of the table's ruleset, its full content recorded at the
    table first if the table's last recorded ruleset is not this one (the
    first coup, or the file changed): the record says what every coup was
    dealt under without our files. Another instance recording it at the
    same moment fails the append's guard, and the command is decided again."""
    t = w.t
    digest_ = rulesets.digest_of(t.rules)
    if t.ruleset_recorded == digest_:
        return digest_
    subject = subjects.event(t.name, "", "", "ruleset")
    last = await w.store.last(subject)
    latest = last.batch.events[-1].data if last is not None and last.batch.events else None
    if not (isinstance(latest, RulesetRecorded) and latest.digest == digest_):
        after = last.seq if last is not None else 0
        await w.record_aside(subject, [RulesetRecorded(t.name, t.config.ruleset, digest_, rulesets.content(t.rules))],
                             expected=after, msg_id=f"{t.name}:ruleset:{after}:{digest_}",
                             causation=f"{t.name}:ruleset:{digest_}")
    t.ruleset_recorded = digest_
    return digest_
