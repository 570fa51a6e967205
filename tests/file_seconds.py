"""Write tests/file_seconds.json from a run's JUnit XML report: the seconds each test file took,
which tests/conftest.py uses to send the longest files to the workers first.

    python3 -m pytest --junitxml=run.xml -o junit_duration_report=total
    python3 tests/file_seconds.py run.xml
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

MIN_SECONDS = 5
"""Files quicker than this are left out (conftest.py estimates them from their slow tests)."""


def file_seconds(junit_xml: Path) -> dict[str, int]:
    """Seconds per test file (setup, call and teardown), longest first, files of MIN_SECONDS or more."""
    seconds: collections.Counter[str] = collections.Counter()
    for case in ET.parse(junit_xml).iter("testcase"):
        path = case.get("file") or (case.get("classname") or "").replace(".", "/") + ".py"
        seconds[path] += float(case.get("time") or 0.0)
    return {path: round(s) for path, s in seconds.most_common() if s >= MIN_SECONDS}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tests/file_seconds.py RUN.xml")
    found = file_seconds(Path(sys.argv[1]))
    Path(__file__).with_name("file_seconds.json").write_text(json.dumps(found, indent=1) + "\n")
    print(f"{len(found)} files, {sum(found.values())} s")
