"""A table as the dealer-policy holds it: its latest coup, folded from the
table's record (``fold``, ``follow``), what that coup leaves to the next,
its card-reading shoe's incidents (casino.rules.incidents: in the coup, or
between coups before the next opens, ``place``), and why a coup is held for
compliance where the record cannot be followed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from casino import games
from casino.audit import verify
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.games import Carry, Coup, Game
from casino.protocol import commands
from casino.protocol.service import log
from casino.rules import incidents
from casino.rules.incidents import CardIncident, Incidents, ShoeToEnd
from casino.rules.ruleset import Ruleset
from casino.rules.shoe import RoundEnded
from casino.store import subjects
from casino.store.envelope import (
    CARRIED,
    NOT_OF_THE_GAME,
    OPENINGS_KEPT,
    AnyEvent,
    Batch,
    CoupConfigured,
    CoupHeld,
    carried_by,
    step_digest,
)
from casino.store.eventstore import EventStore, Stored, latest_at_table
from services.dealer_policy.sources import CardSource
from services.repository import Held, Repository


class TableCoup(Held, kw_only=True):
    """The table's current (latest) coup and what carries over to the next.
    ``last_seq`` and ``applied`` are the coup's; ``seen`` the last of the
    table's coup messages folded, whichever coup it was of."""

    name: str
    config: TableConfig
    rules: Ruleset
    game: Game
    cards: CardSource  # where the table's cards come from (picked once, as the service is wired)
    number: int = 0
    coup: str = ""
    shoe: str = ""
    state: Coup | None = None
    seen: int = 0
    # The extra stakes (double, split, insurance) the coup's recorded decisions
    # call for, by the decision's cause; and those the wager book has confirmed.
    extras: dict[str, commands.PlaceExtra] = msgspec.field(default_factory=dict)
    staked: set[str] = msgspec.field(default_factory=set)
    carried: Carry = Carry()
    ruleset_recorded: str = ""  # the digest of the ruleset last seen recorded at the table
    # The digests of the command ids that opened the coup and the table's coups before it, the latest first
    # (CoupConfigured.opened_before, and the coup's own).
    openings: tuple[str, ...] = ()
    dealt_under: str = ""  # the digest of the ruleset the coup is dealt under (its coup.configured)
    dealer: str = ""  # who deals the coup (its coup.configured): the one signed in at the table's terminal
    # Why the coup is held for compliance ("" where it is not: docs/clauses.md), and whether its
    # coup.held is recorded.
    held: str = ""
    held_seq: int = 0  # the message it is held for
    held_recorded: bool = False
    # Whether it is held for another service's refusal of a step this instance took on the coup as it knew
    # it (``refused``), not for the record itself: withdrawn if the record moves on before coup.held is.
    held_on_refusal: bool = False
    # The card-reading shoe's incidents (casino.rules.incidents): what awaits a supervisor's ruling, in the
    # coup or, between coups, before the next coup's opening; a void; the shoe a ruling ended; the voids in
    # a row; whether the table is closed. The shoe a ruling ended that the shoe service has ended (asked
    # again at the next opening where a first asking failed); the reports counted while the table is closed.
    incidents: Incidents = Incidents()
    end_asked: ShoeToEnd | None = None
    while_closed: set[str] = msgspec.field(default_factory=set)
    # What was recorded between coups in the record of coup ``prelude_of`` before it opened (a card out
    # of the shoe, its ruling): each cause with its command's digest, as ``applied`` holds the coup's.
    prelude: dict[str, str] = msgspec.field(default_factory=dict)
    prelude_of: str = ""
    round_ended: str = ""  # the coup whose round's end at the shoe the table's coup records carry
    last_read: str = ""  # the shoe's last step the table's coup records carry (``carried_by``), told to the shoe
    last_step: tuple[AnyEvent, ...] = ()  # what that step carries, its digest told to the shoe with it
    shoe_seen: str = ""  # the shoe in play, as the shoe service last named it (the first coup is filed under it)
    shuffling: bool = False  # the card-reading shoe waits for its shuffling machine's order of a new shoe
    awaiting_card: float = 0.0  # since when the coup has waited for its card-reading shoe's next card (0: it does not)
    # The finished coup's round ending at the shoe, asked after the terminal has the result.
    ending: asyncio.Future[Any] | None = None

    @property
    def stopped(self) -> str:
        """Why nothing more is dealt in the coup now ("" where it is dealt on):
        held for compliance, void by a supervisor's ruling, or waiting for a
        ruling on an incident in it."""
        if self.held:
            return self.held
        if self.incidents.void:
            return "is void by a supervisor's ruling: nothing more is dealt in it"
        first = self.incidents.first
        return f"waits for a ruling on report {first.read} ({first.what})" if first and first.coup else ""

    @property
    def after_digest(self) -> str:
        """The digest of the step ``last_read`` names, as the record holds it (``envelope.step_digest``)."""
        return step_digest(self.last_step)

    @property
    def finished(self) -> bool:
        """Whether the coup is over: dealt to its end, held for compliance or void."""
        return self.state is None or self.state.phase == "finished" or bool(self.stopped)

    @property
    def procedure(self) -> str:
        """The procedure the coup is dealt by ("" with no coup)."""
        return self.game.procedure(self.state) if self.state is not None else ""

    @property
    def incident(self) -> CardIncident | None:
        """The first incident awaiting a ruling, if any: the one a ruling is on."""
        return self.incidents.first

    @property
    def in_play(self) -> bool:
        """Whether a card out of the shoe now goes into the coup: it is being
        dealt, or held for an incident in it (a held coup records every
        further incident); else it is between coups."""
        return self.state is not None and (not self.finished or self.incidents.holding)

    @property
    def next_coup(self) -> str:
        return f"{self.name}-{self.number + 1:06d}"

    def place(self) -> str:
        """The coup a card out of the shoe now is recorded in: the coup in play,
        else the next coup, in its record before its opening."""
        return self.coup if self.in_play else self.next_coup

    def taken(self, cause: str) -> bool:
        """Whether ``cause`` (a report, a keyed card) is recorded already where a
        card now goes: the coup in play (or its record before it opened), or
        the next coup's record before it opens."""
        if self.in_play:
            return cause in self.applied or (self.prelude_of == self.coup and cause in self.prelude)
        return self.prelude_of == self.next_coup and cause in self.prelude


def new(name: str, config: TableConfig, cards: CardSource) -> TableCoup:
    rules = rulesets.load(config.ruleset)
    return TableCoup(name=name, config=config, rules=rules, game=games.of(rules), cards=cards)


def copy(t: TableCoup) -> TableCoup:
    """The table as it is, which staging a decision leaves as it is (the coup's state moves on in place)."""
    return msgspec.structs.replace(t, state=None if t.state is None else t.game.copy(t.state))


def carry(t: TableCoup) -> Carry:
    """What the coup leaves to the next (the shoe holder, the style in force)."""
    return t.carried if t.state is None else t.game.carry(t.state, t.shoe, t.carried)


def carry_from(t: TableCoup) -> Carry:
    """What the coup leaves to the next; a held coup's as far as it can be
    followed, else what it was opened with."""
    try:
        return carry(t)
    except Exception:  # a coup held for what cannot be followed
        return t.carried


def next_coup(t: TableCoup) -> None:
    t.carried = carry_from(t)
    t.state, t.applied, t.last_seq, t.ending = None, {}, 0, None
    t.extras, t.staked, t.held, t.held_seq, t.held_recorded = {}, set(), "", 0, False
    t.held_on_refusal = False


def fold(t: TableCoup, event: AnyEvent, causation: str) -> None:
    if isinstance(event, CoupConfigured):
        t.number, t.dealt_under, t.dealer = event.coup_number, event.ruleset_digest, event.dealer
        t.incidents = incidents.opened(t.incidents, event.shoe or t.shoe, event.voids_before, event.ruled_ended)
        t.state = games.named(event.game).new()
        t.openings = (commands.id_digest(causation), *event.opened_before)[:OPENINGS_KEPT]
    elif isinstance(event, CoupHeld):
        t.held, t.held_recorded = event.reason, True
    elif isinstance(event, incidents.EVENTS):  # services.dealer_policy.reading
        t.incidents = incidents.evolve(t.incidents, event)
    elif isinstance(event, CARRIED):  # the shoe's record of a step, carried: what the shoe is told confirms it
        step = carried_by(event, causation)
        t.last_step = (*t.last_step, event) if step == t.last_read else (event,)
        t.last_read = step
        t.round_ended = event.coup_id if isinstance(event, RoundEnded) else t.round_ended
    elif t.state is not None:
        t.state = t.game.evolve(t.state, event)
    if (extra := t.game.extra(event, t.name, t.coup, causation)) is not None:
        t.extras = {**t.extras, causation: extra}


def follow(repository: Repository[TableCoup], t: TableCoup, m: Stored) -> None:
    """Fold one message of the table's coups, as the record holds it. A
    message under a coup of no number of ours, or of one no opening opened,
    is a stray, passed over; one the coup being dealt cannot take (no batch
    this code can read, written with a message id as ours are; events its
    rules do not give) holds the coup for compliance: nothing more is
    folded into it. Each is looked at: the table's guard expects it."""
    _, shoe, coup, _ = subjects.tokens(m.subject)
    t.seen = max(t.seen, m.seq)  # looked at, even a stray under an earlier coup: the table's guard counts it
    number = subjects.coup_number(coup)
    if number is None or subjects.table_of_coup(coup) != t.name:
        log.warning("%s seq %d is under no coup of table %s: passed over", m.subject, m.seq, t.name)
        return
    if coup < t.coup or (m.seq <= t.last_seq and coup == t.coup):
        return
    if coup != t.coup and not _opens(repository, t, m, coup, shoe, number):
        return
    if t.held_on_refusal and not t.held_recorded and m.batch.events and not m.unreadable:
        # Another instance took the coup on after the step this one was refused (the table moved between
        # instances, and this one's view was stale): the refusal was of a step already taken, not a fault.
        log.warning("table %s: coup %s goes on in the record (seq %d) since the refusal it was to be held for "
                    "(%s): followed on, not held", t.name, t.coup, m.seq, t.held)
        t.held, t.held_seq, t.held_on_refusal = "", 0, False
    if t.held:  # held for compliance: its coup.held recorded since, or an incident's ruling, and nothing else
        try:
            for env in m.batch.events:
                if isinstance(env.data, (CoupHeld, *CARRIED, *incidents.EVENTS)):
                    fold(t, env.data, env.causation)
        finally:
            t.last_seq = max(t.last_seq, m.seq)
    elif m.unreadable:
        t.last_seq = max(t.last_seq, m.seq)  # on the coup's subject: its guard expects it
        if m.msg_id and not t.finished:
            hold(t, m.seq, f"message seq {m.seq} of its record cannot be read ({m.unreadable})")
    elif differs := not_followed(t, m.batch):
        t.last_seq = max(t.last_seq, m.seq)
        why = f"message seq {m.seq} of its record cannot be followed ({differs[:300]})"
        if t.finished:  # its result stands: the table goes on, and verification reports the message
            log.error("table %s: coup %s: %s: passed over", t.name, t.coup, why)
        else:
            hold(t, m.seq, why)
    else:
        repository.take(t, m.seq, m.batch)


def _opens(repository: Repository[TableCoup], t: TableCoup, m: Stored, coup: str, shoe: str, number: int) -> bool:
    """A message under a coup after the table's latest: whether it opens the
    table's next coup (then taken up as the coup), or else is what was filed
    before that opening (folded as such) or a stray (passed over)."""
    opening = next((e.data for e in m.batch.events if isinstance(e.data, CoupConfigured)), None)
    if opening is None:
        if number == t.number + 1 and before_opening([e.data for e in m.batch.events]):
            take_prelude(repository, t, coup, shoe, m)
        else:
            log.warning("%s seq %d is under a coup no opening opened: passed over", m.subject, m.seq)
        return False
    if why := out_of_turn(t, coup, opening):
        log.error("table %s: %s seq %d %s: passed over, the table deals on (verification names it)",
                  t.name, m.subject, m.seq, why)
        return False
    next_coup(t)
    t.coup, t.shoe, t.number = coup, shoe, number
    if t.prelude_of != coup:
        t.prelude, t.prelude_of = {}, ""
    return True


def out_of_turn(t: TableCoup, coup: str, opening: CoupConfigured) -> str:
    """Why an opening recorded under ``coup`` is not the table's next coup ("" if it is):
    it names another table or number than its subject, or its number does not follow
    the table's latest coup (``t.number``; any, before the first coup is followed
    where nothing before it was read)."""
    number = subjects.coup_number(coup)
    if opening.table != t.name or opening.coup_number != number:
        return f"opens coup {opening.coup_number} of table {opening.table}, not the coup of its subject"
    if (t.coup or t.number) and number != t.number + 1:
        return f"opens coup {number}, and the table's next is {t.number + 1}"
    return ""


async def latest_records(store: EventStore, name: str) -> tuple[int, list[Stored]]:
    """The messages of the table's latest coup, where the table is folded from
    (``follow``), and the number of the coup before them; where the latest is
    the next coup's record before it opens (cards out between coups), the
    coup before's first. A coup's record is read under its shoe and the one
    before it: what was filed before its opening is under the shoe each card
    came from. Where the coup before the latest is in neither (an opening out
    of turn, or a shoe the archiver has removed), the table's coups, whole,
    from no number: ``follow`` passes over an opening out of turn."""
    latest = await latest_at_table(store, name, "coup")
    if latest is None:
        return 0, []
    _, shoe, coup, _ = subjects.tokens(latest.subject)
    number = subjects.shoe_number(name, shoe)
    shoes = [shoe] if number is None or number <= 1 else [subjects.shoe_id(name, number - 1), shoe]
    msgs = await _read_coup(store, name, coup, shoes)
    number = subjects.coup_number(coup) or 0
    if number <= 1:
        return 0, msgs
    before = f"{name}-{number - 1:06d}"
    if any(isinstance(e.data, CoupConfigured) for m in msgs for e in m.batch.events):
        for s in shoes:
            if await store.last(subjects.event(name, s, before, "coup")) is not None:
                return number - 1, msgs
    elif earlier := await _read_coup(store, name, before, shoes):
        return number - 2, earlier + msgs
    return 0, await store.read(subjects.aggregate_filter("coup", name))


async def _read_coup(store: EventStore, name: str, coup: str, shoes: Sequence[str]) -> list[Stored]:
    """A coup's coup messages under ``shoes``, in stream order."""
    return sorted([m for s in shoes for m in await store.read(subjects.event(name, s, coup, "coup"))],
                  key=lambda m: m.seq)


def before_opening(events: Sequence[AnyEvent]) -> bool:
    """Whether ``events`` are what the dealer-policy records between coups, in
    the next coup's record before its opening: card incidents, a card keyed
    in, rulings, a closing or a reopening, each naming no coup."""
    return bool(events) and all(incidents.between_coups(e) for e in events)


def take_prelude(repository: Repository[TableCoup], t: TableCoup, coup: str, shoe: str, m: Stored) -> None:
    """Fold a message recorded between coups, in coup ``coup``'s record before it opens."""
    if t.prelude_of != coup:
        t.prelude, t.prelude_of = {}, coup
    if repository.take(t, m.seq, m.batch):
        t.prelude = {**t.prelude, **{e.causation: e.command for e in m.batch.events}}
        t.shoe_seen = t.shoe_seen or shoe


def not_followed(t: TableCoup, batch: Batch) -> str:
    """Why a recorded batch cannot be taken into the coup as it stands ("" where it can): a
    second opening, no opening first, or decisions that are not what the coup's rules give
    from its state (each decided again, as verification decides it: ``verify.redecided``;
    where the coup was dealt under a ruleset other than the table's now, taken as recorded)."""
    opening = [e for e in batch.events if isinstance(e.data, CoupConfigured)]
    if opening and t.state is not None:
        return "a second coup.configured in one coup"
    if t.state is None and not opening:
        return "the coup's record does not begin with its coup.configured"
    rest = [e for e in batch.events if not isinstance(e.data, NOT_OF_THE_GAME)]
    digest_ = opening[0].data.ruleset_digest if opening and isinstance(opening[0].data, CoupConfigured) \
        else t.dealt_under
    if not rest or digest_ != rulesets.digest_of(t.rules):
        return ""
    try:
        _, differs = verify.redecided(t.game, t.rules, t.game.new() if opening else t.game.copy(t.state), rest)
    except Exception as exc:  # events no rules give, nor follow
        return f"{type(exc).__name__}: {exc}"
    return differs

def hold(t: TableCoup, seq: int, why: str) -> None:
    """The coup held for compliance for what its record holds at ``seq``."""
    t.held, t.held_seq, t.held_on_refusal = why, seq, False
    log.error("table %s: coup %s is held for compliance: %s", t.name, t.coup or "?", why)


def refused(t: TableCoup, why: str) -> None:
    """The coup held for compliance because another service (the shoe)
    refused a step this instance took on the coup as it knows it. Recorded
    (``coup.held``) at the next opening, unless the record moves on first:
    another instance took the coup on meanwhile, and ``follow`` withdraws
    the hold (a stale step refused is no fault)."""
    hold(t, t.last_seq, why)
    t.held_on_refusal = True
