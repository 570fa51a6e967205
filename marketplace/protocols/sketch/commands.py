"""`marketplace sketch ...`: answer queries from a saved sketch file, with no party running.

A run of the `sketch` protocol saves the consumer's sketches in ``RUN/sketches/`` (``merged.npz``
and one file per owner). Answering queries from them is post-processing: it costs no privacy and
talks to nobody. The public feature map is rebuilt from the run's scenario (its seed and `sketch:`
section), and the file's fingerprint must match it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from marketplace.protocols.sketch.release import SketchRelease

EXIT_OK, EXIT_USAGE = 0, 2

EXAMPLES = """\
examples:
  marketplace sketch info runs/sq/sketches/merged.npz
  marketplace sketch query runs/sq/sketches/merged.npz --scenario runs/sq/scenario.resolved.yaml
  marketplace sketch query runs/sq/sketches/merged.npz --scenario scenarios/sketch-quickstart.yaml \\
      --moments 3 --cdf 0.25,0.5,0.75 --covariance --count 0:0:0.5 --count 0:0.2:0.6,3:0.5:1 --json

Every value is in unit-box coordinates: x -> (x - sketch.lower) / (sketch.upper - sketch.lower).
Attributes are called by the data's column names, which a run saves in its sketch files (or the
scenario's data.schema gives); without names, x0, x1, ... in order. --count takes a name or an index.
Every answer is one a dataset in the box could give: a CDF never decreases and stays in [0, 1];
means, second moments, variances and the covariance agree with each other (covariance positive
semi-definite, its diagonal = second moment - mean^2 = the variances, 0 <= variance <=
mean (1 - mean)); higher moments do not grow with the order; counts are >= 0. Raw M²M estimates
from a noisy sketch need not be; the projected values are printed instead (post-processing, so
it costs no privacy), with a note per statistic saying which attributes moved and by how much.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``sketch`` (with ``info`` and ``query``) to ``subparsers``; each sets ``func=run``."""
    sketch = subparsers.add_parser(
        "sketch",
        help="answer queries from a saved DP sketch (no privacy cost, no party needed)",
        description="Read a sketch file saved by a run of the sketch protocol (RUN/sketches/*.npz) and "
        "estimate statistics from it by M²M.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sketch.set_defaults(func=run, sketch_command=None)
    commands = sketch.add_subparsers(dest="sketch_command", metavar="COMMAND")

    info = commands.add_parser("info", help="what a sketch file holds (size, count, guarantee, map)")
    info.add_argument("file", metavar="FILE", help="a sketch file (.npz)")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")

    query = commands.add_parser(
        "query",
        help="estimate moments, CDFs, covariance, counts from a sketch file",
        description="Fit M²M to the sketch in FILE and print the estimates. Without any query option, "
        "answer the scenario's sketch.queries.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("file", metavar="FILE", help="a sketch file (.npz), e.g. RUN/sketches/merged.npz")
    query.add_argument(
        "--scenario",
        required=True,
        metavar="S.yaml",
        help="the run's scenario (RUN/scenario.resolved.yaml): rebuilds the public feature map",
    )
    query.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a scenario value, e.g. --set sketch.samples=20000 (repeatable)",
    )
    query.add_argument("--moments", type=int, metavar="K", help="raw moments of orders 1..K of every attribute")
    query.add_argument("--cdf", metavar="T1,T2,...", help="the CDF of every attribute at these points")
    query.add_argument("--covariance", action="store_true", help="the covariance matrix")
    query.add_argument(
        "--count",
        action="append",
        default=[],
        metavar="A:LO:HI[,A:LO:HI...]",
        help="a counting query: records with LO <= x[A] <= HI for every listed attribute A, "
        "a column name or an index from 0 (repeatable: one query each)",
    )
    query.add_argument(
        "--logistic",
        action="store_true",
        help="a logistic regression of the label (last attribute; needs sketch.include_label)",
    )
    query.add_argument("--samples", type=int, metavar="N", help="M²M synthetic samples (default: sketch.samples)")
    query.add_argument("--json", action="store_true", help="print JSON instead of text")
    return sketch


def run(args: argparse.Namespace) -> int:
    command = getattr(args, "sketch_command", None)
    if command is None:
        print("marketplace sketch: choose a command: info or query (see marketplace sketch --help)", file=sys.stderr)
        return EXIT_USAGE
    from marketplace.protocols.sketch import SketchFileError, SketchRelease

    try:
        release = SketchRelease.load(args.file)
    except (FileNotFoundError, SketchFileError) as err:
        print(f"marketplace sketch: {err}", file=sys.stderr)
        return EXIT_USAGE
    if command == "info":
        return _info(args, release)
    try:
        answers = _query(args, release)
    except _UsageError as err:
        print(f"marketplace sketch query: {err}", file=sys.stderr)
        return EXIT_USAGE
    _print(answers, args.json)
    return EXIT_OK


class _UsageError(ValueError):
    pass


def _info(args: argparse.Namespace, release: SketchRelease) -> int:
    data = {
        "file": args.file,
        "n_features": release.n_features,
        "count": release.count,
        "epsilon": release.epsilon if release.is_private else None,
        "delta": release.delta,
        "mechanism": release.mechanism,
        "parts": release.parts,
        "map_fingerprint": release.map_fingerprint,
        "numerator_variance": release.numerator_variance,
        "count_variance": release.count_variance,
        "attributes": list(release.attributes) or None,
    }
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        for key, value in data.items():
            print(f"{key:20s} {value}")
    return EXIT_OK


def _count_box(text: str, d: int, names: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """The box of one ``--count``: each term's attribute (a name in ``names`` or an index) between LO and HI."""
    lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
    for term in text.split(","):
        parts = term.strip().rsplit(":", 2)
        try:
            low, high = float(parts[1]), float(parts[2])
        except (ValueError, IndexError):
            raise _UsageError(
                f"--count: expected A:LO:HI terms separated by commas (e.g. 0:0.2:0.6), got {term!r}"
            ) from None
        attribute = names.index(parts[0]) if parts[0] in names else _index(parts[0])
        if not 0 <= attribute < d or low > high:
            which = f"one of {', '.join(names)} or " if names else ""
            raise _UsageError(
                f"--count: expected an attribute ({which}an index in 0..{d - 1}) and LO <= HI, got {term!r}"
            )
        lo[attribute], hi[attribute] = low, high
    return lo, hi


def _index(text: str) -> int:
    """An attribute given by its index, or -1 (no attribute) for anything else."""
    try:
        return int(text)
    except ValueError:
        return -1


def _names(release: SketchRelease, config: Any, d: int) -> tuple[str, ...]:
    """The attributes' names: those the file keeps, else the scenario's schema's, else none."""
    from marketplace.protocols.sketch.public import attribute_names

    names = release.attributes or attribute_names(config) or ()
    return tuple(names) if len(names) == d else ()


def _query(args: argparse.Namespace, release: SketchRelease) -> dict[str, Any]:
    from marketplace import seeds
    from marketplace.protocols.sketch import M2MDesign, Prior
    from marketplace.protocols.sketch.consumer import QueryPlan, answer_queries
    from marketplace.protocols.sketch.public import public_map, query_plan
    from marketplace.scenario import ScenarioError, load_scenario

    try:
        config = load_scenario(args.scenario, args.overrides).config
    except ScenarioError as err:
        raise _UsageError(f"bad scenario: {err}") from None
    if config.protocol != "sketch":
        raise _UsageError(f"--scenario: expected a scenario with protocol 'sketch', got {config.protocol!r}")
    fmap = public_map(config)
    if release.map_fingerprint != fmap.fingerprint:
        raise _UsageError(
            f"{args.file}: the sketch was made with map {release.map_fingerprint[:12]}..., but the scenario "
            f"{args.scenario} gives map {fmap.fingerprint[:12]}... (another seed or sketch.map / box?)"
        )
    d = fmap.dim
    names = _names(release, config, d)
    asked = args.moments is not None or args.cdf or args.covariance or args.count or args.logistic
    if not asked:
        plan = query_plan(config)
    else:
        try:
            points = tuple(float(t) for t in args.cdf.split(",")) if args.cdf else ()
        except ValueError:
            raise _UsageError(f"--cdf: expected numbers separated by commas, got {args.cdf!r}") from None
        if args.moments is not None and not 0 <= args.moments <= 8:
            raise _UsageError(f"--moments: expected an order between 0 and 8, got {args.moments}")
        if args.logistic and not config.sketch.include_label:
            raise _UsageError("--logistic: the scenario's sketch.include_label is false (no label was sketched)")
        plan = QueryPlan(
            moments=args.moments or 0,
            cdf_points=points,
            covariance=args.covariance,
            count_boxes=tuple(_count_box(t, d, names) for t in args.count),
            logistic_label=d - 1 if args.logistic else None,
            logistic_l2=config.sketch.queries.logistic_l2,
        )
    samples = args.samples if args.samples is not None else config.sketch.samples
    if samples < 10:
        raise _UsageError(f"--samples: expected at least 10, got {samples}")
    discrete = {plan.logistic_label: (0.0, 1.0)} if plan.logistic_label is not None else {}
    design = M2MDesign.build(
        fmap, rng=seeds.rng(config.seed, "sketch.m2m"), n_samples=samples, prior=Prior(fmap.box, discrete=discrete)
    )
    fit = design.fit(release, regularization=config.sketch.regularization, intercept=config.sketch.intercept)
    named = {"attributes": list(names)} if names else {}
    return {"file": args.file, "map": fmap.describe(), **named, **answer_queries(fit, plan)}


def _print(answers: dict[str, Any], as_json: bool) -> None:
    from marketplace.protocols.sketch.consumer import attribute_name, projection_notes

    if as_json:
        print(json.dumps(answers, indent=2))
        return
    names = answers.get("attributes")
    print(
        f"sketch {answers['file']}: {answers['map']}, n ~ {answers['n_estimate']:.6g}, lambda = {answers['lambda']:.3g}"
    )
    if names:
        print("attributes, in the order of every row below: " + ", ".join(names))
    for order, values in (answers.get("moments") or {}).items():
        print(f"moment {order}: " + " ".join(f"{v:.4g}" for v in values))
    if "cdf" in answers:
        print("CDF at " + ", ".join(f"{t:g}" for t in answers["cdf"]["points"]) + " (one row per attribute):")
        for j, row in enumerate(answers["cdf"]["values"]):
            print(f"  {attribute_name(names, j)}: " + " ".join(f"{v:.4f}" for v in row))
    if "variances" in answers:
        print("variances: " + " ".join(f"{v:.4g}" for v in answers["variances"]))
    if "covariance" in answers:
        print("covariance:")
        for row in answers["covariance"]:
            print("  " + " ".join(f"{v: .4g}" for v in row))
    if "counts" in answers:
        for i, (f, c) in enumerate(zip(answers["counts"]["fractions"], answers["counts"]["counts"])):
            print(f"count query {i + 1}: {c:.6g} records ({f:.4f} of them)")
    notes = projection_notes(answers.get("projections") or {}, names)
    if notes:
        print(
            "note: projected onto the answers a dataset in the box could give (see 'marketplace sketch query --help'):"
        )
        for line in notes:
            print(f"  {line}")
    if "logistic_regression" in answers:
        lr = answers["logistic_regression"]
        print(
            f"logistic regression: coef {[round(c, 4) for c in lr['coef']]}, intercept {lr['intercept']:.4f}, "
            f"converged {lr['converged']}"
        )
