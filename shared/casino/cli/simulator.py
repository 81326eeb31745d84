"""Simulated tables: players who wager within the limits, accept or refuse the
cards and the shoe, and play blackjack by basic strategy, all through the same
command interface a table terminal uses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from casino.cli.console import Console
from casino.cli.devices import Devices
from casino.config import rulesets
from casino.config.tables import TableConfig
from casino.nats.permissions import SIMULATED_SUPERVISORS
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules import incidents
from casino.rules.blackjack.strategy import basic_strategy
from casino.rules.ruleset import BaccaratRules, Ruleset
from casino.rules.settlement import CoupSettled
from casino.store import envelope, subjects
from casino.store.eventstore import UNREADABLE
from casino.store.jetstream import JetStreamEventStore

log = logging.getLogger("casino")
DEALER_STINT = 20  # coups a simulated dealer deals before the next takes over at the table
REFUSED_IN_A_ROW = 20  # coups a table of ``casino run`` has refused in a row when it stops (the others deal on)
SUPERVISOR = SIMULATED_SUPERVISORS[0]  # the floor supervisor the simulated tables' forfeits are directed by (000 8.20)


class Refused(Exception):
    pass


class Habits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How often the simulated players and the floor take each path the
    procedures allow, as chances per occasion: a setting, so that every run's
    record exercises every clause at realistic frequencies.

    ``change_procedure``: the floor deals the next coup by another method or
    style (a table otherwise keeps its own); ``sit``, ``leave``: a player
    takes a free seat, or a seated one leaves, between coups (up to five seated);
    ``wager``: a seated player wagers on a coup; ``back_bet``: a standing
    player bets on a seated player's box (baccarat); ``accept``: an offer of the cards, a role or the shoe accepted (all
    declining is then the chance that every seat declines); ``plays_player``: a
    player accepting the shoe asks to play Player's Hand (000 8.17.2, 8.27.2,
    with the supervisor's approval the tables have); ``expose``: a handler
    exposes the hand rather than giving the cards back; ``breach``: cards seen
    leaving full view (000 8.12, 8.22, 8.31); ``pass_shoe``: a holder passes the
    shoe before the next coup (000 8.18); ``forfeit``: a supervisor directs a
    holder to forfeit it (000 8.20); ``change``: a player cancels a wager and
    places it again at another amount; ``tie_only``, ``both_hands``: a seat
    wagering only on Tie, or on both Banker and Player; ``tie``, ``pair``: a
    Tie or a pair wager beside a seat's wager on a hand; ``insurance``:
    insurance taken when the dealer shows an ace."""

    change_procedure: float = 0.1
    sit: float = 0.3
    leave: float = 0.1
    wager: float = 0.8
    back_bet: float = 0.1
    accept: float = 0.6
    plays_player: float = 0.15
    expose: float = 0.7
    breach: float = 0.03
    pass_shoe: float = 0.2
    forfeit: float = 0.2
    change: float = 0.04
    tie_only: float = 0.04
    both_hands: float = 0.05
    tie: float = 0.2
    pair: float = 0.1
    insurance: float = 0.4

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"habit `{name}` must be a chance from 0 to 1")


async def until_finished(reply: commands.Reply,
                         respond: Callable[[commands.Waiting], Awaitable[commands.Reply]]) -> commands.Reply:
    """What a table terminal does once betting is closed: answer what the coup
    waits for (``respond``) until it is finished or a command is refused."""
    while reply.ok and reply.waiting is not None and reply.waiting.kind not in ("finished", "open", "held"):
        reply = await respond(reply.waiting)
    return reply


class SimulatedTable:
    def __init__(self, name: str, config: TableConfig, peer: Peer, rnd: random.Random,
                 settled: Callable[[str], contextlib.AbstractContextManager[asyncio.Event]], store: JetStreamEventStore,
                 habits: Habits | None = None, first: int = 0, supervisor: Peer | None = None,
                 devices: Devices | None = None) -> None:
        """``first``: which of the ruleset's procedures the table begins with (where the tables file names none);
        ``supervisor``: the floor supervisor's connection (``SUPERVISOR``'s
        credential), else the table's own."""
        self.name, self.config, self.peer, self.rnd, self.settled = name, config, peer, rnd, settled
        self.supervisor = supervisor or peer
        self.first = first
        self.store, self.habits = store, habits or Habits()
        self.devices = devices  # a card-reading table's shuffling machine and shoe
        # The last coup dealt here and who keeps its shoe (000 8.18).
        self.last: commands.Reply | None = None
        self.voided = ""  # the last coup a supervisor ruled void
        self.procedure = ""
        self.dealt_by = ""  # the procedure this terminal last opened a coup by: the one in force
        self.seated: set[int] = set()
        self.players = 0  # players named so far
        # Seconds from closing the betting to settlement, by coup, and each
        # command's reply time as this terminal waits for it, by the command's
        # type, once a benchmark asks for them (a dict here); kept for no one,
        # they would grow without end.
        self.close_to_settled: dict[str, float] | None = None
        self.reply_times: dict[str, list[float]] | None = None
        self.rules: Ruleset = rulesets.load(config.ruleset)
        self.coups = 0
        self.next_number = 0  # the number of the coup the table opens next (0: not known yet)
        self.refusals = 0  # coups refused (each reported, the table going on)
        # Coups refused in a row when the table stops, each reported, the others dealing on (None: the first
        # refused ends the run, as a test or a benchmark wants).
        self.give_up_after: int | None = None
        self.on_refusal: Callable[[str, str], None] | None = None  # told of each (the console)
        self.stopped = False  # no coup opened after this is set

    async def ask(self, service: str, command: type[commands.Command], **fields: object) -> commands.Reply:
        return await self._ask(self.peer, subjects.command(self.name, service), command, **fields)

    async def supervise(self, command: type[commands.Command], **fields: object) -> commands.Reply:
        """What only a supervisor directs, on the floor supervisor's own subject."""
        return await self._ask(self.supervisor, subjects.supervise(self.name, SUPERVISOR), command, **fields)

    async def _ask(self, peer: Peer, subject: str, command: type[commands.Command], **fields: object) -> commands.Reply:
        # Command ids are unique everywhere (the seed only steers the players' choices).
        cmd = command(id=f"sim-{self.name}-{uuid.uuid4().hex}", table=self.name, **fields)
        asked = time.perf_counter()
        for _ in range(60):
            try:
                reply = await peer.ask(subject, cmd)
            except RuntimeError as exc:  # nobody answered (the broker away, restarting): as a terminal, again
                reply = commands.refused(str(exc), "internal")
            if reply.ok or reply.clause not in commands.ASK_AGAIN:
                break
            await asyncio.sleep(0.5)  # the service could not finish (a broker or peer away): the same command again
        if self.reply_times is not None:  # until answered, retries included: as the terminal waits
            self.reply_times.setdefault(command.__name__, []).append(time.perf_counter() - asked)
        return reply

    def _procedure(self) -> str:
        """The procedure the next coup is dealt by: the table keeps its method or
        style, and now and then the floor changes it."""
        if not isinstance(self.rules, BaccaratRules):
            return ""
        if not self.procedure:  # the tables file's, else tables of one ruleset begin with its procedures in turn
            self.procedure = self.config.procedure or self.rules.procedures[self.first % len(self.rules.procedures)]
        elif self._chance("change_procedure"):
            self.procedure = self.rnd.choice(self.rules.procedures)
        return self.procedure

    async def play(self, coups: int | None, every: float = 0.0, first: float = 0.0) -> None:
        """Deal ``coups`` (forever when None): one after the other, or with
        ``every``, a coup opened every so many seconds (the first after ``first``)."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(first)
        if self.devices is not None:
            await self.devices.resume()
        refused = 0  # coups refused in a row: the table goes on after each, and stops after too many
        while (coups is None or self.coups < coups) and not self.stopped:
            started = loop.time()
            try:
                await self.one_coup()
            except Refused as exc:  # this table's trouble, reported; the others deal on, and so does it
                if self.give_up_after is None:
                    raise
                refused += 1
                self.refusals += 1
                if self.on_refusal is not None:
                    self.on_refusal(self.name, str(exc))
                log.warning("%s; the table goes on (%d refused in a row)", exc, refused)
                if refused >= self.give_up_after:
                    log.error("%s: %d coups refused in a row: the table stops dealing", self.name, refused)
                    return
                await asyncio.sleep(1.0)
                continue
            refused = 0
            self.coups += 1
            await asyncio.sleep(max(0.0, started + every - loop.time()))

    def _chance(self, habit: str) -> bool:
        return self.rnd.random() < float(getattr(self.habits, habit))

    async def _give_up_shoe(self, coup: str, seat: int, forfeit: bool) -> commands.Reply:
        """The holder passes the shoe (000 8.18), or a supervisor directs a forfeit (000 8.20)."""
        if forfeit:
            return await self.supervise(commands.ForfeitShoe, coup=coup, seat=seat)
        return await self.ask("coup", commands.PassShoe, coup=coup, seat=seat)

    @property
    def _holder(self) -> int | None:
        """The seat keeping the shoe from the last coup dealt here (000 8.18)."""
        return self.last.waiting.shoe_holder if self.last is not None and self.last.waiting is not None else None

    async def _between_coups(self) -> None:
        """The shoe holder may pass the shoe, or be directed to forfeit it,
        before the next coup; at a card-reading table, now and then a card
        comes out of the shoe between coups (held for a ruling as the next opens)."""
        if self.devices is not None:
            await self.devices.maybe_misdraw()
        if self.last is None or (holder := self._holder) is None:
            return
        if self._chance("pass_shoe"):
            await self._give_up_shoe(self.last.coup, holder, forfeit=False)
        elif self._chance("forfeit"):
            await self._give_up_shoe(self.last.coup, holder, forfeit=True)

    async def open_coup(self, procedure: str) -> commands.Reply:
        """Open the next coup by ``procedure``: from the terminal by the procedure
        in force, as the floor supervisor directs where it is another than this
        terminal last opened by (000 8.2, 001 8.5: the casino's choice); refused
        it (e.g. 000 8.4, a method the table has no approval for; 001 8.5, the
        style in force stays until the shoe ends), by the one in force. Either
        may first need the shoe given up by the player who holds it under
        Method C (000 8.18)."""
        for chosen in dict.fromkeys((procedure, "")):
            directed = bool(chosen) and chosen != self.dealt_by
            opened = await self._open(chosen, directed)
            if not opened.ok and opened.clause == "000 8.18":
                status = await self.ask("coup", commands.Status)
                if status.waiting is not None and status.waiting.shoe_holder is not None:
                    await self._give_up_shoe(status.coup, status.waiting.shoe_holder, self.rnd.random() < 0.5)
                opened = await self._open(chosen, directed)
            if opened.ok:
                self.dealt_by = chosen or self.dealt_by
                break
        return opened

    @property
    def dealer(self) -> str:
        """Who is signed in at the table's terminal: dealers take turns, ``DEALER_STINT`` coups each."""
        return f"{self.name}-D{self.coups // DEALER_STINT % 3 + 1}"

    async def _number(self) -> int:
        """The number of the coup the table opens next: the latest coup's, and
        one (the table asked where this terminal does not know it)."""
        if not self.next_number:
            status = await self.ask("coup", commands.Status)
            self.next_number = (subjects.coup_number(status.coup) or 0) + 1
        return self.next_number

    async def _open(self, procedure: str, directed: bool) -> commands.Reply:
        for _ in range(16):  # at a card-reading table, a new shoe's order reported or its burn cards read first
            number = await self._number()
            if directed:
                opened = await self.supervise(commands.OpenCoup, procedure=procedure, dealer=self.dealer,
                                              number=number)
            else:
                opened = await self.ask("coup", commands.OpenCoup, procedure=procedure, dealer=self.dealer,
                                        number=number)
            if not opened.ok and opened.clause == "coup" and "the table's next is" in opened.reason:
                self.next_number = 0  # another terminal opened one meanwhile: asked again
                continue
            if opened.ok:
                self.next_number = (subjects.coup_number(opened.coup) or 0) + 1
            if opened.ok or self.devices is None:
                break
            if opened.clause in (commands.HELD, incidents.CLOSED) and await self._before_opening():
                continue
            if not await self.devices.answer_refusal(opened):
                break
        return opened

    async def _before_opening(self) -> bool:
        """A card out between coups holds the next coup's opening: the dealer
        keys it in, or the supervisor rules, as the table waits (whether it did)."""
        status = await self.ask("coup", commands.Status)
        if not (status.ok and status.waiting is not None and
                status.waiting.kind in ("key", "ruling", "shuffle", "closed")):
            return False
        coup = f"{self.name}-{await self._number():06d}"  # the next coup's record holds what is ruled on
        await until_finished(status, lambda waiting: self._respond(coup, waiting))
        return True

    async def one_coup(self) -> None:
        await self._between_coups()
        opened = await self.open_coup(self._procedure())
        if not opened.ok:
            # A coup left in hand (the terminal stopped in the middle of it) is dealt to its end first.
            refusal = opened
            opened = await self.ask("coup", commands.Status)
            if not (opened.ok and opened.coup and opened.waiting and opened.waiting.kind not in ("open", "finished")):
                raise Refused(f"{self.name}: opening a coup refused: {refusal.clause}: {refusal.reason}")
        with self.settled(coup := opened.coup) as done:
            await self._deal(coup, done, opened.waiting)

    async def _deal(self, coup: str, done: asyncio.Event, waiting: commands.Waiting | None) -> None:
        """Place the wagers and close the betting (unless closed already), answer
        what the coup waits for, and wait for its settlement."""
        closing = time.perf_counter()
        self.next_number = (subjects.coup_number(coup) or 0) + 1
        reply = commands.Reply(True, coup=coup, waiting=waiting)
        if waiting is None or waiting.kind == "close_betting":
            await self._seat_players(coup)
            await self._place(coup, self._wagers())
            await self._back_bet(coup)
            closing = time.perf_counter()
            reply = await self.ask("coup", commands.CloseBetting, coup=coup)
        reply = await until_finished(reply, lambda waiting: self._respond(coup, waiting))
        if self.voided == coup:  # a card-reading shoe's card held it, and the supervisor ruled it void
            log.info("%s %s: void by the supervisor's ruling, every stake returned", self.name, coup)
            await self.settlement(coup, done)
            return
        if (reply.waiting is not None and reply.waiting.kind == "held") or reply.clause == commands.HELD:
            log.warning("%s %s: held for compliance, the table goes on with its next coup: %s", self.name, coup,
                        reply.reason or "held")
            return  # nothing more is dealt in it, nor settled
        if not reply.ok:
            raise Refused(f"{self.name} {coup}: {reply.clause}: {reply.reason}")
        self.last = reply
        await self.settlement(coup, done)
        if self.close_to_settled is not None:
            self.close_to_settled[coup] = time.perf_counter() - closing

    async def settlement(self, coup: str, done: asyncio.Event, timeout: float = 300) -> None:
        """Until the coup is settled: the live event, or (if the connection was
        away when it passed) the stream itself."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=2)
            if done.is_set():
                return
            with contextlib.suppress(Exception):
                if await self.store.read(f"{subjects.EVENTS}.*.*.{coup}.settle"):
                    return
            if asyncio.get_running_loop().time() > deadline:
                raise Refused(f"{self.name} {coup}: not settled within {timeout:.0f} s")

    async def stored_settlement(self, coup: str, timeout: float = 30) -> None:
        """Until the stream holds the coup's settlement."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not await self.store.read(f"{subjects.EVENTS}.*.*.{coup}.settle"):
            if asyncio.get_running_loop().time() > deadline:
                raise Refused(f"{self.name} {coup}: its settlement is not in the stream after {timeout:.0f} s")
            await asyncio.sleep(0.05)

    def _amount(self, bet: str) -> int:
        limit = self.rules.limits[bet]  # type: ignore[index]
        return int(self.rnd.choice([limit.min, 2 * limit.min, 5 * limit.min]))

    def _bets(self) -> list[str]:
        """One seat's bets: a hand (or a blackjack box), now and then both hands
        or only Tie, with a Tie or a pair wager beside."""
        if not isinstance(self.rules, BaccaratRules):
            return ["box"]
        offered = self.rules.limits
        if "tie" in offered and self._chance("tie_only"):
            return ["tie"]
        bets = ["player", "banker"] if self._chance("both_hands") else [self.rnd.choice(["player", "banker"])]
        if "tie" in offered and self._chance("tie"):
            bets.append("tie")
        pairs = [p for p in ("player_pair", "banker_pair") if p in offered]
        if pairs and self._chance("pair"):
            bets.append(self.rnd.choice(pairs))
        return bets

    async def _seat_players(self, coup: str) -> None:
        """Players come and go as betting opens, recorded in the coup's book:
        each seated player leaves now and then, and a free seat is taken now
        and then (never an empty table). A seat found taken (by a player seated
        before this simulator started) counts as seated."""
        for seat in sorted(self.seated):
            if self._chance("leave"):
                left = await self.ask("wager", commands.Leave, coup=coup, seat=seat)
                if left.ok or left.clause == "seating":
                    self.seated.discard(seat)
        free = [seat for seat in self.rules.seats if seat not in self.seated]
        while free and (not self.seated or (len(self.seated) < 5 and self._chance("sit"))):
            seat = free.pop(self.rnd.randrange(len(free)))
            self.players += 1
            await self.ask("wager", commands.Sit, coup=coup, seat=seat, player=f"{self.name}-P{self.players}")
            self.seated.add(seat)

    def _wagers(self) -> list[tuple[int, str, int]]:
        """The seated players' wagers: most of them wager on most coups (at least
        one on every coup); a player holding the shoe backs Banker's Hand, which he plays."""
        seats = [seat for seat in sorted(self.seated) if self._chance("wager")] or [self.rnd.choice(sorted(self.seated))]
        return [(seat, bet, self._amount(bet)) for seat in seats
                for bet in (["banker"] if seat == self._holder else self._bets())]

    async def _back_bet(self, coup: str) -> None:
        """Now and then a standing player bets on a seated player's box (baccarat)."""
        if isinstance(self.rules, BaccaratRules) and self.seated and self._chance("back_bet"):
            bet = self.rnd.choice(["player", "banker"])
            self.players += 1
            await self.ask("wager", commands.PlaceWager, coup=coup, seat=self.rnd.choice(sorted(self.seated)), bet=bet,
                           amount=self._amount(bet), player=f"{self.name}-B{self.players}")

    async def _place(self, coup: str, wagers: list[tuple[int, str, int]]) -> None:
        """Place the seated players' wagers on one slip, as an electronic table
        confirms it; now and then a player changes a wager: cancelled, and
        placed again at another amount."""
        slip = await self.ask("wager", commands.PlaceWagers, coup=coup,
                              wagers=tuple(commands.SlipLine(seat, bet, amount) for seat, bet, amount in wagers))
        if not slip.ok:  # as a terminal shows it; the close of betting says what it leaves the coup
            log.warning("%s %s: the slip was refused: %s: %s", self.name, coup, slip.clause, slip.reason)
        for seat, bet, _ in wagers:
            if self._chance("change"):
                await self.ask("wager", commands.CancelWager, coup=coup, seat=seat, bet=bet)
                await self.ask("wager", commands.PlaceWager, coup=coup, seat=seat, bet=bet, amount=self._amount(bet))

    def _may_play_player(self) -> bool:
        """000 8.17.2, 8.27.2: only where the table has the approval the ruleset asks for."""
        needed = self.rules.approvals.get("holder_plays_player") if isinstance(self.rules, BaccaratRules) else None
        return needed is None or any(a.what == "holder_plays_player" and a.by == needed for a in self.config.approvals)

    async def _respond(self, coup: str, w: commands.Waiting) -> commands.Reply:
        if self.devices is not None:
            if w.kind == "read":
                return await self.devices.read()
            if w.kind == "shuffle":  # the shoe has ended: its cards out, the machine shuffles and reports the order
                await self.devices.shuffle()
                return await self.ask("coup", commands.Status)
            if w.kind == "closed":  # the supervisor reopens the table, and its cards are shuffled again
                log.warning("%s: closed (%s); reopened by the supervisor", self.name, w.reason)
                reopened = await self.supervise(commands.ReopenTable)
                if reopened.ok:  # its shoe ended as it closed
                    await self.devices.shuffle()
                return await self.ask("coup", commands.Status) if reopened.ok else reopened
            if w.kind == "key":  # the dealer on duty keys in the card the shoe could not read
                return await self.ask("coup", commands.KeyCard, coup=coup, card=self.devices.unread,
                                      dealer=self.dealer)
            if w.kind == "ruling" and w.incident == "unread":  # and a supervisor confirms it, seen
                return await self.supervise(commands.Rule, coup=coup, ruling="confirm", card=self.devices.unread)
            if w.kind == "ruling":  # the floor supervisor rules by the house rule (docs/clauses.md)
                ruling = w.house_rule or "go_on"
                ruled = await self.supervise(commands.Rule, coup=coup, ruling=ruling)
                if ruled.ok and ruling in ("void", "end_shoe") and ruled.coup == coup:
                    self.voided = coup
                if ruled.ok and ruling == "end_shoe" and self.config.shuffle == "hand":
                    await self.devices.shuffle()  # the cards out of the shoe, shuffled again by the dealer
                return ruled
            misdrawn = await self.devices.maybe_misdraw()
            if misdrawn is not None and misdrawn.waiting is not None and misdrawn.waiting.kind == "ruling":
                return misdrawn  # the coup held for it: the supervisor rules next
        assert w.seat is not None
        if w.kind == "answer":
            plays = "player" if w.offer == "shoe" and self._may_play_player() and self._chance("plays_player") \
                else "banker"
            return await self.ask("coup", commands.AnswerOffer, coup=coup, seat=w.seat, accept=self._chance("accept"),
                                  plays=plays)
        if w.kind == "expose":
            if self._chance("breach"):
                await self.ask("coup", commands.ReportHandlingBreach, coup=coup, seat=w.seat, hand=w.hand,
                               note="cards below the table edge")
            kind = commands.ExposeHand if self._chance("expose") else commands.ReturnCards
            return await self.ask("coup", kind, coup=coup, seat=w.seat, hand=w.hand)
        if w.kind == "decision":
            if "insurance" in w.options and self._chance("insurance"):
                return await self.ask("coup", commands.Decide, coup=coup, seat=w.seat, hand=w.box_hand, action="insurance",
                                      amount=self.rules.limits["box"].min // 2)  # type: ignore[index]
            action = basic_strategy(w.cards, w.dealer[0], w.options)
            return await self.ask("coup", commands.Decide, coup=coup, seat=w.seat, hand=w.box_hand, action=action)
        raise Refused(f"{self.name} {coup}: cannot answer {w.kind}")


class Simulator:
    """Drives tables until each has dealt ``coups`` (forever when None), flat
    out or, with ``every``, each opening a coup every so many seconds."""

    def __init__(self, nc: Client, tables: dict[str, TableConfig], seed: int | None = None,
                 console: Console | None = None, patience: int = 5, every: float = 0.0,
                 terminals: dict[str, Client] | None = None, habits: Habits | None = None,
                 supervisor: Client | None = None, devices: dict[str, tuple[Client, Client]] | None = None,
                 faults: float = 0.0, physical: Path | None = None, give_up_after: int | None = None) -> None:
        """``nc`` watches the events; each table's commands go by its terminal's
        connection in ``terminals`` (a terminal user of its own), else by ``nc``,
        and a supervisor's by ``supervisor`` (``SUPERVISOR``'s user), else by ``nc``.
        ``habits``: how often the players take each path (``Habits``)."""
        self.nc, self.tables, self.console, self.every = nc, tables, console, every
        self.habits = habits or Habits()
        self.rnd = random.Random(seed)
        self.waiting: dict[str, asyncio.Event] = {}
        self.peers = {name: Peer((terminals or {}).get(name, nc), timeout=10, attempts=patience) for name in tables}
        self.supervisor = Peer(supervisor or nc, timeout=10, attempts=patience)
        # Each card-reading table's shoe and shuffling machine, on their own connections (users), and how
        # often they misbehave (a chance at each card); with ``physical``, where their physical shoes are kept.
        self.devices, self.faults, self.physical = devices or {}, faults, physical
        self.patience = patience
        self.give_up_after = give_up_after  # SimulatedTable.give_up_after
        self.playing: list[SimulatedTable] = []

    def stop(self) -> None:
        """Open no more coups: each table finishes the one in hand, and its
        play ends whether or not its task is also cancelled."""
        for table in self.playing:
            table.stopped = True

    @contextlib.contextmanager
    def _settled(self, coup: str) -> Iterator[asyncio.Event]:
        """Set when the coup's settlement passes, while its table waits for it
        (and no longer: a casino dealing for days would keep every coup)."""
        self.waiting[coup] = done = asyncio.Event()
        try:
            yield done
        finally:
            del self.waiting[coup]

    async def _on_event(self, msg: Msg) -> None:
        try:
            batch = envelope.decode(msg.data)
        except UNREADABLE:  # a message that is no batch of ours: nothing to show or wait for
            return
        if self.console:
            self.console.on_batch(msg.subject, batch)
        for env in batch.events:
            if isinstance(env.data, CoupSettled) and (done := self.waiting.get(env.data.coup_id)) is not None:
                done.set()

    async def run(self, coups: int | None) -> None:
        # The console shows every event; the players only wait for their settlements.
        watched = f"{subjects.EVENTS}.>" if self.console else subjects.aggregate_filter("settle")
        sub = await self.nc.subscribe(watched, cb=self._on_event)
        store = JetStreamEventStore(self.nc)
        tables: list[SimulatedTable] = []
        begun: Counter[str] = Counter()  # tables of each ruleset so far: each begins with the next procedure
        for name, cfg in self.tables.items():
            rnd = random.Random(self.rnd.random())
            devices = None
            if cfg.cards == "read":
                reader, shuffler = self.devices.get(name, (self.nc, self.nc))
                devices = Devices(name, cfg, rulesets.load(cfg.ruleset), Peer(reader, timeout=10, attempts=self.patience),
                                  Peer(shuffler, timeout=10, attempts=self.patience), rnd, self.faults,
                                  None if self.physical is None else self.physical / f"{name}.json")
            tables.append(SimulatedTable(name, cfg, self.peers[name], rnd, self._settled,
                                         store, self.habits, first=begun[cfg.ruleset], supervisor=self.supervisor,
                                         devices=devices))
            tables[-1].give_up_after = self.give_up_after
            if self.console is not None:
                tables[-1].on_refusal = self.console.refused
            begun[cfg.ruleset] += 1
        self.playing = tables
        # Paced tables start at even intervals, as tables on a floor do not deal in step.
        plays = [asyncio.ensure_future(t.play(coups, self.every, self.every * i / len(tables)))
                 for i, t in enumerate(tables)]
        try:
            done, _ = await asyncio.wait(plays, return_when=asyncio.FIRST_EXCEPTION)
            for play in done:
                play.result()  # a table that failed fails the run
            # A settlement is seen passing before the stream may hold it: a bounded run ends once it does.
            for table in tables:
                if table.last is not None:
                    await table.stored_settlement(table.last.coup)
        finally:
            await _ended(plays, self.stop)
            await sub.unsubscribe()


async def _ended(plays: list[asyncio.Task[None]], stop: Callable[[], None]) -> None:
    """Until every table's play has ended, stopping those still dealing: no
    table opens another coup, and each is cancelled again until it ends (in
    Python 3.11 a cancellation is lost in a request answered at that moment)."""
    stop()
    pending = {play for play in plays if not play.done()}
    while pending:
        for play in pending:
            play.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    for play in plays:
        if not play.cancelled():
            play.exception()  # retrieved: the run reports the first failure only
