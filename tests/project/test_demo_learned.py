"""The demo's few-shot part: a meta-trained sampler against the plug-in field, held-out digit."""

import numpy as np
import pytest

from skflow import NWFlowSampler, SolverOptions
from skflow.__main__ import _digit_features, _panels, main, run_few_shot
from skflow.metrics import memorization_ratio, mmd2


@pytest.fixture(scope="module")
def few_shot():
    return run_few_shot(
        digit=5, n_support=8, n_samples=20, n_steps=10, train_iter=20, random_state=1
    )


def _plugin_samples():
    X, y, features = _digit_features(5)
    Z = features.transform(X)
    rows = np.random.default_rng(1).permutation(np.flatnonzero(y == 5))
    support, held_out = Z[rows[:8]], Z[rows[8:]]
    gen = (
        NWFlowSampler(sigma_min="auto", solver=SolverOptions(n_steps=10))
        .fit(support)
        .sample(200, random_state=1)
    )
    return X[rows[:8]], support, held_out, gen


@pytest.mark.exactness
def test_few_shot_plugin_numbers_are_the_plugin_metrics(few_shot):
    # recompute the plug-in's MMD^2 and memorisation ratio from public pieces: same split, seed
    pixels, support, held_out, gen = _plugin_samples()
    assert few_shot["mmd2"]["plug-in"] == pytest.approx(mmd2(gen, held_out, reference=held_out))
    expected = memorization_ratio(gen, support, held_out)
    assert few_shot["memorization"]["plug-in"] == pytest.approx(expected)
    # the figure's support row is the support, in pixels
    np.testing.assert_array_equal(few_shot["support_images"], pixels)


def test_few_shot_trains_on_other_classes_only(few_shot):
    assert few_shot["train_iterations"] == 20 and few_shot["train_seconds"] > 0
    # features are fitted without the held-out digit: its rows are not standardized exactly
    X, y, features = _digit_features(5)
    Z = features.transform(X)
    assert np.allclose(Z[y != 5].mean(axis=0), 0.0, atol=1e-10)
    assert not np.allclose(Z[y == 5].mean(axis=0), 0.0, atol=1e-2)
    for name in ("plug-in", "learned"):
        assert np.isfinite(few_shot["mmd2"][name])
        assert few_shot["memorization"][name] > 0
        assert few_shot["images"][name].shape == (10, 64)
    # a split of the held-out rows is closer to itself than the few-shot samplers are
    assert few_shot["mmd2_holdout_split"] < few_shot["mmd2"]["plug-in"]


@pytest.mark.exactness
def test_few_shot_is_deterministic(few_shot):
    # a fixed iteration budget: the same numbers on every run, whatever the machine's load
    again = run_few_shot(
        digit=5, n_support=8, n_samples=20, n_steps=10, train_iter=20, random_state=1
    )
    assert again["mmd2"] == few_shot["mmd2"]
    assert again["memorization"] == few_shot["memorization"]


def test_figure_panels_show_supports_and_numbers(few_shot):
    exact = {
        "n_support": 20,
        "support": np.zeros((20, 64)),
        "generated": np.zeros((64, 64)),
        "mmd2_generated": 0.0123,
        "memorization_generated": 0.456,
    }
    panels = _panels(exact, few_shot)
    titles = [title for title, _ in panels]
    assert len(panels) == 5
    assert "support" in titles[0] and "0.012" in titles[1] and "0.46" in titles[1]
    assert "8 real examples" in titles[2] and panels[2][1] is few_shot["support_images"]
    for title, name in zip(titles[3:], ("plug-in", "learned"), strict=True):
        assert f"{few_shot['mmd2'][name]:.3f}" in title
        assert f"{few_shot['memorization'][name]:.2f}" in title


def test_figure_says_when_the_few_shot_support_repeats_row_one(few_shot):
    """One seed draws both supports: when row 3 shows the first digits of row 1 again, its
    title says so (and does not when they differ)."""
    k = few_shot["n_support"]
    exact = {
        "n_support": 20,
        "support": np.zeros((20, 64)),
        "generated": np.zeros((64, 64)),
        "mmd2_generated": 0.0123,
        "memorization_generated": 0.456,
    }
    assert "row 1" not in _panels(exact, few_shot)[2][0]
    exact["support"] = np.concatenate([few_shot["support_images"], np.zeros((20 - k, 64))])
    title = _panels(exact, few_shot)[2][0]
    assert f"{k} real examples, the first {k} of row 1 again" in title


def test_cli_prints_both_samplers_and_no_loss_lines(tmp_path, capsys):
    out = tmp_path / "demo.png"
    # 60 iterations: the training loop logs a loss line at 50 and at 60
    args = ["demo", "--n-samples", "10", "--n-steps", "5", "--output", str(out)]
    args += ["--train-iter", "60", "--few-shot-support", "6"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "MMD^2 plug-in" in captured.out and "MMD^2 learned" in captured.out
    assert "memorisation ratio" in captured.out
    # one progress display: the bar (stderr), no "iter ... loss" lines beside it
    assert "iter " not in captured.out and "iter " not in captured.err
    assert out.exists() and out.stat().st_size > 1000


def test_cli_has_no_time_cap():
    with pytest.raises(SystemExit):
        main(["demo", "--train-time", "10"])


def test_few_shot_trains_on_one_torch_thread(monkeypatch):
    # one thread: the same float sums on every machine, and no contention on a busy one
    import torch

    import skflow.__main__ as demo

    seen = []
    original = demo._meta_trained_sampler

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(demo, "_meta_trained_sampler", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_few_shot(digit=5, n_support=8, n_samples=20, n_steps=5, train_iter=3, random_state=1)
        assert seen == [1] and torch.get_num_threads() == 2  # restored afterwards
    finally:
        torch.set_num_threads(before)
