"""Verification: does every recorded coup follow from its recorded inputs?

For each coup, each recorded decision (one stored batch) is turned back into
the command that caused it (a card dealt, an answer, a decision) and decided
again through the rules library from the state folded so far; the events the
rules give must be exactly the events recorded. The wagers the coup dealt to
must be the wager book's, every card dealt must be the card the shoe drew at
that position, and the payouts must be what settlement gives. For each ended
shoe, the revealed order and salt must match the commitment published at the
shuffle, and every card burned or drawn must be that order's card.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from casino import games
from casino.config import rulesets
from casino.games import payouts_of
from casino.protocol.commands import id_digest
from casino.rules import settlement, shoe, wagerbook
from casino.rules.errors import RuleViolation
from casino.rules.ruleset import Ruleset
from casino.rules.wagers import Wager
from casino.store import subjects
from casino.store.envelope import (
    ADDED_SINCE,
    KEYED,
    NOT_OF_THE_GAME,
    OPENINGS_KEPT,
    SHOE_ENDING,
    AnyEvent,
    CardIncident,
    CardKeyed,
    CoupConfigured,
    CoupHeld,
    CoupRuled,
    Envelope,
    RulesetRecorded,
)
from casino.store.eventstore import Stored


class Finding(msgspec.Struct, frozen=True):
    """A difference between what is recorded and what the rules give."""

    coup: str
    seq: int
    what: str


def verify_coup(stored: list[Stored], recorded: Mapping[str, Ruleset] | None = None) -> list[Finding]:
    """Every difference in one coup's records (all four services' events).
    The coup is decided again under the ruleset it names by digest: its
    recorded content where ``recorded`` (by digest) holds it, else the file of
    that name, which must still have that digest."""
    msgs = sorted(stored, key=lambda m: m.seq)
    coup = subjects.tokens(msgs[0].subject)[2] if msgs else ""
    strays = unreadable(coup, msgs)
    if any(m.unreadable and m.msg_id for m in msgs):  # written as ours write, and not understood: the coup neither
        return strays
    everything: list[AnyEvent] = [e.data for m in msgs for e in m.batch.events]
    if held := [(m.seq, e.data) for m in msgs for e in m.batch.events if isinstance(e.data, CoupHeld)]:
        return strays + [Finding(coup, seq, f"the coup was held for compliance by the dealer-policy: {e.reason}")
                         for seq, e in held if isinstance(e, CoupHeld)]
    configured = next((e for e in everything if isinstance(e, CoupConfigured)), None)
    if configured is None:
        return strays + [Finding(coup, msgs[0].seq if msgs else 0, "the coup has no coup.configured event")]
    try:
        return strays + _verified(coup, msgs, everything, configured, recorded)
    except Exception as exc:  # events the rules cannot follow at all (not a refusal: a record no dealer wrote)
        return strays + [Finding(coup, msgs[-1].seq, f"the coup's events cannot be followed: {type(exc).__name__}: "
                                                     f"{str(exc)[:200]}")]


def unreadable(coup: str, msgs: list[Stored]) -> list[Finding]:
    """Every message among ``msgs`` that is no record this code can read: one
    written with a message id as the services write (the coup cannot be
    understood), or a stray no service wrote (the server's answer to a
    request aimed at the coup's subject, say), under the coup all the same."""
    return [Finding(coup, m.seq, f"message seq {m.seq} cannot be read ({m.unreadable})" + (
        "" if m.msg_id else ": written by no service of ours (no message id)")) for m in msgs if m.unreadable]


def _verified(coup: str, msgs: list[Stored], everything: list[AnyEvent], configured: CoupConfigured,
              recorded: Mapping[str, Ruleset] | None) -> list[Finding]:
    rules = (recorded or {}).get(configured.ruleset_digest)  # its digest checked as it was read
    if rules is None:
        rules = rulesets.load(configured.ruleset)
        if (now := rulesets.digest_of(rules)) != configured.ruleset_digest:
            return [Finding(coup, msgs[0].seq, f"the coup was dealt under {configured.ruleset} with digest "
                                               f"{configured.ruleset_digest}; neither the record nor the file "
                                               f"(digest {now}) holds that ruleset")]
    findings = _redecide(coup, rules, [m for m in msgs if subjects.tokens(m.subject)[3] == "coup"]) + _keyed(coup, msgs)
    book = wagerbook.book_of(everything)
    findings += _book_and_cards(coup, msgs, book)
    findings += _payouts(coup, msgs, everything, book, rules)
    return sorted(findings, key=lambda f: f.seq)


# What each table's latest verified coup left to the next: its number, the
# seat and the player holding the shoe into the next coup (000 8.18), the
# procedure in force (000 8.2, 001 8.5), the openings the next coup's
# record must name (its own and those before it), who dealt it, and the
# coups voided in a row up to it on its shoe (docs/readers.md), by table.
Carried = dict[str, tuple[int, int | None, str, str, tuple[str, ...], str, int]]


def _holding(seat: int | None, player: str) -> str:
    return "nobody" if seat is None else f"seat {seat}" + (f" ({player})" if player else "")


def carried_over(stored: list[Stored], carried: Carried) -> list[Finding]:
    """What a coup was opened with against what its table's previous coup
    left, decided again from the record of the coup before, not from what the
    opening itself says: the shoe holder, seat and player (000 8.18: the
    holder keeps the shoe until he passes it, loses, or is directed to forfeit
    it; 8.15, 8.20), and the procedure in force (000 8.2, 001 8.5; recorded
    since ``baccarat.coup_opened`` version 3: deciding the opening again
    refuses a change no supervisor directed). ``carried`` is updated with
    this coup; a coup whose previous coup was not verified before it (the
    first of a window or of a file) is checked against nothing."""
    msgs = sorted(stored, key=lambda m: m.seq)
    envelopes = [(m.seq, e) for m in msgs if subjects.tokens(m.subject)[3] == "coup" for e in m.batch.events]
    events = [(seq, e.data) for seq, e in envelopes]
    configured_at = next(((seq, e) for seq, e in envelopes if isinstance(e.data, CoupConfigured)), None)
    if configured_at is None:
        return []
    configured_seq, configured_envelope = configured_at
    filed = subjects.tokens(msgs[0].subject)[2]  # the coup whose record holds it, whatever its events name
    configured = configured_envelope.data
    assert isinstance(configured, CoupConfigured)
    game = games.named(configured.game)
    state: Any = game.new()
    findings = []
    opened_by = id_digest(configured_envelope.causation)
    if opened_by in configured.opened_before:  # a command applied twice
        findings.append(Finding(filed, configured_seq, f"the coup was opened by command "
                                f"{configured_envelope.causation}, which had opened an earlier coup of the table"))
    opening = next(((seq, e) for seq, e in events if not isinstance(e, NOT_OF_THE_GAME)), None)
    findings += off_roster(filed, configured, events)
    before = carried.get(configured.table)
    if before is not None and before[0] == configured.coup_number - 1 and configured.opened_before and \
            configured.opened_before != before[4][:len(configured.opened_before)]:
        findings.append(Finding(filed, configured_seq, "the coup's record does not name the "
                                "openings of the coups before it as their records do"))
    if before is not None and before[0] == configured.coup_number - 1 and \
            (configured.dealer or configured.dealer_before) and configured.dealer_before != before[5]:
        findings.append(Finding(filed, configured_seq, f"the coup names "
                                f"{configured.dealer_before or 'nobody'} as the dealer before it, but the coup before "
                                f"was dealt by {before[5] or 'nobody signed in'}"))
    ended_before = any(isinstance(e, CoupRuled) and e.ruling == "end_shoe" and not e.coup for _, e in events)
    if before is not None and before[0] == configured.coup_number - 1 and \
            configured.voids_before != (0 if ended_before else before[6]):
        findings.append(Finding(filed, configured_seq, f"the coup names "
                                f"{configured.voids_before} coups voided in a row before it, but the record has "
                                f"{0 if ended_before else before[6]} (docs/readers.md)"))
    if opening is not None and before is not None and before[0] == configured.coup_number - 1:
        seq, opened = opening
        coup = filed
        seat, player = getattr(opened, "shoe_holder", None), getattr(opened, "shoe_holder_player", "")
        if seat != before[1] or (player and before[2] and player != before[2]):
            findings.append(Finding(coup, seq, f"the coup opened with the shoe held by {_holding(seat, player)}, "
                                               f"but the coup before left it with {_holding(before[1], before[2])} "
                                               f"(000 8.18)"))
        in_force = getattr(opened, "in_force", "")
        if in_force and before[3] and in_force != before[3]:
            findings.append(Finding(coup, seq, f"the coup opened with {in_force} in force, but the coup before was "
                                               f"dealt by {before[3]} "
                                               f"({'000 8.2' if in_force.startswith('method') else '001 8.5'})"))
    in_coup = [e for _, e in events if isinstance(e, CoupRuled) and e.coup]
    voided = any(games.voided(e) for e in in_coup)
    voids = 0 if not voided or any(e.ruling == "end_shoe" for e in in_coup) else configured.voids_before + 1
    try:
        for _, e in events:
            if not isinstance(e, NOT_OF_THE_GAME):
                state = game.evolve(state, e)
        left = game.carry(state, "", games.Carry())
    except Exception:  # a coup its rules cannot follow (held, or not a dealer's record): the next checked against nothing
        carried.pop(configured.table, None)
        return findings
    carried[configured.table] = (configured.coup_number, left.holder, left.holder_player, left.procedure,
                                 (opened_by, *configured.opened_before)[:OPENINGS_KEPT], configured.dealer, voids)
    return findings


def off_roster(coup: str, configured: CoupConfigured, events: Iterable[tuple[int, AnyEvent]]) -> list[Finding]:
    """Every direction in a coup from a name not on the roster of supervisors
    recorded with it (``coup.configured`` version 4)."""
    if not configured.supervisors:
        return []
    return [Finding(coup, seq, f"directed by {name}, who is not on the roster of supervisors recorded with the "
                               f"coup") for seq, e in events
            if (name := getattr(e, "supervisor", "")) not in ("", *configured.supervisors)]


class Openings:
    """Each table's openings as the record holds them, taken in stream order:
    each against its subject and the table's coup before it (a table's coups
    are numbered one after another; an opening out of turn is passed over,
    as the dealer-policy passes it over, and the next is checked against the
    last in turn), and the coups left in play (``in_play``, as they are found):
    only a table's latest opening may be in play (``left_in_play``)."""

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}  # by table: the number of its last coup opened in turn
        self.last_opened: dict[str, str] = {}  # by table: the coup opened last, in turn or not
        self.in_play: dict[str, str] = {}  # the coups found in play, and their tables
        self.findings: list[Finding] = []

    def take(self, m: Stored) -> None:
        table, _, coup, aggregate = subjects.tokens(m.subject)
        if aggregate != "coup":
            return
        for e in m.batch.events:
            if isinstance(e.data, CoupConfigured):
                self.findings += self._opened(table, coup, m.seq, e.data)

    def _opened(self, table: str, coup: str, seq: int, c: CoupConfigured) -> list[Finding]:
        self.last_opened[table] = coup
        number = subjects.coup_number(coup)
        if c.table != table or c.coup_number != number:
            return [Finding(coup, seq, f"the coup's opening names coup {c.coup_number} of table {c.table}, not "
                                       f"the coup it is recorded under")]
        before = self.latest.get(table)
        if before is not None and number != before + 1:
            return [Finding(coup, seq, f"the coup opened as number {number}, and the table's coup before it is "
                                       f"{before}: a table's coups are numbered one after another")]
        self.latest[table] = c.coup_number
        return []

    def left_in_play(self) -> list[Finding]:
        """Every coup in play that is not its table's latest: it can never end."""
        return [Finding(coup, 0, f"the coup was never finished, and {after} opened after it")
                for coup, table in sorted(self.in_play.items()) if (after := self.last_opened.get(table, coup)) != coup]


def recorded_rulesets(stored: Iterable[Stored]) -> tuple[dict[str, Ruleset], list[Finding]]:
    """The rulesets a record holds (``ruleset.recorded``), by digest, each one's
    digest recomputed from its content: one that does not match is a finding."""
    found: dict[str, Ruleset] = {}
    findings: list[Finding] = []
    for m in stored:
        for env in m.batch.events:
            e = env.data
            if isinstance(e, RulesetRecorded):
                if rulesets.digest(e.content) != e.digest:
                    findings.append(Finding(subjects.NO_COUP, m.seq, f"the ruleset {e.name} recorded at {e.table} "
                                                                    f"does not have the digest it names ({e.digest})"))
                else:
                    found[e.digest] = rulesets.from_content(e.content)
    return found, findings


def _redecide(coup: str, rules: Ruleset, msgs: list[Stored]) -> list[Finding]:
    """Each recorded batch holds one decision or several consecutive ones (the
    dealer's own steps are recorded together): from the first event not yet
    explained, the command it implies is decided again and must give exactly
    the events recorded from there (``redecided``)."""
    game = games.of(rules)
    state: Any = game.new()
    readings = Readings(coup, rules)
    for m in msgs:
        readings.look(m, game.waiting(rules, state).kind if state.phase != "new" else "")
        state, differs = redecided(game, rules, state, [e for e in m.batch.events if not isinstance(e.data, NOT_OF_THE_GAME)])
        if differs:
            return [Finding(coup, m.seq, differs)]
    if readings.findings or readings.void or readings.awaiting is not None:
        return readings.findings + readings.unruled()
    if state.phase != "finished":
        return [Finding(coup, msgs[-1].seq if msgs else 0, f"the coup is not finished (phase {state.phase})")]
    return []


class Readings:
    """A coup's card incidents and rulings (a card-reading shoe's card the coup
    could not take: docs/readers.md), each held to the coup as it stood: a
    misdraw only where no card was due, each incident ruled in turn by a
    supervisor by the house rule it names (a shoe that has left its order
    may always be ended) before anything more is dealt, a card the shoe
    could not read taken only as keyed in and confirmed, nothing dealt in a
    coup once it is void; those between coups, filed before the coup's
    opening, ruled before it opened, and voiding nothing."""

    def __init__(self, coup: str, rules: Ruleset) -> None:
        self.coup, self.rules = coup, rules
        self.findings: list[Finding] = []
        self.held: list[tuple[int, CardIncident]] = []  # the incidents awaiting a ruling, the first ruled first
        self.void = False
        self.keyed = ""  # the card keyed in for the incident awaiting a ruling
        self.confirmed = False  # a card keyed in confirmed: the next event in its message may take it

    @property
    def awaiting(self) -> CardIncident | None:
        return self.held[0][1] if self.held else None

    def look(self, m: Stored, waits: str) -> None:
        for env in m.batch.events:
            e = env.data
            if self.confirmed:
                self.confirmed = False
                if env.causation.startswith(KEYED) and not isinstance(e, NOT_OF_THE_GAME):
                    continue  # dealt as it came, before any incident after it held the coup
            if isinstance(e, CardIncident):
                if e.kind == "misdrawn" and waits == "card" and not self.held:  # held, no card is due
                    self.findings.append(Finding(self.coup, m.seq, f"{e.card} recorded as misdrawn, but the coup's "
                                                                   "rules called for a card then"))
                if (house := self._house_rule(e)) is not None:
                    self.findings.append(Finding(self.coup, m.seq, house))
                if not self.held:
                    self.keyed = ""
                self.held.append((m.seq, e))
            elif isinstance(e, CoupConfigured) and self.held:
                self.findings.append(Finding(self.coup, m.seq, f"the coup opened while held for a ruling on report "
                                                               f"{self.held[0][1].read}, a card out before it opened"))
            elif isinstance(e, CardKeyed):
                if self.awaiting is None or self.awaiting.kind != "unread" or e.read != self.awaiting.read:
                    self.findings.append(Finding(self.coup, m.seq, f"a card keyed in for report {e.read}, which "
                                                 "holds no card the shoe could not read"))
                self.keyed = e.card
            elif isinstance(e, CoupRuled):
                if e.ruling == "confirm":
                    if not self.keyed:
                        self.findings.append(Finding(self.coup, m.seq, "a card confirmed that no dealer keyed in"))
                    self.confirmed = True
                first = self.awaiting
                if first is None or e.read != first.read:
                    self.findings.append(Finding(self.coup, m.seq, f"a ruling on report {e.read}, which is not the "
                                                                   "first incident the coup was held for"))
                elif not e.supervisor:
                    self.findings.append(Finding(self.coup, m.seq, "a ruling that names no supervisor"))
                elif e.ruling != first.house_rule and not (e.ruling == "end_shoe" and first.kind in SHOE_ENDING):
                    self.findings.append(Finding(self.coup, m.seq, f"ruled {e.ruling!r}, but the house rule "
                                                 f"{first.setting} was {first.house_rule!r}"))
                elif e.ruling == "void" and not e.coup:
                    self.findings.append(Finding(self.coup, m.seq, "a ruling voids a card out between coups"))
                self.held = [(s, i) for s, i in self.held if i is not first]
                self.keyed = ""
                self.void = self.void or games.voided(e)
            elif not isinstance(e, NOT_OF_THE_GAME) and (self.awaiting is not None or self.void):
                self.findings.append(Finding(self.coup, m.seq, f"{type(e).__name__} recorded in a coup "
                                             + ("held for a ruling" if self.awaiting is not None else "ruled void")))
                return

    def _house_rule(self, e: CardIncident) -> str | None:
        """Why the house rule an incident names is not the ruleset's, or None where it is."""
        if not e.setting:
            return None if e.house_rule == "confirm" else f"a card the shoe could not read held for {e.house_rule!r}"
        setting = getattr(self.rules.shoe, e.setting.removeprefix("shoe."), None)
        allowed = {setting, "end_shoe"} | ({"go_on"} if setting == "void" and not e.coup else set())
        if e.house_rule in allowed:
            return None
        return f"held for a ruling {e.house_rule!r}, but the ruleset's {e.setting} is {setting!r}"

    def unruled(self) -> list[Finding]:
        return [Finding(self.coup, seq, f"held for {i.what}, and no supervisor has ruled") for seq, i in self.held]


def _keyed(coup: str, msgs: list[Stored]) -> list[Finding]:
    """Each card keyed in for a report the shoe could not read, and
    confirmed, is the card the shoe took for that report (checked against the
    order and the composition as the report would have been: dealt, burned,
    misdrawn or refused)."""
    keyed: dict[str, str] = {}
    confirmed: dict[str, tuple[int, str]] = {}
    taken: dict[str, str] = {}
    for m in msgs:
        for env in m.batch.events:
            e = env.data
            if isinstance(e, CardKeyed):
                keyed[e.read] = e.card
            elif isinstance(e, CoupRuled) and e.ruling == "confirm":
                confirmed[e.read] = (m.seq, keyed.get(e.read, ""))
            elif isinstance(e, shoe.CardDrawn | shoe.CardBurned | shoe.CardMisdrawn | shoe.CardRefused) and e.read:
                taken[e.read] = e.card
    return [Finding(coup, seq, f"the card taken for report {read} is {taken.get(read) or 'no card'}, not {card}, the "
                               "card keyed in and confirmed")
            for read, (seq, card) in confirmed.items() if taken.get(read) != card]


def redecided(game: games.Game, rules: Ruleset, state: Any, envelopes: Sequence[Envelope]) -> tuple[Any, str]:
    """The coup's state after one recorded batch's events (``envelopes``, its
    ``coup.configured`` left out), each decision in it decided again through
    the rules from ``state``; and, where the rules do not give exactly the
    events recorded, what differs ("" where they do). The verification of
    every coup, and the dealer-policy's reading of a coup it takes up."""
    recorded = [e.data for e in envelopes]
    i = 0
    while i < len(recorded):
        command = game.command_of.get(type(recorded[i]))
        if command is None:
            return state, f"{type(recorded[i]).__name__} is not caused by any command"
        try:
            given, state = game.step(rules, state, command(recorded[i]))
        except RuleViolation as exc:
            return state, f"the rules refuse the recorded {type(recorded[i]).__name__}: {exc}"
        given = [_as_recorded(g, e) for g, e in zip(given, envelopes[i:], strict=False)] + given[len(envelopes) - i:]
        got = recorded[i:i + len(given)]
        if given != got or not given:
            j = next((j for j, (g, r) in enumerate(zip(given, got, strict=False)) if g != r), min(len(given), len(got)))
            want = given[j] if j < len(given) else "nothing"
            have = got[j] if j < len(got) else "nothing"
            return state, f"event {i + j} of the batch: recorded {have!r}, the rules give {want!r}"
        i += len(given)
    return state, ""


def _as_recorded(given: Any, recorded: Any) -> Any:
    """The event the rules give, as the record holds it: a field that came
    with a later schema version of its type (``envelope.ADDED_SINCE``: a
    step's clause, who held the shoe), recorded before it, reads empty (its
    upcaster gives it so), and is compared empty."""
    added = ADDED_SINCE.get(recorded.type, ())
    if added and type(given) is type(recorded.data):
        empty = {f: "" for f in added if not getattr(recorded.data, f)}
        return msgspec.structs.replace(given, **empty) if empty else given
    return given


def _book_and_cards(coup: str, msgs: list[Stored], book: wagerbook.Book) -> list[Finding]:
    findings: list[Finding] = []
    events: list[tuple[int, Any]] = [(m.seq, env.data) for m in msgs for env in m.batch.events]
    drawn = {e.position: (seq, e.card) for seq, e in events if type(e) is shoe.CardDrawn}
    void = any(games.voided(e) for _, e in events)
    closed_seq = 0
    for seq, e in events:  # type tests by identity: a record has thousands of events to look at
        if type(e) in games.BETTING_CLOSED:
            closed_seq = seq
            if sorted(e.wagers, key=_key) != sorted(book.wagers, key=_key):
                findings.append(Finding(coup, seq, "the coup's wagers are not the wager book's"))
        elif type(e) in games.CARD_DEALT and ((at := drawn.pop(e.position, None)) is None or at[1] != e.card):
            findings.append(Finding(coup, seq, f"{e.card} dealt from position {e.position}, "
                                               f"but the shoe drew {at[1] if at else 'no card'} there"))
    # And every card the shoe drew for the coup was dealt in it (one it did not take is recorded otherwise:
    # misdrawn, or refused).
    findings += [Finding(coup, seq, f"the shoe drew {card} at position {position} for the coup, which dealt no card "
                                    "from there") for position, (seq, card) in sorted(drawn.items())]
    if not closed_seq and not void:  # a coup voided while betting was open deals nothing: its book is refunded
        findings.append(Finding(coup, msgs[-1].seq if msgs else 0, "betting never closed"))
    return findings


def _key(w: Wager) -> tuple[int, str, str]:
    return w.seat, w.bet, w.player


def _payouts(coup: str, msgs: list[Stored], events: list[AnyEvent], book: wagerbook.Book,
             rules: Ruleset) -> list[Finding]:
    settled = [(m.seq, e) for m in msgs for e in m.batch.events if isinstance(e.data, settlement.CoupSettled)]
    if not settled:
        return [Finding(coup, msgs[-1].seq, "the coup is not settled")]
    seq, envelope_ = settled[0]
    recorded = envelope_.data
    assert isinstance(recorded, settlement.CoupSettled)
    try:
        payouts = payouts_of(events, book, rules)
    except (RuleViolation, StopIteration) as exc:
        return [Finding(coup, seq, f"settlement cannot be recomputed: {exc}")]
    if envelope_.version < 2 and recorded.payouts and recorded.payouts[0].bet in ("box", "insurance"):
        # Version 1 named no player on a blackjack payout: compared as it was recorded.
        payouts = tuple(msgspec.structs.replace(p, player="") for p in payouts)
    findings = []
    if recorded.payouts != payouts:
        findings.append(Finding(coup, seq, f"recorded payouts {list(recorded.payouts)}, the rules give {list(payouts)}"))
    if (recorded.staked, recorded.returned) != (sum(p.stake for p in recorded.payouts),
                                                sum(p.returned for p in recorded.payouts)):
        findings.append(Finding(coup, seq, "the settled totals are not the sums of the payouts"))
    return findings


# The shoe events a shoe is verified from.
SHOE_EVENTS = (shoe.ShoeShuffled, shoe.CardBurned, shoe.CardDrawn, shoe.CardMisdrawn, shoe.ShoeEnded)
LEFT_THE_SHOE = (shoe.CardBurned, shoe.CardDrawn, shoe.CardMisdrawn)


def verify_shoes(stored: list[Stored]) -> list[Finding]:
    """Every ended shoe among ``stored`` shoe events: commitment and order."""
    per_shoe: dict[str, list[tuple[int, AnyEvent]]] = defaultdict(list)
    for m in stored:
        for env in m.batch.events:
            if isinstance(env.data, SHOE_EVENTS):
                per_shoe[env.data.shoe_id].append((m.seq, env.data))
    return [f for shoe_id, events in per_shoe.items() for f in verify_shoe(shoe_id, events)]


def verify_shoe(shoe_id: str, events: list[tuple[int, AnyEvent]]) -> list[Finding]:
    """One shoe, from its events: the cards it can hold (its composition)
    always; its commitment and order once it has ended (nothing where it was
    shuffled by hand: no order was known)."""
    events = sorted(events, key=lambda se: se[0])
    shuffled = next((e for _, e in events if isinstance(e, shoe.ShoeShuffled)), None)
    ended = next(((s, e) for s, e in events if isinstance(e, shoe.ShoeEnded)), None)
    findings = _composition(shoe_id, shuffled, events)
    if ended is None:
        return findings
    if shuffled is None:
        return [Finding(shoe_id, ended[0], "the shoe ended, but its shuffle and commitment are not recorded")]
    seq, end = ended
    assert isinstance(end, shoe.ShoeEnded)
    if shuffled.source == "hand":
        return findings + ([Finding(shoe_id, seq, "a shoe shuffled by hand revealed an order")] if end.order else [])
    try:
        shoe.check_revealed(end.order, end.salt, shuffled.commitment, shuffled.decks)
    except RuleViolation as exc:
        return [Finding(shoe_id, seq, exc.reason)]
    for s, e in events:
        if isinstance(e, LEFT_THE_SHOE) and end.order[e.position] != e.card:
            findings.append(Finding(shoe_id, s, f"position {e.position} gave {e.card}, "
                                                f"the revealed order has {end.order[e.position]}"))
    return findings


def _composition(shoe_id: str, shuffled: shoe.ShoeShuffled | None, events: list[tuple[int, AnyEvent]]) -> list[Finding]:
    """Every card out of the shoe one its decks hold: no more copies of a card than the decks have."""
    if shuffled is None:
        return []
    out: dict[str, int] = defaultdict(int)
    findings = []
    for s, e in events:
        if isinstance(e, LEFT_THE_SHOE):
            out[e.card] += 1
            if out[e.card] == shuffled.decks + 1:
                findings.append(Finding(shoe_id, s, f"{e.card} out of the shoe {out[e.card]} times: a "
                                                    f"{shuffled.decks}-deck shoe holds {shuffled.decks}"))
    return findings
