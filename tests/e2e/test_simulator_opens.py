"""How a simulated table opens its next coup: by another procedure than it
last dealt by as the floor supervisor directs (000 8.2), by the same from its
terminal; when the procedure it chose is refused, by the table's own
procedure instead, the shoe first given up by the player who holds it under
Method C (000 8.18) whichever procedure is tried.
The dealer is a script here: what is tested is the table's answer to each
refusal, not the rules (tests/rules) nor the services (the other tests)."""

from __future__ import annotations

import contextlib
import random

import pytest

from casino.cli.simulator import Habits, SimulatedTable
from casino.config.tables import TableConfig
from casino.protocol import commands

pytestmark = pytest.mark.anyio
HOLDER = 4


class Dealer:
    """Refuses Method B (no approval at this table) and every coup while seat
    ``HOLDER`` keeps the shoe; records what it was asked."""

    def __init__(self) -> None:
        self.held = True
        self.asked: list[str] = []
        self.next = 8  # the number of the table's next coup

    async def ask(self, subject: str, cmd: commands.Command) -> commands.Reply:
        by = f" by {subject.rsplit('.', 1)[1]}" if ".supervise." in subject else ""
        self.asked.append(f"{type(cmd).__name__} {getattr(cmd, 'procedure', '')}".strip() + by)
        match cmd:
            case commands.Status():
                return commands.Reply(True, coup=f"T-{self.next - 1:06d}", waiting=commands.Waiting(
                    "finished", shoe_holder=HOLDER if self.held else None))
            case commands.PassShoe() | commands.ForfeitShoe():
                assert cmd.seat == HOLDER and cmd.coup == "T-000007"
                self.held = False
                return commands.Reply(True, coup=cmd.coup)
            case commands.OpenCoup() if cmd.number != self.next:
                return commands.Reply(False, f"opens coup number {cmd.number}, and the table's next is {self.next}",
                                      "coup")
            case commands.OpenCoup() if cmd.procedure == "method_b":
                return commands.Reply(False, "Method B needs the prior approval of an inspector", "000 8.4")
            case commands.OpenCoup() if self.held:
                return commands.Reply(False, f"seat {HOLDER} holds the shoe under Method C", "000 8.18")
            case commands.OpenCoup():
                self.next += 1
                return commands.Reply(True, coup=f"T-{self.next - 1:06d}", waiting=commands.Waiting("close_betting"))
        raise AssertionError(f"not scripted: {cmd}")


@pytest.mark.parametrize("procedure", ["method_b", "method_a"])
async def test_a_refused_procedure_falls_back_to_the_tables_own_once_the_shoe_is_given_up(procedure: str) -> None:
    dealer = Dealer()
    table = SimulatedTable("T", TableConfig("baccarat-000-methods"), dealer,  # type: ignore[arg-type]
                           random.Random(1), lambda coup: contextlib.nullcontext(), None,  # type: ignore[arg-type]
                           Habits())
    opened = await table.open_coup(procedure)
    assert opened.ok and opened.coup == "T-000008", opened
    assert not dealer.held
    given_up = next(a for a in dealer.asked if a in ("PassShoe", "ForfeitShoe by SUP-SIM"))
    sup = "by SUP-SIM"
    # The table asked first for the number of its next coup, which every opening names.
    expected = {"method_b": ["Status", f"OpenCoup method_b {sup}", "OpenCoup", "Status", given_up, "OpenCoup"],
                "method_a": ["Status", f"OpenCoup method_a {sup}", "Status", given_up,
                             f"OpenCoup method_a {sup}"]}[procedure]
    assert dealer.asked == expected
    # The next coup: by the procedure the table now deals by, from the terminal; another one, as directed.
    del dealer.asked[:]
    await table.open_coup(procedure)
    await table.open_coup("method_d")
    assert dealer.asked == [f"OpenCoup {procedure}" if procedure == "method_a" else f"OpenCoup {procedure} {sup}",
                            *(["OpenCoup"] if procedure == "method_b" else []), f"OpenCoup method_d {sup}"]
