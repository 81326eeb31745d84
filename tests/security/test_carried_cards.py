"""A card from a card-reading shoe is one durable step (docs/readers.md): the
shoe checks it against its order and gives its record of it to the coup's
append, which carries it. Proven on a secured casino on a real nats-server:
the card is one message, a shoe taken up afresh folds the carried cards
from the coups' records, a card whose coup append is lost is recorded before
the next report is taken, and a card forged into a coup's record is not the
shoe's word."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from services.dealer_policy.dealing import Dealing

from casino.protocol import commands
from casino.rules import shoe
from casino.rules.blackjack.messages import CardDealt
from casino.rules.settlement import CoupSettled
from casino.store import envelope, subjects
from casino.store.eventstore import Stored
from tests.security.hostile_devices import Table, read_table

pytestmark = pytest.mark.anyio
RULESET = "blackjack-002-hole-card"


def _carrying(history: list[Stored], read: str) -> list[Stored]:
    return [m for m in history if any(type(e.data) is shoe.CardDrawn and e.data.read == read for e in m.batch.events)]


def _one_card_each(history: list[Stored]) -> Counter[str]:
    reads = Counter(e.data.read for m in history for e in m.batch.events
                    if isinstance(e.data, shoe.CardDrawn | shoe.CardMisdrawn | shoe.CardBurned) and e.data.read)
    assert reads and max(reads.values()) == 1, reads
    return reads


def _shoe_taken_afresh(table: Table) -> None:
    """The shoe service holds the table no more: it folds it from the record at its next command, as an
    instance taking the table over does."""
    shoes = next(r for r in table.casino.running if r.kind == "shoe").service
    shoes.tables.clear()


async def test_a_read_card_is_one_append_and_a_shoe_taken_up_afresh_folds_it_from_the_coup(tmp_path: Path) -> None:
    async with read_table(tmp_path, "RC-1", RULESET) as table:
        coup = await table.open()
        closed = await table.bet_and_close(coup)
        assert closed.waiting is not None and closed.waiting.kind == "read", closed
        card = table.devices.cards.pop(0)
        taken = await table.report(card, "first-card")
        assert taken.ok and taken.cards == (card,), taken
        history = await table.history()
        [carrying] = _carrying(history, "first-card")  # one message: the shoe's record of the card and its deal
        assert subjects.tokens(carrying.subject)[3] == "coup"
        assert [type(e.data) for e in carrying.batch.events] == [shoe.CardDrawn, CardDealt]
        assert [m for m in history if subjects.tokens(m.subject)[3] == "shoe"
                and any(e.causation == envelope.READ + "first-card" for e in m.batch.events)] == []

        _shoe_taken_afresh(table)  # the next card is checked by a shoe that knows the first from the coup alone
        second = await table.devices.read()
        assert second.ok and second.incident == "", second
        await table.deal_out(coup, second)
        await table.recorded(coup, CoupSettled)
        _shoe_taken_afresh(table)
        await table.deal_coup()  # and the next coup too, every card the machine's next
        history = await table.history()
        findings = (await table.verified()).findings
    _one_card_each(history)
    assert not any(isinstance(e.data, shoe.CardRefused | shoe.CardMisdrawn) for m in history for e in m.batch.events)
    assert findings == []


async def test_a_card_whose_coup_append_is_lost_is_recorded_before_the_next_report_is_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dealer-policy fails as it appends the card the shoe gave (a crash
    before its append): the device, answered with the failure, reports the
    next card. The shoe answers it with the earlier card first; both are
    recorded, each once and in the order they left the shoe."""
    flush = Dealing.flush
    lost: list[str] = []

    async def losing(self: Dealing) -> None:
        carried = [e for evs, *_ in self.t.staged.steps for e in evs if isinstance(e, shoe.CardDrawn)]
        if carried and not lost:
            lost.append(carried[0].read)
            self.repository.unstage(self.t)
            raise RuntimeError("the dealer-policy failed before its append")
        await flush(self)

    async with read_table(tmp_path, "RC-2", RULESET) as table:
        coup = await table.open()
        await table.bet_and_close(coup)
        monkeypatch.setattr(Dealing, "flush", losing)
        first, second = table.devices.cards.pop(0), table.devices.cards.pop(0)
        failed = await table.reader.ask(subjects.command(table.name, "read"),  # sent once: not again
                                        commands.CardRead("lost-append", table.name, first))
        assert not failed.ok and lost == ["lost-append"], failed
        assert _carrying(await table.history(), "lost-append") == []  # nothing recorded
        taken = await table.report(second, "after-the-lost")
        assert taken.ok and taken.cards == (second,), taken
        history = await table.history()
        drawn = [(e.data.read, e.data.card, e.data.position) for m in history for e in m.batch.events
                 if isinstance(e.data, shoe.CardDrawn) and e.data.coup_id == coup]
        assert [(read, card) for read, card, _ in drawn] == [("lost-append", first), ("after-the-lost", second)]
        assert drawn[1][2] == drawn[0][2] + 1
        await table.deal_out(coup, taken)
        await table.recorded(coup, CoupSettled)
        history = await table.history()
        findings = (await table.verified()).findings
    _one_card_each(history)
    assert findings == []


async def test_a_card_forged_into_a_coups_record_is_not_the_shoes_word(tmp_path: Path) -> None:
    """A writer with the dealer-policy's credential records a card the shoe
    never gave, as the next of its order. The shoe, taking the table up
    afresh, passes it over (it is not the order's next card) and takes the
    real card; verification names the forged one."""
    async with read_table(tmp_path, "RC-3", RULESET) as table:
        coup = await table.open()
        await table.bet_and_close(coup)
        taken = await table.devices.read()
        assert taken.ok, taken
        history = await table.history()
        last = max((m for m in history if subjects.tokens(m.subject)[2] == coup
                    and subjects.tokens(m.subject)[3] == "coup"), key=lambda m: m.seq)
        [real] = [e.data for e in _carrying(history, last.batch.events[0].causation[len(envelope.READ):])[0].batch.events
                  if isinstance(e.data, shoe.CardDrawn)]
        real_next = table.devices.cards[0]
        forged_card = next(c for c in ("AS", "KH", "2C", "3D") if c != real_next)
        forged = shoe.CardDrawn(real.shoe_id, coup, real.position + 1, forged_card, "forged")
        writer = await table.casino.connect("dealer-policy")
        try:
            event: Any = msgspec.structs.replace(last.batch.events[0], id="forged-1", type="shoe.card_drawn",
                                                 version=envelope.version_of("shoe.card_drawn"), data=forged,
                                                 causation=envelope.READ + "forged", command="")
            ack = await writer.jetstream().publish(last.subject, envelope.encode(envelope.Batch((event,))))
            assert ack.seq > last.seq
        finally:
            await writer.close()
        _shoe_taken_afresh(table)
        real_card = await table.devices.read()
        assert real_card.ok and real_card.incident == "", real_card  # the machine's next card, taken
        await table.deal_out(coup, real_card)
        await table.recorded(coup, CoupSettled)
        findings = (await table.verified()).findings
    assert {f.coup for f in findings} == {coup} and any(forged_card in f.what for f in findings), findings
