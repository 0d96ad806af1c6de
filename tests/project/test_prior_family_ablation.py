"""``benchmarks/prior_family_ablation.py``: runs of variant subsets combined into the table of
``docs/pretrained.md``, every MMD² also as % lower than the tuned plug-in."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def ablation(load_benchmark):
    return load_benchmark("prior_family_ablation")


def _run(ablation, variants: dict, command: str, iters: int = 10) -> dict:
    rows = {}
    for m in ablation.MS:
        rows[f"plug-in tuned (sigma_min per m), m={m}"] = {"true": 0.5, "pooled": 0.4, "copy": 0.6}
        for name, value in variants.items():
            rows[f"{name}, m={m}"] = {"true": value, "pooled": value, "copy": 0.9}
    args = {"iters": iters, "tasks": 3, "n_generated": 20}
    return {"args": args, "rows": rows, "machine": "2 cores", "commands": [command]}


def test_combined_runs_keep_every_variant_and_command(ablation):
    a = _run(ablation, {"all families": 0.25}, "A")
    b = _run(ablation, {"gaussian only": 0.6}, "B")
    both = ablation.combine([a, b])
    assert both["commands"] == ["A", "B"]
    names = [k.rsplit(", m=", 1)[0] for k in both["rows"]]
    assert names.index("plug-in tuned (sigma_min per m)") < names.index("all families")
    assert names.index("all families") < names.index("gaussian only")
    table = ablation.table(both)
    assert "| all families | 5 | 0.2500 (+50 %) | 0.2500 (+38 %) | 0.90 |" in table
    assert "| gaussian only | 10 | 0.6000 (-20 %) | 0.6000 (-50 %) | 0.90 |" in table
    assert "`A` and `B`" in table


def test_combine_refuses_runs_of_other_settings(ablation):
    with pytest.raises(ValueError, match="--iters"):
        ablation.combine([_run(ablation, {}, "A"), _run(ablation, {}, "B", iters=20)])


def test_docs_block_is_written_from_the_saved_runs(ablation):
    """The block of ``docs/pretrained.md`` is what ``--docs-from`` writes from the saved runs."""
    folder = ablation.PAGE.parents[1] / "benchmarks" / "results" / "prior_ablation"
    runs = [json.loads((folder / f"{n}.json").read_text()) for n in ("recipe", "families")]
    assert ablation.table(ablation.combine(runs)) in ablation.PAGE.read_text()


def test_every_variant_is_a_recipe_change(ablation):
    for weights, changed in ablation.VARIANTS.values():
        assert weights is None or set(weights) <= {"gaussian", "student", "lognormal", "rings",
                                                   "moons", "spirals", "shells"}  # fmt: skip
        assert set(changed) <= set(ablation.RECIPES["general-16"]["sampler"])
