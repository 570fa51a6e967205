"""Where a run writes its files: a new or empty folder, or a fresh default one under ``runs/``.

Every way of running a scenario (``marketplace run``, a sweep, a served marketplace's request and
resume, a market) writes its report, logs and keys into one folder, and refuses one that already
holds files, so that two runs' files never mix.
"""

from __future__ import annotations

from pathlib import Path


class RunFolderError(ValueError):
    """The output folder is a file, or already holds files (an earlier run's): nothing was started."""


def check_run_folder(out_dir: str | Path) -> Path:
    """``out_dir`` as a Path if a run may write there: a new folder or an empty one.

    A file, or a folder that already holds files (say, an earlier run's), is refused with
    :class:`RunFolderError`: two runs' reports, logs and keys would otherwise mix.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"{out} is a file; a run writes a folder (give a new or an empty one)")
    if out.is_dir():
        held = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir())
        if held:
            shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
            raise RunFolderError(
                f"{out} already holds files ({shown}), perhaps from an earlier run; give a new "
                "folder, or remove this one, so that two runs' files do not mix"
            )
    return out


def default_run_folder(name: str, kind: str = "") -> Path:
    """``runs/<name>[-kind]-<timestamp>``, with ``-2``, ``-3``, ... when that folder already exists."""
    from datetime import datetime

    base = Path("runs") / f"{name}{'-' + kind if kind else ''}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate
