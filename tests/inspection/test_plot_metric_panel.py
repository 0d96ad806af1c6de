"""plot_metric_panel: a generated sample over its support and reference on the real data's
two leading principal axes, the metric panel in the title (matplotlib, Agg backend)."""

from __future__ import annotations

import numpy as np
import pytest

from skflow.inspection import plot_metric_panel
from skflow.metrics import metric_panel

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


@pytest.fixture
def samples():
    rng = np.random.default_rng(0)
    # the real data vary along feature 2 most, then feature 0: the principal axes
    scale = np.array([2.0, 0.1, 5.0])
    S, R = rng.normal(size=(20, 3)) * scale, rng.normal(size=(80, 3)) * scale
    return rng.normal(size=(50, 3)) * scale, S, R


def test_plot_draws_three_groups_on_the_principal_axes(samples):
    G, S, R = samples
    fig = plot_metric_panel(G, S, R, random_state=0)
    ax = fig.axes[0]
    ref, gen, sup = (c.get_offsets() for c in ax.collections)
    assert (len(ref), len(gen), len(sup)) == (80, 50, 20)
    real = np.vstack([S, R])
    centre = real.mean(0)
    _, _, vt = np.linalg.svd(real - centre, full_matrices=False)
    # oracle: the projections on the real data's leading axes (up to the axes' signs)
    expected = (G - centre) @ vt[:2].T
    np.testing.assert_allclose(np.abs(gen), np.abs(expected), atol=1e-12)
    assert np.abs(gen[:, 0]).mean() > np.abs(gen[:, 1]).mean()  # the widest axis first
    matplotlib.pyplot.close(fig)


def test_plot_title_shows_the_panel_values_and_floors(samples):
    G, S, R = samples
    panel = metric_panel(G, S, R, random_state=1)
    fig, ax = matplotlib.pyplot.subplots()
    assert plot_metric_panel(G, S, R, panel=panel, ax=ax) is fig
    title = ax.get_title()
    e = panel["c2st_accuracy"]
    assert f"1-NN acc {e.value:.3g} ({e.floor:.3g})" in title
    assert f"memo {panel['memorization_ratio'].value:.3g}" in title
    matplotlib.pyplot.close(fig)


def test_plot_of_one_feature_and_torch_inputs(samples):
    torch = pytest.importorskip("torch")
    G, S, R = (a[:, :1] for a in samples)
    fig = plot_metric_panel(torch.as_tensor(G), torch.as_tensor(S), R, random_state=0)
    assert len(fig.axes[0].collections[1].get_offsets()) == 50
    matplotlib.pyplot.close(fig)


def test_plot_refuses_invalid_samples(samples):
    G, S, R = samples
    with pytest.raises(ValueError, match="support has 2 features but generated has 3"):
        plot_metric_panel(G, S[:, :2], R)
