"""A card-reading table's incidents (docs/readers.md): the cards its shoe
reported that a coup could not take, each awaiting a supervisor's ruling in
turn, and what those rulings leave to the table.

The aggregate is the table's, across its coups and the time between them:
the incidents awaiting a ruling in queue order, the card the dealer keyed in
for the first where the shoe could not read it, whether the coup in play is
void, the shoe a ruling (or the table's closing) ended, the coups voided in a
row (across shoes), the shoe a ruling ended last and the one dealt after it,
and whether the table is closed. ``decide`` makes every check a report, a
key, a ruling or a reopening is held to, each refusal naming its clause or
setting; ``evolve`` folds the events. The dealer-policy decides through it,
and verification decides every recorded incident again through it.

House rules where the regulations are silent (the ``[shoe]`` settings,
docs/clauses.md): a card out when none was due (``misdraw``), one the shoe
cannot have given (``refused``), the cut card out of place (``cut_card``);
``end_shoe_after`` coups voided in a row (or cards refused in a row) end the
shoe; a table whose shoe a ruling ended and whose next shoe must be ended
too, or with more than ``most_awaiting`` incidents awaiting a ruling, is
closed until a supervisor reopens it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from casino.rules.aggregate import violation
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import ShoeRules

KINDS = ("misdrawn", "refused", "unread", "cut_card")
# The incidents whose card says the shoe has left its committed order (a card it cannot have given, a cut card
# out of place): a supervisor may end the shoe for one whatever the house rule.
SHOE_ENDING = ("refused", "cut_card")
# The house rule each kind is ruled by (a card the shoe could not read has none: it is keyed in and confirmed).
SETTINGS = {"misdrawn": "shoe.misdraw", "refused": "shoe.refused", "cut_card": "shoe.cut_card"}
UNREAD = "unread card"  # the clause of a card the shoe could not read, keyed in and confirmed
IN_TURN = "ruling"  # the clause of a ruling out of turn, or where none is awaited
CLOSED = "table closed"  # the clause of what a closed table refuses until a supervisor reopens it
# What closes a table (``TableClosed.clause``): a second shoe in a row to be ended, too many incidents awaiting.
WATCHED, CROWDED = "setting shoe.end_shoe_after", "setting shoe.most_awaiting"

# A card incident's kind and a supervisor's ruling in plain words, as a pit reads them.
INCIDENT_WORDS = {"misdrawn": "a card out of the shoe when none was due", "refused": "a card the shoe cannot have given",
                  "unread": "a card the shoe could not read", "cut_card": "the cut card out of its place"}
RULING_WORDS = {"go_on": "dealt on", "void": "void, every stake returned", "end_shoe": "void, and the shoe ended",
                "confirm": "the card keyed in confirmed"}


# ---- events ---------------------------------------------------------------


class CardIncident(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="coup.card_incident"):
    """A card out of the table's card-reading shoe that the coup could not
    take: ``misdrawn`` (none was due: ``clause``, 000 8.19 or 8.28 where a
    holder drew it), ``refused`` (the shoe cannot have given it: not the next
    of the committed order, or a copy too many; ``clause`` names which),
    ``unread`` (the shoe could not read it), or ``cut_card`` (the cut card
    out of place, or missed), as the shoe recorded it under the report
    ``read``. It awaits a supervisor's ruling (``CoupRuled``) by the house
    rule ``setting``, whose ruling is ``house_rule``; each further incident
    is ruled in turn. ``coup`` is empty for a card out between coups: it
    holds the next coup's opening, and is filed in that coup's record before
    its ``coup.configured``. ``shoe``: the shoe the card came from (version
    2; empty before), under which a card out between coups is filed."""

    table: str
    coup: str
    kind: str
    card: str
    read: str
    clause: str
    what: str
    setting: str
    house_rule: str
    shoe: str = ""

    def said(self) -> str:
        """The incident in plain words, as a pit reads it."""
        return INCIDENT_WORDS.get(self.kind, self.kind) + (f", {self.card}," if self.card else "")


class CardKeyed(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="coup.card_keyed"):
    """The card of report ``read``, which the card-reading shoe could not
    read, as ``dealer`` keyed it in from the table's terminal: taken only once
    a supervisor (not the one who keyed it) confirms it (``CoupRuled`` ``confirm``)."""

    table: str
    coup: str
    read: str
    card: str
    dealer: str


class CoupRuled(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="coup.ruled"):
    """A supervisor's ruling on the incident of report ``read``, the first
    awaiting one, on their own credential: ``go_on`` (the card stays in the
    discard rack, the coup is dealt on), ``void`` (nothing more is dealt in
    it; every wager is returned) or ``end_shoe`` (void, and the shoe ended),
    as the house rule ``setting`` says; or, for a card the shoe could not
    read, ``confirm`` (the card keyed in is the card: the coup takes it, in
    the same message, as the shoe's report). ``coup`` is empty for an
    incident between coups, where no coup is voided."""

    table: str
    coup: str
    read: str
    ruling: str
    supervisor: str
    setting: str

    def said(self) -> str:
        """The ruling in plain words, as a pit reads it."""
        return (f"ruled by {self.supervisor}: {RULING_WORDS.get(self.ruling, self.ruling)}"
                + (f" (house rule {self.setting})" if self.setting else ""))


class TableClosed(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="table.closed"):
    """The table taken out of play by its card-reading shoe's incidents, why
    (``reason``) and under which setting (``clause``): its shoe ``shoe`` is
    ended, the ``awaiting`` incidents that awaited a ruling are closed with
    it, ``coup`` (the coup in play, "" between coups) is held for compliance,
    and nothing is dealt or ruled until a supervisor reopens it.
    ``ruled_ended``: the shoe a ruling ended before ``shoe``, where that is
    why (``shoe.end_shoe_after``)."""

    table: str
    coup: str
    shoe: str
    reason: str
    clause: str
    awaiting: int
    ruled_ended: str = ""


class TableReopened(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="table.reopened"):
    """A closed table reopened by supervisor ``supervisor``, on their own
    credential: the incidents it was closed with are closed, and the cards its
    shoe reported while it was closed are recorded here as one incident, by
    their count (``reported``)."""

    table: str
    supervisor: str
    reported: int


AnyIncidentEvent = CardIncident | CardKeyed | CoupRuled | TableClosed | TableReopened
EVENTS = (CardIncident, CardKeyed, CoupRuled, TableClosed, TableReopened)


def between_coups(event: object) -> bool:
    """Whether ``event`` is an incident's, a ruling's, a closing's or a
    reopening's between coups (naming no coup: a reopening always is)."""
    if isinstance(event, TableReopened):
        return True
    return isinstance(event, CardIncident | CardKeyed | CoupRuled | TableClosed) and not event.coup


def voided(event: object) -> bool:
    """Whether ``event`` voids its coup: a supervisor's ruling in it that
    nothing more is dealt in it (``void``, or ``end_shoe``: its shoe ended
    too); one between coups voids nothing. A void coup is settled with every
    stake returned."""
    return isinstance(event, CoupRuled) and event.ruling in ("void", "end_shoe") and bool(event.coup)


# ---- commands -------------------------------------------------------------


class Report(msgspec.Struct, frozen=True, gc=False):
    """A card out of the shoe that the coup could not take, as the shoe took
    it: ``kind``, the card, its report ``read``, the ``clause`` it breaches,
    what happened in words, the shoe it came from, and the ruling the shoe's
    record calls for (``shoe_says``: the setting, or ``end_shoe`` at cards
    refused in a row, casino.rules.shoe.house_rule; empty for an unread
    card). ``coup``: the coup in play ("" between coups); ``due``: whether
    the coup's rules called for a card then."""

    table: str
    coup: str
    kind: str
    card: str
    read: str
    clause: str
    what: str
    shoe: str
    shoe_says: str = ""
    due: bool = False


class Key(msgspec.Struct, frozen=True, gc=False):
    """The dealer ``dealer`` keys in ``card`` for the first incident, a card the shoe could not read."""

    table: str
    coup: str
    card: str
    dealer: str


class Rule(msgspec.Struct, frozen=True, gc=False):
    """Supervisor ``supervisor`` rules on the first incident (``read``, where named, must be it)."""

    table: str
    coup: str
    ruling: str
    supervisor: str
    card: str = ""
    read: str = ""


class Reopen(msgspec.Struct, frozen=True, gc=False):
    """Supervisor ``supervisor`` reopens the closed table; ``reported``: the cards its shoe reported meanwhile."""

    table: str
    supervisor: str
    reported: int = 0


AnyIncidentCommand = Report | Key | Rule | Reopen


# ---- state ----------------------------------------------------------------


class ShoeToEnd(msgspec.Struct, frozen=True, gc=False):
    """A shoe a ruling (or the table's closing) ended: its shoe service ends it (``clause``: the setting)."""

    shoe: str
    read: str
    clause: str


class Incidents(msgspec.Struct, frozen=True, gc=False):
    """What a table's incidents leave it with."""

    awaiting: tuple[CardIncident, ...] = ()  # in queue order: the first is the one a ruling is on
    keyed: str = ""  # the card keyed in for the first, where the shoe could not read it
    keyer: str = ""  # who keyed it in
    void: bool = False  # the coup in play ruled void: nothing more is dealt in it
    # The table's coups voided in a row, across shoes, the coup in play among them once void (none once a coup
    # is dealt to its end, or the table reopened).
    voids: int = 0
    to_end: ShoeToEnd | None = None  # the shoe a ruling or the closing ended, until the coup after opens
    ended: str = ""  # the shoe a ruling ended last, while the table deals no further than the shoe after it
    after: str = ""  # the shoe after it, once seen
    closed: str = ""  # why the table is closed ("" while it is open)
    closed_shoe: str = ""  # the shoe it was closed at

    @property
    def first(self) -> CardIncident | None:
        """The incident a ruling is on, if any."""
        return self.awaiting[0] if self.awaiting else None

    @property
    def holding(self) -> bool:
        """Whether the coup in play waits for a ruling (an incident in it is first)."""
        return bool(self.awaiting and self.awaiting[0].coup)


def seen(state: Incidents, shoe: str) -> Incidents:
    """The table dealing from ``shoe`` (a card out of it, a coup opened on
    it): the shoe after the one a ruling ended is the first other one seen;
    a shoe after that one means it ended without a ruling, and the table is
    no longer on its watch."""
    if not shoe or not state.ended or shoe == state.ended:
        return state
    if not state.after:
        return msgspec.structs.replace(state, after=shoe)
    if shoe == state.after:
        return state
    return msgspec.structs.replace(state, ended="", after="")


def on_watch(state: Incidents, shoe: str) -> bool:
    """Whether ``shoe`` is the shoe after one a ruling ended: its own end by a ruling closes the table."""
    return bool(state.ended) and shoe != state.ended and state.after in ("", shoe)


def carried(state: Incidents, shoe: str) -> tuple[int, str]:
    """What a coup opened on ``shoe`` records of the table (``coup.configured``):
    the coups voided in a row just before it, across shoes (none once a coup
    is dealt to its end or the table reopened), and the shoe a ruling ended
    where ``shoe`` is the one after it ("" otherwise)."""
    watched = seen(state, shoe)
    return (state.voids if state.void else 0), (watched.ended if on_watch(watched, shoe) else "")


def opened(state: Incidents, shoe: str, voids_before: int, ruled_ended: str) -> Incidents:
    """The table as a coup opened on ``shoe`` with what it recorded (``carried``)."""
    return msgspec.structs.replace(state, void=False, voids=voids_before, to_end=None, ended=ruled_ended,
                                   after=shoe if ruled_ended else "")


def reports_taken(state: Incidents, table: str) -> None:
    """Refuse a card-reading shoe's report at a closed table (it is counted, not taken)."""
    if state.closed:
        raise RuleViolation(CLOSED, f"table {table} is closed ({state.closed}): the card is counted, not taken, "
                                    "until a supervisor reopens the table")


# ---- decide ---------------------------------------------------------------


def decide(rules: ShoeRules, state: Incidents, command: AnyIncidentCommand) -> list[AnyIncidentEvent]:
    """The events ``command`` causes, or ``RuleViolation`` naming the clause or setting that refuses it."""
    handle = _DECIDE.get(type(command))
    if handle is None:
        raise RuleViolation("protocol", f"unknown incident command {type(command).__name__}")
    return handle(rules, state, command)


def check(rules: ShoeRules, state: Incidents, command: AnyIncidentCommand) -> RuleViolation | None:
    """Whether ``command`` is allowed now; the violation says why not."""
    return violation(lambda: decide(rules, state, command))


def house_rule(rules: ShoeRules, state: Incidents, cmd: Report) -> str:
    """The ruling an incident is held for: ``confirm`` for a card the shoe
    could not read; else what the shoe's record calls for (the setting, or
    ``end_shoe`` at cards refused in a row), but between coups no coup is
    voided (the card is set aside, and the table goes on), and the coup that
    would be the table's ``end_shoe_after``-th voided in a row ends its shoe."""
    if cmd.kind == "unread":
        return "confirm"
    if cmd.shoe_says == "void" and not cmd.coup:
        return "go_on"
    if cmd.shoe_says == "void" and state.voids - state.void + 1 >= rules.end_shoe_after:
        return "end_shoe"
    return cmd.shoe_says


def _report(rules: ShoeRules, state: Incidents, cmd: Report) -> list[AnyIncidentEvent]:
    reports_taken(state, cmd.table)
    if cmd.kind not in KINDS:
        raise RuleViolation("protocol", f"{cmd.kind!r} is no card incident")
    if cmd.kind == "misdrawn" and cmd.due and not state.awaiting and not state.void:
        raise RuleViolation(cmd.clause, f"{cmd.card} out of the shoe when the coup's rules called for a card: "
                                        "it is the card due, not a misdraw")
    setting = SETTINGS.get(cmd.kind, "")
    if setting:
        value = getattr(rules, setting.removeprefix("shoe."))
        if cmd.shoe_says not in (value, *(("end_shoe",) if cmd.kind == "refused" else ())):
            raise RuleViolation(f"setting {setting}", f"a card {cmd.kind} is held for {value!r} by the ruleset's "
                                                      f"{setting}, not {cmd.shoe_says!r}")
    watched = seen(state, cmd.shoe)
    incident = CardIncident(cmd.table, cmd.coup, cmd.kind, cmd.card, cmd.read, cmd.clause, cmd.what, setting,
                            house_rule(rules, watched, cmd), cmd.shoe)
    if incident.house_rule == "end_shoe" and on_watch(watched, cmd.shoe):
        return [incident, TableClosed(cmd.table, cmd.coup, cmd.shoe, f"shoe {watched.ended} was ended by a "
                                      f"supervisor's ruling, and the shoe after it, {cmd.shoe}, must be ended too",
                                      WATCHED, len(state.awaiting) + 1, watched.ended)]
    if len(state.awaiting) >= rules.most_awaiting:
        return [incident, TableClosed(cmd.table, cmd.coup, cmd.shoe, f"{len(state.awaiting) + 1} incidents await "
                                      f"a ruling, more than the ruleset's {rules.most_awaiting}",
                                      CROWDED, len(state.awaiting) + 1)]
    return [incident]


def _key(rules: ShoeRules, state: Incidents, cmd: Key) -> list[AnyIncidentEvent]:
    _open(state, cmd.table)
    first = state.first
    if first is None or first.kind != "unread":
        raise RuleViolation(UNREAD, f"table {cmd.table} waits for no card the shoe could not read"
                                    + (f" (report {first.read} first: {first.what})" if first is not None else ""))
    if not cmd.dealer:
        raise RuleViolation(UNREAD, f"no dealer is signed in at table {cmd.table}'s terminal: the card the shoe could "
                                    "not read is keyed in by the dealer on duty, who is named")
    return [CardKeyed(cmd.table, cmd.coup, first.read, cmd.card, cmd.dealer)]


def allowed(incident: CardIncident) -> tuple[str, ...]:
    """The rulings a supervisor may give on ``incident``: its house rule, or
    ``end_shoe`` for a shoe that has left its order."""
    return (incident.house_rule, *(("end_shoe",) if incident.kind in SHOE_ENDING and
                                   incident.house_rule != "end_shoe" else ()))


def _rule(rules: ShoeRules, state: Incidents, cmd: Rule) -> list[AnyIncidentEvent]:
    _open(state, cmd.table)
    first = state.first
    if first is None:
        raise RuleViolation(IN_TURN, f"table {cmd.table} waits for no ruling")
    if cmd.read and cmd.read != first.read:
        raise RuleViolation(IN_TURN, f"table {cmd.table} waits for a ruling on report {first.read} first, not "
                                     f"{cmd.read}: each incident is ruled in turn")
    if not cmd.supervisor:
        raise RuleViolation(IN_TURN, "a ruling is a supervisor's, on their own credential, and names them")
    if cmd.ruling not in allowed(first):
        clause = f"setting {first.setting}" if first.setting else UNREAD
        rulings = " or ".join(repr(r) for r in allowed(first))
        raise RuleViolation(clause, f"{INCIDENT_WORDS.get(first.kind, first.kind)} (report {first.read}) is ruled "
                                    f"{rulings}" + (f" by the house rule {first.setting}" if first.setting else "")
                            + f", not {cmd.ruling!r}")
    if cmd.ruling == "confirm":
        if not state.keyed or cmd.card != state.keyed:
            raise RuleViolation(UNREAD, f"the dealer has keyed in {state.keyed or 'no card'} for report "
                                        f"{first.read}, not {cmd.card or 'no card'}: the supervisor confirms the "
                                        "card keyed in")
        if cmd.supervisor == state.keyer:
            raise RuleViolation(UNREAD, f"{cmd.supervisor} keyed in the card of report {first.read}: another "
                                        "confirms it")
    return [CoupRuled(cmd.table, cmd.coup, first.read, cmd.ruling, cmd.supervisor, first.setting)]


def _reopen(rules: ShoeRules, state: Incidents, cmd: Reopen) -> list[AnyIncidentEvent]:
    if not state.closed:
        raise RuleViolation(CLOSED, f"table {cmd.table} is not closed")
    if not cmd.supervisor:
        raise RuleViolation(CLOSED, "a table is reopened by a supervisor, on their own credential, who is named")
    return [TableReopened(cmd.table, cmd.supervisor, cmd.reported)]


def _open(state: Incidents, table: str) -> None:
    if state.closed:
        raise RuleViolation(CLOSED, f"table {table} is closed ({state.closed}): a supervisor reopens it first")


_DECIDE: dict[type, Callable[[ShoeRules, Incidents, Any], list[AnyIncidentEvent]]] = {
    Report: _report, Key: _key, Rule: _rule, Reopen: _reopen}


# ---- evolve ---------------------------------------------------------------


def evolve(state: Incidents, event: AnyIncidentEvent) -> Incidents:
    """The table after ``event``."""
    match event:
        case CardIncident():
            state = seen(state, event.shoe)
            first = not state.awaiting
            return msgspec.structs.replace(state, awaiting=(*state.awaiting, event),
                                           keyed="" if first else state.keyed, keyer="" if first else state.keyer)
        case CardKeyed():
            return msgspec.structs.replace(state, keyed=event.card, keyer=event.dealer)
        case CoupRuled():
            return _ruled(state, event)
        case TableClosed():
            return msgspec.structs.replace(state, awaiting=(), keyed="", keyer="", closed=event.reason,
                                           closed_shoe=event.shoe,
                                           to_end=ShoeToEnd(event.shoe, "", event.clause) if event.shoe else None)
        case TableReopened():  # the coup before stays as it was (void, or not); the voids are counted afresh
            return Incidents(void=state.void, to_end=state.to_end)
    return state


def _ruled(state: Incidents, e: CoupRuled) -> Incidents:
    ruled = next((i for i in state.awaiting if i.read == e.read), None)
    state = msgspec.structs.replace(state, awaiting=tuple(i for i in state.awaiting if i is not ruled),
                                    keyed="", keyer="", void=state.void or voided(e),
                                    voids=state.voids + (voided(e) and not state.void))
    if e.ruling == "end_shoe" and ruled is not None:
        state = msgspec.structs.replace(state, to_end=ShoeToEnd(ruled.shoe, e.read, f"setting {e.setting}"),
                                        ended=ruled.shoe or state.ended, after="")
    return state
