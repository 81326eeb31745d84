"""A simulated card-reading table's devices (docs/readers.md): the shuffling
machine, which shuffles the physical cards and (``recognised``) reports the
order it made, and the card-reading shoe, which reports each card as the
dealer draws it, on their own users. With ``faults`` (a chance at each card)
they misbehave as real ones do: a card drawn when none was due, a card that
is not the shoe's next (substituted), a card the shoe cannot read (the
dealer keys it in), a report sent twice, a shoe that falls silent for a while. With ``keep``, the physical shoe outlives the
simulator (a file of its own): a simulator started again deals on from the
cards left in it, and sends again the report it was sending when it stopped."""

from __future__ import annotations

import asyncio
import random
import secrets
import time
import uuid
from collections import Counter
from pathlib import Path

import msgspec

from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import LANE_BURST, LANE_RATE, Peer, Rate
from casino.rules.cards import DECK, full_set
from casino.rules.ruleset import Ruleset
from casino.rules.shoe import cites
from casino.store import subjects

FAULTS = ("misdraw", "substitute", "unread", "duplicate", "silent")
SILENT_FOR = 3.0  # seconds a shoe that falls silent stays so


class Devices:
    def __init__(self, table: str, config: TableConfig, rules: Ruleset, reader: Peer, shuffler: Peer,
                 rnd: random.Random, faults: float = 0.0, keep: Path | None = None) -> None:
        self.table, self.config, self.rules = table, config, rules
        self.reader, self.shuffler, self.rnd, self.faults = reader, shuffler, rnd, faults
        self.keep = keep
        self.physical = Physical()
        if keep is not None and keep.exists():
            self.physical = msgspec.json.decode(keep.read_bytes(), type=Physical)
        self.incidents: Counter[str] = Counter()  # the faults made, by kind
        self.report_ms: list[float] = []  # each card's report answered (recorded), in milliseconds
        clauses = cites(rules.document, rules.shoe)
        self.burn_clause, self.cut_first = clauses.burn, clauses.cut_first
        # The dealer's hand: cards drawn no faster than the shoe's lane at the dealer-policy takes their
        # reports (LANE_RATE a second, LANE_BURST at once), with room for the network's jitter. A dealer
        # draws a card or two a second; without it a simulated shoe reported a whole deal at once, and the
        # reports past the lane's burst were refused and sent again half a second later.
        self.hand = Rate(LANE_RATE * 0.8, LANE_BURST - 2)

    @property
    def cards(self) -> list[str]:
        return self.physical.cards

    @property
    def unread(self) -> str:
        return self.physical.unread

    def _save(self, pending: commands.Command | None = None) -> None:
        """The physical shoe as it is, and the report being sent (sent again by ``resume``)."""
        self.physical.pending = b"" if pending is None else commands.encoder.encode(pending)
        if self.keep is not None:
            self.keep.parent.mkdir(parents=True, exist_ok=True)
            self.keep.with_suffix(".new").write_bytes(msgspec.json.encode(self.physical))
            self.keep.with_suffix(".new").replace(self.keep)

    async def resume(self) -> None:
        """The report that was being sent when the simulator stopped, sent again as it was."""
        if self.physical.pending:
            pending = msgspec.json.decode(self.physical.pending, type=commands.ReaderReport | commands.ShuffleMade)
            await self._send(self.shuffler if isinstance(pending, commands.ShuffleMade) else self.reader, pending)

    async def _drawn(self) -> None:
        """Until the dealer's hand has drawn the next card (``hand``)."""
        while not self.hand.take(self.table):
            await asyncio.sleep(1 / self.hand.per_second)

    async def _send(self, peer: Peer, command: commands.Command) -> commands.Reply:
        if peer is self.reader:
            await self._drawn()
        self._save(command)
        asked = time.perf_counter()  # from the report: the dealer's hand is not the engine's time
        reply = await self._report(peer, "shuffler" if isinstance(command, commands.ShuffleMade) else "read", command)
        if isinstance(command, commands.CardRead):
            self.report_ms.append(1000 * (time.perf_counter() - asked))
        self._save()
        return reply

    async def _report(self, peer: Peer, service: str, command: commands.Command) -> commands.Reply:
        for _ in range(60):
            try:
                reply = await peer.ask(subjects.command(self.table, service), command)
            except RuntimeError as exc:
                reply = commands.refused(str(exc), "internal")
            if reply.ok or reply.clause not in commands.ASK_AGAIN:
                return reply
            await asyncio.sleep(0.5)
        return reply

    async def shuffle(self) -> commands.Reply:
        """The machine shuffles a full shoe, and reports the order where it is a recognised one."""
        cards = list(full_set(self.rules.shoe.decks))
        secrets.SystemRandom().shuffle(cards)
        self.physical.cards, self.physical.cut_out = cards, False
        if self.config.shuffle != "recognised":
            self._save()
            return commands.Reply(True)
        return await self._send(self.shuffler, commands.ShuffleMade(f"order-{uuid.uuid4().hex[:16]}", self.table,
                                                                    tuple(cards)))

    async def answer_refusal(self, refused: commands.Reply) -> bool:
        """What the devices do for a refused opening: shuffle a new shoe when the
        shoe waits for the machine's order, or draw the burn cards. Whether they did anything."""
        if refused.clause == commands.SHUFFLING_MACHINE or (not self.cards and "shoe" in refused.clause):
            await self.shuffle()
            return True
        if refused.clause == self.burn_clause and "burn" in refused.reason:
            await self.read()
            return True
        return False

    def _chance(self) -> bool:
        return self.faults > 0 and self.rnd.random() < self.faults

    async def read(self, due: bool = True) -> commands.Reply:
        """The dealer draws the shoe's next card and the shoe reports it; with
        faults, now and then a substituted card, a report sent twice or a silence first."""
        if not self.cards:
            await self.shuffle()
        if not self.physical.cut_out and self.cut_card_due():
            cut = await self.cut_card()
            if cut.clause == self.cut_first and self.rules.shoe.cut_card_first_of_round == "reshuffle_now":
                await self.shuffle()  # 003 7.9: reshuffled now, and the round dealt on from the new shoe
        fault = self.rnd.choice(FAULTS[1:]) if due and self._chance() else ""
        if fault == "substitute" and self.config.shuffle == "recognised":
            self.incidents["substitute"] += 1
            card = self.rnd.choice([c for c in DECK if c != self.cards[0]])  # a card from the dealer's sleeve
        else:
            card = self.cards.pop(0)
        if fault == "unread":
            self.incidents["unread"] += 1
            self.physical.unread = card
        report = commands.CardRead(f"card-{uuid.uuid4().hex[:16]}", self.table, "" if fault == "unread" else card)
        if fault == "silent":
            self.incidents["silent"] += 1
            await asyncio.sleep(SILENT_FOR)
        reply = await self._send(self.reader, report)
        if fault == "duplicate":
            self.incidents["duplicate"] += 1
            await self._drawn()
            reply = await self._report(self.reader, "read", report)
        return reply

    async def maybe_misdraw(self) -> commands.Reply | None:
        """Now and then, a card drawn while the coup waits for a player, or
        between coups: a misdraw (the reply to its report)."""
        if self.cards and self._chance():
            self.incidents["misdraw"] += 1
            return await self.read(due=False)
        return None

    def cut_card_due(self) -> bool:
        """Whether the cut card is the next thing out of the physical shoe."""
        cut = self.rules.shoe.cut_index
        return cut is not None and len(self.cards) == self.rules.shoe.cards - cut

    async def cut_card(self) -> commands.Reply:
        """The cut card out of the shoe, reported."""
        self.physical.cut_out = True
        return await self._send(self.reader, commands.CutCardRead(f"cut-{uuid.uuid4().hex[:16]}", self.table))


class Physical(msgspec.Struct):
    """A simulated table's physical shoe: the cards left in it, the next
    first; whether its cut card has come out; the card it last could not
    read, as the dealer sees it; and the report being sent (a command)."""

    cards: list[str] = []
    cut_out: bool = False
    unread: str = ""
    pending: bytes = b""
