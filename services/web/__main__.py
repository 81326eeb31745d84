"""Run the web pages: python -m services.web --tables FILE --accounts FILE --http-port P, the web user's
NATS URL in $CASINO_NATS_URL (or --nats). With --passwords FILE, an accounts file that does not exist
yet is made: a user of each role, their passwords written to FILE (owner-only)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from casino.config.tables import load_tables
from casino.nats import client as natsclient
from services.web.accounts import ROLES, write_accounts
from services.web.clauses import Regulations
from services.web.guard import HEAD_WITHIN
from services.web.guard import server as web_server
from services.web.sessions import AccountsFile
from services.web.site import Site, app
from services.web.streams import STREAMS_MOST, STREAMS_PER_ADDRESS, STREAMS_PER_SESSION


async def serve(url: str, tables_file: Path, accounts_file: Path, regulations: Path, host: str, port: int,
                forwarded_allow_ips: str, streams: int, head_within: float) -> None:
    tables = load_tables(tables_file)
    nc = await natsclient.connect(url)
    site = Site(nc, {t: c.currency for t, c in tables.items()}, AccountsFile(accounts_file), Regulations(regulations),
                streams)
    await site.start()
    server = web_server(app(site), host, port, forwarded_allow_ips, head_within=head_within)
    try:
        await server.serve()
    finally:
        await site.floor.stop()
        await nc.close()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m services.web")
    p.add_argument("--nats", default=os.environ.get("CASINO_NATS_URL"), help="the web user's NATS URL")
    p.add_argument("--tables", required=True, help="the tables file")
    p.add_argument("--accounts", required=True, help="the web accounts file (services.web.site.write_accounts)")
    p.add_argument("--passwords", help="make the accounts file where there is none: a user of each role, "
                                       "the passwords written here")
    p.add_argument("--regulations", default=str(Path(__file__).resolve().parents[2] / "docs" / "regulations"),
                   help="the regulations' text, NNN-<name>.txt (default: the repository's docs/regulations; the "
                        "image holds them in /opt/casino/regulations)")
    p.add_argument("--http-host", default="127.0.0.1", help="the address the pages are served on (a pod: 0.0.0.0)")
    p.add_argument("--http-port", type=int, default=8080, help="the port the pages, /metrics, /healthz and /readyz are served on")
    p.add_argument("--forwarded-allow-ips", default="",
                   help="the proxies whose X-Forwarded-For and X-Forwarded-Proto are believed, comma-separated "
                        "(default none: every client is counted under its own address; a pod behind the Ingress, "
                        "reachable from its controller alone: '*')")
    p.add_argument("--streams", type=int, default=STREAMS_MOST,
                   help=f"live floor streams this instance serves at once (default {STREAMS_MOST}; "
                        f"{STREAMS_PER_SESSION} a session, {STREAMS_PER_ADDRESS} an address; at the bound the "
                        "oldest of the address holding the most is ended)")
    p.add_argument("--head-within", type=float, default=HEAD_WITHIN,
                   help=f"seconds a new connection may take to send its first request's head before it is closed "
                        f"(default {HEAD_WITHIN:g})")
    args = p.parse_args()
    if args.nats is None:
        p.error("the web user's NATS URL: --nats or $CASINO_NATS_URL")
    accounts = Path(args.accounts)
    if args.passwords and not accounts.exists():
        passwords = write_accounts(accounts, {role: role for role in ROLES})
        Path(args.passwords).write_text(json.dumps(passwords, indent=2) + "\n")
        Path(args.passwords).chmod(0o600)
    asyncio.run(serve(args.nats, Path(args.tables), accounts, Path(args.regulations), args.http_host, args.http_port,
                      args.forwarded_allow_ips, args.streams, args.head_within))


if __name__ == "__main__":
    main()
