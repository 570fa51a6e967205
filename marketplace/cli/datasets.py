"""`marketplace data list|info|fetch|verify|path`: the public datasets from the command line.

:func:`add_parser` adds ``data`` and its actions to the main parser (:mod:`marketplace.cli`); each
sets ``func``.

Exit status: 0 done; 2 bad arguments (an unknown dataset, a malformed mirror URL); 3 a fetch or
a verification failed.
"""

from __future__ import annotations

import argparse
import sys

from marketplace.datasets.cache import data_home, fetch_command, file_states, missing_files
from marketplace.datasets.registry import DATASETS, DatasetSpec, UnknownDataset, dataset

EXIT_OK, EXIT_USAGE, EXIT_FAILED = 0, 2, 3

EXAMPLES = """\
examples:
  marketplace data list                                   what is registered, what is in the cache
  marketplace data fetch adult mnist                      download and verify two datasets
  marketplace data fetch --all --mirror https://example.org/datasets/
  marketplace data verify                                 re-check every cached file's SHA-256
  marketplace data path adult                             the folder of one dataset

The cache is $MARKETPLACE_DATA, or a per-user cache folder; it holds NAME/FILE. A mirror
(--mirror or $MARKETPLACE_DATA_MIRROR: http://, https:// or file:) holds the same NAME/FILE paths.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``data`` and its actions to the main parser's sub-commands."""
    data = sub.add_parser(
        "data",
        help="the public datasets: list, fetch, verify, locate",
        description="Public datasets used by the shipped scenarios, fetched by name and checked "
        "against their registered SHA-256.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = data.add_subparsers(dest="data_command", metavar="ACTION")
    listing = actions.add_parser("list", help="every registered dataset, its size and whether it is cached")
    listing.set_defaults(func=list_command)
    info = actions.add_parser("info", help="origin, licence, citation and files of one dataset")
    info.add_argument("name", metavar="NAME")
    info.set_defaults(func=info_command)
    fetch = actions.add_parser(
        "fetch",
        help="download datasets into the cache, checking every file",
        description="Download each file (from its upstream URL, or from the mirror), check its "
        "SHA-256, and only then put it into the cache. Files already cached and "
        "intact are kept.",
    )
    fetch.add_argument("names", nargs="*", metavar="NAME", help="dataset names (see `marketplace data list`)")
    fetch.add_argument("--all", action="store_true", help="every registered dataset")
    fetch.add_argument(
        "--mirror",
        metavar="URL",
        help="base URL holding NAME/FILE (http://, https:// or file:; default: $MARKETPLACE_DATA_MIRROR, "
        "else each file's upstream URL)",
    )
    fetch.add_argument("--retries", type=_count, default=3, metavar="N", help="extra attempts per file (default 3)")
    fetch.add_argument(
        "--timeout",
        type=_seconds,
        default=30.0,
        metavar="S",
        help="seconds to wait for a connection or for data (default 30)",
    )
    fetch.set_defaults(func=fetch_command_line)
    verify = actions.add_parser("verify", help="re-check the size and SHA-256 of every cached file")
    verify.add_argument("names", nargs="*", metavar="NAME", help="datasets to check (default: every cached one)")
    verify.set_defaults(func=verify_command)
    path = actions.add_parser("path", help="the cache folder, or the folder of one dataset")
    path.add_argument("name", nargs="?", metavar="NAME")
    path.set_defaults(func=path_command)
    data.set_defaults(func=lambda args: _usage(data))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _specs(names: list[str]) -> list[DatasetSpec]:
    """The datasets named (in order, each once); UnknownDataset for a name the registry lacks."""
    return [dataset(name) for name in dict.fromkeys(names)]


def _human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size} B"  # pragma: no cover


def _state(spec: DatasetSpec) -> str:
    missing = missing_files(spec)
    if not missing:
        return "cached"
    return (
        "not fetched"
        if len(missing) == len(spec.files) and not any("wrong size" in m for m in missing)
        else "incomplete"
    )


def list_command(args: argparse.Namespace) -> int:
    print(f"data cache: {data_home()}  (set MARKETPLACE_DATA to move it)")
    width = max(len(name) for name in DATASETS)
    print(f"{'name':<{width}}  {'size':>8}  {'state':<11}  used by (data.source.kind)")
    for spec in DATASETS.values():
        print(f"{spec.name:<{width}}  {_human(spec.size):>8}  {_state(spec):<11}  {spec.used_by}")
    return EXIT_OK


def info_command(args: argparse.Namespace) -> int:
    try:
        spec = dataset(args.name)
    except UnknownDataset as err:
        print(f"marketplace data: {err}", file=sys.stderr)
        return EXIT_USAGE
    ids = ", ".join(f"{k} {v}" for k, v in (("OpenML id", spec.openml), ("UCI id", spec.uci)) if v is not None)
    print(f"{spec.name}: {spec.title}")
    print(f"  origin:   {spec.origin}" + (f"  ({ids})" if ids else ""))
    print(f"  licence:  {spec.license}")
    print(f"  cite:     {spec.citation}")
    print(f"  copy:     {spec.copy}")
    print(f"  used by:  data.source.kind {spec.used_by}")
    print(f"  folder:   {data_home() / spec.name}  ({_state(spec)})")
    for f in spec.files:
        print(f"  {f.name}  {f.size} bytes  sha256 {f.sha256}")
        print(f"      from {f.url}" if f.url else f"      no upstream copy: {f.recipe}")
    return EXIT_OK


def fetch_command_line(args: argparse.Namespace) -> int:
    from marketplace.datasets.fetch import FetchError, default_mirror, fetch_dataset, mirror_url, terminal_progress

    if args.all == bool(args.names):
        print(
            "marketplace data fetch: name the datasets to fetch, or pass --all (not both); "
            f"registered: {', '.join(DATASETS)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        specs = list(DATASETS.values()) if args.all else _specs(args.names)
        mirror = mirror_url(args.mirror) if args.mirror else default_mirror()
    except UnknownDataset as err:
        print(f"marketplace data fetch: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as err:
        print(f"marketplace data fetch: --mirror (or $MARKETPLACE_DATA_MIRROR): {err}", file=sys.stderr)
        return EXIT_USAGE
    home = data_home()
    failed = []
    for spec in specs:
        try:
            fetched = fetch_dataset(
                spec, mirror=mirror, home=home, retries=args.retries, timeout=args.timeout, progress=terminal_progress
            )
        except FetchError as err:
            print(f"marketplace data fetch: {err}", file=sys.stderr)
            failed.append(spec.name)
            continue
        new = sum(f.downloaded for f in fetched)
        what = f"downloaded {new} of {len(fetched)} file{'s' if len(fetched) != 1 else ''}" if new else "already cached"
        print(f"{spec.name}: {what}, every file verified ({_human(spec.size)}) -> {home / spec.name}")
    if failed:
        print(
            f"marketplace data fetch: {len(failed)} of {len(specs)} dataset{'s' if len(specs) != 1 else ''} failed "
            f"({', '.join(failed)}); nothing half-written was kept",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def verify_command(args: argparse.Namespace) -> int:
    try:
        specs = _specs(args.names) if args.names else list(DATASETS.values())
    except UnknownDataset as err:
        print(f"marketplace data verify: {err}", file=sys.stderr)
        return EXIT_USAGE
    bad = []
    for spec in specs:
        states = file_states(spec)
        problems = [f"{s.spec.name} {s.state}" for s in states if s.state != "ok"]
        if not problems:
            print(f"{spec.name}: ok ({len(states)} file{'s' if len(states) != 1 else ''}, SHA-256 verified)")
        elif all(s.state == "missing" for s in states) and not args.names:
            print(f"{spec.name}: not fetched")
        else:
            print(f"{spec.name}: FAILED: {', '.join(problems)}; fix with: {fetch_command([spec.name])}")
            bad.append(spec.name)
    if bad:
        print(
            f"marketplace data verify: {len(bad)} dataset{'s' if len(bad) != 1 else ''} failed: {', '.join(bad)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def path_command(args: argparse.Namespace) -> int:
    if args.name is None:
        print(data_home())
        return EXIT_OK
    try:
        spec = dataset(args.name)
    except UnknownDataset as err:
        print(f"marketplace data path: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(data_home() / spec.name)
    if missing_files(spec):
        print(
            f"marketplace data path: {spec.name} is not (completely) in the cache; fetch it with: "
            f"{fetch_command([spec.name])}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK
