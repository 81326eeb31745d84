"""The pit's, surveillance's and the regulator's pages: the floor live, a
table, a shoe, and a coup replayed step by step with its verification. Read-only:
the web user reads the record (live and archived), the read models and the
live events, writes nothing and creates no consumer; no command is sent from
a browser. Everything a terminal or a device wrote is shown inert (Jinja's
escaping, and control characters shown as escapes)."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from nats.aio.client import Client
from prometheus_client import make_asgi_app
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from casino.audit.archive import history
from casino.audit.history import Absent, Bounds, coup_id, coups_within, played_at
from casino.audit.replay import render_shoe, replay_coup
from casino.audit.verify import shoe_records, verify_coup
from casino.cli.replay import NAME, exported
from casino.rules.text import escaped, money
from casino.store import subjects
from casino.store.eventstore import latest_at_table
from casino.store.jetstream import Named, casino_named
from services.web import roads, words
from services.web.accounts import Accounts
from services.web.clauses import NUMBER, Regulations, linked
from services.web.dispute import INCIDENTS, as_of
from services.web.floor import Floor
from services.web.guard import CSRF, CSRF_FIELD, Guarded, SignInLimits
from services.web.metrics import WebMetrics
from services.web.sessions import SESSIONS, AccountsFile, Sessions
from services.web.signin import COOKIE, SignIn
from services.web.streams import ENDED, STREAMS_MOST, Streams
from services.web.tiles import Tile

HERE = Path(__file__).resolve().parent
PAGES = ("floor", "floor_events", "table", "shoe", "coup", "find", "clause", "export", "signin")
FOUND_AT_MOST = 50  # coups a search by player lists
SEARCHED_AT_MOST = 1000  # coups a search by player reads, the latest in its window
SESSION_CHECK = 30.0  # seconds between checks that a live stream's session is still open


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
    env.filters["inert"] = lambda text: escaped(str(text))
    env.filters["money"] = lambda minor, currency="", signed=False: money(int(minor), currency, signed=signed)
    env.filters["clauses"] = linked
    env.filters["number"] = lambda coup: coup.rpartition("-")[2].lstrip("0")
    env.filters["spoken"] = words.card
    env.filters["iso"] = lambda at: datetime.fromtimestamp(at, UTC).isoformat()
    env.filters["clock"] = lambda at: f"{datetime.fromtimestamp(at, UTC):%H:%M:%S} UTC"
    env.filters["plain"] = lambda name: escaped(str(name).replace("_", " ").title())  # method_a: Method A
    return env


class Site:
    def __init__(self, nc: Client, tables: dict[str, str], accounts: Accounts | AccountsFile,
                 regulations: Regulations, streams_most: int = STREAMS_MOST,
                 searched_most: int = SEARCHED_AT_MOST) -> None:
        """``tables``: each table's currency; ``accounts``: as read once, or
        their file (read again as it changes: a new password ends its sessions)."""
        self.nc, self.regulations = nc, regulations
        self.accounts = accounts if isinstance(accounts, AccountsFile) else AccountsFile(accounts=accounts)
        self.sessions: Sessions | None = None  # once started
        self.store = history(nc)  # live and sealed alike
        self.env = _env()
        self.metrics = WebMetrics()
        self.sign = SignIn(self.render, self._sessions, SignInLimits(self.metrics.registry), self.accounts)
        self.searched_most = searched_most
        self.streams = Streams(streams_most)
        self.small_roads: dict[str, tuple[tuple[str, int], str]] = {}  # each tile's big road, drawn once a result
        self.floor = Floor(nc, tables, self._draw_tile,
                           lambda down, restarting: self.render("down.html", down=down, restarting=restarting),
                           lambda summary: self.render("summary.html", summary=summary))
        self.floor.on_drawn = lambda table: self.metrics.drawn.inc()
        self.floor.services.on_started = lambda service: self.metrics.started.labels(service).inc()
        self.metrics.down.set_function(lambda: len(self.floor.services.down))
        self.metrics.restarting.set_function(lambda: len(self.floor.services.restarting))
        self.named = Named()
        self.ready = False

    async def start(self) -> None:
        try:
            kv = await self.nc.jetstream().key_value(SESSIONS)
        except Exception as exc:
            raise RuntimeError(f"the web's sessions bucket {SESSIONS} cannot be opened ({exc}): the administrator "
                               f"provisions it (`casino run` does, or casino.nats.provision)") from exc
        self.sessions = Sessions(kv, self.accounts)
        self.named = await casino_named(self.nc.jetstream())  # whose record: on every print
        await self.floor.start()
        self.ready = True

    def _draw_tile(self, tile: Tile) -> str:
        return self.render("tile.html", t=tile, now=time.time(), road=self._small_road(tile))

    def _small_road(self, tile: Tile) -> str:
        """The big road of the tile's shoe in play (a baccarat shoe's), drawn again only once a result comes."""
        if not tile.results:
            return ""
        key, held = (tile.results_of, len(tile.results)), self.small_roads.get(tile.status.table)
        if held is None or held[0] != key:
            held = self.small_roads[tile.status.table] = (key, self.render("small-road.html", marks=tile.road()))
        return held[1]

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(csrf=CSRF.get(), csrf_field=CSRF_FIELD, **context)

    # ---- sign-in ---------------------------------------------------------

    def _sessions(self) -> Sessions:
        assert self.sessions is not None, "the site is not started"
        return self.sessions

    async def who(self, request: Request) -> tuple[str, str] | None:
        return await self._sessions().who(request.cookies.get(COOKIE, ""))

    def page(self, name: str, roles: tuple[str, ...] = ()) -> Callable[[Request], Awaitable[Response]]:
        """The page ``name``'s handler: for a signed-in browser (``roles``: of
        those roles alone), counted and timed; an unsigned one is sent to sign in."""
        handler = getattr(self, f"{name}_page")

        async def answer(request: Request) -> Response:
            self.metrics.requests.labels(name).inc()
            CSRF.set(request.state.csrf)
            with self.metrics.seconds.labels(name).time():
                who = await self.who(request)
                if who is None:  # a page sends to sign in; the live stream, an EventSource, is refused
                    return PlainTextResponse("sign in first", 401) if name == "floor_events" else \
                        RedirectResponse(f"/signin?then={quote(request.url.path)}", 303)
                if roles and who[1] not in roles:
                    return self.missing(who, f"{name} for your role", 403)
                response: Response = await handler(request, who)
                return response

        return answer

    def missing(self, who: tuple[str, str] | None, what: str, status: int = 404) -> Response:
        return HTMLResponse(self.render("missing.html", who=who, what=what, status=status), status_code=status)

    # ---- the floor ---------------------------------------------------------

    async def floor_page(self, request: Request, who: tuple[str, str]) -> Response:
        await self.floor.look()
        return HTMLResponse(self.render("floor.html", who=who, floor=self.floor, summary=self.floor.summary(),
                                        compact=request.query_params.get("compact") == "1"))

    async def floor_events_page(self, request: Request, who: tuple[str, str]) -> Response:
        """The tiles changed, as they change: each drawn, and each event encoded,
        once for every browser. Bounded (``Streams``): a few a session and an
        address, and a number in all, at which the oldest of the address holding
        the most is ended; a stream whose session has ended is closed within
        ``SESSION_CHECK`` seconds."""
        session, address = request.cookies.get(COOKIE, ""), request.client.host if request.client else ""
        if refusal := self.streams.refusal(session, address):
            return PlainTextResponse(refusal, 429)
        await self.floor.look()
        stream = self.streams.opened(session, address)
        stream.frames.put_nowait(self.floor.everything())  # a page reconnecting has missed what changed meanwhile
        self.floor.watchers.add(stream.frames)
        self.metrics.streams.inc()

        async def tiles() -> AsyncIterator[bytes]:
            try:
                while True:
                    try:
                        frame = await asyncio.wait_for(stream.frames.get(), SESSION_CHECK)
                    except TimeoutError:
                        if await self.who(request) is None:
                            return
                        continue
                    if frame == ENDED or stream.over:
                        return
                    self.metrics.sent.inc()
                    yield frame
            finally:
                self.floor.watchers.discard(stream.frames)
                self.streams.closed(stream)
                self.metrics.streams.dec()

        return EventSourceResponse(tiles(), ping=15)

    # ---- a table, a shoe ---------------------------------------------------

    async def table_page(self, request: Request, who: tuple[str, str]) -> Response:
        """A table: its live coup, its shoe in play's facts, scoreboard and coups."""
        table = request.path_params["table"]
        if table not in self.floor.tiles:
            return self.missing(who, f"table {table}")
        await self.floor.look()
        return HTMLResponse(self.render("table.html", who=who, t=self.floor.tiles[table], table=table,
                                        drawn=self.floor.drawn[table], **await self._shoe_in_play(table)))

    async def table_shoe_page(self, request: Request, who: tuple[str, str]) -> Response:
        """The table page's shoe in play, drawn again as each result is recorded (``Floor.tell``)."""
        table = request.path_params["table"]
        if table not in self.floor.tiles:
            return self.missing(who, f"table {table}")
        return HTMLResponse(self.render("table-shoe.html", table=table, **await self._shoe_in_play(table)))

    async def table_tile_page(self, request: Request, who: tuple[str, str]) -> Response:
        """The table page's tile as last drawn, asked for as it changes (``Floor.tell``): it swaps itself in."""
        table = request.path_params["table"]
        if table not in self.floor.tiles:
            return self.missing(who, f"table {table}")
        return HTMLResponse(self.floor.drawn[table])

    async def board_page(self, request: Request, who: tuple[str, str], part: str = "board.html") -> Response:
        """A baccarat table's scoreboard for a screen on the pit wall: its five roads, counts and ask."""
        table = request.path_params["table"]
        if table not in self.floor.tiles or self.floor.tiles[table].status.game not in ("", "baccarat"):
            return self.missing(who, f"a scoreboard for table {table} (a baccarat table's)")
        return HTMLResponse(self.render(part, who=who, table=table, **await self._shoe_in_play(table)))

    async def board_roads_page(self, request: Request, who: tuple[str, str]) -> Response:
        """The pit display's roads, drawn again as each result is recorded (``Floor.tell``)."""
        return await self.board_page(request, who, "board-roads.html")

    async def _shoe_in_play(self, table: str) -> dict[str, Any]:
        tile = self.floor.tiles[table]
        shoe = tile.status.shoe or tile.view.shoe or await self._latest_shoe(table)
        stored = await self.store.read(subjects.shoe_filter(table, shoe)) if shoe else []
        return {"shoe": shoe, **roads.shoe_facts(stored)}

    async def shoe_page(self, request: Request, who: tuple[str, str]) -> Response:
        """A shoe: its commitment and what its end revealed, its coups, and its seal in the table's chain."""
        shoe = request.path_params["shoe"]
        table = subjects.table_of_shoe(shoe)
        if not NAME.fullmatch(shoe) or table not in self.floor.tiles:
            return self.missing(who, f"shoe {shoe}")
        stored = await self.store.read(subjects.shoe_filter(table, shoe))
        if not stored:
            return self.missing(who, f"shoe {shoe}")
        kept = await self.store.seals.get(table, shoe)
        own = shoe_records(stored)
        return HTMLResponse(self.render("shoe.html", who=who, table=table, shoe=shoe, kept=kept,
                                        lines=render_shoe(own, kept.hash if kept else ""), **roads.shoe_facts(stored)))

    async def _latest_shoe(self, table: str) -> str:
        latest = await latest_at_table(self.store, table, "shoe")
        return subjects.tokens(latest.subject)[1] if latest is not None else ""

    # ---- a coup --------------------------------------------------------------

    async def coup_page(self, request: Request, who: tuple[str, str]) -> Response:
        """The dispute page: the coup's cards in dealing order, stepped through
        one step at a time (``step``), each step with its time, who caused it
        and its clause; its wagers and payouts; its verification, as `casino
        verify` computes it, from the record live or sealed."""
        table, number = request.path_params["table"], request.path_params["number"]
        if table not in self.floor.tiles:
            return self.missing(who, f"table {table}")
        coup = coup_id(table, str(number))
        stored = await self.store.read(subjects.coup_filter(coup, table))
        try:
            r = replay_coup(stored)
        except LookupError:
            return self.missing(who, f"coup {coup}")
        findings = verify_coup(stored)
        step = _int(request.query_params.get("step"), len(r.steps), len(r.steps))
        sealed = await self.store.seals.get(table, r.shoe) if r.shoe else None
        return HTMLResponse(self.render(
            "coup.html", who=who, r=r, findings=findings, coup=coup, number=number, step=step, now=as_of(r, step),
            sealed=sealed, incidents=INCIDENTS, printed=datetime.now(UTC), named=self.named))

    async def find_page(self, request: Request, who: tuple[str, str]) -> Response:
        """A coup found by table and number, by the time it was in play, or by a player's wagers in a window."""
        q = request.query_params
        table = q.get("table", "")
        tables = list(self.floor.tiles)
        found: list[tuple[int, str]] = []
        searched, earlier = range(0), False
        asked = table and any(q.get(k) for k in ("number", "at", "player"))
        if asked and table not in self.floor.tiles:
            return self.missing(who, f"table {table}")
        if asked and (number := q.get("number", "")):
            if not number.isdigit() or len(number) > 9:
                return self.missing(who, "a coup is found by its number at the table: 1, 2, 3 and on", 400)
            return RedirectResponse(f"/coup/{table}/{int(number)}", 303)
        try:
            at, since, until = (_time(q.get(k, "")) for k in ("at", "since", "until"))
        except ValueError:
            return self.missing(who, "a time is written as in 2026-12-06T14:30:00 (UTC)", 400)
        if asked and at is not None:
            if at >= datetime.max.replace(tzinfo=UTC) - timedelta(days=1):
                return self.missing(who, "a coup is found at a time before the year 9999", 400)
            numbers, _ = await coups_within(self.store, table, Bounds(until=at + timedelta(microseconds=1)))
            if numbers:
                return RedirectResponse(f"/coup/{table}/{numbers[-1]}", 303)
            return self.missing(who, f"coup in play at {table} at {at:%Y-%m-%d %H:%M:%S} UTC")
        player = q.get("player", "")[:64]
        if asked and player:
            window, _ = await coups_within(self.store, table, Bounds(since=since, until=until))
            numbers = window[-self.searched_most:] if window is not None else range(0)
            searched = numbers
            found = [(n, f"{at:%Y-%m-%d %H:%M:%S} UTC")
                     async for n, at in played_at(self.store, table, numbers, player, _players)][-FOUND_AT_MOST:]
            earlier = window is not None and len(window) > len(numbers)
        return HTMLResponse(self.render("find.html", who=who, tables=tables, q=q, found=found, player=player,
                                        table=table, searched=bool(asked and player), window=searched,
                                        earlier=asked and player and earlier))

    async def clause_page(self, request: Request, who: tuple[str, str]) -> Response:
        document, number = request.path_params["document"], request.path_params["number"]
        if not NUMBER.fullmatch(number):
            return self.missing(who, "a clause is numbered as the regulations number it: 8.19, 8.9(a), (4)(a)", 400)
        text = self.regulations.text(document, number)
        if text is None:
            return self.missing(who, f"clause {document} {number}")
        return HTMLResponse(self.render("clause.html", who=who, document=document, number=number, text=text))

    # ---- the regulator's export -----------------------------------------------

    async def export_page(self, request: Request, who: tuple[str, str]) -> Response:
        """Compliance's export of a table and a window, as `casino export` writes
        it: the form, or (``download``) the file, its chain's end hash in its name."""
        q = request.query_params
        table = q.get("table", "")
        tables = list(self.floor.tiles)
        if not table:
            return HTMLResponse(self.render("export.html", who=who, tables=tables, header=None, query=""))
        if table not in self.floor.tiles:
            return self.missing(who, f"table {table}")
        try:
            since, until = (_time(q.get(k, "")) for k in ("since", "until"))
        except ValueError:
            return self.missing(who, "a time is written as in 2026-12-06T14:30:00 (UTC)", 400)
        named, now = self.named, f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"
        out = io.BytesIO()
        try:
            header = await exported(self.nc, table, since, until, named, now, out)
        except Absent as exc:
            return self.missing(who, str(exc))
        filename = f"{table}-{header.last[:16]}.export"
        if q.get("download"):
            return Response(out.getvalue(), media_type="application/octet-stream", headers={
                "Content-Disposition": f'attachment; filename="{filename}"', "X-Casino-Chain-End": header.last})
        return HTMLResponse(self.render("export.html", who=who, tables=tables, header=header, filename=filename,
                                        query=str(request.url.query)))

    async def readyz(self, _: Request) -> Response:
        return PlainTextResponse("ready") if self.ready and self.nc.is_connected else \
            PlainTextResponse("not ready", 503)


def _int(text: str | None, default: int, most: int) -> int:
    return max(0, min(int(text), most)) if text and text.isdigit() else default


def _time(text: str) -> datetime | None:
    """A time asked for in a form (ISO, taken as UTC); None for none."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC) if text else None


def _players(e: object) -> set[str]:
    """The players an event of a wager book names: who wagers, is seated, or was seated as betting opened."""
    wager = getattr(e, "wager", None)
    return {getattr(e, "player", ""), getattr(wager, "player", ""), *(p for _, p in getattr(e, "seated", ()))}


async def healthz(_: Request) -> Response:
    return PlainTextResponse("ok")


def app(site: Site) -> Starlette:
    return Starlette(middleware=[Middleware(Guarded)], routes=[
        Route("/", site.page("floor")),
        Route("/floor/events", site.page("floor_events")),
        Route("/coup/{table}/{number:int}", site.page("coup")),
        Route("/coup", site.page("find")),
        Route("/table/{table}", site.page("table")),
        Route("/table/{table}/shoe", site.page("table_shoe")),
        Route("/table/{table}/tile", site.page("table_tile")),
        Route("/table/{table}/board", site.page("board")),
        Route("/table/{table}/board/roads", site.page("board_roads")),
        Route("/shoe/{shoe}", site.page("shoe")),
        Route("/clause/{document}/{number}", site.page("clause")),
        Route("/export", site.page("export", roles=("compliance",))),
        Route("/signin", site.sign.signin, methods=["GET", "POST"]),
        Route("/signout", site.sign.signout, methods=["POST"]),
        Route("/healthz", healthz),
        Route("/readyz", site.readyz),
        Mount("/metrics", make_asgi_app(site.metrics.registry)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ])
