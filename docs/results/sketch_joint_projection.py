"""How much the joint projection of a sketch's moments and covariance changes the answers, and their
error against the truth: raw M²M estimates, each statistic projected on its own (moments isotonic in
[0, 1], covariance's negative eigenvalues clipped), and the joint projection the consumer reports.

Run: PYTHONPATH=$PWD python3 docs/results/sketch_joint_projection.py [SEEDS]  (about 2 s a seed)
Runs scenarios/sketch-quickstart.yaml in process for each seed (default 1..10; 7 is the scenario's
own), refits M²M to the merged sketch as the consumer did, and prints one row per seed and the
means. Errors are those of the report (unit-box coordinates): mean relative error of the first and
second moments and of the variances, ||C - C_true||_F / ||C_true||_F; "inconsistent" counts the
attributes whose answers no dataset could give (negative variance, or diag C != second - mean^2).
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from sklearn.isotonic import IsotonicRegression

from marketplace import seeds
from marketplace.protocols.sketch import M2MDesign, Prior, SketchRelease
from marketplace.protocols.sketch.exchange import public_map
from marketplace.protocols.sketch.joint import project_jointly
from marketplace.protocols.sketch.valid import project_covariance
from marketplace.runner.run import run_scenario
from marketplace.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[2]


def mre(estimate, truth):
    return float(np.mean(np.abs(np.asarray(estimate) - truth) / np.abs(truth)))


def errors(m, m2, C, truth):
    t1, t2, tC = (np.array(truth["moments"]["1"]), np.array(truth["moments"]["2"]), np.array(truth["covariance"]))
    inconsistent = (np.abs(np.diag(C) - (m2 - m**2)) > 1e-9) | (m2 - m**2 < 0) | (np.diag(C) < 0)
    return {
        "m1": mre(m, t1),
        "m2": mre(m2, t2),
        "var": mre(np.diag(C), np.diag(tC)),
        "cov": float(np.linalg.norm(C - tC) / np.linalg.norm(tC)),
        "inconsistent": int(inconsistent.sum()),
    }


def one_seed(seed: int, folder: Path) -> dict[str, dict]:
    raw_scenario = yaml.safe_load((ROOT / "scenarios" / "sketch-quickstart.yaml").read_text())
    raw_scenario["seed"] = seed
    scenario = parse_scenario(raw_scenario, source="sketch-quickstart", base_dir=ROOT)
    report = run_scenario(scenario, folder / f"seed-{seed}", driver="inprocess")
    config, truth = scenario.config, report["truth"]
    fmap = public_map(config)
    design = M2MDesign.build(
        fmap,
        rng=np.random.default_rng(seeds.derive(config.seed, "sketch.m2m")),
        n_samples=config.sketch.samples,
        prior=Prior(fmap.box),
    )
    fit = design.fit(
        SketchRelease.load(report["files"]["sketches"]["merged"]),
        regularization=config.sketch.regularization,
        intercept=config.sketch.intercept,
    )
    m, m2, C = fit.moments(1), fit.moments(2), fit.covariance()
    reported = report["estimates"]
    assert np.allclose(reported["moments"]["1"], project_jointly(m, m2, C).mean)  # the refit is the consumer's
    separate = np.column_stack(
        [
            IsotonicRegression(y_min=0, y_max=1, increasing=False).fit_transform([1, 2], [m[j], m2[j]])
            for j in range(m.size)
        ]
    )
    joint = project_jointly(m, m2, C)
    return {
        "raw": errors(m, m2, C, truth),
        "separate": errors(separate[0], separate[1], project_covariance(C)[0], truth),
        "joint": errors(joint.mean, joint.second, joint.covariance, truth),
    }


def main() -> None:
    chosen = [int(s) for s in sys.argv[1:]] or list(range(1, 11))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in chosen:
            rows.append(one_seed(seed, Path(tmp)))
            print(
                f"seed {seed}: "
                + "; ".join(
                    f"{name} " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()) for name, row in rows[-1].items()
                )
            )
    print(f"mean over {len(rows)} seeds:")
    for name in ("raw", "separate", "joint"):
        means = {k: np.mean([r[name][k] for r in rows]) for k in rows[0][name]}
        print(f"  {name:9s}" + "  ".join(f"{k} {v:.4g}" for k, v in means.items()))


if __name__ == "__main__":
    main()
