"""The ``casino`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import nats.errors

from casino.audit.history import Absent
from casino.config import rulesets
from casino.rules.parsheet import par_sheet
from casino.rules.ruleset import RulesetError
from casino.rules.text import escaped
from casino.store.jetstream import Undeclared


def _print_sheet(sheet: dict[str, Any]) -> None:
    print(f"{sheet['ruleset']}: {sheet['game']}, {sheet['decks']} decks")
    if sheet["game"] == "baccarat":
        print("outcome    probability")
        for k, p in sheet["outcomes"].items():
            print(f"{k:<10} {p:.6f}")
        print("bet          house edge")
        for k, e in sheet["house_edge"].items():
            print(f"{k:<12} {100 * e:8.4f}%")
        return
    print(f"dealer {'hits' if sheet['dealer_hits_soft_17'] else 'stands on'} soft 17; no peek")
    cols = list(next(iter(sheet["dealer_final"].values())))
    print("up   " + "".join(f"{c:>10}" for c in cols))
    for up, dist in sheet["dealer_final"].items():
        print(f"{up:<5}" + "".join(f"{dist[c]:10.6f}" for c in cols))


class Parser(argparse.ArgumentParser):
    """A mistake in the arguments said in one line, with where to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe could no longer be told apart
        return status
    except (FileNotFoundError, Absent, RulesetError, Undeclared) as exc:  # not there, or not as it should be
        print(escaped(f"casino: {exc}", keep_newlines=False), file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader stopped reading (``casino replay coup ... | head``): it has
        # what it asked for. Nothing more is written, and no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by a closed pipe
    except (nats.errors.Error, TimeoutError) as exc:  # the broker away or refusing mid-way
        print(escaped(f"casino: the event store stopped answering: {exc or type(exc).__name__}",
                      keep_newlines=False), file=sys.stderr)
        return 1
    except OSError as exc:  # a file that cannot be written or read
        print(escaped(f"casino: {exc}", keep_newlines=False), file=sys.stderr)
        return 1


def _main(argv: Sequence[str] | None) -> int:
    parser = Parser(prog="casino", description="The coup engine's command line.")
    sub = parser.add_subparsers(dest="command", required=True)
    ps = sub.add_parser("par-sheet", help="game mathematics of a ruleset, by exact enumeration")
    ps.add_argument("ruleset", help=f"a ruleset file or a built-in name: {', '.join(rulesets.available())}")
    ps.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("rulesets", help="list the built-in rulesets")
    from casino.cli import run as launcher

    launcher.add_arguments(sub.add_parser("run", help="the whole casino: NATS, the four services, simulated tables"))
    launcher.add_web_arguments(sub.add_parser("web", help="the web pages alone, read-only, over a store a run left "
                                                          "(--var) or a running casino's (--nats)"))
    from casino.cli import replay as replaycli

    replaycli.add_commands(sub)
    args = parser.parse_args(argv)

    if args.command in ("replay", "verify", "export", "projections"):
        return replaycli.run(args)
    if args.command == "run":
        return launcher.run(args)
    if args.command == "web":
        return launcher.web(args)
    if args.command == "rulesets":
        print("\n".join(rulesets.available()))
        return 0
    rules = rulesets.load(args.ruleset)
    sheet = par_sheet(rules)
    if args.json:
        print(json.dumps(sheet, indent=2))
    else:
        _print_sheet(sheet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
