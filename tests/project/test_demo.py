"""The one-command demo runs end to end and reports sensible numbers."""

import subprocess
import sys

import numpy as np

from skflow import LearnedFlowSampler
from skflow.__main__ import main, run_demo, run_few_shot


def test_demo_reports_and_plots(tmp_path):
    out = tmp_path / "demo.png"
    report = run_demo(n_support=15, n_samples=40, n_steps=20, output=str(out), learned=False)
    assert out.exists() and out.stat().st_size > 1000
    # generated digits are far closer to held-out digits of their class than another class is
    assert report["mmd2_generated"] < 0.25 * report["mmd2_other_class"]
    # the kernel flow with sigma_min = 0.05 lands near its support: below real held-out digits
    assert 0.0 < report["memorization_generated"] < 1.0
    n_eff = list(report["n_eff"].values())
    assert n_eff[0] == 15.0 and n_eff[-1] < 1.5
    assert np.all(np.diff(n_eff) <= 1e-9)


def test_cli_entry_point(tmp_path, capsys):
    argv = ["demo", "--n-samples", "10", "--n-steps", "5", "--output", "", "--no-learned"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MMD^2" in out and "memorisation ratio" in out


def test_help_has_no_rest_markup():
    for argv in (["--help"], ["demo", "--help"]):
        text = subprocess.run(
            [sys.executable, "-m", "skflow", *argv], capture_output=True, text=True, check=True
        ).stdout
        assert "``" not in text and ":class:" not in text and ":func:" not in text
        assert "demo" in text


def test_few_shot_part_uses_the_prior_that_sees_the_support_size():
    """The demo conditions the prior docs/learned.md recommends zero-shot: it does not copy
    its 10 examples the way ``general-16`` does (memorisation ratio 0.40 there)."""
    report = run_few_shot(digit=3, n_support=10, n_samples=64, random_state=0)
    card = LearnedFlowSampler.pretrained_models()[report["prior"]]
    assert card["network"].get("size_embedding") is True
    assert report["memorization"]["learned"] > 0.6
    # both samplers are far closer to the held-out digits than the noise floor is far from 0
    assert max(report["mmd2"].values()) < 10 * report["mmd2_holdout_split"] + 0.05
