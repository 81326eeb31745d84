"""The command interface: what a table terminal (the dealer's screen, a
card-reading shoe, the simulator) and the services send each other.

Every command is a msgspec Struct with a stable tag, sent as JSON by NATS
request/reply to ``casino.cmd.<table>.<service>``; every reply is a ``Reply``.
``id`` identifies the command: a retried command carries the same id and is
applied once.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

import msgspec

from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.cards import Card
from casino.rules.errors import RuleViolation
from casino.rules.runs import Run
from casino.rules.shoe import CardDrawn, CutCardReached, ReshuffleRequired, RoundEnded, RoundStarted
from casino.rules.text import Name, Text
from casino.rules.wagers import Wager

Hand = Literal["player", "banker"]


# An identifier that becomes a subject token (a table, a coup, a shoe):
# letters, digits, '_' and '-', so that no wildcard ('*', '>'), dot or space
# turns one table's command into a read of many.
Token = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
# A command id goes into a message id header: visible ASCII, bounded.
CommandId = Annotated[str, msgspec.Meta(pattern=r"^[!-~]{1,128}$")]


class Command(msgspec.Struct, frozen=True, tag_field="type", forbid_unknown_fields=True):
    id: CommandId
    table: Token


def digest(command: Command) -> str:
    """What a command says, in short: recorded with the events it causes, so
    that a command sent again with the same id and other content is refused."""
    return hashlib.sha256(encoder.encode(command)).hexdigest()[:16]


def reused(command: Command, recorded: str) -> RuleViolation | None:
    """The refusal of ``command`` whose id was recorded with the digest
    ``recorded`` (None for a retry of the same command, or a record too old
    to tell)."""
    if recorded and recorded != digest(command):
        return RuleViolation("command id", f"command id {command.id} was used already for another command; "
                                           "a new command takes a new id")
    return None


def id_digest(command_id: str) -> str:
    """A command id in short, as a coup's record names the openings before it
    (``CoupConfigured.opened_before``): 48 bits, against a few dozen ids of one table."""
    return hashlib.sha256(command_id.encode()).hexdigest()[:12]


def opening_id(table: str, command_id: str) -> str:
    """The message id of the write that opens a coup: of the table and the
    command, whatever coup it opens, so that the stream itself refuses to
    write a second opening for the same command (within its duplicate window)."""
    return f"{table}:open:{command_id}"


def write_id(coup: str, command_id: str) -> str:
    """The message id of the write a terminal's command causes in a coup: a
    terminal's command ids are its own, and the stream deduplicates message
    ids across all subjects, so the same id at another coup is another
    command, never a retry of this one."""
    return f"{coup}:{command_id}"


# ---- to the dealer-policy service (casino.cmd.<table>.coup) -----------------


class Approval(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """An approval as a command names one (it must be among the table's in
    the casino's configuration): a name, an approver, a printable reference,
    and as the configuration words them, its conditions and when it was
    granted (the coup records the configuration's, whatever a terminal says)."""

    what: Name
    by: baccarat_messages.Approver
    reference: Text = ""
    conditions: Text = ""
    granted: Text = ""

    def held_by(self, approvals: tuple[baccarat_messages.Approval, ...]) -> bool:
        """Whether ``approvals`` (the table's configuration) hold this one."""
        return any((a.what, a.by, a.reference) == (self.what, self.by, self.reference) for a in approvals)


class OpenCoup(Command, frozen=True, tag="table.open_coup"):
    """Open the next coup; ``procedure`` is a baccarat method or style (empty:
    the one in force, the last coup's, else the tables file's, else the
    ruleset's first); ``approvals`` are the approvals in force. Another
    procedure than the one in force is the casino's choice (000 8.2, 001 8.5):
    taken only on a supervisor's own subject (``subjects.supervise``), where
    ``supervisor`` is the name that subject gives; from a table's terminal it
    is always empty, whatever the terminal wrote. ``number``: the number of
    the coup it opens (the last coup the terminal saw, and one; ``table.status``
    names the latest), always: an opening is applied once however late it is
    asked again (the table past that number, it is refused), and one that
    names none is refused, naming the table's next. ``dealer``: who
    deals the coup, as signed in at the table's terminal (empty: the dealer
    who dealt the table's last coup deals on); recorded with the coup, and a
    change of dealer with it."""

    procedure: Name = ""
    approvals: tuple[Approval, ...] = ()
    supervisor: Text = ""
    number: Annotated[int, msgspec.Meta(ge=0, le=999_999)] = 0
    dealer: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,64}$")] = ""


class CloseBetting(Command, frozen=True, tag="table.close_betting"):
    coup: Token


class AnswerOffer(Command, frozen=True, tag="table.answer_offer"):
    coup: Token
    seat: int
    accept: bool
    plays: Hand = "banker"


class ExposeHand(Command, frozen=True, tag="table.expose_hand"):
    coup: Token
    seat: int
    hand: Hand


class ReturnCards(Command, frozen=True, tag="table.return_cards"):
    coup: Token
    seat: int
    hand: Hand


class ReportHandlingBreach(Command, frozen=True, tag="table.report_handling_breach"):
    coup: Token
    seat: int
    hand: Hand
    note: Text = ""


class PassShoe(Command, frozen=True, tag="table.pass_shoe"):
    coup: Token
    seat: int


class ForfeitShoe(Command, frozen=True, tag="table.forfeit_shoe"):
    """000 8.20, 8.29: a supervisor directs the holder to forfeit the shoe.
    Taken only on the supervisor's own subject (``subjects.supervise``), and
    ``supervisor`` is then the name that subject gives, whatever the sender
    wrote: a table's terminal cannot direct it, nor name who did."""

    coup: Token
    seat: int
    supervisor: Text = ""


class Decide(Command, frozen=True, tag="table.decide"):
    """A blackjack player's decision: stand, hit, double, split or insurance."""

    coup: Token
    seat: int
    hand: int
    action: Literal["stand", "hit", "double", "split", "insurance"]
    amount: int = 0


class Status(Command, frozen=True, tag="table.status"):
    """What the table's current coup waits for (a query; writes nothing)."""


class Rule(Command, frozen=True, tag="table.rule"):
    """A supervisor's ruling on the first incident a coup is held for, of what
    a card-reading shoe reported (docs/readers.md): ``go_on`` (the card stays
    out of the coup, in the discard rack, and the coup is dealt on), ``void``
    (nothing more is dealt in it, every stake is returned, and the table goes
    on with its next coup), ``end_shoe`` (void, and the shoe ended: its cards
    come out and are shuffled again), or, for a card the shoe could not read,
    ``confirm``: ``card`` is the card the dealer keyed in (``KeyCard``), seen
    by the supervisor, and the coup takes it as the shoe's report. A card out
    between coups holds the next coup's opening, and is ruled in that coup's
    record (``coup`` names it). ``read``, where given, is the report the
    ruling is on: it must be the first the coup is held for. Taken only on the
    supervisor's own subject, where ``supervisor`` is the name that subject gives."""

    coup: Token
    ruling: Literal["go_on", "void", "confirm", "end_shoe"]
    supervisor: Text = ""
    card: Annotated[str, msgspec.Meta(pattern=r"^([2-9TJQKA][SHDC])?$")] = ""
    read: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_:.-]{0,64}$")] = ""


class KeyCard(Command, frozen=True, tag="table.key_card"):
    """The dealer keys in, from the table's terminal, the card the
    card-reading shoe could not read (docs/readers.md); taken into the coup
    only once a supervisor confirms it (``Rule`` ``confirm``). ``dealer``:
    who keys it, as signed in at the terminal (empty: the dealer of the
    table's latest coup, on duty); refused where nobody is."""

    coup: Token
    card: Annotated[str, msgspec.Meta(pattern=r"^[2-9TJQKA][SHDC]$")]
    dealer: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,64}$")] = ""


class ReopenTable(Command, frozen=True, tag="table.reopen"):
    """A supervisor reopens a table its card-reading shoe's incidents closed
    (docs/readers.md): recorded with the supervisor's name and the count of
    the cards its shoe reported while it was closed. Taken only on the
    supervisor's own subject, where ``supervisor`` is the name that subject gives."""

    supervisor: Text = ""


CoupCommand = (
    OpenCoup | CloseBetting | AnswerOffer | ExposeHand | ReturnCards | ReportHandlingBreach | PassShoe
    | ForfeitShoe | Decide | Status | KeyCard
)
# What a supervisor directs, on the supervisor's own subject: a forfeit and a
# ruling only there (SUPERVISED), an opening there or, by the procedure in force, from a terminal.
SupervisorCommand = ForfeitShoe | OpenCoup | Rule | ReopenTable
SUPERVISED = (ForfeitShoe, Rule, ReopenTable)


# ---- from a table's card-reading shoe (casino.cmd.<table>.read) and shuffling
# machine (casino.cmd.<table>.shuffler): docs/readers.md ----------------------

# A report's id: the device's own, unique at its table; a report sent again with it is the same report.
ReportId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_:.-]{1,64}$")]


class CardRead(Command, frozen=True, tag="reader.card"):
    """A card out of the card-reading shoe, as it read it; ``card`` empty where it could not read it."""

    id: ReportId
    card: Annotated[str, msgspec.Meta(pattern=r"^([2-9TJQKA][SHDC])?$")]


class CutCardRead(Command, frozen=True, tag="reader.cut_card"):
    """The cut card out of the card-reading shoe."""

    id: ReportId


ReaderReport = CardRead | CutCardRead


class ShuffleMade(Command, frozen=True, tag="shuffler.order"):
    """The order a shuffling machine made for the table's next shoe, the
    shoe's first card first: one full set of the shoe's decks."""

    id: ReportId
    cards: Annotated[tuple[Annotated[str, msgspec.Meta(pattern=r"^[2-9TJQKA][SHDC]$")], ...],
                     msgspec.Meta(max_length=416)]


# What the dealer-policy answers: a terminal's, a supervisor's and a card-reading shoe's commands.
PolicyCommand = CoupCommand | SupervisorCommand | ReaderReport


# ---- to the wager service (casino.cmd.<table>.wager) -----------------------


# A player at the table, as the terminal names them (no one named: the player seated at the box).
Player = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,64}$")]


class PlaceWager(Command, frozen=True, tag="table.place_wager"):
    """A wager on the box of ``seat``: the seated player's, or a back bet by
    ``player`` where another player sits there (baccarat)."""

    coup: Token
    seat: int
    bet: Name
    amount: int
    player: Player = ""


class SlipLine(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """One wager of a bet slip, as ``PlaceWager`` has it."""

    seat: int
    bet: Name
    amount: int
    player: Player = ""


SLIP_MOST = 64  # wagers on one slip: a table's seats, each with every bet it offers, and back bets beside


class PlaceWagers(Command, frozen=True, tag="table.place_wagers"):
    """A bet slip: a seat's or a table's wagers placed at once (one
    record), as an electronic table confirms a slip; refused whole, the
    refused line and its rule named, where any one of them is."""

    coup: Token
    wagers: Annotated[tuple[SlipLine, ...], msgspec.Meta(min_length=1, max_length=SLIP_MOST)]


class CancelWager(Command, frozen=True, tag="table.cancel_wager"):
    coup: Token
    seat: int
    bet: Name
    player: Player = ""


class Sit(Command, frozen=True, tag="table.sit"):
    """``player`` takes ``seat`` while the coup's betting is open (recorded in its book)."""

    coup: Token
    seat: int
    player: Token


class Leave(Command, frozen=True, tag="table.leave"):
    """The player seated at ``seat`` leaves it while the coup's betting is open."""

    coup: Token
    seat: int


WagerCommand = PlaceWager | PlaceWagers | CancelWager | Sit | Leave


# ---- to the wager service from the dealer-policy (casino.cmd.<table>.book) --
# A subject of their own: only the dealer-policy may publish on it, so no
# terminal opens or closes a book, or stakes a double, split or insurance the
# coup has not decided.


class OpenBook(Command, frozen=True, tag="wager.open_book"):
    """``previous``: the table's last coup, whose seating the new book opens with."""

    coup: Token
    shoe: Token
    ruleset: str
    previous: str = ""


class CloseBook(Command, frozen=True, tag="wager.close_book"):
    """``void``: the coup is void by a supervisor's ruling while its betting is
    open: the book closes with the wagers placed, to be returned, whatever
    the deal would have needed (casino.rules.wagerbook)."""

    coup: Token
    void: bool = False


class PlaceExtra(Command, frozen=True, tag="wager.place_extra"):
    coup: Token
    seat: int
    hand: int
    kind: Literal["double", "split", "insurance"]
    amount: int


BookCommand = OpenBook | CloseBook | PlaceExtra


# ---- to the shoe service (casino.cmd.<table>.shoe) --------------------------


class StartRound(Command, frozen=True, tag="shoe.start_round"):
    """The round of ``coup`` started; ``after`` as ``DrawCard``'s. With
    ``unrecorded`` (asked as the coup opens, before its opening is recorded)
    the start is given for the opening's append to carry (``Reply.carried``)
    where the shoe records nothing else with it (a reshuffle first is the
    shoe's own append)."""

    coup: Token
    ruleset: str
    after: str = ""
    unrecorded: bool = False
    after_digest: str = ""  # ``envelope.step_digest`` of the step ``after`` names, as the record holds it


class DrawCard(Command, frozen=True, tag="shoe.draw_card"):
    """The coup's cards from the ``index``-th (0 first), ``count`` of them, drawn
    in one step: asking again for the same cards returns the same cards, so a
    retried draw never takes a second card. With a ``run`` (nobody waited for
    until the coup's last card) the draw goes on in the same step with every
    further card the run's rule calls for (casino.rules.runs): the tableau's,
    or the dealer's drawing rule once every player has acted. A run with its
    pickup draws the coup's last cards: the round ends in the same step (as
    ``EndRound`` ends it), and with ``next`` the next coup's round starts.
    What the shoe decides is not recorded by it where nothing else of the
    shoe's follows at once (a reshuffle): it is answered ``carried``, for the
    coup's append, and ``after`` confirms it, as ``TakeRead``'s.
    ``unrecorded``: the coup's steps before the draw (its betting closed, a
    choice, a draw given for the same append) are staged, not yet recorded;
    a draw the shoe would record itself is then refused (``RECORD_FIRST``):
    no card is recorded before them. So is one whose ``after`` names a step
    the instance asked neither gave nor finds in the record (another
    instance gave it, and this one cannot know the cards it took)."""

    coup: Token
    ruleset: str
    index: int
    count: int = 1
    run: Run | None = None
    next: Token | None = None
    after: str = ""
    unrecorded: bool = False
    after_digest: str = ""  # ``envelope.step_digest`` of the step ``after`` names, as the record holds it


# A draw the shoe records in its own append (a reshuffle follows it) while the coup's steps before it are
# not yet recorded: refused, for the dealer-policy to record them first (``DrawCard.unrecorded``).
RECORD_FIRST = "record first"


class EndRound(Command, frozen=True, tag="shoe.end_round"):
    """The round of ``coup`` ended, its cards to the discard rack in their
    ``pickup`` order; with ``next``, the table's next coup, the round of that
    coup started in the same step where the shoe can deal it at once (no
    reshuffle, no burn due): answered with ``next`` and its shoe, or else with
    ``coup`` (the next coup's opening then starts its round). ``held``: the
    coup is held for compliance, and its round ends with the cards the shoe
    drew for it, whatever round the shoe is dealing (casino.rules.shoe.EndHeld).
    ``unrecorded``: asked before the coup's result is recorded, for the
    result's append to carry the round's end (``Reply.carried``); where the
    shoe would record it itself (a reshuffle follows) it is refused
    (``RECORD_FIRST``) and asked again once the result is recorded."""

    coup: Token
    ruleset: str
    pickup: tuple[Card, ...]
    next: Token | None = None
    held: bool = False
    after: str = ""
    unrecorded: bool = False
    after_digest: str = ""  # ``envelope.step_digest`` of the step ``after`` names, as the record holds it


class TakeRead(Command, frozen=True, tag="shoe.take_read"):
    """A card-reading shoe's report, checked by the shoe (``CardRead``,
    ``CutCardRead``): ``due`` where the coup's rules call for a card now
    (``clause``: what a card out when none is due breaches). Answered with
    the card and its position, or with the ``incident`` it was recorded as.
    Where the card due is one of a ``run`` (``count`` cards from the coup's
    ``first``, then each its rule calls for) and completes it, the round ends
    in the card's own append, as ``DrawCard``'s run ends it, and with ``next``
    the next coup's round starts.

    A card due is not recorded by the shoe where nothing else of the shoe's
    follows at once (a reshuffle): it is answered ``carried``, with the
    round's end where it completes a run, and the coup's own append records
    it (one durable step a card). ``after`` (here and in ``EndRound``): the report of the last card
    the coup's record carries, as the dealer-policy has read it, which
    confirms that card at the shoe; a card carried that the record does not
    hold is answered first (``earlier``), for the dealer-policy to record."""

    coup: str
    ruleset: str
    read: str
    card: str = ""
    cut: bool = False
    due: bool = False
    clause: str = ""
    run: Run | None = None
    first: int = 0
    count: int = 0
    next: Token | None = None
    after: str = ""
    after_digest: str = ""  # ``envelope.step_digest`` of the step ``after`` names, as the record holds it


class EndShoeNow(Command, frozen=True, tag="shoe.end_now"):
    """A card-reading table's shoe ended now by a supervisor's ruling under
    the house rule ``clause`` on the card of report ``read`` (the shoe has
    left its committed order, or its cut card came out of place), or by the
    table's closing: the void coup's cards picked up, the order revealed, and
    the next shoe filled once its machine reports the order (by hand: at
    once). ``shoe``: the shoe to end (where empty, the shoe of ``read``).
    Answered as done once that shoe is no longer in play."""

    coup: str
    ruleset: str
    read: str
    clause: str
    shoe: str = ""


class ShoeStatus(Command, frozen=True, tag="shoe.status"):
    """Whether the table's card-reading shoe waits for its shuffling machine's
    order of a new shoe (answered with ``Waiting`` ``shuffle``); a query."""

    ruleset: str


ShoeCommand = StartRound | DrawCard | EndRound | TakeRead | EndShoeNow | ShoeStatus


# ---- replies ----------------------------------------------------------------


class Waiting(msgspec.Struct, frozen=True):
    """What a coup waits for next: ``open`` (no coup), ``close_betting``,
    ``answer`` (from ``seat``, about ``offer``), ``expose`` (``seat``'s ``hand``),
    ``decision`` (``seat``, blackjack ``box_hand``), ``read`` (the card-reading
    shoe's next card, due to ``seat``/``hand``), ``key`` (the card the shoe
    could not read, keyed in by the dealer), ``ruling`` (held for a card
    ``incident`` until a supervisor rules), ``shuffle`` (a card-reading
    table's shoe has ended, and its shuffling machine's order of the next is
    awaited), ``closed`` (the table is out of play for its card-reading
    shoe's incidents, ``reason`` says why, until a supervisor reopens it:
    ``table.reopen``), ``finished``, or ``held``
    (held for compliance, or void: nothing more is dealt in it; the next coup opens). For a
    decision it shows the hand's ``cards``, the dealer's face-up ``dealer`` cards
    and the actions the rules allow now (``options``). At baccarat,
    ``shoe_holder`` is the seat holding the shoe (once the coup is finished,
    the seat keeping it into the next coup, 000 8.18)."""

    kind: str
    seat: int | None = None
    hand: str | None = None
    box_hand: int = 0
    offer: str | None = None
    cards: tuple[Card, ...] = ()
    dealer: tuple[Card, ...] = ()
    options: tuple[str, ...] = ()
    shoe_holder: int | None = None
    # ``key``, ``ruling``: what the coup is held for ("misdrawn", "refused", "unread", "cut_card":
    # docs/readers.md), and the ruling its house rule calls for
    incident: str | None = None
    house_rule: str | None = None
    # ``closed``: why the table is closed (its card-reading shoe's incidents), until a supervisor reopens it
    reason: str | None = None


class Reply(msgspec.Struct, frozen=True, omit_defaults=True):
    """``ok`` or a refusal with the ``reason`` and the ``clause`` that refuses."""

    ok: bool
    reason: str = ""
    clause: str = ""
    coup: str = ""
    shoe: str = ""
    waiting: Waiting | None = None
    cards: tuple[Card, ...] = ()
    positions: tuple[int, ...] = ()
    wagers: tuple[Wager, ...] = ()
    # What a card-reading shoe's report was recorded as, where not (only) a card dealt:
    # "burned", "misdrawn", "refused" (not the shoe's), "cut card", "cut card misplaced"; and the
    # ruling the house rules call for on an incident (casino.rules.shoe.house_rule).
    incident: str = ""
    house_rule: str = ""
    # The shoe's record of a step (a card due, a draw, the round's end), for the coup's append to carry, and
    # the report of a card carried before that the coup's record does not hold yet, asked again first.
    carried: tuple[CardDrawn | CutCardReached | ReshuffleRequired | RoundEnded | RoundStarted, ...] = ()
    earlier: str = ""


WAGER_SERVICE = "wager service"
# The refusal of what a card-reading table cannot do until its shuffling machine reports the order of a new
# shoe (docs/readers.md): the table waits for it (``Waiting`` ``shuffle``), and says so.
SHUFFLING_MACHINE = "shuffling machine"
# The refusal of a command to a coup held for compliance (its record holds a message the dealer-policy
# cannot read or follow): nothing more is dealt in it, and the table goes on with its next coup.
HELD = "held for compliance"
# Refusals a terminal meets with the same command (the same id) asked again a
# moment later: a service or the event store away, another writer winning the
# race, too many commands waiting, a coup opened whose wager book is not open
# yet. Asked again, a command recorded already is answered as recorded.
ASK_AGAIN = frozenset({"internal", "concurrency", "event store", "rate limit", WAGER_SERVICE})


def refused(reason: str, clause: str) -> Reply:
    return Reply(False, reason=reason, clause=clause)


coup_decoder = msgspec.json.Decoder(CoupCommand)
supervise_decoder = msgspec.json.Decoder(SupervisorCommand)
wager_decoder = msgspec.json.Decoder(WagerCommand)
book_decoder = msgspec.json.Decoder(BookCommand)
shoe_decoder = msgspec.json.Decoder(ShoeCommand)
reply_decoder = msgspec.json.Decoder(Reply)
reader_decoder = msgspec.json.Decoder(ReaderReport)
shuffler_decoder = msgspec.json.Decoder(ShuffleMade)
encoder = msgspec.json.Encoder()
