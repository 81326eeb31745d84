"""Signing in and out of the web pages: a form with its token, limited by
client address, and by address and user (``services.web.guard``), and a session kept on the
server (``services.web.sessions``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from casino.nats.provision import SESSION_SECONDS
from services.web.guard import CSRF, SignInLimits, cookie_header, csrf_matches
from services.web.sessions import AccountsFile, Sessions

COOKIE = "casino_session"
FORM_BYTES = 4096  # the most a form (sign-in, sign-out) may send


class SignIn:
    """``/signin`` and ``/signout``; ``render`` draws a page, ``sessions`` gives the sessions once the site has started."""

    def __init__(self, render: Callable[..., str], sessions: Callable[[], Sessions], limits: SignInLimits,
                 accounts: AccountsFile) -> None:
        self.render, self.sessions, self.limits, self.accounts = render, sessions, limits, accounts

    @staticmethod
    async def _form(request: Request) -> dict[str, str] | None:
        """A small urlencoded form, None if it is larger than a form of ours."""
        if int(request.headers.get("content-length") or 0) > FORM_BYTES:
            return None
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > FORM_BYTES:
                return None
        return {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}

    async def signin(self, request: Request) -> Response:
        CSRF.set(request.state.csrf)
        then = request.query_params.get("then", "/")
        if request.method == "GET":
            return HTMLResponse(self.render("signin.html", refused="", then=then))
        form = await self._form(request)
        if form is None:
            return PlainTextResponse("a sign-in is a user and a password", 413)
        user, password, then = form.get("user", "")[:64], form.get("password", "")[:256], form.get("then", "/")
        if not csrf_matches(request.scope, form):
            return HTMLResponse(self.render("signin.html", refused="That form had expired: sign in again.",
                                            then=then), status_code=403)
        client = request.client.host if request.client else ""
        if why := self.limits.refusal(client, user):
            return HTMLResponse(self.render("signin.html", refused=why, then=then), status_code=429,
                                headers={"Retry-After": "60"})
        role = await asyncio.to_thread(self.accounts.current().role_of, user, password)
        if role is None:
            self.limits.failed(client, user)
            return HTMLResponse(self.render("signin.html", refused="That user and password do not sign in.",
                                            then=then), status_code=401)
        self.limits.signed_in(client, user)
        token = await self.sessions().begin(user, role)
        response = RedirectResponse(then if then.startswith("/") and not then.startswith("//") else "/", 303)
        response.headers.append("set-cookie", cookie_header(COOKIE, token, request.scope, SESSION_SECONDS).decode())
        return response

    async def signout(self, request: Request) -> Response:
        """The session ended on the server (a copy of its cookie opens nothing
        after), by a POST from the site's own form."""
        CSRF.set(request.state.csrf)
        form = await self._form(request)
        if form is None or not csrf_matches(request.scope, form):
            return PlainTextResponse("sign out from the site's own Sign out button", 403)
        await self.sessions().end(request.cookies.get(COOKIE, ""))
        response = RedirectResponse("/signin", 303)
        response.headers.append("set-cookie", cookie_header(COOKIE, "", request.scope, 0).decode())
        return response
