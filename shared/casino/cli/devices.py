"""A simulated card-reading table's devices (docs/readers.md): the shuffling
machine, which shuffles the physical cards and (``recognised``) reports the
order it made, and the card-reading shoe, which reports each card as the
dealer draws it, on their own users. With ``faults`` (a chance at each card)
they misbehave as real ones do: a card drawn when none was due, a card that
is not the shoe's next (substituted), a card the shoe cannot read (the
dealer keys it in), a report sent twice, a shoe that falls silent for a while."""

from __future__ import annotations

import asyncio
import random
import secrets
import uuid
from collections import Counter

from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.protocol.service import Peer
from casino.rules.cards import DECK, full_set
from casino.rules.ruleset import Ruleset
from casino.rules.shoe import cites
from casino.store import subjects

SHUFFLER = "shuffling machine"  # the clause of a shoe waiting for its machine's order (services.shoe.readers)
FAULTS = ("misdraw", "substitute", "unread", "duplicate", "silent")
SILENT_FOR = 3.0  # seconds a shoe that falls silent stays so


class Devices:
    def __init__(self, table: str, config: TableConfig, rules: Ruleset, reader: Peer, shuffler: Peer,
                 rnd: random.Random, faults: float = 0.0) -> None:
        self.table, self.config, self.rules = table, config, rules
        self.reader, self.shuffler, self.rnd, self.faults = reader, shuffler, rnd, faults
        self.cards: list[str] = []  # the physical shoe, its next card first
        self.cut_out = False  # whether the cut card has come out of the shoe in play
        self.incidents: Counter[str] = Counter()  # the faults made, by kind
        self.unread = ""  # the card the shoe could not read last, as the dealer sees it
        self.burn_clause = cites(rules.document, rules.shoe).burn

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
        self.cards, self.cut_out = cards, False
        if self.config.shuffle != "recognised":
            return commands.Reply(True)
        return await self._report(self.shuffler, "shuffler", commands.ShuffleMade(
            f"order-{uuid.uuid4().hex[:16]}", self.table, tuple(cards)))

    async def answer_refusal(self, refused: commands.Reply) -> bool:
        """What the devices do for a refused opening: shuffle a new shoe when the
        shoe waits for the machine's order, or draw the burn cards. Whether they did anything."""
        if refused.clause == SHUFFLER or (not self.cards and "shoe" in refused.clause):
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
        if not self.cut_out and self.cut_card_due():
            self.cut_out = True
            await self.cut_card()
        fault = self.rnd.choice(FAULTS[1:]) if due and self._chance() else ""
        if fault == "substitute" and self.config.shuffle == "recognised":
            self.incidents["substitute"] += 1
            card = self.rnd.choice([c for c in DECK if c != self.cards[0]])  # a card from the dealer's sleeve
        else:
            card = self.cards.pop(0)
        if fault == "unread":
            self.incidents["unread"] += 1
            self.unread = card
        report = commands.CardRead(f"card-{uuid.uuid4().hex[:16]}", self.table, "" if fault == "unread" else card)
        if fault == "silent":
            self.incidents["silent"] += 1
            await asyncio.sleep(SILENT_FOR)
        reply = await self._report(self.reader, "read", report)
        if fault == "duplicate":
            self.incidents["duplicate"] += 1
            reply = await self._report(self.reader, "read", report)
        return reply

    async def maybe_misdraw(self) -> commands.Reply | None:
        """Now and then, a card drawn while the coup waits for a player: a misdraw (the reply to its report)."""
        if self.cards and self._chance():
            self.incidents["misdraw"] += 1
            return await self.read(due=False)
        return None

    def cut_card_due(self) -> bool:
        """Whether the cut card is the next thing out of the physical shoe."""
        cut = self.rules.shoe.cut_index
        return cut is not None and len(self.cards) == self.rules.shoe.cards - cut

    async def cut_card(self) -> commands.Reply:
        return await self._report(self.reader, "read", commands.CutCardRead(f"cut-{uuid.uuid4().hex[:16]}", self.table))
