from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.record import bounded_run


@pytest.fixture(scope="session")
def raw_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The raw JSON record of one bounded simulated run, dealt once for every test that reads it."""
    return bounded_run(tmp_path_factory.mktemp("bounded-run"))
