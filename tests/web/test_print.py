"""A coup printed as a regulator files it: Chromium's own PDF of the coup
page, read back as text and as the colours its text is drawn in, with the
browser's backgrounds on and off."""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from pypdf import PdfReader
from pypdf.generic import ContentStream
from services.web.dispute import INCIDENTS

from casino.audit.replay import replay_coup
from casino.cli.run import default_tables
from casino.cli.simulator import Simulator
from casino.store import subjects
from tests.e2e.casino import SUPERVISOR
from tests.natsfixture import nats_server
from tests.web.test_pages import serving, signed_in

pytestmark = pytest.mark.anyio
CASINO = "Casino Atlântico, Sala 2"


@pytest.fixture
def named_nats_url(tmp_path: Path) -> Iterator[str]:
    with nats_server(tmp_path / "nats", casino=CASINO) as url:
        yield url


def luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_colours(pdf: bytes) -> set[tuple[float, ...]]:
    """The fill colours every text of the PDF is drawn in (RGB, 0 to 1)."""
    reader, colours = PdfReader(io.BytesIO(pdf)), set()
    for page in reader.pages:
        fill: tuple[float, ...] = (0.0, 0.0, 0.0)
        saved: list[tuple[float, ...]] = []
        for operands, op in ContentStream(page.get_contents(), reader).operations:
            if op == b"q":
                saved.append(fill)
            elif op == b"Q" and saved:
                fill = saved.pop()
            elif op in (b"rg", b"sc", b"scn") and len(operands) == 3:
                fill = tuple(float(x) for x in operands)
            elif op == b"g":
                fill = (float(operands[0]),) * 3
            elif op in (b"Tj", b"TJ", b"'", b'"'):
                colours.add(fill)
    return colours


async def test_a_printed_coup_names_the_casino_who_printed_it_its_verdict_and_digest_every_row_legible(
        named_nats_url: str) -> None:
    tables = {name: msgspec.structs.replace(config, supervisors=(*config.supervisors, SUPERVISOR))
              for name, config in default_tables(1, ["baccarat-000-methods"], readers=1).items()}
    [table] = tables
    async with serving(named_nats_url, tables) as (casino, w, _):  # type: ignore[arg-type]
        await Simulator(casino.nc, tables, seed=61, patience=40, faults=0.3).run(8)  # type: ignore[arg-type]
        for number in range(1, 9):
            r = replay_coup(await casino.store.read(subjects.coup_filter(f"{table}-{number:06d}", table)))
            if any(s.type in INCIDENTS for s in r.steps):
                break
        assert any(s.type in INCIDENTS for s in r.steps), "no coup of eight had an incident"
        incident = next(s for s in r.steps if s.type in INCIDENTS)
        page = await signed_in(w.browser, w.base, "comp1", w.passwords["comp1"])
        await page.goto(f"{w.base}/coup/{table}/{number}")
        await page.emulate_media(media="print")
        for backgrounds in (True, False):
            pdf = await page.pdf(print_background=backgrounds)
            text = unicodedata.normalize("NFKC", "\n".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages))
            flat = re.sub(r"\s+", "", text)
            assert f"Casino '{CASINO}'" in text, text
            assert "Printed by comp1 (compliance)" in text
            assert ("Verified: every step follows the rules" if not r.unreadable else "Verification failed") in text
            assert r.record_digest and r.record_digest in flat  # however a line breaks it
            assert re.sub(r"\s+", "", incident.text)[:40] in flat
            # Every text drawn dark on the white page: at least 4.5:1 against it.
            colours = text_colours(pdf)
            assert colours and all(1.05 / (luminance(c) + 0.05) >= 4.5 for c in colours), (backgrounds, colours)
