"""Verification of a card-reading table's incidents, and of where the record
files each message: every incident, key, ruling, closing and reopening
decided again through the incidents' rules (casino.rules.incidents) from the
table's state as the record leaves it, nothing dealt in a coup held for a
ruling or void; every message under the table, shoe and coup its envelope
names, and a card out between coups under the shoe it came from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from casino.audit.findings import Finding
from casino.rules import incidents, shoe
from casino.rules.errors import RuleViolation
from casino.rules.incidents import (
    AnyIncidentCommand,
    AnyIncidentEvent,
    CardIncident,
    CardKeyed,
    CoupRuled,
    Incidents,
    TableClosed,
    TableReopened,
)
from casino.rules.ruleset import ShoeRules
from casino.store import subjects
from casino.store.envelope import KEYED, NOT_OF_THE_GAME, READ, CoupConfigured
from casino.store.eventstore import Stored


def command_of(e: AnyIncidentEvent, rules: ShoeRules, state: Incidents, due: bool) -> AnyIncidentCommand | None:
    """The command a recorded incident event was decided from (None for a
    closing: it follows the incident that closed the table). The ruling the
    shoe's record called for is the setting, or ``end_shoe`` where a card
    refused is held for it (cards refused in a row: the shoe's record)."""
    match e:
        case CardIncident():
            says = "" if e.kind == "unread" else "end_shoe" if e.kind == "refused" and e.house_rule == "end_shoe" \
                else str(getattr(rules, e.setting.removeprefix("shoe."), ""))
            return incidents.Report(e.table, e.coup, e.kind, e.card, e.read, e.clause, e.what, e.shoe, says, due)
        case CardKeyed():
            return incidents.Key(e.table, e.coup, e.card, e.dealer)
        case CoupRuled():
            return incidents.Rule(e.table, e.coup, e.ruling, e.supervisor, state.keyed if e.ruling == "confirm" else "",
                                  e.read)
        case TableReopened():
            return incidents.Reopen(e.table, e.supervisor, e.reported)
    return None


def assumed(events: Iterable[object]) -> Incidents:
    """The table before ``events`` as they imply it, where the coup before
    them was not verified (the first of a window or of a file): closed where
    they reopen it before closing it, and on the watch of a shoe a ruling
    ended where a closing names one."""
    for e in events:
        if isinstance(e, TableReopened):
            return Incidents(closed="closed before the record verified")
        if isinstance(e, TableClosed):
            return Incidents(ended=e.ruled_ended)
    return Incidents()


class Rulings:
    """A coup's record, what was filed before its opening first, taken
    through the incidents' rules from ``state``, the table as the coup
    before left it (``rules``: the ruleset's shoe settings, where known:
    without them nothing is decided again, and only what follows is held)."""

    def __init__(self, coup: str, rules: ShoeRules | None, state: Incidents) -> None:
        self.coup, self.rules, self.state = coup, rules, state
        self.findings: list[Finding] = []
        self.stopped = False  # a step recorded where none may be: the rest of the coup is not decided again

    def look(self, m: Stored, due: bool) -> None:
        """One message of the coup's record; ``due``: whether the coup's rules called for a card before it."""
        shoe_token = subjects.tokens(m.subject)[1]
        expected: list[AnyIncidentEvent] = []
        confirmed = False
        for env in m.batch.events:
            e = env.data
            if confirmed:
                # The shoe's record of the card keyed in, carried, and then the card taken as it came, before any
                # incident after it.
                confirmed = type(e) is shoe.CardDrawn and env.causation.startswith(KEYED)
                if confirmed or (env.causation.startswith(KEYED) and not isinstance(e, NOT_OF_THE_GAME)):
                    continue
            if isinstance(e, CoupConfigured):
                if (first := self.state.first) is not None:
                    self._found(m.seq, f"the coup opened while held for a ruling on report {first.read}, a card out "
                                       "before it opened")
                self.state = incidents.opened(self.state, e.shoe or shoe_token, e.voids_before, e.ruled_ended)
            elif isinstance(e, incidents.EVENTS):
                if expected:
                    if (want := expected.pop(0)) != e:
                        self._found(m.seq, f"recorded {e!r}, the incidents' rules give {want!r}")
                elif isinstance(e, TableClosed):
                    self._found(m.seq, f"the table recorded closed ({e.reason}), where no incident closed it")
                else:
                    expected = self._decided(m.seq, e, due)
                self.state = incidents.evolve(self.state, e)
                confirmed = isinstance(e, CoupRuled) and e.ruling == "confirm"
            elif not isinstance(e, NOT_OF_THE_GAME) and (self.state.holding or self.state.void):
                self._found(m.seq, f"{type(e).__name__} recorded in a coup "
                                   + ("held for a ruling" if self.state.holding else "ruled void"))
                self.stopped = True
                return
        if expected:
            self._found(m.seq, f"the incidents' rules give {expected[0]!r} too, which is not recorded")

    def _decided(self, seq: int, e: AnyIncidentEvent, due: bool) -> list[AnyIncidentEvent]:
        """The events after the first that the rules give for ``e``'s command (a closing), each to be recorded next."""
        if self.rules is None:
            return []
        command = command_of(e, self.rules, self.state, due)
        if command is None:
            return []
        try:
            given = incidents.decide(self.rules, self.state, command)
        except RuleViolation as exc:
            self._found(seq, f"the incidents' rules refuse the recorded {type(e).__name__}: {exc}")
            return []
        if given[0] != e:
            self._found(seq, f"recorded {e!r}, the incidents' rules give {given[0]!r}")
        return given[1:]

    def _found(self, seq: int, what: str) -> None:
        self.findings.append(Finding(self.coup, seq, what))

    def unruled(self) -> list[Finding]:
        """The incidents in the coup still awaiting a ruling: none may, once it is over."""
        return [Finding(self.coup, 0, f"held for {i.what}, and no supervisor has ruled") for i in self.state.awaiting]


def before_opening_only(msgs: Sequence[Stored]) -> bool:
    """Whether a coup's records hold only what was filed before its opening
    (cards out between coups, their rulings), as a shoe's records hold the
    part of the next coup's record that came from it: the coup opened from
    another shoe."""
    events = [e.data for m in msgs if subjects.tokens(m.subject)[3] == "coup" for e in m.batch.events]
    return bool(events) and all(incidents.between_coups(e) for e in events)


def enveloped(m: Stored) -> list[Finding]:
    """Each event of a message whose envelope names another table, shoe or
    coup than the message's subject."""
    table, shoe_token, coup, _ = subjects.tokens(m.subject)
    return [Finding(coup if coup != subjects.NO_COUP else shoe_token, m.seq, f"{env.type} filed under {m.subject}, "
                    f"but its envelope names table {env.table}, shoe {env.shoe or 'none'}, coup {env.coup or 'none'}")
            for env in m.batch.events if (env.table, env.shoe or subjects.NO_COUP, env.coup or subjects.NO_COUP)
            != (table, shoe_token, coup)]


def filed(coup: str, msgs: Sequence[Stored]) -> list[Finding]:
    """Where a coup's record files its incidents: from its opening on, under
    the shoe it opened from, each naming the coup; before it (cards out
    between coups, and their rulings), under the shoe its card came from, as
    the incident names it and as the shoe's record of the report has it, a
    card keyed in or a ruling under its incident's."""
    came_from = {env.causation.removeprefix(READ): env.data.shoe_id for m in msgs
                 if subjects.tokens(m.subject)[3] == "shoe" for env in m.batch.events
                 if env.causation.startswith(READ) and isinstance(env.data, shoe.ShoeEvent)}
    findings: list[Finding] = []
    shoe_of: dict[str, str] = {}  # each incident's report, and the shoe it is filed under
    opened_in = ""
    for m in msgs:
        _, shoe_token, _, aggregate = subjects.tokens(m.subject)
        for env in m.batch.events if aggregate == "coup" else ():
            if isinstance(env.data, CoupConfigured):
                opened_in = shoe_token
            elif opened_in and shoe_token != opened_in:
                findings.append(Finding(coup, m.seq, f"{env.type} is filed under shoe {shoe_token}, and the coup "
                                                     f"opened from shoe {opened_in}"))
            if isinstance(env.data, incidents.EVENTS):
                findings += [Finding(coup, m.seq, what) for what in
                             _card_filed(env.data, env.type, coup, shoe_token, came_from, shoe_of)]
    return findings


def _card_filed(e: AnyIncidentEvent, kind: str, coup: str, shoe_token: str, came_from: dict[str, str],
                shoe_of: dict[str, str]) -> list[str]:
    """Why an incident's event is not filed where it belongs (``shoe_of``: where each incident before it is)."""
    out = []
    if not isinstance(e, TableReopened) and e.coup and e.coup != coup:
        out.append(f"{kind} names coup {e.coup}, and is filed under {coup}")
    if isinstance(e, CardIncident):
        shoe_of[e.read] = shoe_token
        card_shoe = e.shoe or came_from.get(e.read, shoe_token)
        if not e.coup and card_shoe != shoe_token:
            out.append(f"report {e.read}, a card out between coups, is filed under shoe {shoe_token}, but its card "
                       f"came from shoe {card_shoe}")
        if e.shoe and came_from.get(e.read, e.shoe) != e.shoe:
            out.append(f"report {e.read} names shoe {e.shoe}, but the shoe's record took its card in shoe "
                       f"{came_from[e.read]}")
    elif isinstance(e, CardKeyed | CoupRuled) and not e.coup and shoe_of.get(e.read, shoe_token) != shoe_token:
        out.append(f"{kind} on report {e.read} is filed under shoe {shoe_token}, and its incident under shoe "
                   f"{shoe_of[e.read]}")
    return out
