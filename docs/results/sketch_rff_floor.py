"""Why M²M's noise-free RFF first-moment error on Random10 is ~1e-4..1e-3, not the paper's 6e-8.

Run: python3 docs/results/sketch_rff_floor.py  (about 30 s)
"""

import numpy as np

from marketplace.protocols.sketch import RFF, Box, M2MDesign, exact_sketch

rng = np.random.default_rng(0)
X = rng.random((27_000, 10))  # Random10
true = X.mean(axis=0)
fmap = RFF.draw(Box.unit(10), n_features=200, sigma=1.0, seed=1)
S = np.random.default_rng(2).random((20_000, 10))  # synthetic points from the uniform prior
P = fmap.transform(S)
sv = np.linalg.svd(P, compute_uv=False)
print(f"feature matrix singular values: {sv[0]:.3g} .. {sv[-1]:.3g} (ratio {sv[-1] / sv[0]:.1e})")
for rcond in (1e-8, 1e-15):
    a, *_ = np.linalg.lstsq(P, S[:, 0], rcond=rcond)
    print(
        f"least-squares residual of x_1 on the features (SVD cut-off {rcond:g}): RMS "
        f"{np.sqrt(np.mean((S[:, 0] - P @ a) ** 2)):.2e}"
    )
for sigma in (2.0, 5.0):
    P2 = RFF.draw(Box.unit(10), n_features=200, sigma=sigma, seed=1).transform(S)
    a, *_ = np.linalg.lstsq(P2, S[:, 0], rcond=1e-15)
    print(f"  with sigma = {sigma}: RMS {np.sqrt(np.mean((S[:, 0] - P2 @ a) ** 2)):.2e}")
print(f"expected noise-free MRE ~ RMS / sqrt(n) / 0.5 = {2.7e-2 / np.sqrt(len(X)) / 0.5:.1e}")
design = M2MDesign.build(fmap, rng=np.random.default_rng(3), n_samples=100_000)
for intercept in (False, True):
    fit = design.fit(exact_sketch(X, fmap), regularization=0.0, intercept=intercept)
    print(
        f"M²M, exact sketch, n_s = 1e5, intercept {intercept}: MRE {np.mean(np.abs(fit.moments(1) - true) / true):.2e}"
    )
fit = M2MDesign(fmap, X).fit(exact_sketch(X, fmap), regularization=0.0)
print(f"M²M with the data themselves as synthetic points: MRE {np.mean(np.abs(fit.moments(1) - true) / true):.2e}")
