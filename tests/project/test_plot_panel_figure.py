"""``benchmarks/plot_panel_figure.py``: the held-out digit never reaches the training rows, and
the printed table is the panels it was given (value and floor per metric, the command)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "plot_panel_figure.py"


def _load():
    spec = importlib.util.spec_from_file_location("plot_panel_figure_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figure = _load()


def test_the_held_digit_is_not_in_training_and_the_support_not_in_the_reference():
    X, y, S, R = figure.digits_task(10, seed=0)
    assert figure.HELD not in set(y.tolist()) and set(y.tolist()) == set(figure.TRAIN.tolist())
    assert S.shape == (10, 16) and R.shape[1] == 16
    assert not ({tuple(r) for r in S} & {tuple(r) for r in R})
    assert not ({tuple(r) for r in S} & {tuple(r) for r in X})


def test_table_prints_each_value_beside_its_floor():
    rows = [("arm-a", {"c2st_accuracy": {"value": 0.91, "floor": 0.49}})]
    args = SimpleNamespace(m=10, generated=200, few_shot_budget=0.0, seed=3)
    text = figure.markdown(rows, args, 12.0)
    assert "| arm-a | 0.91 (0.49) |" in text
    assert "--m 10 --generated 200 --few-shot-budget 0 --seed 3" in text
