"""The files of a prior (issue 63): the card's schema, discovery in a folder, plain names, the
training checkpoint without pickle, what the SHA-256 proves, and the support sizes of a card.

Broken cards are made from ``tmp_path`` copies of the shipped files."""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from skflow import LearnedFlowSampler
from skflow.exceptions import InvalidParameterError, PriorCardError, SupportSizeWarning
from skflow.priors.__main__ import main
from skflow.priors.training import checkpoint_files, read_checkpoint, train_prior, write_checkpoint
from skflow.samplers.prior_store import PRIORS_DIR, file_sha256

ROOT = Path(__file__).resolve().parents[2]


def _copy(folder: Path, name: str = "mine", source: str = "general-16") -> Path:
    """A copy of a shipped prior under ``name``; returns its card's path."""
    for ext in ("json", "npz"):
        shutil.copy(PRIORS_DIR / f"{source}.{ext}", folder / f"{name}.{ext}")
    return folder / f"{name}.json"


def _edit(path: Path, edit) -> None:
    card = json.loads(path.read_text())
    edit(card)
    path.write_text(json.dumps(card))


# -- the card's schema ---------------------------------------------------------------------
def _set(section, key, value):
    return lambda card: card[section].__setitem__(key, value)


BROKEN = {
    "missing section": ("network", lambda card: card.pop("network")),
    "missing field": ("fitted.task_scale_", lambda card: card["fitted"].pop("task_scale_")),
    "nan scale": ("fitted.task_scale_", _set("fitted", "task_scale_", float("nan"))),
    "inf scale": ("fitted.task_scale_", _set("fitted", "task_scale_", float("inf"))),
    "negative scale": ("fitted.task_scale_", _set("fitted", "task_scale_", -1.0)),
    "unknown normalize": ("finetune_params.normalize", _set("finetune_params", "normalize", "x")),
    "training normalize": ("estimator_params.normalize", _set("estimator_params", "normalize", 2)),
    "string width": ("network.n_features", _set("network", "n_features", "16")),
    "bool width": ("network.n_features", _set("network", "n_features", True)),
    "sigma_min": ("network.sigma_min", _set("network", "sigma_min", 1.5)),
    "range": ("fitted.support_range_", _set("fitted", "support_range_", [100, 2])),
    "normalize_": ("fitted.normalize_", _set("fitted", "normalize_", "yes")),
    "iterations": ("fitted.n_iter_", _set("fitted", "n_iter_", -1)),
    "hash": ("weights_sha256", lambda card: card.__setitem__("weights_sha256", "abc")),
    "weights file": ("weights_file", lambda card: card.__setitem__("weights_file", "../w.npz")),
    "estimator parameter": ("estimator_params", _set("finetune_params", "augment", "sideways")),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_card_names_the_file_the_field_and_the_fix(tmp_path, case):
    field, edit = BROKEN[case]
    _edit(_copy(tmp_path), edit)
    with pytest.raises(PriorCardError) as info:
        LearnedFlowSampler.from_pretrained("mine", n_features=3, folder=tmp_path)
    message = str(info.value)
    assert str(tmp_path / "mine.json") in message and field in message and "Fix" in message
    assert isinstance(info.value, ValueError)


def test_a_diverged_sampler_is_not_written_as_a_prior(tmp_path):
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    prior.task_scale_ = float("nan")
    with pytest.raises(PriorCardError, match="fitted.task_scale_.*refit"):
        prior.save_pretrained("mine", tmp_path)
    assert not (tmp_path / "mine.json").exists()


# -- discovery -----------------------------------------------------------------------------
def test_other_json_files_are_not_priors_and_do_not_break_loading(tmp_path):
    _copy(tmp_path)
    (tmp_path / "package.json").write_text(json.dumps({"name": "x", "version": "1.0"}))
    (tmp_path / "broken.json").write_text("{not json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unrelated file is ignored without a word
        assert list(LearnedFlowSampler.pretrained_models(tmp_path)) == ["mine"]
        LearnedFlowSampler.from_pretrained("mine", n_features=2, folder=tmp_path)
    for name in ("package", "broken"):  # asked for by name: an error that names the file
        with pytest.raises(PriorCardError, match=rf"{name}\.json.*not a prior.*'mine'"):
            LearnedFlowSampler.from_pretrained(name, folder=tmp_path)


def test_a_broken_card_is_left_out_of_the_list_with_a_warning(tmp_path):
    _copy(tmp_path)
    _edit(_copy(tmp_path, "bad"), _set("fitted", "task_scale_", float("nan")))
    with pytest.warns(UserWarning, match=r"bad\.json.*task_scale_"):
        assert list(LearnedFlowSampler.pretrained_models(tmp_path)) == ["mine"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # loading another prior does not read it
        LearnedFlowSampler.from_pretrained("mine", n_features=2, folder=tmp_path)


def test_a_folder_that_does_not_exist_is_named(tmp_path):
    with pytest.raises(InvalidParameterError, match="not a directory"):
        LearnedFlowSampler.from_pretrained("general-16", folder=tmp_path / "nowhere")


# -- names ---------------------------------------------------------------------------------
NOT_NAMES = ["../escape", "a/b", "a\\b", "/tmp/abs", "C:x", "", ".", ".."]


@pytest.mark.parametrize("name", NOT_NAMES)
def test_names_with_a_folder_are_refused_by_save_and_load(tmp_path, name):
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    inside = tmp_path / "inside"
    with pytest.raises(InvalidParameterError, match="plain file stem"):
        prior.save_pretrained(name, inside)
    assert not inside.exists() and sorted(tmp_path.iterdir()) == []  # nothing written
    inside.mkdir()
    _copy(tmp_path, "escape")  # a prior beside the folder, which "../escape" would reach
    with pytest.raises(InvalidParameterError, match="plain file stem"):
        LearnedFlowSampler.from_pretrained(name, folder=inside)


# -- the training checkpoint ---------------------------------------------------------------
def _checkpoint(folder: Path) -> LearnedFlowSampler:
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    write_checkpoint(folder, "general-16", prior, {"loss": [1.0, np.float32(2.0)]})
    return prior


@pytest.mark.exactness
def test_a_checkpoint_is_tensors_and_json_and_reads_back_the_same_sampler(tmp_path):
    prior = _checkpoint(tmp_path)
    meta, tensors = checkpoint_files(tmp_path, "general-16")
    assert sorted(tmp_path.iterdir()) == [meta, tensors]
    assert json.loads(meta.read_text())["format"].startswith("skflow-prior-checkpoint")
    state = torch.load(tensors, weights_only=True)  # tensors only: loads without pickle
    assert all(torch.is_tensor(v) for v in state.values())
    sampler, log = read_checkpoint(tmp_path, "general-16")
    assert log == {"loss": [1.0, 2.0]}
    S = np.random.default_rng(0).normal(size=(10, 2))
    for model in (sampler, prior):
        model.set_params(solver__n_steps=3)
    np.testing.assert_array_equal(
        sampler.sample(4, support=S, random_state=0), prior.sample(4, support=S, random_state=0)
    )
    assert LearnedFlowSampler.pretrained_models(tmp_path) == {}  # no checkpoint is a prior


class _Payload:
    """Stands for code hidden in a pickle: ``weights_only`` refuses to build it."""


def test_a_checkpoint_is_read_without_unpickling(tmp_path):
    _checkpoint(tmp_path)
    meta, tensors = checkpoint_files(tmp_path, "general-16")
    torch.save({"x": torch.zeros(1), "payload": _Payload()}, tensors)
    _edit(meta, lambda m: m.__setitem__("tensors_sha256", file_sha256(tensors)))
    with pytest.raises(pickle.UnpicklingError, match="weights_only"):
        read_checkpoint(tmp_path, "general-16")
    torch.save({"x": torch.zeros(1)}, tensors)  # tensors that are not the metadata's
    with pytest.raises(ValueError, match="not those of"):
        read_checkpoint(tmp_path, "general-16")


def test_resume_needs_a_checkpoint_folder(tmp_path, capsys):
    with pytest.raises(InvalidParameterError, match="checkpoint=FOLDER"):
        train_prior("general-16", max_iter=1, folder=tmp_path, resume=True, progress=False)
    with pytest.raises(SystemExit):
        main(["general-16", "--resume", "--out", str(tmp_path)])
    assert "--resume needs --checkpoint" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == []


# -- what the SHA-256 proves ---------------------------------------------------------------
@pytest.mark.parametrize(
    "path", ["docs/pretrained.md", "skflow/samplers/prior_store.py", "skflow/samplers/learned.py"]
)
def test_the_docs_say_the_hash_is_integrity_not_authenticity(path):
    text = " ".join((ROOT / path).read_text().split())
    assert "integrity, not authenticity" in text or "not who wrote them" in text
    assert "can rewrite the card" in text and "sources you trust" in text


# -- support sizes -------------------------------------------------------------------------
def _prior(folder=None, name="general-16"):
    prior = LearnedFlowSampler.from_pretrained(name, n_features=2, folder=folder)
    return prior.set_params(solver__n_steps=2)


def test_a_support_outside_the_cards_sizes_warns_with_the_range_and_the_fix():
    prior, rng = _prior(), np.random.default_rng(0)
    fix = r"2 to 100 rows.*prior\.fit\(X, y\).*LearnedFlowSampler\(\)\.fit\(X, y\)"
    calls = {
        "support": lambda m: prior.sample(2, support=rng.normal(size=(m, 2))),
        "batch": lambda m: prior.sample_batch(2, rng.normal(size=(2, m, 2))),
        "velocity": lambda m: prior.velocity(
            np.zeros((2, 3, 2)), 0.5, support=rng.normal(size=(2, m, 2))
        ),
    }
    for what, call in calls.items():
        with pytest.warns(SupportSizeWarning, match=fix) as record:
            call(500)
        assert record[0].filename == __file__, what  # the user's line
        with warnings.catch_warnings():
            warnings.simplefilter("error", SupportSizeWarning)
            call(100)  # inside the range: silent


def test_the_range_is_the_cards(tmp_path):
    _edit(_copy(tmp_path), _set("fitted", "support_range_", [2, 20]))
    prior = _prior(tmp_path, "mine")
    with pytest.warns(SupportSizeWarning, match="2 to 20 rows"):
        prior.sample(2, support=np.random.default_rng(0).normal(size=(50, 2)))
