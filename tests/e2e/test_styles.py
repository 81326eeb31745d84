"""001 8.5 from one coup to the next, as the dealer-policy carries it: a game
dealt from a card shoe keeps its style until the shoe ends; on a continuous
shuffler, which deals each round from a new shoe, the style changes only by
approved procedure. Both hold across a restart of the dealer-policy, and
even as a supervisor directs (a change of style is theirs to direct, where
it may be made at all)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from casino.config.tables import TableConfig
from casino.protocol import commands
from casino.rules.baccarat.messages import Approval
from tests.e2e.casino import Casino
from tests.variants import ruleset_variant

pytestmark = pytest.mark.anyio
TABLE = "S-1"
REFUSED = {"shoe": "a game dealt from a shoe continues in style_a until it ends",
           "continuous_shuffler": "on a continuous shuffler the style changes only by approved procedure"}


@pytest.mark.parametrize("shuffler", ["shoe", "continuous_shuffler"])
async def test_001_8_5_the_style_in_force_carries_from_coup_to_coup(nats_url: str, tmp_path: Path,
                                                                    shuffler: str) -> None:
    tables = {TABLE: TableConfig(ruleset_variant(tmp_path, "baccarat-001-styles", shuffler=shuffler))}
    async with Casino(nats_url, tables) as casino:
        first = await casino.ask(TABLE, "coup", commands.OpenCoup, procedure="style_a")
        assert first.ok
        assert (await casino.ask(TABLE, "wager", commands.PlaceWager, coup=first.coup, seat=3, bet="banker", amount=5000)).ok
        closed = await casino.ask(TABLE, "coup", commands.CloseBetting, coup=first.coup)
        assert closed.ok and closed.waiting is not None and closed.waiting.kind == "finished"
        await casino.settled(first.coup)

        for restarted in (False, True):
            if restarted:
                await casino.stop("dealer-policy")
                await casino.start("dealer-policy")
            refused = await casino.supervise(TABLE, commands.OpenCoup, procedure="style_b")
            assert (refused.ok, refused.clause, refused.reason) == (False, "001 8.5", REFUSED[shuffler])

        # The approved procedure is the casino's: a terminal naming an approval is refused ...
        approval = Approval("style_change", "casino_supervisor", "SUP-7")
        forged = await casino.ask(TABLE, "coup", commands.OpenCoup, procedure="style_b", approvals=(approval,))
        assert (forged.ok, forged.clause) == (False, "approvals"), forged
        # ... and the table's configuration holding it lets the style change where it may.
        casino.tables = {TABLE: msgspec.structs.replace(tables[TABLE], approvals=(approval,))}
        await casino.stop("dealer-policy")
        await casino.start("dealer-policy")
        undirected = await casino.ask(TABLE, "coup", commands.OpenCoup, procedure="style_b")  # the terminal's say-so
        assert (undirected.ok, undirected.clause) == (False, "001 8.5") and "supervisor" in undirected.reason
        approved = await casino.supervise(TABLE, commands.OpenCoup, procedure="style_b")
        assert approved.ok is (shuffler == "continuous_shuffler"), approved
