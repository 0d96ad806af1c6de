"""The demo's few-shot part: a meta-trained sampler against the plug-in field, held-out digit."""

import numpy as np
import pytest

from skflow import NWFlowSampler
from skflow.__main__ import _digit_features, main, run_few_shot
from skflow.metrics import mmd2


@pytest.fixture(scope="module")
def few_shot():
    return run_few_shot(
        digit=5,
        n_support=8,
        n_samples=20,
        n_steps=10,
        train_iter=20,
        train_time=None,
        random_state=1,
    )


def test_few_shot_plugin_number_is_the_plugin_mmd(few_shot):
    # recompute the plug-in's MMD^2 from public pieces: same split, same seed, same features
    X, y, features = _digit_features(5)
    Z = features.transform(X)
    rows = np.random.default_rng(1).permutation(np.flatnonzero(y == 5))
    support, held_out = Z[rows[:8]], Z[rows[8:]]
    gen = NWFlowSampler(sigma_min=0.01, n_steps=10).fit(support).sample(200, random_state=1)
    assert few_shot["mmd2"]["plug-in"] == pytest.approx(mmd2(gen, held_out, reference=held_out))


def test_few_shot_trains_on_other_classes_only(few_shot):
    assert few_shot["train_iterations"] == 20 and few_shot["train_seconds"] > 0
    # features are fitted without the held-out digit: its rows are not standardized exactly
    X, y, features = _digit_features(5)
    Z = features.transform(X)
    assert np.allclose(Z[y != 5].mean(axis=0), 0.0, atol=1e-10)
    assert not np.allclose(Z[y == 5].mean(axis=0), 0.0, atol=1e-2)
    for name in ("plug-in", "learned"):
        assert np.isfinite(few_shot["mmd2"][name])
        assert few_shot["images"][name].shape == (10, 64)
    # a split of the held-out rows is closer to itself than the few-shot samplers are
    assert few_shot["mmd2_holdout_split"] < few_shot["mmd2"]["plug-in"]


def test_cli_prints_both_samplers(tmp_path, capsys):
    out = tmp_path / "demo.png"
    args = [
        "demo",
        "--n-samples",
        "10",
        "--n-steps",
        "5",
        "--output",
        str(out),
        "--train-iter",
        "5",
        "--few-shot-support",
        "6",
    ]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "MMD^2 plug-in" in text and "MMD^2 learned" in text
    assert out.exists() and out.stat().st_size > 1000
