"""docs/security.md gives the permission model as casino.nats.permissions applies it."""

from __future__ import annotations

from pathlib import Path

from casino.nats import permissions as natsauth

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_the_users_table_is_the_model_as_applied() -> None:
    text = DOC.read_text()
    start = text.index("casino.nats.permissions.markdown_table(); a test keeps it current -->\n")
    table = text[text.index("\n", start) + 1:text.index("<!-- end of the table -->")]
    assert table == natsauth.markdown_table(), "regenerate: python -c 'from casino import natsauth; " \
                                              "print(natsauth.markdown_table())'"
