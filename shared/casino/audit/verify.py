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
from typing import TYPE_CHECKING, Any

import msgspec

from casino import games
from casino.audit.findings import Finding
from casino.audit.readings import Rulings, assumed, filed
from casino.config import rulesets
from casino.games import payouts_of
from casino.rules import incidents, settlement, shoe, wagerbook
from casino.rules.errors import RuleViolation
from casino.rules.incidents import CardKeyed, CoupRuled, Incidents
from casino.rules.ruleset import Ruleset
from casino.rules.wagers import Wager
from casino.store import subjects
from casino.store.envelope import (
    ADDED_SINCE,
    CARRIED,
    NOT_OF_THE_GAME,
    AnyEvent,
    CoupConfigured,
    CoupHeld,
    Envelope,
    RulesetRecorded,
)
from casino.store.eventstore import Stored

if TYPE_CHECKING:
    from casino.audit.carried import Left


def verify_coup(stored: list[Stored], recorded: Mapping[str, Ruleset] | None = None,
                before: Left | None = None) -> list[Finding]:
    """Every difference in one coup's records (all four services' events).
    The coup is decided again under the ruleset it names by digest: its
    recorded content where ``recorded`` (by digest) holds it, else the file of
    that name, which must still have that digest. ``before``: what the table's
    coup before left (where it was verified before it), from which its
    card-reading shoe's incidents are decided again."""
    msgs = sorted(stored, key=lambda m: m.seq)
    coup = subjects.tokens(msgs[0].subject)[2] if msgs else ""
    strays = unreadable(coup, msgs)
    if any(m.unreadable and m.msg_id for m in msgs):  # written as ours write, and not understood: the coup neither
        return strays
    everything: list[AnyEvent] = [e.data for m in msgs for e in m.batch.events]
    configured = next((e for e in everything if isinstance(e, CoupConfigured)), None)
    if any(isinstance(e, CoupHeld) for e in everything):
        return strays + filed(coup, msgs) + _held(coup, msgs, configured, recorded, before)
    if configured is None:
        return strays + [Finding(coup, msgs[0].seq if msgs else 0, "the coup has no coup.configured event")]
    try:
        return strays + filed(coup, msgs) + _verified(coup, msgs, everything, configured, recorded, before)
    except Exception as exc:  # events the rules cannot follow at all (not a refusal: a record no dealer wrote)
        return strays + [Finding(coup, msgs[-1].seq, f"the coup's events cannot be followed: {type(exc).__name__}: "
                                                     f"{str(exc)[:200]}")]


def verify_before_opening(stored: list[Stored], before: Left | None,
                          recorded: Mapping[str, Ruleset] | None = None) -> list[Finding]:
    """The part of a coup's record filed before its opening under a shoe it
    did not open from (``readings.before_opening_only``): its incidents
    decided again from what the coup before left, and where each is filed.
    The coup itself is verified where it opened."""
    msgs = sorted(stored, key=lambda m: m.seq)
    coup = subjects.tokens(msgs[0].subject)[2] if msgs else ""
    rules = resolve(before.ruleset, before.digest, recorded) if before is not None and before.ruleset else None
    rulings = Rulings(coup, rules.shoe if rules is not None else None, _prior(msgs, before, None))
    for m in msgs:
        if subjects.tokens(m.subject)[3] == "coup":
            rulings.look(m, False)
    return unreadable(coup, msgs) + filed(coup, msgs) + rulings.findings


def resolve(name: str, digest: str, recorded: Mapping[str, Ruleset] | None) -> Ruleset | None:
    """The ruleset a coup names by ``digest``: its recorded content, else the
    file ``name`` where it still has that digest (None where neither does)."""
    found = (recorded or {}).get(digest)  # its digest checked as it was read
    if found is None:
        found = rulesets.load(name)
        if rulesets.digest_of(found) != digest:
            return None
    return found


def _prior(msgs: list[Stored], before: Left | None, number: int | None) -> Incidents:
    """The table's incidents as the coup before left them, where it was
    verified before this one (``number``: this coup's, where it opened here),
    else as the record implies them."""
    if before is not None and (number is None or before.number == number - 1):
        return before.incidents
    return assumed(e.data for m in msgs if subjects.tokens(m.subject)[3] == "coup" for e in m.batch.events)


def _held(coup: str, msgs: list[Stored], configured: CoupConfigured | None, recorded: Mapping[str, Ruleset] | None,
          before: Left | None) -> list[Finding]:
    """A coup held for compliance: each hold, and its incidents (a table
    closed with it) decided again where its ruleset is known, nothing else."""
    rules = None if configured is None else resolve(configured.ruleset, configured.ruleset_digest, recorded)
    rulings = [] if rules is None or configured is None else _redecide(
        coup, rules, [m for m in msgs if subjects.tokens(m.subject)[3] == "coup"],
        _prior(msgs, before, configured.coup_number), held=True)
    return [f for f in rulings if "recorded in a coup" not in f.what] + [
        Finding(coup, m.seq, f"the coup was held for compliance by the dealer-policy: {e.data.reason}")
        for m in msgs for e in m.batch.events if isinstance(e.data, CoupHeld)]


def unreadable(coup: str, msgs: list[Stored]) -> list[Finding]:
    """Every message among ``msgs`` that is no record this code can read: one
    written with a message id as the services write (the coup cannot be
    understood), or a stray no service wrote (the server's answer to a
    request aimed at the coup's subject, say), under the coup all the same."""
    return [Finding(coup, m.seq, f"message seq {m.seq} cannot be read ({m.unreadable})" + (
        "" if m.msg_id else ": written by no service of ours (no message id)")) for m in msgs if m.unreadable]


def _verified(coup: str, msgs: list[Stored], everything: list[AnyEvent], configured: CoupConfigured,
              recorded: Mapping[str, Ruleset] | None, before: Left | None) -> list[Finding]:
    rules = resolve(configured.ruleset, configured.ruleset_digest, recorded)
    if rules is None:
        now = rulesets.digest_of(rulesets.load(configured.ruleset))
        return [Finding(coup, msgs[0].seq, f"the coup was dealt under {configured.ruleset} with digest "
                                           f"{configured.ruleset_digest}; neither the record nor the file "
                                           f"(digest {now}) holds that ruleset")]
    findings = _redecide(coup, rules, [m for m in msgs if subjects.tokens(m.subject)[3] == "coup"],
                         _prior(msgs, before, configured.coup_number)) + _keyed(coup, msgs)
    book = wagerbook.book_of(everything)
    findings += _book_and_cards(coup, msgs, book, configured)
    findings += _payouts(coup, msgs, everything, book, rules)
    return sorted(findings, key=lambda f: f.seq)


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


def _redecide(coup: str, rules: Ruleset, msgs: list[Stored], before: Incidents, held: bool = False) -> list[Finding]:
    """Each recorded batch holds one decision or several consecutive ones (the
    dealer's own steps are recorded together): from the first event not yet
    explained, the command it implies is decided again and must give exactly
    the events recorded from there (``redecided``); each card-reading shoe's
    incident, from what the coup before left (``before``), through the
    incidents' rules (casino.audit.readings). ``held``: the coup is held for
    compliance, and only its incidents are decided again."""
    game = games.of(rules)
    state: Any = game.new()
    rulings = Rulings(coup, rules.shoe, before)
    for m in msgs:
        rulings.look(m, state.phase != "new" and game.waiting(rules, state).kind == "card")
        if rulings.stopped or held:
            continue
        state, differs = redecided(game, rules, state, [e for e in m.batch.events if not isinstance(e.data, NOT_OF_THE_GAME)])
        if differs:
            return rulings.findings + [Finding(coup, m.seq, differs)]
    if held:
        return rulings.findings
    if rulings.findings or rulings.state.void or rulings.state.awaiting:
        return rulings.findings + rulings.unruled()
    if state.phase != "finished":
        return [Finding(coup, msgs[-1].seq if msgs else 0, f"the coup is not finished (phase {state.phase})")]
    return []


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


def _book_and_cards(coup: str, msgs: list[Stored], book: wagerbook.Book, configured: CoupConfigured) -> list[Finding]:
    """The wagers the coup dealt to are its book's, every card dealt is the
    card the shoe drew at that position and every card drawn was dealt, and
    (in records since ``coup.configured`` version 7) no card left the shoe
    for the coup before its betting closed was recorded."""
    findings: list[Finding] = []
    events: list[tuple[int, Any]] = [(m.seq, env.data) for m in msgs for env in m.batch.events]
    drawn: dict[int, tuple[int, str]] = {}
    for seq, e in events:
        if type(e) is shoe.CardDrawn and drawn.setdefault(e.position, (seq, e.card)) != (seq, e.card):
            findings.append(Finding(coup, seq, f"{e.card} drawn at position {e.position} for the coup, where "
                                               f"{drawn[e.position][1]} was drawn already"))
    void = any(incidents.voided(e) for _, e in events)
    if configured.shoe:  # records since coup.configured version 7
        findings += _drawn_after_closing(coup, events, min((seq for seq, _ in drawn.values()), default=0))
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


def _drawn_after_closing(coup: str, events: list[tuple[int, Any]], first_drawn: int) -> list[Finding]:
    """No card left the shoe for the coup before its betting closed was recorded."""
    closed = next((seq for seq, e in events if type(e) in games.BETTING_CLOSED), 0)
    if first_drawn and closed and first_drawn < closed:
        return [Finding(coup, first_drawn, f"a card left the shoe for the coup (seq {first_drawn}) before its betting "
                                           f"closed was recorded (seq {closed})")]
    return []


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


SHOE_TYPES = frozenset(SHOE_EVENTS)
CARRIED_TYPES = frozenset(CARRIED)


def of_the_shoe(aggregate: str, event: object) -> bool:
    """Whether ``event``, recorded under ``aggregate``, is of its shoe's
    record: the shoe's own messages, and the steps the shoe gave its coups'
    appends to carry (``envelope.CARRIED`` in a coup's record)."""
    kind = type(event)
    return kind in CARRIED_TYPES if aggregate == "coup" else aggregate == "shoe" and kind in SHOE_TYPES


def shoe_records(stored: Iterable[Stored]) -> list[Stored]:
    """The messages of ``stored`` that hold its shoes' records (``of_the_shoe``)."""
    return [m for m in stored if (aggregate := subjects.tokens(m.subject)[3]) == "shoe" or (
        aggregate == "coup" and not m.unreadable and any(of_the_shoe(aggregate, e.data) for e in m.batch.events))]


def verify_shoes(stored: Iterable[Stored]) -> list[Finding]:
    """Every ended shoe among ``stored``'s shoe records (``of_the_shoe``): commitment and order."""
    per_shoe: dict[str, list[tuple[int, AnyEvent]]] = defaultdict(list)
    for m in stored:
        aggregate = subjects.tokens(m.subject)[3]
        for env in m.batch.events:
            if of_the_shoe(aggregate, env.data):
                per_shoe[env.data.shoe_id].append((m.seq, env.data))  # type: ignore[union-attr]
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
