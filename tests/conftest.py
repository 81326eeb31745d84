from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.natsfixture import nats_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    with nats_server(tmp_path / "nats") as url:
        yield url
