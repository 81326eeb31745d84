"""The rules of dealing: a pure library.

Nothing in this package does I/O, reads a clock, draws a random number or uses
asyncio; ``ruff`` enforces it (see ``ruff.toml`` in this folder). Every service
and the replay tool decide through these functions, and a replayed coup is a
fold of its recorded events through the same ``evolve`` functions.
"""
