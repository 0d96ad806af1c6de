"""``benchmarks/prior_family_ablation.py``: runs of variant subsets combined into the table of
``docs/pretrained.md``, every MMD² also as % lower than the tuned plug-in."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skflow.samplers.options import flat_learned_params


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
    runs = [json.loads((folder / f"{n}.json").read_text()) for n in ("recipe", "families", "size")]
    assert ablation.table(ablation.combine(runs)) in ablation.PAGE.read_text()


def test_every_variant_is_a_recipe_change(ablation):
    for weights, changed in ablation.VARIANTS.values():
        assert weights is None or set(weights) <= {"gaussian", "student", "lognormal", "rings",
                                                   "moons", "spirals", "shells"}  # fmt: skip
        # the recipe's flat form (a model card's): every field of every group by its name
        flat = flat_learned_params(ablation.LearnedFlowSampler().get_params())
        assert set(changed) <= set(flat)


def test_prior_law_selection_has_its_own_block_and_reference(ablation, tmp_path):
    run = {
        "args": {
            "iters": 10,
            "tasks": 3,
            "n_generated": 20,
            "selection": "prior-law",
            "ms": [5, 50],
        },
        "rows": {
            "plug-in auto, m=5": {"true": 0.5, "pooled": 0.4, "copy": 1.0},
            "plug-in auto, m=50": {"true": 0.2, "pooled": 0.2, "copy": 1.2},
            "all families, m=5": {"true": 0.25, "pooled": 0.5, "copy": 0.5},
            "all families, m=50": {"true": 0.3, "pooled": 0.1, "copy": 1.3},
        },
        "machine": "2 cores",
        "commands": ["C"],
    }
    text = ablation.table(run)
    assert text.startswith("<!-- prior-ablation-law:begin -->")
    assert "than the auto plug-in" in text and "held-out tasks of the prior's own law" in text
    assert "| all families | 5 | 0.2500 (+50 %) | 0.5000 (-25 %) | 0.50 |" in text
    assert "| all families | 50 | 0.3000 (-50 %) | 0.1000 (+50 %) | 1.30 |" in text
    page = tmp_path / "page.md"
    page.write_text(f"intro\n\n{ablation.BEGIN}\nold digits\n{ablation.END}\n")
    ablation.write_docs(run, page)
    ablation.write_docs(run, page)  # rewriting replaces its own block only
    written = page.read_text()
    assert written.count("prior-ablation-law:begin") == 1 and "old digits" in written
    digits = _run(ablation, {"all families": 0.25}, "A")
    with pytest.raises(ValueError, match="--selection"):
        ablation.combine([digits, run])


@pytest.mark.exactness
def test_prior_law_tasks_have_sixteen_features_and_are_seeded(ablation):
    a = ablation.prior_law_tasks(3, 0, (5, 20))
    b = ablation.prior_law_tasks(3, 0, (5, 20))
    assert len(a) == 3 and a[0][0].shape == (20, 16) and a[0][1].shape == (300, 16)
    np.testing.assert_array_equal(a[1][0], b[1][0])
    assert not np.array_equal(ablation.prior_law_tasks(3, 1, (5, 20))[0][0], a[0][0])


def test_prior_law_docs_block_is_written_from_the_saved_runs(ablation):
    folder = ablation.PAGE.parents[1] / "benchmarks" / "results" / "prior_ablation"
    runs = [
        json.loads((folder / f"{n}.json").read_text()) for n in ("prior_law", "prior_law_size_s01")
    ]
    assert ablation.table(ablation.combine(runs)) in ablation.PAGE.read_text()


def test_rewriting_a_block_keeps_it_in_place(ablation, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"intro\n\n{ablation.BEGIN}\nold\n{ablation.END}\n\n## After\n\ntail\n")
    ablation.write_docs(_run(ablation, {"all families": 0.25}, "A"), page)
    text = page.read_text()
    assert "old" not in text and text.index(ablation.END) < text.index("## After")
    assert text.endswith("## After\n\ntail\n")
