"""`marketplace ledger show DB_OR_KIT`: an owner's lifetime ledger, as it stands on disk; and
`marketplace ledger reconcile DB_OR_FOLDER`: settle what owners that are gone left reserved.

``show`` reads the file without changing it (a running owner may keep charging meanwhile: WAL readers
do not block it). A kit folder is found by its ``kit.json`` (``<party>.ledger.sqlite``), or by the one
``*.ledger.sqlite`` file it holds. ``reconcile`` writes: it runs
:meth:`~marketplace.privacy.lifetime.LifetimeLedger.reconcile` on one ledger, or on every ledger of a
folder. ``check`` verifies, read-only, every ledger of a path (:mod:`marketplace.privacy.lifetime.check`);
``init`` creates a ledger on purpose, and with ``--force`` keeps the one there (or the record of one that
was there) aside first (:meth:`~marketplace.privacy.lifetime.LifetimeLedger.init`).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

EXIT_OK, EXIT_USAGE, EXIT_FAILED = 0, 2, 3

EXAMPLES = """\
examples:
  marketplace ledger show kits/owner-1                    the ledger in owner-1's kit folder
  marketplace ledger show kits/owner-1/owner-1.ledger.sqlite --json
  marketplace ledger reconcile kits/owner-1               settle what a killed owner left reserved
  marketplace ledger check state/                          verify every ledger of a serve state folder
  marketplace ledger init kits/owner-1 --owner owner-1 --eps 10 --delta 1e-6 --force
                                                          start a fresh ledger, keeping the old file aside
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``ledger`` (with ``show``, ``reconcile``, ``check`` and ``init``) to ``subparsers``; each sets ``func``."""
    ledger = subparsers.add_parser(
        "ledger",
        help="an owner's lifetime privacy ledger: spent, remaining, history",
        description="Read an owner's lifetime ledger (a SQLite file, kept in its kit folder as "
        "<party>.ledger.sqlite) and print its budget, filter, neighbouring relation, what is "
        "spent and left, every request it charged or declined, and the data points it sold.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ledger.set_defaults(func=_usage(ledger))
    commands = ledger.add_subparsers(dest="ledger_command", metavar="COMMAND")
    show = commands.add_parser(
        "show",
        help="print a ledger: spent, remaining, the filter, the relation, the history",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument(
        "path", metavar="DB_OR_KIT_FOLDER", help="a ledger file, or a kit folder holding <party>.ledger.sqlite"
    )
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    show.set_defaults(func=show_command)
    reconcile = commands.add_parser(
        "reconcile",
        help="settle reservations left by owners that are gone: roll back those that sent nothing",
        description="Settle every reservation a process that is gone left 'reserved' (an owner killed between "
        "charging a run and settling it): rolled back when its ledger holds no record that anything of the "
        "release left, kept as spent (committed) when it does. Reservations of a live process of this host "
        "are not touched. Owners do this themselves when they first open their ledger.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reconcile.add_argument(
        "path", metavar="DB_OR_FOLDER", help="a ledger file, a kit folder, or a folder of <party>.ledger.sqlite files"
    )
    reconcile.add_argument("--json", action="store_true", help="print JSON instead of text")
    reconcile.set_defaults(func=reconcile_command)
    check = commands.add_parser(
        "check",
        help="verify every ledger in a file, kit, ledgers folder or serve state folder (read-only)",
        description="Open each ledger read-only and check its schema and invariants: nothing negative, no "
        "request charged twice, every counted request charged, the spend within the budget, sales consistent "
        "with their requests; a ledger whose record says it existed but that is missing or empty fails too. "
        "Prints one line per ledger. Exit 0 when every ledger passes, 3 when one fails, 2 when the path holds "
        "no ledger.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("path", metavar="PATH", help="a ledger file, a kit folder, a ledgers folder or a state folder")
    check.add_argument("--json", action="store_true", help="print JSON instead of text")
    check.set_defaults(func=check_command)
    init = commands.add_parser(
        "init",
        help="create a fresh ledger on purpose; --force keeps an existing (or damaged) one aside first",
        description="Create a lifetime ledger for an owner. A ledger that exists, or that existed (its record "
        "<party>.ledger.id is beside it), is never replaced silently: with --force its file is renamed "
        "<name>.replaced-<UTC time> (with its -wal and -shm files), never deleted, and a fresh ledger starts "
        "with nothing spent.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("path", metavar="DB_OR_FOLDER", help="the ledger file, or the folder it goes in")
    init.add_argument("--owner", required=True, help="the party the ledger belongs to (names the file in a folder)")
    init.add_argument("--eps", type=float, required=True, help="the lifetime budget's epsilon")
    init.add_argument("--delta", type=float, default=0.0, help="the lifetime budget's delta (default 0)")
    init.add_argument(
        "--relation",
        default="add/remove-one",
        choices=("add/remove-one", "replace-one", "replace-one-distinct"),
        help="the neighbouring relation the budget is stated under (default add/remove-one)",
    )
    init.add_argument("--filter", default="basic", choices=("basic", "zcdp"), help="the privacy filter (default basic)")
    init.add_argument("--force", action="store_true", help="keep an existing or former ledger aside and start afresh")
    init.set_defaults(func=init_command)
    return ledger


def _usage(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    return run


def find_ledger(path: str | Path) -> Path:
    """The ledger file named by ``path``: the file itself, or the one in a kit folder."""
    from marketplace.privacy.lifetime import LEDGER_SUFFIX, ledger_file

    path = Path(path)
    if not path.is_dir():
        return path
    manifest = path / "kit.json"
    if manifest.is_file():
        party = json.loads(manifest.read_text(encoding="utf-8")).get("party")
        if isinstance(party, str) and ledger_file(path, party).is_file():
            return ledger_file(path, party)
    found = sorted(path.glob(f"*{LEDGER_SUFFIX}"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise FileNotFoundError(f"{path}: no lifetime ledger in this folder (expected <party>{LEDGER_SUFFIX})")
    raise FileNotFoundError(f"{path}: several ledgers ({', '.join(p.name for p in found)}): name the file")


def describe(ledger: Any) -> dict[str, Any]:
    """Everything ``show`` prints, as a JSON-ready dict."""
    spent, left = ledger.spent(), ledger.remaining()
    eps, delta = ledger.guarantee()
    history = ledger.history()
    budget = {"eps": ledger.budget[0], "delta": ledger.budget[1]}
    if ledger.limits.rho is not None:
        budget["rho"] = ledger.limits.rho
    return {
        "path": str(ledger.path),
        "owner": ledger.owner,
        "filter": ledger.filter,
        "filter_description": ledger.limits.describe(),
        "relation": ledger.relation,
        "created": ledger.created,
        "budget": budget,
        "spent": {k: v for k, v in spent._asdict().items() if v is not None},
        "guarantee": {"eps": eps, "delta": delta},
        "remaining": {k: v for k, v in left._asdict().items() if v is not None},
        "counts": {
            state: sum(r.state == state for r in history) for state in ("committed", "reserved", "aborted", "declined")
        },
        "history": [r.to_dict() for r in history],
        **sales_of(ledger),
    }


def sales_of(ledger: Any) -> dict[str, Any]:
    """``{"sales": [...], "sales_standing": {...}}`` when the ledger recorded sales, else nothing
    (a ledger that never sold data points prints as it always did)."""
    sales = ledger.sales()
    if not sales:
        return {}
    return {"sales": [s.to_dict() for s in sales], "sales_standing": ledger.sales_standing()}


def render(info: dict[str, Any]) -> str:
    """The text form of :func:`describe`."""
    from marketplace.privacy.lifetime import Charge
    from marketplace.privacy.lifetime.filters import amount

    def as_amount(d: dict[str, float]) -> str:
        return amount(Charge(d.get("eps"), d.get("delta"), d.get("rho")))

    counts = info["counts"]
    lines = [
        f"{info['owner']}: lifetime ledger {info['path']}",
        f"relation:  {info['relation']}",
        f"filter:    {info['filter_description']}",
        f"budget:    eps={info['budget']['eps']:g}, delta={info['budget']['delta']:g}"
        + (f" (rho={info['budget']['rho']:.6g})" if "rho" in info["budget"] else ""),
        f"spent:     {as_amount(info['spent'])}  (guarantee so far: eps={info['guarantee']['eps']:.6g}, "
        f"delta={info['guarantee']['delta']:g})",
        f"remaining: {as_amount(info['remaining'])}",
        f"requests:  {counts['committed']} committed, {counts['reserved']} reserved and not settled (counted as "
        f"spent), "
        f"{counts['aborted']} aborted, {counts['declined']} declined",
    ]
    if info["history"]:
        rows = [("time", "request", "consumer", "what", "cost", "state")]
        for r in info["history"]:
            cost = (
                "-"
                if r["cost"] is None
                else ", ".join(
                    f"{k}={v:g}" for k, v in r["cost"].items() if v is not None and not (k == "delta" and v == 0)
                )
            )
            rows.append((r["time"], r["request_id"], r["consumer"], r["what"], cost, r["state"]))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        lines.append("history:")
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[5] for row in rows]
    else:
        lines.append("history:   empty")
    if info.get("sales"):
        lines += render_sales(info["sales"], info["sales_standing"])
    return "\n".join(lines)


def render_sales(sales: list[dict[str, Any]], standing: dict[str, Any]) -> list[str]:
    """The lines of the sales table and its totals (:meth:`LifetimeLedger.sales_standing`)."""

    def figure(value: float | int | None) -> str:
        return "-" if value is None else f"{value:g}"

    def bounded(value: float | int | None, at_most: float | int | None, state: str) -> str:
        """A kept sale's unknown figure as its bound, ``<=3``; a reserved one's as ``-`` (not settled yet)."""
        return f"<={at_most:g}" if value is None and state == "kept" and at_most is not None else figure(value)

    rows = [("request", "consumer", "price", "reserved", "sold", "earnings", "state")]
    for s in sales:
        sold = bounded(s["sold"], s.get("sold_at_most"), s["state"])
        earnings = bounded(s["earnings"], s.get("earnings_at_most"), s["state"])
        rows.append(
            (s["request_id"], s["consumer"], figure(s["price"]), str(s["reserved"]), sold, earnings, s["state"])
        )
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    lines = ["sales:"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[6] for row in rows]
    left = "no lifetime limit" if standing["points_left"] is None else f"{standing['points_left']} left to sell"
    lines.append(
        f"sold:      {standing['sold']} points, earning {standing['earnings']:g}; {standing['reserved']} reserved "
        f"and not settled (counted against the terms); {left}"
    )
    if any(s.get("privacy_price") for s in sales):  # a line only for a ledger that priced privacy
        lines.append(
            f"privacy:   {standing.get('privacy_earnings', 0.0):g} of those earnings paid for privacy loss (each "
            "sale's price_per_eps times the eps charged; reserved, not yet earned: "
            f"{sum(s['privacy_price'] for s in sales if s['state'] in ('reserved', 'kept')):g})"
        )
    kept = standing.get("kept") or {}
    if kept.get("sales"):
        lines.append(
            f"kept:      {kept['sales']} sale{'s' if kept['sales'] != 1 else ''} kept by a reconcile (the owner's "
            f"process ended before settling {'them' if kept['sales'] != 1 else 'it'}): sold unknown, at most "
            f"{kept['sold_at_most']} points earning at most {kept['earnings_at_most']:g}"
        )
    return lines


def show_command(args: argparse.Namespace) -> int:
    """``marketplace ledger show``: print the ledger; exit 2 if it cannot be read."""
    from marketplace.privacy.lifetime import LedgerInputError, LifetimeLedger
    from marketplace.privacy.lifetime.ledger import ledger_error

    path = None
    try:
        path = find_ledger(args.path)
        with LifetimeLedger.read(path) as ledger:
            info = describe(ledger)
    except sqlite3.Error as err:  # a file whose header reads but whose rows do not (a truncated ledger)
        print(f"marketplace ledger show: {ledger_error(path or Path(args.path), err)}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, LedgerInputError, ValueError) as err:
        print(f"marketplace ledger show: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(info, indent=2) if args.json else render(info))
    return EXIT_OK


def ledgers_in(path: str | Path) -> list[Path]:
    """The ledger files ``path`` names: the file itself, a kit folder's, or every one of a folder."""
    from marketplace.privacy.lifetime import LEDGER_SUFFIX

    path = Path(path)
    if not path.is_dir():
        return [path]
    if (path / "kit.json").is_file():
        return [find_ledger(path)]
    found = sorted(path.glob(f"*{LEDGER_SUFFIX}"))
    if not found:
        raise FileNotFoundError(f"{path}: no lifetime ledger in this folder (expected <party>{LEDGER_SUFFIX})")
    return found


def reconcile_command(args: argparse.Namespace) -> int:
    """``marketplace ledger reconcile``: reconcile each ledger named; exit 2 if one cannot be."""
    from marketplace.privacy.lifetime import LedgerInputError, LifetimeLedger
    from marketplace.privacy.lifetime.ledger import ledger_error

    results, status = [], EXIT_OK
    try:
        paths = ledgers_in(args.path)
    except (OSError, ValueError) as err:
        print(f"marketplace ledger reconcile: {err}", file=sys.stderr)
        return EXIT_USAGE
    for path in paths:
        try:
            with LifetimeLedger.read(path) as ledger:
                done = ledger.reconcile()
                results.append({"path": str(path), "owner": ledger.owner, **done})
        except sqlite3.Error as err:
            print(f"marketplace ledger reconcile: {ledger_error(path, err)}", file=sys.stderr)
            status = EXIT_USAGE
        except (OSError, LedgerInputError, ValueError) as err:
            print(f"marketplace ledger reconcile: {err}", file=sys.stderr)
            status = EXIT_USAGE
    if args.json:
        print(json.dumps(results, indent=2))
    for r in [] if args.json else results:
        print(
            f"{r['owner']}: {r['path']}: {len(r['rolled_back'])} rolled back (nothing had left), "
            f"{len(r['kept'])} kept as spent (something had left), {len(r['untouched'])} left reserved "
            "(held by a live process, or by one whose ledger named no holder)"
        )
    return status


def ledgers_to_check(path: str | Path) -> list[Path]:
    """Every ledger ``path`` names, for ``check``: the file itself, or every ``<party>.ledger.sqlite`` (and
    every ledger whose record is there without its file) in the folder and, when it holds none, in the
    folders under it (a serve state folder keeps its owners' ledgers in ``owners/``)."""
    from marketplace.privacy.lifetime import LEDGER_SUFFIX
    from marketplace.privacy.lifetime.known import RECORD_SUFFIX

    path = Path(path)
    if not path.is_dir():
        return [path]
    record_glob = f"*{LEDGER_SUFFIX.removesuffix('.sqlite')}{RECORD_SUFFIX}"

    def found_in(pattern: str, record: str) -> set[Path]:
        files = set(path.glob(pattern.format(LEDGER_SUFFIX)))
        return files | {r.with_suffix(".sqlite") for r in path.glob(record)}

    direct = found_in("*{}", record_glob)
    return sorted(direct or found_in("**/*{}", f"**/{record_glob}"))


class _Checked(TypedDict):
    """One ledger's line of ``marketplace ledger check`` (an item of its --json list)."""

    path: str
    ok: bool
    problems: list[str]


def check_command(args: argparse.Namespace) -> int:
    """``marketplace ledger check``: one line per ledger; exit 0 (all pass), 3 (one fails), 2 (no ledger)."""
    from marketplace.privacy.lifetime.check import problems
    from marketplace.privacy.lifetime.known import known, refuse_gone

    path = Path(args.path)
    if not path.exists() and known(path) is None:
        print(f"marketplace ledger check: {path}: no such file or folder", file=sys.stderr)
        return EXIT_USAGE
    paths = ledgers_to_check(path)
    if not paths:
        print(
            f"marketplace ledger check: {path}: no lifetime ledger here (expected <party>.ledger.sqlite)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    results: list[_Checked] = []
    for ledger in paths:
        record = known(ledger)
        found = problems(ledger)
        if found and record is not None and found[0].startswith(("missing", "empty", "holds no table")):
            found = [str(refuse_gone(ledger, record, found[0])).removeprefix(f"{ledger}: ")]
        results.append({"path": str(ledger), "ok": not found, "problems": found})
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            print(f"{r['path']}: " + ("ok" if r["ok"] else "; ".join(r["problems"])))
    return EXIT_OK if all(r["ok"] for r in results) else EXIT_FAILED


def init_command(args: argparse.Namespace) -> int:
    """``marketplace ledger init``: create a fresh ledger; exit 2 when refused (or the budget is not one)."""
    from marketplace.privacy.lifetime import LEDGER_SUFFIX, LedgerInputError, LifetimeLedger, ledger_file
    from marketplace.privacy.neighbouring import budget_relation_text

    path = Path(args.path)
    if path.is_dir() or not path.name.endswith(LEDGER_SUFFIX):
        path = ledger_file(path, args.owner)
    relation = f"{budget_relation_text(args.relation)} (a row of {args.owner}'s data)"
    try:
        ledger, moved = LifetimeLedger.init(
            path,
            owner=args.owner,
            budget=(args.eps, args.delta),
            relation=relation,
            filter=args.filter,
            force=args.force,
        )
    except (OSError, LedgerInputError, ValueError) as err:
        print(f"marketplace ledger init: {err}", file=sys.stderr)
        return EXIT_USAGE
    with ledger:
        print(
            f"{ledger.owner}: a fresh lifetime ledger {ledger.path} (eps={args.eps:g}, delta={args.delta:g}, "
            f"{args.filter} filter, created {ledger.created})"
        )
    for old in moved:
        print(f"kept aside: {old}")
    return EXIT_OK
