"""The live console: each table as its events arrive from the stream."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from casino.readmodels.projections import Takings
from casino.rules import settlement, shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.store import subjects
from casino.store.envelope import Batch, CoupConfigured
from casino.store.eventstore import EventStore, latest_at_table


@dataclass
class TableView:
    name: str
    ruleset: str = ""
    coup: str = ""
    procedure: str = ""
    cards: dict[str, list[str]] = field(default_factory=dict)
    result: str = ""
    settled: int = 0
    house_net: int = 0
    shoe: str = ""
    shoe_cards: int = 0
    position: int = 0

    def line(self) -> str:
        hands = "  ".join(f"{h}:{' '.join(cs)}" for h, cs in self.cards.items())
        pen = f"{100 * self.position / self.shoe_cards:4.0f}%" if self.shoe_cards else "   -"
        return (f"{self.name:<8} {self.coup:<16} {self.procedure:<10} {hands[:58]:<58} {self.result:<22} "
                f"{self.shoe or '-':<18} {pen} settled {self.settled:<5} house {self.house_net:>9}")


class Console:
    """Folds the live event stream into one line per table."""

    def __init__(self, tables: list[str], live: bool | None = None) -> None:
        self.views = {t: TableView(t) for t in tables}
        self.live = sys.stdout.isatty() if live is None else live
        self._drawn = 0

    def on_batch(self, subject: str, batch: Batch) -> None:
        table, _, _, _ = subjects.tokens(subject)
        v = self.views.get(table)
        if v is None:
            return
        for env in batch.events:
            self._apply(v, env.coup, env.data)

    def _apply(self, v: TableView, coup: str, e: object) -> None:
        match e:
            case CoupConfigured():
                v.ruleset, v.coup, v.cards, v.result, v.procedure = e.ruleset, coup, {}, "", "blackjack"
            case baccarat_messages.CoupOpened():
                v.procedure = e.procedure
            case baccarat_messages.CardDealt():
                v.cards.setdefault(e.hand[0].upper(), []).append(e.card)
            case blackjack_messages.CardDealt():
                v.cards.setdefault("D" if e.seat is None else f"{e.seat}.{e.hand}", []).append(e.card)
            case baccarat_messages.CoupResulted():
                v.result = f"{e.winner} {e.player_points}-{e.banker_points}"
            case blackjack_messages.CoupResulted():
                v.result = f"dealer {'BJ' if e.dealer_blackjack else e.dealer_total}"
            case shoe.ShoeShuffled():
                v.shoe, v.shoe_cards, v.position = e.shoe_id, e.cards, 0
            case shoe.CardDrawn() | shoe.CardBurned():
                v.position = e.position + 1
            case settlement.CoupSettled():
                v.settled += 1
                v.house_net += e.staked - e.returned

    def render(self) -> str:
        return "\n".join(v.line() for v in self.views.values())

    def draw(self) -> None:
        if not self.live:
            return
        text = self.render()
        if self._drawn:
            sys.stdout.write(f"\x1b[{self._drawn}F")
        sys.stdout.write("\x1b[J" + text + "\n")
        sys.stdout.flush()
        self._drawn = text.count("\n") + 1


async def where_tables_stand(console: Console, store: EventStore, takings: dict[str, Takings]) -> None:
    """Show where each table stands without reading its history: its latest
    coup and its shoe in play from the store, its settled coups and the
    house's net from the read models' takings."""
    for table, view in console.views.items():
        for aggregate in ("coup", "shoe"):
            latest = await latest_at_table(store, table, aggregate)
            if latest is None:
                continue
            _, shoe, coup, _ = subjects.tokens(latest.subject)
            for msg in await store.read(subjects.event(table, shoe, coup if aggregate == "coup" else "*", aggregate)):
                console.on_batch(msg.subject, msg.batch)
        if table in takings:
            view.settled, view.house_net = takings[table].coups_settled, takings[table].house_net
