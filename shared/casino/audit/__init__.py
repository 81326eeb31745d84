"""Replaying and verifying the record: a coup, a shoe, a table's history, a whole store."""
