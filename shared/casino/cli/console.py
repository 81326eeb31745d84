"""The live console: each table as its events arrive from the stream."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field

from casino.readmodels.projections import Takings
from casino.rules import settlement, shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.incidents import RULING_WORDS, CardIncident, CoupRuled, TableClosed, TableReopened
from casino.rules.text import escaped, money
from casino.store import subjects
from casino.store.envelope import Batch, CoupConfigured, CoupHeld
from casino.store.eventstore import EventStore, Stored, latest_at_table


@dataclass
class TableView:
    name: str
    ruleset: str = ""
    coup: str = ""
    procedure: str = ""
    procedure_clause: str = ""  # the clause the procedure is dealt under (its coup.opened)
    phase: str = ""  # the coup's, as its record has it: betting, dealing, finished, held, void, settled
    last: str = ""  # the coup before's result, with its number ("coup 41: banker 7-5")
    cards: dict[str, list[str]] = field(default_factory=dict)
    result: str = ""
    settled: int = 0
    house_net: int = 0
    shoe: str = ""
    shoe_cards: int = 0
    position: int = 0
    currency: str = ""
    reshuffle: str = ""  # why the shoe in play is to be reshuffled (the clause), once it is
    shoe_ended: str = ""  # why the shoe ended, until the next is shuffled ("" while one is in play)

    def line(self) -> str:
        """One line of ``WIDTH`` columns at most: the coup and the shoe by their
        numbers at the table (the table is the line's first column)."""
        hands = "  ".join(f"{h}:{' '.join(cs)}" for h, cs in self.cards.items())
        if len(hands) > HANDS:
            hands = hands[:HANDS - 1] + "~"
        dealt = f"{100 * self.position / self.shoe_cards:3.0f}%" if self.shoe_cards else "  -"
        procedure = self.procedure.replace("_", " ")  # method_a: method a
        return (f"{self.name[:10]:<10} {self.coup.rpartition('-')[2].lstrip('0'):>5} {procedure[:9]:<9} "
                f"{hands:<{HANDS}} {self.result[:12]:<12} {self.shoe.rpartition('-')[2] or '-':>4} {dealt:>5} "
                f"{self.settled:>7} {money(self.house_net, self.currency, signed=True)[:16]:>16}")


WIDTH = 120  # columns: a line a table, never wrapped (a wrapped line would break the redraw in place)
HANDS = 44
FACE_DOWN = "??"  # a card dealt face down (the blackjack hole card), shown so until it is turned
HEADER = (f"{'table':<10} {'coup':>5} {'procedure':<9} {'cards':<{HANDS}} {'result':<12} {'shoe':>4} {'dealt':>5} "
          f"{'settled':>7} {'house net':>16}")
# One line, within WIDTH: what the columns' short words mean.
LEGEND = "cards: P player, B banker, D dealer, 3 seat 3 (3/2 its 2nd hand); dealt: share of the shoe; house net: + house won"
# A card-reading shoe's card a coup was held for, in the result column until a supervisor rules (docs/readers.md).
HELD_FOR = {"misdrawn": "HELD misdraw", "refused": "HELD refused", "unread": "HELD unread", "cut_card": "HELD cut card"}


class Console:
    """Folds the live event stream into one line per table."""

    def __init__(self, tables: list[str], currencies: dict[str, str] | None = None, live: bool | None = None) -> None:
        self.views = {t: TableView(t, currency=(currencies or {}).get(t, "")) for t in tables}
        self.live = sys.stdout.isatty() if live is None else live
        self._drawn = 0
        self.incidents: Counter[str] = Counter()  # card incidents at card-reading tables, by kind
        self.rulings: Counter[str] = Counter()  # and the supervisors' rulings on them, by kind and ruling
        self.kinds: dict[tuple[str, str], str] = {}  # each incident's kind, by (table, report) until ruled
        self.voids: Counter[str] = Counter()  # each table's coups voided in a row so far, across shoes
        self.longest_voids = 0  # the longest run of voids in a row at any table
        self.closed = 0  # tables closed by their card-reading shoe's incidents
        self.shoes_ended = 0  # shoes a supervisor's ruling ended
        self.refusals: list[str] = []  # the latest refusals a simulated table met (it goes on)

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
                if v.result and v.coup != coup:
                    v.last = f"coup {v.coup.rpartition('-')[2].lstrip('0')}: {v.result}"
                v.ruleset, v.coup, v.cards, v.result, v.procedure = e.ruleset, coup, {}, "", "blackjack"
                v.procedure_clause, v.phase = "", "betting"
            case baccarat_messages.CoupOpened():
                v.procedure, v.procedure_clause = e.procedure, e.clause
            case baccarat_messages.BettingClosed() | blackjack_messages.BettingClosed():
                v.phase = "dealing"
            case CoupHeld():
                v.phase = "held"
            case baccarat_messages.CardDealt():
                v.cards.setdefault(e.hand[0].upper(), []).append(e.card)
            case blackjack_messages.CardDealt():
                v.cards.setdefault("D" if e.seat is None else f"{e.seat}/{e.hand + 1}" if e.hand else f"{e.seat}",
                                   []).append(e.card if e.face_up else FACE_DOWN)
            case blackjack_messages.HoleCardTurned():  # the dealer's hole card, face down until now
                dealer = v.cards.get("D", [])
                if FACE_DOWN in dealer:
                    dealer[dealer.index(FACE_DOWN)] = e.card
            case baccarat_messages.CoupResulted():
                v.result, v.phase = f"{e.winner} {e.player_points}-{e.banker_points}", "finished"
                self.voids[v.name] = 0
            case blackjack_messages.CoupResulted():
                v.result, v.phase = f"dealer {'BJ' if e.dealer_blackjack else e.dealer_total}", "finished"
                self.voids[v.name] = 0
            case shoe.ShoeShuffled():
                v.shoe, v.shoe_cards, v.position, v.reshuffle, v.shoe_ended = e.shoe_id, e.cards, 0, "", ""
            case shoe.ReshuffleRequired():
                v.reshuffle = e.clause
                if e.when == "now":  # 003 7.9, or a ruling: reshuffled now, the next shoe's order awaited
                    v.shoe_ended = e.clause
            case shoe.ShoeEnded():
                v.shoe_ended = v.reshuffle or "ended"
            case shoe.CardDrawn() | shoe.CardBurned():
                v.position = e.position + 1
            case CardIncident():
                v.result = HELD_FOR.get(e.kind, "HELD")
                self.incidents[e.kind] += 1
                self.kinds[(v.name, e.read)] = e.kind
            case CoupRuled():
                v.result = f"ruled: {RULING_WORDS.get(e.ruling, e.ruling)}"
                if e.coup and e.ruling in ("void", "end_shoe"):
                    v.phase = "void"
                self.rulings[f"{self.kinds.pop((v.name, e.read), '?')} {e.ruling.replace('_', ' ')}"] += 1
                self.shoes_ended += e.ruling == "end_shoe"
                if e.coup and e.ruling in ("void", "end_shoe"):
                    self.voids[v.name] += 1
                    self.longest_voids = max(self.longest_voids, self.voids[v.name])
            case TableClosed():
                v.result, self.closed = f"CLOSED: {e.reason}", self.closed + 1
            case TableReopened():
                v.result, self.voids[v.name] = f"reopened by {e.supervisor}", 0

            case settlement.CoupSettled():
                if e.coup_id == v.coup and v.phase != "void":
                    v.phase = "settled"
                v.settled += 1
                v.house_net += e.staked - e.returned

    def render(self) -> str:
        lines = [HEADER, *(v.line() for v in self.views.values())]
        if self.incidents:
            lines.append("card incidents: " + ", ".join(f"{k} {n}" for k, n in sorted(self.incidents.items()))
                         + "; ruled: " + (", ".join(f"{k} {n}" for k, n in sorted(self.rulings.items())) or "none")
                         + f"; shoes ended {self.shoes_ended}; longest run of voids in a row {self.longest_voids}"
                         + f"; tables closed {self.closed}")
        lines += [f"refused: {why}" for why in self.refusals[-3:]]
        return "\n".join(lines)

    def refused(self, table: str, why: str) -> None:
        """A simulated table's coup refused (the table goes on, and the others deal on): shown under the tables."""
        self.refusals.append(f"{why}; {table} goes on")
        if not self.live:
            print(escaped(f"refused: {self.refusals[-1]}"), flush=True)

    def draw(self) -> None:
        """Redraw the tables in place, as ``top`` does: back to the first line
        drawn, each line cut to the terminal's width (so none wraps)."""
        if not self.live:
            return
        columns = shutil.get_terminal_size((WIDTH, 24)).columns
        lines = [escaped(line)[:columns].rstrip() for line in self.render().split("\n")]
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        sys.stdout.write(up + "\x1b[J" + "\n".join(lines) + "\n")
        sys.stdout.flush()
        self._drawn = len(lines)


async def where_tables_stand(console: Console, store: EventStore, takings: dict[str, Takings]) -> None:
    """Show where each table stands without reading its history: its latest
    coup and its shoe in play from the store, its settled coups and the
    house's net from the read models' takings."""
    for table, view in console.views.items():
        held: dict[int, Stored] = {}  # the latest coup's and the shoe in play's, in stream order
        for aggregate in ("coup", "shoe"):
            latest = await latest_at_table(store, table, aggregate)
            if latest is None:
                continue
            _, shoe, coup, _ = subjects.tokens(latest.subject)
            held.update((m.seq, m) for m in await store.read(
                subjects.event(table, shoe, coup if aggregate == "coup" else "*", aggregate)))
        for seq in sorted(held):
            console.on_batch(held[seq].subject, held[seq].batch)
        if table in takings:
            view.settled, view.house_net = takings[table].coups_settled, takings[table].house_net
