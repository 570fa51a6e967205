"""The command line that starts a party as a process of its own: ``python -m marketplace <command> ...``.

Every process the marketplace starts from another (the runner's parties and owner hosts under
``--launch exec``, a marketplace's session curators, owner agents and their owner hosts, a
request's consumer) is built here, with this interpreter, so that they all run the same code the
same way a container does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

Option = str | Path | int | float | None


def party_command(command: str, *, sets: Sequence[str] = (), extra: Sequence[str] = (), **options: Option) -> list[str]:
    """``python -m marketplace <command>`` with one ``--flag value`` per keyword in ``options``
    (``run_id="x"`` gives ``--run-id x``; ``None`` leaves the flag out), one ``--set`` per item of
    ``sets``, then ``extra`` (flags built elsewhere, such as :meth:`ReadLimits.arguments`)."""
    cmd = [sys.executable, "-m", "marketplace", command]
    for name, value in options.items():
        if value is not None:
            cmd += [f"--{name.replace('_', '-')}", str(value)]
    for assignment in sets:
        cmd += ["--set", assignment]
    return cmd + list(extra)
