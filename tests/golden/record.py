"""Record the golden view of every shipped scenario.

    PYTHONPATH=$PWD python3 tests/golden/record.py [--only NAME] [--driver DRIVER] [--out DIR] [--raw DIR]

Runs each ``scenarios/*.yaml`` with its overrides from ``golden.view.OVERRIDES`` under ``--driver``
(default: inprocess, the faster; the tests compare both drivers with the one file) and writes
``golden_view`` of the report to ``<out>/<scenario>.json`` (sorted keys, indent 1).
``--raw DIR`` also keeps each whole report there, to compare two recordings field by field.
Datasets are read from the data cache ($MARKETPLACE_DATA, else the pre-filled cache beside the
checkout, as the tests do); record every scenario, so their datasets must all be there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: import golden.view as the tests do

from golden.view import DRIVERS, HERE, OVERRIDES, SCENARIOS, golden_view  # noqa: E402

PREFILLED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def run_golden(scenario: str, driver: str, raw: Path | None = None) -> dict[str, Any]:
    """Run ``scenario`` (a file name in scenarios/) under ``driver`` with its golden overrides in a
    fresh temporary folder; returns the whole report."""
    from marketplace.runner.run import run_scenario
    from marketplace.scenario import load_scenario

    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        report = run_scenario(
            load_scenario(SCENARIOS / scenario, OVERRIDES[scenario]), Path(tmp) / "run", driver=driver
        )
    if raw is not None:
        raw.mkdir(parents=True, exist_ok=True)
        (raw / f"{Path(scenario).stem}.{driver}.json").write_text(json.dumps(report, sort_keys=True, indent=1))
    return report


def write_view(view: dict[str, Any], path: Path) -> None:
    """Write ``view`` as the golden files are written: sorted keys, indent 1, a final newline."""
    path.write_text(json.dumps(view, sort_keys=True, indent=1, allow_nan=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a scenario (file name or stem); repeatable")
    parser.add_argument("--driver", choices=DRIVERS, default="inprocess", help="the driver that runs them")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the views (default: tests/golden)")
    parser.add_argument("--raw", type=Path, help="also keep the whole reports in this folder")
    args = parser.parse_args(argv)
    if not os.environ.get("MARKETPLACE_DATA") and PREFILLED_DATA.is_dir():
        os.environ["MARKETPLACE_DATA"] = str(PREFILLED_DATA)
    from marketplace.market.spec import is_market_file

    shipped = sorted(
        path.name for path in SCENARIOS.glob("*.yaml") if not is_market_file(path)
    )  # market files are no scenarios
    unknown = sorted(set(shipped) - set(OVERRIDES))
    if unknown:
        print(f"no overrides for {unknown}: add them to golden/view.py OVERRIDES", file=sys.stderr)
        return 2
    names = shipped
    if args.only:
        wanted = {name if name.endswith(".yaml") else f"{name}.yaml" for name in args.only}
        names = [name for name in shipped if name in wanted]
        if missing := sorted(wanted - set(names)):
            print(f"not a shipped scenario: {missing}", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    total = time.perf_counter()
    for name in names:
        started = time.perf_counter()
        report = run_golden(name, args.driver, args.raw)
        path = args.out / f"{Path(name).stem}.json"
        write_view(golden_view(report), path)
        failed += report["status"] != "completed"
        print(f"{time.perf_counter() - started:6.1f} s  {report['status']:<10} {path.name}", flush=True)
    print(f"{time.perf_counter() - total:6.1f} s  total", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
