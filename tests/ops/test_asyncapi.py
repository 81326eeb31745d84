"""Each service's AsyncAPI document under docs/asyncapi/ is what `faststream
docs gen` makes of its application now (`make asyncapi` regenerates them),
and names every command, reply and event type with its schema."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path

import msgspec
import pytest
import yaml

from casino.protocol import commands
from casino.store.envelope import AnyEvent

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "asyncapi"
SERVICES = ("shoe", "wager", "dealer_policy", "settlement", "projections", "archiver")


def generated(service: str, out: Path) -> str:
    faststream = Path(sys.executable).parent / "faststream"
    env = {**os.environ, "CASINO_INSTANCE": "instance", "CASINO_NATS_URL": "nats://nats:4222"}
    subprocess.run([str(faststream), "docs", "gen", f"services.{service}.app:app", "--factory", "--yaml",
                    "--out", str(out)], check=True, cwd=ROOT, env=env, capture_output=True)
    return out.read_text()


@pytest.mark.parametrize("service", SERVICES)
def test_the_committed_asyncapi_document_is_current(service: str, tmp_path: Path) -> None:
    doc = DOCS / f"{service.replace('_', '-')}.yaml"
    # Compared as data: faststream lists the channels in an order that changes from one run to the next.
    assert yaml.safe_load(doc.read_text()) == yaml.safe_load(generated(service, tmp_path / "asyncapi.yaml")), \
        "regenerate: make asyncapi"


def tags(union: typing.Any) -> set[str]:
    return {msgspec.inspect.type_info(t).tag for t in typing.get_args(union)}  # type: ignore[attr-defined]


def test_every_command_reply_and_event_is_described_with_its_schema() -> None:
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in DOCS.glob("*.yaml")}

    def channel(doc: str, address: str) -> str:
        return yaml.safe_dump(next(v for v in docs[doc]["components"]["schemas"].items()
                                   if v[0].startswith(address))[1])

    for doc, address, union in (("shoe", "casino.cmd.{table}.shoe", commands.ShoeCommand),
                                ("wager", "casino.cmd.{table}.wager", commands.WagerCommand),
                                ("wager", "casino.cmd.{table}.book", commands.BookCommand),
                                ("dealer-policy", "casino.cmd.{table}.coup", commands.CoupCommand),
                                ("dealer-policy", "casino.cmd.{table}.read", commands.ReaderReport)):
        schema = channel(doc, address)
        assert all(f"- {tag}\n" in schema for tag in tags(union)), (doc, address)
    for doc in ("shoe", "wager", "dealer-policy"):
        assert "rate limit" in yaml.safe_dump(docs[doc]) or "clause" in channel(doc, "_INBOX.{requester}")
    events = channel("dealer-policy", "casino.ev.{table}.{shoe}.{coup}.coup")
    assert all(f"- {tag}\n" in events for tag in tags(AnyEvent))
