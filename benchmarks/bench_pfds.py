"""Timings of one pfds sharer on Adult-sized data (median of repeats, time.perf_counter).

Run: python benchmarks/bench_pfds.py [--rows N] [--h-max H] [--repeats R]

One sharer holding all ~45k complete rows of UCI Adult (adult.data + adult.test from the data
cache: `marketplace data fetch adult`; 6 numeric and 8 categorical attributes; the categorical
domains are the public lists of adult.names), eps = 1, h_max = 8, t = 10, p = 4:

* grow_tree (eps/2: the exponential mechanism on every numeric split, Laplace leaf counts);
* optPrivateGen: noisy node counts of levels 1..3, the consistency step (dual Newton solver) and
  the synthesis of round(x_j) records; each part timed alone too;
* the whole sharer (tree + consistency + synthesis; target < 5 s), and its spread over 2 x repeats
  trees for each attribute_choice (the size of a tree depends on the attributes its levels draw);
* labelling the synthetic records by the majority of 4 shared trees.

Without the Adult files it falls back to a synthetic table of the same shape (and says so).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from timing import median_seconds, report  # benchmarks/timing.py: a script's own folder is on sys.path

from marketplace.privacy.rng import make_rng
from marketplace.protocols.pfds import (
    CategoricalAttribute,
    ClassLabels,
    NumericAttribute,
    PublicSchema,
    consistent_counts,
    grow_tree,
    label_synthetic,
    noisy_node_counts,
    opt_private_gen,
    synthesize,
)

EPSILON, H_MAX, T, P = 1.0, 8, 10, 4
# Public ranges of the numeric attributes (wide round bounds, not the data's min and max).
NUMERIC = {
    "age": (0.0, 100.0),
    "fnlwgt": (0.0, 1.5e6),
    "education-num": (1.0, 16.0),
    "capital-gain": (0.0, 1e5),
    "capital-loss": (0.0, 5000.0),
    "hours-per-week": (0.0, 100.0),
}
COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)


def adult_schema() -> PublicSchema:
    """Adult's public schema: categorical domains as listed in adult.names."""
    from marketplace.datasets import read_bytes  # checked against the registry's SHA-256

    domains = {}
    for line in read_bytes("adult", "adult.names").decode("utf-8").splitlines():
        name, _, rest = line.partition(":")
        if name in COLUMNS and name not in NUMERIC and rest.strip():
            domains[name] = tuple(v.strip() for v in rest.strip().rstrip(".").split(","))
    attributes = tuple(
        NumericAttribute(c, *NUMERIC[c]) if c in NUMERIC else CategoricalAttribute(c, domains[c]) for c in COLUMNS
    )
    return PublicSchema(attributes=attributes, label=ClassLabels((0, 1)))


def adult_rows(schema: PublicSchema) -> tuple[np.ndarray, np.ndarray]:
    from marketplace.datasets import read_bytes  # checked against the registry's SHA-256

    columns: dict[str, list] = {c: [] for c in COLUMNS}
    labels = []
    for name in ("adult.data", "adult.test"):
        for line in read_bytes("adult", name).decode("utf-8").splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) != 15 or "?" in fields or line.startswith("|"):
                continue
            for column, value in zip(COLUMNS, fields):
                columns[column].append(float(value) if column in NUMERIC else value)
            labels.append(int(fields[-1].rstrip(".") == ">50K"))
    return schema.encode(columns), np.array(labels)


def synthetic_rows(n: int) -> tuple[PublicSchema, np.ndarray, np.ndarray]:
    """A stand-in of Adult's shape: 6 numeric and 8 categorical attributes with Adult's domain sizes."""
    sizes = {
        "workclass": 8,
        "education": 16,
        "marital-status": 7,
        "occupation": 14,
        "relationship": 6,
        "race": 5,
        "sex": 2,
        "native-country": 41,
    }
    attributes = tuple(
        NumericAttribute(c, *NUMERIC[c])
        if c in NUMERIC
        else CategoricalAttribute(c, tuple(f"v{i}" for i in range(sizes[c])))
        for c in COLUMNS
    )
    schema = PublicSchema(attributes=attributes, label=ClassLabels((0, 1)))
    data = np.random.default_rng(0)
    X = np.column_stack(
        [data.uniform(*NUMERIC[c], size=n) if c in NUMERIC else data.integers(0, sizes[c], size=n) for c in COLUMNS]
    )
    y = (X[:, 0] / 100 + data.random(n) > 1.0).astype(int)
    return schema, X, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=0, help="use only the first N rows (0: all)")
    parser.add_argument("--h-max", type=int, default=H_MAX)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from marketplace.datasets import DATASETS
    from marketplace.datasets.cache import data_home, missing_files

    if not missing_files(DATASETS["adult"]):
        schema = adult_schema()
        X, y = adult_rows(schema)
        source = "Adult"
    else:
        print(
            f"the adult dataset is not in {data_home()} (marketplace data fetch adult): timing a synthetic "
            "table of Adult's shape instead",
            file=sys.stderr,
        )
        schema, X, y = synthetic_rows(45_222)
        source = "synthetic"
    if args.rows:
        X, y = X[: args.rows], y[: args.rows]
    h_max, repeats, n = args.h_max, args.repeats, X.shape[0]
    rng = make_rng(seed=0, secure=False)
    tag = f"{source} n={n:,} h_max={h_max}"

    def tree_once():
        return grow_tree(X, y, schema, epsilon=EPSILON / 2, rng=rng, h_max=h_max, t=T)

    def sharer_once():
        tree = tree_once()
        return tree, opt_private_gen(tree, X, epsilon=EPSILON / 2, rng=rng, p=P)

    tree, synthetic = sharer_once()
    noisy = noisy_node_counts(tree, X, epsilon=EPSILON / 2, rng=rng, p=P)
    consistent = consistent_counts(tree, noisy)
    print(
        f"{tag}: {tree.n_nodes:,} nodes, {tree.n_leaves:,} leaves, depth {tree.depth}; "
        f"{synthetic.X.shape[0]:,} synthetic records; consistency in {consistent.iterations} Newton steps; "
        f"eps spent {synthetic.epsilon:g}"
    )

    report(f"grow_tree {tag}", median_seconds(tree_once, repeats), repeats)
    report(
        f"noisy_node_counts p={P}",
        median_seconds(lambda: noisy_node_counts(tree, X, epsilon=EPSILON / 2, rng=rng, p=P), repeats),
        repeats,
    )
    report(
        f"consistent_counts (dual Newton) {tree.n_leaves:,} leaves",
        median_seconds(lambda: consistent_counts(tree, noisy), repeats),
        repeats,
    )
    report("synthesize", median_seconds(lambda: synthesize(tree, consistent.leaves, rng=rng), repeats), repeats)
    report(f"whole sharer: tree + optPrivateGen {tag} (target < 5 s)", median_seconds(sharer_once, repeats), repeats)
    # Each run draws a new tree, whose size depends on the attributes drawn: show the spread too.
    for choice in ("level", "node"):
        times, leaves = [], []
        for _ in range(2 * repeats):
            start = time.perf_counter()
            grown = grow_tree(X, y, schema, epsilon=EPSILON / 2, rng=rng, h_max=h_max, t=T, attribute_choice=choice)
            opt_private_gen(grown, X, epsilon=EPSILON / 2, rng=rng, p=P)
            times.append(time.perf_counter() - start)
            leaves.append(grown.n_leaves)
        print(
            f"whole sharer, attribute_choice={choice!r}, {2 * repeats} trees of {min(leaves):,}-{max(leaves):,} "
            f"leaves: "
            f"median {np.median(times) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms"
        )
    trees = [tree] + [tree_once() for _ in range(3)]
    report(
        f"label {synthetic.X.shape[0]:,} records by 4 trees",
        median_seconds(lambda: label_synthetic(trees, synthetic, rng=rng), repeats),
        repeats,
    )


if __name__ == "__main__":
    main()
