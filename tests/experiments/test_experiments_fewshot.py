"""The fewshot benchmark: presets, an end-to-end tiny run and its docs section."""

import numpy as np
import pytest

from skflow_experiments import EXPERIMENTS, fewshot


def test_presets():
    assert "fewshot" in EXPERIMENTS
    assert {"smoke", "tiny", "quick", "full"} <= set(fewshot.PRESETS)
    assert fewshot.PRESETS["quick"]["learned"] == {}  # the default fit(X, y), nothing else
    assert fewshot.PRESETS["quick"]["support_sizes"] == (2, 5, 10, 20, 50)
    assert "not a result" in fewshot.PRESETS["smoke"]["label"]
    with pytest.raises(ValueError, match="unknown preset"):
        fewshot.run("bogus")


def test_tiny_end_to_end_and_docs(tmp_path):
    res = fewshot.run("tiny", output_dir=tmp_path / "out", seeds=2, n_tasks=4)
    (name,) = res["datasets"]
    data = res["datasets"][name]
    for m in ("2", "10"):
        per_task = data["comparison"][m]["per_task"]
        for method in fewshot.METHODS:
            assert np.asarray(per_task[method]["true"]).shape == (2, 4)
            assert np.all(np.asarray(per_task[method]["copy"]) > 0)
        assert "ci" in data["summary"]["true"]["learned_vs_plugin_tuned"][m]
    assert data["per_seed"][0]["training"]["support_range"][0] == 2
    assert set(data["summary"]["memorization_ratio_median"]) == set(fewshot.METHODS)
    page = tmp_path / "results.md"
    page.write_text("# r\n\n<!-- fewshot:begin -->\nold\n<!-- fewshot:end -->\n", encoding="utf-8")
    fewshot.write_docs(res, "python -m skflow_experiments fewshot --preset tiny", page)
    text = page.read_text(encoding="utf-8")
    assert "not a result" in text and "memorisation ratio" in text.lower()
    assert "learned lower than tuned plug-in" in text and "old" not in text


def test_log_support_axis_has_no_minor_tick_labels(monkeypatch, tmp_path):
    """The support-size axis is log scaled and spans about a decade: matplotlib would label
    its minor ticks (3x10^0, 4x10^0, ...) over the support sizes. Only the sizes are labelled."""
    import matplotlib

    matplotlib.use("Agg")
    figures = []
    monkeypatch.setattr(fewshot, "save_figure", lambda fig, out, name: figures.append(fig))
    ms = [2, 5, 10, 20]
    curve = {str(m): 0.1 / m for m in ms}
    summary = {"support_sizes": ms, "true": {"mmd2": {k: curve for k in fewshot.METHODS}}}
    fewshot._plot({"datasets": {"digits": {"summary": summary}}}, tmp_path)
    (fig,) = figures
    fig.canvas.draw()
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(m) for m in ms]
    assert not [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
