"""The pit's, surveillance's and the regulator's pages: the floor live, and a
coup replayed step by step with its verification. Read-only: the web user
reads the record and the live events, writes nothing and creates no
consumer; no command is sent from a browser. Everything a terminal or a
device wrote is shown inert (Jinja's escaping, and control characters
shown as escapes)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import secrets
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import msgspec
from jinja2 import Environment, FileSystemLoader, select_autoescape
from nats.aio.client import Client
from nats.aio.msg import Msg
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from casino.audit.history import Absent
from casino.audit.replay import replay_coup
from casino.audit.verify import verify_coup
from casino.cli.console import Console, TableView
from casino.cli.replay import exported
from casino.rules import shoe as dealing_shoe
from casino.rules.baccarat import messages as baccarat_messages
from casino.rules.blackjack import messages as blackjack_messages
from casino.rules.text import escaped, money
from casino.store import envelope, subjects
from casino.store.envelope import CoupConfigured
from casino.store.eventstore import latest_at_table
from casino.store.jetstream import JetStreamEventStore, casino_named
from services.web import roads

HERE = Path(__file__).resolve().parent
ROLES = ("pit", "surveillance", "compliance")
SESSION_SECONDS = 8 * 3600  # a signed-in browser is asked to sign in again after a shift
COOKIE = "casino_session"


class Account(msgspec.Struct):
    role: str
    salt: str
    scrypt: str  # the password's scrypt hash, hex


class Accounts(msgspec.Struct):
    """Who may sign in, with which role; and the key the session cookies are signed with."""

    secret: str
    users: dict[str, Account] = {}

    @staticmethod
    def hashed(password: str, salt: str) -> str:
        return hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=2**14, r=8, p=1).hex()

    @classmethod
    def made(cls, roles: dict[str, str]) -> tuple[Accounts, dict[str, str]]:
        """Accounts for ``roles`` (user -> role), each with a new password; and the passwords."""
        passwords = {user: secrets.token_urlsafe(12) for user in roles}
        users = {}
        for user, role in roles.items():
            salt = secrets.token_hex(16)
            users[user] = Account(role, salt, cls.hashed(passwords[user], salt))
        return cls(secrets.token_hex(32), users), passwords

    def role_of(self, user: str, password: str) -> str | None:
        account = self.users.get(user)
        if account is None:
            self.hashed(password, "00" * 16)  # as long either way
            return None
        return account.role if hmac.compare_digest(self.hashed(password, account.salt), account.scrypt) else None

    def cookie(self, user: str, role: str, now: float) -> str:
        body = f"{user}|{role}|{int(now) + SESSION_SECONDS}"
        return f"{body}|{self._sign(body)}"

    def session(self, cookie: str, now: float) -> tuple[str, str] | None:
        """The signed-in user and role of a session cookie, or None (unsigned, altered or expired)."""
        body, _, signature = cookie.rpartition("|")
        parts = body.split("|")
        if len(parts) != 3 or not hmac.compare_digest(signature, self._sign(body)):
            return None
        user, role, expires = parts
        return (user, role) if expires.isdigit() and int(expires) > now and role in ROLES else None

    def _sign(self, body: str) -> str:
        return hmac.new(bytes.fromhex(self.secret), body.encode(), hashlib.sha256).hexdigest()


class Floor:
    """Every table as its live events arrive (one subscription, whatever the
    number of browsers), and each browser's queue of the tables changed."""

    def __init__(self, tables: list[str], currencies: dict[str, str]) -> None:
        self.console = Console(tables, currencies, live=False)
        self.watchers: set[asyncio.Queue[str]] = set()

    async def on_event(self, msg: Msg) -> None:
        try:
            batch = envelope.decode(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
            return  # no batch of ours: nothing to show (verification names it)
        self.console.on_batch(msg.subject, batch)
        table = subjects.tokens(msg.subject)[0]
        for queue in self.watchers:
            if queue.qsize() < 64:  # a browser that does not read is not waited for
                queue.put_nowait(table)

    @property
    def views(self) -> dict[str, TableView]:
        return self.console.views


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
    env.filters["inert"] = lambda text: escaped(str(text))
    env.filters["money"] = lambda minor, currency="", signed=False: money(int(minor), currency, signed=signed)
    return env


class Site:
    def __init__(self, nc: Client, tables: dict[str, str], accounts: Accounts) -> None:
        """``tables``: each table's currency."""
        self.nc, self.accounts = nc, accounts
        self.store = JetStreamEventStore(nc)
        self.floor = Floor(list(tables), tables)
        self.env = _env()

    async def start(self) -> None:
        await self.nc.subscribe(f"{subjects.EVENTS}.>", cb=self.floor.on_event)

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    # ---- sign-in ---------------------------------------------------------

    def who(self, request: Request) -> tuple[str, str] | None:
        return self.accounts.session(request.cookies.get(COOKIE, ""), time.time())

    async def signin(self, request: Request) -> Response:
        if request.method == "GET":
            return HTMLResponse(self.render("signin.html", failed=False, then=request.query_params.get("then", "/")))
        if int(request.headers.get("content-length") or 0) > 4096:
            return PlainTextResponse("a sign-in is a user and a password", 413)
        form = {k: v[0] for k, v in parse_qs((await request.body())[:4096].decode(errors="replace")).items()}
        user, password = form.get("user", "")[:64], form.get("password", "")[:256]
        then = form.get("then", "/")
        role = self.accounts.role_of(user, password)
        if role is None:
            return HTMLResponse(self.render("signin.html", failed=True, then=then), status_code=401)
        response = RedirectResponse(then if then.startswith("/") and not then.startswith("//") else "/", 303)
        response.set_cookie(COOKIE, self.accounts.cookie(user, role, time.time()), max_age=SESSION_SECONDS,
                            httponly=True, samesite="strict")
        return response

    async def signout(self, request: Request) -> Response:
        response = RedirectResponse("/signin", 303)
        response.delete_cookie(COOKIE)
        return response

    # ---- pages -------------------------------------------------------------

    def _signed(self, request: Request) -> tuple[str, str] | Response:
        who = self.who(request)
        if who is None:
            return RedirectResponse(f"/signin?then={request.url.path}", 303)
        return who

    async def floor_page(self, request: Request) -> Response:
        who = self._signed(request)
        if isinstance(who, Response):
            return who
        return HTMLResponse(self.render("floor.html", who=who, views=self.floor.views.values()))

    async def floor_events(self, request: Request) -> Response:
        who = self.who(request)
        if who is None:
            return PlainTextResponse("sign in first", 401)
        queue: asyncio.Queue[str] = asyncio.Queue()
        self.floor.watchers.add(queue)

        async def tiles() -> AsyncIterator[ServerSentEvent]:
            try:
                while True:
                    table = await queue.get()
                    view = self.floor.views[table]
                    yield ServerSentEvent(self.render("tile.html", v=view).replace("\n", " "), event=f"tile-{table}")
            finally:
                self.floor.watchers.discard(queue)

        return EventSourceResponse(tiles(), ping=15)

    async def coup_page(self, request: Request) -> Response:
        who = self._signed(request)
        if isinstance(who, Response):
            return who
        table, number = request.path_params["table"], request.path_params["number"]
        if table not in self.floor.views:
            return HTMLResponse(self.render("missing.html", who=who, what=f"table {table}"), status_code=404)
        coup = f"{table}-{number:06d}"
        stored = await self.store.read(subjects.coup_filter(coup, table))
        if not stored:
            return HTMLResponse(self.render("missing.html", who=who, what=f"coup {coup}"), status_code=404)
        replay = replay_coup(stored)
        findings = verify_coup(stored)
        return HTMLResponse(self.render("coup.html", who=who, r=replay, findings=findings, coup=coup))


    async def table_page(self, request: Request) -> Response:
        """A table: its live coup, its shoe in play's facts and roads, and that shoe's coups."""
        who = self._signed(request)
        if isinstance(who, Response):
            return who
        table = request.path_params["table"]
        view = self.floor.views.get(table)
        if view is None:
            return HTMLResponse(self.render("missing.html", who=who, what=f"table {table}"), status_code=404)
        shoe = view.shoe or (await self._latest_shoe(table))
        stored = await self.store.read(subjects.shoe_filter(table, shoe)) if shoe else []
        facts: dict[str, Any] = {"burned": 0, "ended": None, "shuffled": None}
        coups: dict[str, str] = {}  # coup -> its result, in turn
        beads: list[roads.Bead] = []
        marks: list[tuple[str, int, bool, bool]] = []
        for m in stored:
            coup = subjects.tokens(m.subject)[2]
            for env in m.batch.events:
                e = env.data
                if isinstance(e, dealing_shoe.ShoeShuffled):
                    facts["shuffled"] = e
                elif isinstance(e, dealing_shoe.CardBurned):
                    facts["burned"] += 1
                elif isinstance(e, dealing_shoe.ShoeEnded):
                    facts["ended"] = e
                elif isinstance(e, CoupConfigured):
                    coups.setdefault(coup, "")
                elif isinstance(e, baccarat_messages.CoupResulted):
                    number = subjects.coup_number(coup) or 0
                    coups[coup] = f"{e.winner} {e.player_points}-{e.banker_points}"
                    beads.append(roads.Bead(e.winner, number))
                    marks.append((e.winner, number, e.player_pair, e.banker_pair))
                elif isinstance(e, blackjack_messages.CoupResulted):
                    coups[coup] = f"dealer {'blackjack' if e.dealer_blackjack else e.dealer_total}"
        return HTMLResponse(self.render(
            "table.html", who=who, v=view, shoe=shoe, facts=facts, bead_plate=roads.bead_plate(beads),
            big_road=roads.big_road(marks), coups=list(coups.items())[::-1], baccarat=bool(beads)))

    async def export_page(self, request: Request) -> Response:
        """Compliance's export of a table and a window, as `casino export` writes
        it: the form, or (``download``) the file, its chain's end hash in its name."""
        who = self._signed(request)
        if isinstance(who, Response):
            return who
        if who[1] != "compliance":
            return HTMLResponse(self.render("missing.html", who=who, what="export for your role"), status_code=403)
        q = request.query_params
        table = q.get("table", "")
        if not table:
            return HTMLResponse(self.render("export.html", who=who, tables=list(self.floor.views), header=None,
                                            query=""))
        if table not in self.floor.views:
            return HTMLResponse(self.render("missing.html", who=who, what=f"table {table}"), status_code=404)
        try:
            since, until = (datetime.fromisoformat(q[k]).replace(tzinfo=UTC) if q.get(k) else None
                            for k in ("since", "until"))
        except ValueError:
            return HTMLResponse(self.render("missing.html", who=who, what="such a time"), status_code=400)
        named, now = await casino_named(self.nc.jetstream()), f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"
        out = io.BytesIO()
        try:
            header = await exported(self.nc, table, since, until, named, now, out)
        except Absent as exc:
            return HTMLResponse(self.render("missing.html", who=who, what=str(exc)), status_code=404)
        if q.get("download"):
            return Response(out.getvalue(), media_type="application/octet-stream", headers={
                "Content-Disposition": f'attachment; filename="{table}-{header.last[:16]}.export"',
                "X-Casino-Chain-End": header.last})
        return HTMLResponse(self.render("export.html", who=who, tables=list(self.floor.views), header=header,
                                        query=str(request.url.query)))

    async def _latest_shoe(self, table: str) -> str:
        latest = await latest_at_table(self.store, table, "shoe")
        return subjects.tokens(latest.subject)[1] if latest is not None else ""


async def healthz(_: Request) -> Response:
    return PlainTextResponse("ok")


def app(site: Site) -> Starlette:
    return Starlette(routes=[
        Route("/", site.floor_page),
        Route("/floor/events", site.floor_events),
        Route("/coup/{table}/{number:int}", site.coup_page),
        Route("/table/{table}", site.table_page),
        Route("/export", site.export_page),
        Route("/signin", site.signin, methods=["GET", "POST"]),
        Route("/signout", site.signout, methods=["POST", "GET"]),
        Route("/healthz", healthz),
        Route("/readyz", healthz),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ])


def write_accounts(path: Path, roles: dict[str, str]) -> dict[str, str]:
    """The web accounts for ``roles`` written to ``path`` (owner-only); their passwords."""
    accounts, passwords = Accounts.made(roles)
    path.write_bytes(msgspec.json.encode(accounts))
    path.chmod(0o600)
    return passwords


def read_accounts(path: Path) -> Accounts:
    return msgspec.json.decode(path.read_bytes(), type=Accounts)

