"""Who may sign in to the web pages, with which role (their sessions: services.web.sessions).

Made by the casino's administrator: python -m services.web.accounts FILE USER=ROLE ...
writes FILE (owner-only; in Kubernetes, the Secret casino-web-accounts) and
prints each user's new password, once."""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import secrets
from pathlib import Path

import msgspec

ROLES = ("pit", "surveillance", "compliance")


class Account(msgspec.Struct):
    role: str
    salt: str
    scrypt: str  # the password's scrypt hash, hex


class Accounts(msgspec.Struct):
    """Who may sign in, with which role. (``secret``: the key an earlier web
    signed its cookies with, read and no longer used: sessions live on the server.)"""

    secret: str = ""
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
        return cls("", users), passwords

    def role_of(self, user: str, password: str) -> str | None:
        account = self.users.get(user)
        if account is None:
            self.hashed(password, "00" * 16)  # as long either way
            return None
        return account.role if hmac.compare_digest(self.hashed(password, account.salt), account.scrypt) else None


def write_accounts(path: Path, roles: dict[str, str]) -> dict[str, str]:
    """The web accounts for ``roles`` written to ``path`` (owner-only); their passwords."""
    accounts, passwords = Accounts.made(roles)
    path.write_bytes(msgspec.json.encode(accounts))
    path.chmod(0o600)
    return passwords


def read_accounts(path: Path) -> Accounts:
    return msgspec.json.decode(path.read_bytes(), type=Accounts)



def main() -> None:
    p = argparse.ArgumentParser(prog="python -m services.web.accounts", description="make the web pages' accounts")
    p.add_argument("file", help="the accounts file to write")
    p.add_argument("users", nargs="+", metavar="USER=ROLE", help=f"a user and its role ({', '.join(ROLES)})")
    args = p.parse_args()
    roles = dict(u.partition("=")[::2] for u in args.users)
    if any(role not in ROLES for role in roles.values()):
        p.error(f"a role is one of {', '.join(ROLES)}")
    print(json.dumps(write_accounts(Path(args.file), roles), indent=2))


if __name__ == "__main__":
    main()
