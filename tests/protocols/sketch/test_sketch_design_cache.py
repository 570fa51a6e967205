"""The M²M design a consumer keeps on disk (marketplace.protocols.sketch.design_cache): a new
process reads the design an earlier one built, bit for bit, and never a file that is not it."""

from __future__ import annotations

import numpy as np
import pytest

from marketplace.protocols.sketch import RFF, Box, M2MDesign, Prior, SketchRelease, design_cache, m2m


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(design_cache.ENV, str(tmp_path / "designs"))
    monkeypatch.setattr(m2m, "_SHARED", type(m2m._SHARED)())  # no design of this process's memory
    return tmp_path / "designs"


def fresh(fmap, seed, n):
    m2m._SHARED.clear()  # as a new process: nothing in memory
    return M2MDesign.shared(fmap, seed=np.random.SeedSequence(seed), n_samples=n)


def arrays(design):
    return {**design._arrays(), "columns": design.columns}


def test_a_kept_design_is_the_built_one_bit_for_bit(cache):
    fmap = RFF.draw(Box.unit(3), n_features=40, sigma=0.5, seed=3)
    built = fresh(fmap, 11, 2000)
    (kept_file,) = cache.glob("*.npz")
    read = fresh(fmap, 11, 2000)
    assert read is not built and kept_file.exists()
    for name, array in arrays(built).items():
        other = arrays(read)[name]
        assert array.dtype == other.dtype and array.shape == other.shape and array.tobytes() == other.tobytes(), name
    release = SketchRelease(
        numerator=np.ones(fmap.n_features),
        count=100.0,
        numerator_variance=1.0,
        count_variance=1.0,
        map_fingerprint=fmap.fingerprint,
        epsilon=1.0,
        delta=0.0,
        mechanism="laplace",
    )
    assert built.fit(release).moments(2).tobytes() == read.fit(release).moments(2).tobytes()
    direct = M2MDesign.build(fmap, rng=np.random.default_rng(np.random.SeedSequence(11)), n_samples=2000)
    assert direct.gram.tobytes() == read.gram.tobytes()


def test_another_key_or_a_damaged_file_is_built_again(cache):
    fmap = RFF.draw(Box.unit(2), n_features=20, sigma=0.5, seed=1)
    first = fresh(fmap, 1, 500)
    other = fresh(fmap, 2, 500)  # another seed: another design, another file
    assert len(list(cache.glob("*.npz"))) == 2 and other.samples.tobytes() != first.samples.tobytes()
    for path in cache.glob("*.npz"):
        path.write_bytes(path.read_bytes()[:-100])  # truncated
    again = fresh(fmap, 1, 500)
    assert again.samples.tobytes() == first.samples.tobytes()
    other_map = RFF.draw(Box.unit(2), n_features=20, sigma=0.5, seed=2)
    key = (
        fmap.fingerprint,
        np.random.SeedSequence(1).generate_state(8).tobytes(),
        500,
        repr(Prior(fmap.box).box.state()),
        repr([]),
    )
    assert design_cache.read(key, fmap) is not None and design_cache.read(key, other_map) is None


def test_off_keeps_nothing_and_the_folder_keeps_the_latest(cache, monkeypatch):
    fmap = RFF.draw(Box.unit(2), n_features=10, sigma=0.5, seed=1)
    for seed in range(design_cache.KEEP + 2):
        fresh(fmap, seed, 200)
    assert len(list(cache.glob("*.npz"))) == design_cache.KEEP
    monkeypatch.setenv(design_cache.ENV, "off")
    assert design_cache.cache_folder() is None
    fresh(fmap, 99, 200)
    assert len(list(cache.glob("*.npz"))) == design_cache.KEEP
