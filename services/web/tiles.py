"""A table's tile on the floor: what it shows (its coup, shoe, takings,
pace and big road) and what the pit must look at there (``Tile.alerts``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from casino.cli.console import TableView
from casino.readmodels.projections import ShoeStats, TableStatus, Takings
from casino.rules.baccarat.scoreboard import Coup, Mark, big_road
from casino.store import subjects

STALLED = 300.0  # seconds without an event mid-coup: as the alert CasinoTableStalledMidCoup
PACE_WINDOW = 900.0  # seconds of coups counted into a table's pace
INCIDENT_SHOWN = 900.0  # seconds a card incident stays on its tile once ruled
ROAD_COLUMNS = 12  # the columns of its shoe's big road a tile shows, the latest (the table's page shows them all)


@dataclass
class Summary:
    tables: int
    dealing: int
    held: int
    alerted: int
    takings: dict[str, int]  # the house's net, by currency ("": none named)


@dataclass(frozen=True)
class Alert:
    text: str
    at: float = 0.0  # when what it says was recorded (0: not known)
    coup: int | None = None  # the coup it is about (None: the table's, not a coup's)

    def __str__(self) -> str:
        return self.text


@dataclass
class Tile:
    """What one table's tile shows."""

    view: TableView  # the coup in play as recorded: its cards, its result
    status: TableStatus
    takings: Takings
    shoe: ShoeStats | None = None
    pace: float | None = None  # coups an hour
    incident: str = ""
    incident_at: float = 0.0  # when it was recorded
    incident_coup: int | None = None  # the coup it came in (None: between coups)
    finding: str = ""  # the latest coup that failed verification here
    finding_at: float = 0.0
    finding_coup: int | None = None
    closed: str = ""  # why its card-reading shoe's incidents closed the table, until a supervisor reopens it
    closed_at: float = 0.0
    holder: str = ""  # who holds the shoe (Method C, 000 8.15 to 8.20), or a hand's cards (Methods B, D)
    # The baccarat results of the shoe in play by coup number, from the record as it is read (at the start,
    # from the read model): the tile's big road.
    results_of: str = ""
    results: dict[int, Coup] = field(default_factory=dict)
    samples: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=64))

    def alerts(self, now: float) -> list[Alert]:
        """What the pit must look at here, each with when it came and its coup."""
        coup, last = subjects.coup_number(self.view.coup or self.status.coup), self.status.last_event_at
        out = []
        if self.status.phase == "held":
            out.append(Alert(f"coup held: {self.view.result or 'for compliance'}", last, coup))
        if self.incident and (self.status.phase == "held" or now - self.incident_at < INCIDENT_SHOWN):
            out.append(Alert(self.incident, self.incident_at, self.incident_coup))
        if self.finding:
            out.append(Alert(self.finding, self.finding_at, self.finding_coup))
        if self.closed:
            out.append(Alert(f"table closed: {self.closed}; a supervisor reopens it", self.closed_at))
        if self.view.shoe_ended:
            out.append(Alert(f"shoe ended ({self.view.shoe_ended}): the table waits for its next shoe's order", last))
        quiet = now - last
        if self.status.phase in ("betting", "dealing", "finished") and last and quiet > STALLED:
            out.append(Alert(f"no event for {quiet / 60:.0f} min mid-coup", last, coup))
        return out

    def take_results(self, shoe: str, results: dict[int, Coup]) -> None:
        """Results of ``shoe`` (a later shoe than the one held: the held ones let go)."""
        if shoe != self.results_of:
            table = self.status.table
            if (subjects.shoe_number(table, shoe) or 0) < (subjects.shoe_number(table, self.results_of) or 0):
                return  # an earlier shoe's, read late
            self.results_of, self.results = shoe, {}
        self.results.update(results)

    def road(self) -> list[Mark]:
        """The latest ``ROAD_COLUMNS`` columns of the big road of the tile's shoe."""
        return big_road([self.results[n] for n in sorted(self.results)], ROAD_COLUMNS)

    def counted(self, now: float) -> None:
        """A sample of the table's coup count, for its pace."""
        if not self.samples or self.samples[-1][1] != self.status.coups:
            self.samples.append((now, self.status.coups))
        while self.samples and now - self.samples[0][0] > PACE_WINDOW:
            self.samples.popleft()
        if len(self.samples) >= 2 and self.samples[-1][0] - self.samples[0][0] >= 60:
            (t0, c0), (t1, c1) = self.samples[0], self.samples[-1]
            self.pace = 3600 * (c1 - c0) / (t1 - t0)
