"""The command interface on the wire, and how a service answers and asks commands."""
