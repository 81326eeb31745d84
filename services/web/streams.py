"""The floor's live streams an instance of the web holds, bounded so that no
holder shuts anyone else out: a few a session and a few dozen an address
(beyond, refused), and a number in all, at which the oldest stream of the
address holding the most (of those, the one that opened one last) is ended
to make room. A flood of streams from a
stolen credential or a few addresses takes its own streams' places, never
the pit boss's: it lasts as long as the flood keeps reopening them."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

STREAMS_PER_SESSION = 4  # live floor streams one session may hold open (a few tabs)
STREAMS_PER_ADDRESS = 32  # and one client address (a pit's few screens behind one address, each a few tabs)
STREAMS_MOST = 500  # live floor streams in all, on one instance of the web
ENDED = b""  # put in a stream's queue: the stream ends


@dataclass(eq=False)
class Stream:
    session: str
    address: str
    frames: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(maxsize=16))
    over: bool = False  # ended to make room: it sends nothing more

    def end(self) -> None:
        """Ends the stream: what it had not sent yet is dropped for the end."""
        self.over = True
        while not self.frames.empty():
            self.frames.get_nowait()
        self.frames.put_nowait(ENDED)


class Streams:
    """The streams open, oldest first, bounded ``per_session``, ``per_address`` and ``most`` in all."""

    def __init__(self, most: int = STREAMS_MOST, per_session: int = STREAMS_PER_SESSION,
                 per_address: int = STREAMS_PER_ADDRESS) -> None:
        self.most, self.per_session, self.per_address = most, per_session, per_address
        self.open: dict[Stream, None] = {}  # in the order opened
        self.by_session: Counter[str] = Counter()
        self.by_address: Counter[str] = Counter()
        self.opened_last: dict[str, int] = {}  # each address's latest opening, in turn
        self.openings = 0
        self.ended = 0  # streams ended to make room for another holder's

    def refusal(self, session: str, address: str) -> str:
        """Why a new stream of this session from this address is refused ("" if it is not)."""
        if self.by_session[session] >= self.per_session:
            return f"a session may watch the floor in {self.per_session} windows at most: close one"
        if self.by_address[address] >= self.per_address:
            return f"an address may hold {self.per_address} of the floor's live streams at most: close one"
        return ""

    def opened(self, session: str, address: str) -> Stream:
        """A new stream (``refusal`` said none); at ``most``, the oldest of the address holding the most ended."""
        if len(self.open) >= self.most:
            holder = max(self.by_address, key=lambda a: (self.by_address[a], self.opened_last[a]))
            oldest = next(s for s in self.open if s.address == holder)
            self.closed(oldest)
            oldest.end()
            self.ended += 1
        stream = Stream(session, address)
        self.open[stream] = None
        self.by_session[session] += 1
        self.by_address[address] += 1
        self.openings += 1
        self.opened_last[address] = self.openings
        return stream

    def closed(self, stream: Stream) -> None:
        """The stream ended (once: ended for room, it is closed already)."""
        if self.open.pop(stream, 0) is None:
            for counts, key in ((self.by_session, stream.session), (self.by_address, stream.address)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]
            if stream.address not in self.by_address:
                self.opened_last.pop(stream.address, None)
