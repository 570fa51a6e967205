"""What a command's start imports: the command line, a consumer's request path, the privacy package
and a sketch consumer's core leave SciPy, scikit-learn and matplotlib until they are used (each takes
0.3-1 s to import, which a consumer's start or an owner's worker would pay for nothing)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

HEAVY = ("scipy", "sklearn", "matplotlib")

PATHS = {
    "command line": "import marketplace.cli; marketplace.cli._parser()",
    "request path": (
        "import marketplace.cli.request\n"
        "from marketplace.api import load\n"
        "from marketplace.service.api import request, resume\n"
        "from marketplace.service.client import RequestFailed, RequestRefused, request as send\n"
        "load('scenarios/sketch-quickstart.yaml')"
    ),
    "privacy": "import marketplace.privacy, marketplace.privacy.lifetime, marketplace.privacy.gdp",
    "sketch consumer": (
        "from marketplace.protocols.sketch.consumer import SketchConsumer\n"
        "from marketplace.protocols.sketch import M2MDesign, rank_owners, merge_sketches, weighted_logistic_regression"
    ),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_importing_leaves_the_heavy_libraries_out(path):
    code = PATHS[path] + f"\nimport sys\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"{path} imports {out.stdout.strip()}"
