"""What a table's coup leaves to the next, held against the next coup's
opening: the shoe holder and the procedure in force, the openings before it
and who dealt it, and its card-reading shoe's incidents (the coups voided in
a row, a shoe a ruling ended), each decided again from the record of the
coup before, never from what the opening itself says."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from casino import games
from casino.audit.findings import Finding
from casino.protocol.commands import id_digest
from casino.rules import incidents
from casino.rules.incidents import Incidents
from casino.store import subjects
from casino.store.envelope import NOT_OF_THE_GAME, OPENINGS_KEPT, AnyEvent, CoupConfigured
from casino.store.eventstore import Stored


class Left(msgspec.Struct):
    """What a table's latest verified coup left to the next: its number, the
    seat and the player holding the shoe into the next coup (000 8.18), the
    procedure in force (000 8.2, 001 8.5) where its game could be followed
    (``dealt``), the openings the next coup's record must name (its own and
    those before it), who dealt it, the ruleset it was dealt under, and its
    card-reading shoe's incidents as it left them (casino.rules.incidents)."""

    number: int
    dealt: bool = False
    holder: int | None = None
    holder_player: str = ""
    procedure: str = ""
    openings: tuple[str, ...] = ()
    dealer: str = ""
    ruleset: str = ""
    digest: str = ""
    incidents: Incidents = Incidents()


# What each table's latest verified coup left to the next, by table.
Carried = dict[str, Left]


def _holding(seat: int | None, player: str) -> str:
    return "nobody" if seat is None else f"seat {seat}" + (f" ({player})" if player else "")


def carried_over(stored: list[Stored], carried: Carried) -> list[Finding]:
    """What a coup was opened with against what its table's previous coup
    left, decided again from the record of the coup before, not from what the
    opening itself says: the shoe holder, seat and player (000 8.18: the
    holder keeps the shoe until he passes it, loses, or is directed to forfeit
    it; 8.15, 8.20), the procedure in force (000 8.2, 001 8.5; recorded
    since ``baccarat.coup_opened`` version 3: deciding the opening again
    refuses a change no supervisor directed), and what its card-reading
    shoe's incidents left (the coups voided in a row, a shoe a ruling ended:
    casino.rules.incidents.carried). ``carried`` is updated with this coup
    (with what was filed before its opening alone, where its record here
    holds nothing more); a coup whose previous coup was not verified before
    it (the first of a window or of a file) is checked against nothing."""
    msgs = sorted(stored, key=lambda m: m.seq)
    envelopes = [(m.seq, subjects.tokens(m.subject)[1], e) for m in msgs if subjects.tokens(m.subject)[3] == "coup"
                 for e in m.batch.events]
    events = [(seq, e.data) for seq, _, e in envelopes]
    table = subjects.tokens(msgs[0].subject)[0] if msgs else ""
    before = carried.get(table)
    configured_at = next(((seq, shoe_token, e) for seq, shoe_token, e in envelopes
                          if isinstance(e.data, CoupConfigured)), None)
    if configured_at is None:  # what was filed before an opening alone: carried_before_opening
        return []
    configured_seq, opened_in, configured_envelope = configured_at
    filed_as = subjects.tokens(msgs[0].subject)[2]  # the coup whose record holds it, whatever its events name
    configured = configured_envelope.data
    assert isinstance(configured, CoupConfigured)
    opened_by = id_digest(configured_envelope.causation)
    findings = []
    if opened_by in configured.opened_before:  # a command applied twice
        findings.append(Finding(filed_as, configured_seq, f"the coup was opened by command "
                                f"{configured_envelope.causation}, which had opened an earlier coup of the table"))
    findings += off_roster(filed_as, configured, events)
    known = before if before is not None and before.number == configured.coup_number - 1 else None
    at_opening = _through(known.incidents if known is not None else Incidents(),
                          [(seq, e) for seq, e in events if seq < configured_seq])
    if known is not None:
        findings += _left_before(filed_as, configured_seq, configured, known, events)
        findings += _incidents_carried(filed_as, configured_seq, configured, opened_in, at_opening)
    carried[table] = _leaves(configured, opened_by, events, _through(
        at_opening, [(seq, e) for seq, e in events if seq >= configured_seq], opened_in))
    return findings


def carried_before_opening(stored: list[Stored], carried: Carried) -> None:
    """``carried`` updated with the part of a coup's record filed before its
    opening under a shoe it did not open from (``readings.before_opening_only``):
    the incidents it holds, between the coup before and that opening."""
    table = subjects.tokens(stored[0].subject)[0] if stored else ""
    if (before := carried.get(table)) is not None:
        events = [(m.seq, e.data) for m in sorted(stored, key=lambda m: m.seq)
                  if subjects.tokens(m.subject)[3] == "coup" for e in m.batch.events]
        carried[table] = msgspec.structs.replace(before, incidents=_through(before.incidents, events))


def _left_before(coup: str, seq: int, configured: CoupConfigured, known: Left,
                 events: list[tuple[int, AnyEvent]]) -> list[Finding]:
    """A coup's opening against what the coup before it left (``known``):
    the openings it names, the dealer before it, and (where the coup before's
    game could be followed) the shoe holder and the procedure in force."""
    findings = []
    if configured.opened_before and configured.opened_before != known.openings[:len(configured.opened_before)]:
        findings.append(Finding(coup, seq, "the coup's record does not name the "
                                "openings of the coups before it as their records do"))
    if (configured.dealer or configured.dealer_before) and configured.dealer_before != known.dealer:
        findings.append(Finding(coup, seq, f"the coup names "
                                f"{configured.dealer_before or 'nobody'} as the dealer before it, but the coup before "
                                f"was dealt by {known.dealer or 'nobody signed in'}"))
    opening = next(((seq, e) for seq, e in events if not isinstance(e, NOT_OF_THE_GAME)), None)
    if opening is None or not known.dealt:
        return findings
    at, opened = opening
    seat, player = getattr(opened, "shoe_holder", None), getattr(opened, "shoe_holder_player", "")
    if seat != known.holder or (player and known.holder_player and player != known.holder_player):
        findings.append(Finding(coup, at, f"the coup opened with the shoe held by {_holding(seat, player)}, "
                                f"but the coup before left it with {_holding(known.holder, known.holder_player)} "
                                f"(000 8.18)"))
    in_force = getattr(opened, "in_force", "")
    if in_force and known.procedure and in_force != known.procedure:
        findings.append(Finding(coup, at, f"the coup opened with {in_force} in force, but the coup before "
                                f"was dealt by {known.procedure} "
                                f"({'000 8.2' if in_force.startswith('method') else '001 8.5'})"))
    return findings


def _leaves(configured: CoupConfigured, opened_by: str, events: list[tuple[int, AnyEvent]],
            after: Incidents) -> Left:
    """What a coup leaves to the next: its game's carry where its rules can
    follow it (not where it is held, or is no dealer's record), and the rest."""
    left = Left(configured.coup_number, openings=(opened_by, *configured.opened_before)[:OPENINGS_KEPT],
                dealer=configured.dealer, ruleset=configured.ruleset, digest=configured.ruleset_digest,
                incidents=after)
    game = games.named(configured.game)
    state: Any = game.new()
    try:
        for _, e in events:
            if not isinstance(e, NOT_OF_THE_GAME):
                state = game.evolve(state, e)
        carry = game.carry(state, "", games.Carry())
    except Exception:  # a coup its rules cannot follow: its game checks nothing next
        return left
    return msgspec.structs.replace(left, dealt=True, holder=carry.holder, holder_player=carry.holder_player,
                                   procedure=carry.procedure)


def _through(state: Incidents, events: Iterable[tuple[int, object]], shoe: str = "") -> Incidents:
    """The table's incidents after ``events`` (a coup's opening on ``shoe`` among them)."""
    for _, e in events:
        if isinstance(e, CoupConfigured):
            state = incidents.opened(state, e.shoe or shoe, e.voids_before, e.ruled_ended)
        elif isinstance(e, incidents.EVENTS):
            state = incidents.evolve(state, e)
    return state


def _incidents_carried(coup: str, seq: int, configured: CoupConfigured, shoe_token: str,
                       state: Incidents) -> list[Finding]:
    """What a coup's opening records of its table's incidents against what the
    record leaves it (casino.rules.incidents.carried): the coups voided in a
    row before it, and a shoe a ruling ended before its shoe. Before version
    7 of ``coup.configured`` the voids were counted on one shoe: none after a
    ruling ended it."""
    voids, ruled_ended = incidents.carried(state, configured.shoe or shoe_token)
    if not configured.shoe and state.to_end is not None and state.to_end.read:
        voids = 0
    findings = []
    if configured.voids_before != voids:
        findings.append(Finding(coup, seq, f"the coup names {configured.voids_before} coups voided in a row before "
                                           f"it, but the record has {voids} (docs/readers.md)"))
    if configured.shoe and configured.ruled_ended != ruled_ended:
        findings.append(Finding(coup, seq, f"the coup names {configured.ruled_ended or 'no shoe'} as ended by a ruling "
                                           f"before its shoe, but the record has {ruled_ended or 'none'}"))
    if configured.shoe and configured.shoe != shoe_token:
        findings.append(Finding(coup, seq, f"the coup names shoe {configured.shoe}, and is filed under {shoe_token}"))
    return findings


def off_roster(coup: str, configured: CoupConfigured, events: Iterable[tuple[int, AnyEvent]]) -> list[Finding]:
    """Every direction in a coup from a name not on the roster of supervisors
    recorded with it (``coup.configured`` version 4)."""
    if not configured.supervisors:
        return []
    return [Finding(coup, seq, f"directed by {name}, who is not on the roster of supervisors recorded with the "
                               f"coup") for seq, e in events
            if (name := getattr(e, "supervisor", "")) not in ("", *configured.supervisors)]
