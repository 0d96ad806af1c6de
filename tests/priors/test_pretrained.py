"""The shipped priors: cards, hashes, rebuilt weights, sampling at several d and m, fine-tuning,
and the training command (deterministic, resumable) on a tiny budget."""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as tnf
from sklearn.datasets import load_iris

from skflow import LearnedFlowSampler, NetworkOptions, SolverOptions, TrainingOptions
from skflow.exceptions import InvalidParameterError, MemorizationWarning
from skflow.nn.transformer import CrossAttentionVelocity
from skflow.priors import FAMILIES, RECIPES, EllipticalMixtureTasks, PriorTasks, train_prior
from skflow.priors.model_card import current_command
from skflow.priors.training import write_checkpoint
from skflow.samplers._fitted import FITTED, fitted_config, restore
from skflow.samplers.options import learned_params_from_flat
from skflow.samplers.prior_store import PRIORS_DIR, file_sha256, load_prior, read_prior

CARDS = LearnedFlowSampler.pretrained_models()
NAMES = sorted(CARDS)
CARD_KEYS = ("command", "iterations", "wall_time_s", "cpu_time_s", "machine_start",
             "loss_curve", "validation_curve")  # fmt: skip


def test_at_least_one_prior_is_shipped():
    assert "general-16" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_card_and_hash(name):
    card = CARDS[name]
    weights = PRIORS_DIR / card["weights_file"]
    assert file_sha256(weights) == card["weights_sha256"]
    assert weights.stat().st_size < 5 * 2**20  # a few MB at most, inside the package
    for key in CARD_KEYS:
        assert key in card["training"], key
    assert card["training"]["iterations"] == card["fitted"]["n_iter_"] > 0
    # the card records the command as it was typed; the docs show how it runs today
    command = current_command(card["training"]["command"])
    assert command.startswith("python -m skflow.priors " + name)
    assert len(card["training"]["loss_curve"]) > 0


@pytest.mark.exactness
@pytest.mark.parametrize("name", NAMES)
def test_loaded_model_equals_rebuilt_model(name):
    card = CARDS[name]
    net = CrossAttentionVelocity(**card["network"])
    with np.load(PRIORS_DIR / card["weights_file"]) as data:
        net.load_state_dict({k: torch.from_numpy(data[k]) for k in data.files})
    loaded = LearnedFlowSampler.from_pretrained(name).model_
    for (k, a), (k2, b) in zip(net.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b), k
    assert card["n_parameters"] == sum(p.numel() for p in net.state_dict().values())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("d", [1, 4, 13, 16])
def test_samples_at_several_d_and_m(name, d):
    prior = LearnedFlowSampler.from_pretrained(name, n_features=d).set_params(solver__n_steps=10)
    assert prior.n_features_in_ == d and prior.model_.n_features == d
    rng = np.random.default_rng(d)
    for m in (2, 10, 100):
        S = rng.normal(size=(m, d)) * 3.0 + 5.0
        X = prior.sample(20, support=S, random_state=0)
        assert X.shape == (20, d) and np.all(np.isfinite(X))
        # per-task normalisation: the samples live where the support lies
        assert abs(X.mean() - 5.0) < 5.0


@pytest.mark.parametrize("name", NAMES)
def test_narrow_prior_is_the_zero_padded_network(name):
    full = LearnedFlowSampler.from_pretrained(name).model_
    narrow = LearnedFlowSampler.from_pretrained(name, n_features=3).model_
    gen = torch.Generator().manual_seed(0)
    S, X = torch.randn(1, 12, 3, generator=gen), torch.randn(1, 5, 3, generator=gen)
    pad = full.n_features - 3
    padded = full(tnf.pad(X, (0, pad)), tnf.pad(S, (0, pad)), 0.3)
    torch.testing.assert_close(narrow(X, S, 0.3), padded[..., :3], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(full(X, S, 0.3), narrow(X, S, 0.3))  # forward pads by itself


def test_restrict_features_equals_padding_with_trained_like_weights():
    net = CrossAttentionVelocity(6, d_model=16, n_heads=2, n_layers=2)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    small = net.restrict_features(2)
    x, S, t = torch.randn(2, 5, 2), torch.randn(2, 7, 2), torch.rand(2, 5)
    torch.testing.assert_close(small(x, S, t), net(x, S, t), atol=2e-5, rtol=1e-4)
    with pytest.raises(InvalidParameterError):
        net.restrict_features(7)


def test_errors_name_width_and_corrupted_weights(tmp_path):
    with pytest.raises(InvalidParameterError, match="general-16"):
        LearnedFlowSampler.from_pretrained("no-such-prior")
    width = CARDS["general-16"]["network"]["n_features"]
    with pytest.raises(InvalidParameterError, match="PCA"):
        LearnedFlowSampler.from_pretrained("general-16", n_features=width + 1)
    for suffix in (".json", ".npz"):
        shutil.copy(PRIORS_DIR / f"general-16{suffix}", tmp_path)
    card, _ = read_prior("general-16", folder=tmp_path)
    card["weights_sha256"] = "0" * 64
    (tmp_path / "general-16.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="corrupted"):
        read_prior("general-16", folder=tmp_path)


@pytest.mark.parametrize("batched", [False, True], ids=["support", "batch"])
def test_support_of_another_width_names_the_remedy(batched):
    """The width is fixed at load (``n_features_in_``): a narrower support names
    ``from_pretrained(name, n_features=d)``, a wider one the prior's limit and PCA; both in
    ``sample(support=...)`` (one support or a batch) and ``sample_batch``, also after pickling."""
    width = CARDS["general-16"]["network"]["n_features"]
    prior = pickle.loads(pickle.dumps(LearnedFlowSampler.from_pretrained("general-16")))
    shape = (2, 10) if batched else (10,)
    rng = np.random.default_rng(0)  # rows with spread: a constant support is refused (issue 34)
    narrow, wide = rng.normal(size=(*shape, 4)), rng.normal(size=(*shape, width + 4))
    remedy = r"from_pretrained\('general-16', n_features=4\)"
    with pytest.raises(ValueError, match=remedy):
        prior.sample(5, support=narrow)
    limit = rf"serves at most {width} features.*PCA\(n_components={width}\)"
    with pytest.raises(ValueError, match=limit):
        prior.sample(5, support=wide)
    if batched:
        with pytest.raises(ValueError, match=remedy):
            prior.sample_batch(5, narrow)
    # loaded as the message says, the same support is served
    fitted = LearnedFlowSampler.from_pretrained("general-16", n_features=4)
    fitted.set_params(solver__n_steps=2)
    assert fitted.sample(5, support=narrow).shape == (*shape[:-1], 5, 4)


@pytest.mark.exactness
def test_pickle_and_fine_tune_on_labelled_data():
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=4)
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    S = X[y == 0][:10]
    before = prior.sample(30, support=S, random_state=0)
    clone = pickle.loads(pickle.dumps(prior))
    np.testing.assert_array_equal(clone.sample(30, support=S, random_state=0), before)
    n0 = prior.n_iter_
    prior.set_params(training__max_iter=3).fit(
        X, y
    )  # warm_start=True: the prior's weights continue
    assert prior.n_iter_ == n0 + 3
    after = prior.sample(30, support=S, random_state=0)
    assert not np.array_equal(after, before)
    assert np.max(np.abs(after - before)) < 5.0  # a few small steps, not a new network


@pytest.mark.exactness
def test_prior_tasks_vary_dimension_family_and_scale():
    tasks = PriorTasks(max_features=6)
    dims = {tasks.sample_tasks(4, 5, 3, random_state=s)[0].shape[-1] for s in range(40)}
    assert dims == set(range(1, 7))
    S1, Q1 = tasks.sample_tasks(4, 5, 3, random_state=3)
    S2, Q2 = tasks.sample_tasks(4, 5, 3, random_state=3)
    np.testing.assert_array_equal(S1, S2)
    assert tasks.variable_n_features and tasks.n_features == 6
    with pytest.raises(InvalidParameterError, match="no family"):
        PriorTasks(weights={"rings": 1.0}).families(1)
    rings = PriorTasks(max_features=3, weights={"rings": 1.0})  # no 1-feature batch drawn
    assert {rings.sample_tasks(2, 4, 2, random_state=s)[0].shape[-1] for s in range(30)} == {2, 3}
    with pytest.raises(InvalidParameterError):
        PriorTasks(weights={"cubes": 1.0}).sample_tasks(2, 3, 3, random_state=0)
    assert set(FAMILIES) >= {"gaussian", "student", "lognormal", "rings", "shells"}


@pytest.mark.parametrize("law", ["gaussian", "student", "lognormal"])
def test_elliptical_laws_are_standardized(law):
    tasks = EllipticalMixtureTasks(3, law=law, n_components=(1, 1), decay=(0.0, 0.0))
    S, _ = tasks.sample_tasks(400, 200, 0, random_state=0)
    centred = S - S.mean(axis=1, keepdims=True)
    assert abs(np.mean(centred**2) - 1.0) < 0.15


def test_train_prior_is_deterministic_and_resumable(tmp_path):
    a = train_prior("general-16", max_iter=3, folder=tmp_path / "a", progress=False)
    b = train_prior("general-16", max_iter=3, folder=tmp_path / "b", progress=False)
    card_a, card_b = json.loads(a.read_text()), json.loads(b.read_text())
    assert card_a["weights_sha256"] == card_b["weights_sha256"]
    assert card_a["training"]["iterations"] == 3
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["general-16.json",
                                                                  "general-16.npz"]  # fmt: skip
    # an interrupted run: a checkpoint (tensors and JSON, no pickle), resumed by 2 iterations
    ckpt = tmp_path / "ckpt"
    prior = LearnedFlowSampler.from_pretrained("general-16")
    log = {"loss": [1.0] * 3, "validation": [], "wall_s": 1.0, "cpu_s": 1.0}
    write_checkpoint(ckpt, "general-16", prior.set_params(warm_start=False), log)
    n0 = prior.n_iter_
    card = train_prior("general-16", max_iter=n0 + 2, folder=tmp_path / "c", checkpoint=ckpt,
                       resume=True, progress=False)  # fmt: skip
    resumed = json.loads(card.read_text())
    assert resumed["training"]["iterations"] == n0 + 2 and resumed["training"]["resumed"]
    assert not any(ckpt.iterdir())  # the checkpoint is removed at the end


@pytest.mark.parametrize("name", NAMES)
def test_model_card_page_is_written_from_the_card(name):
    from pathlib import Path

    from skflow.priors.model_card import card_markdown

    page = Path(__file__).resolve().parents[2] / "docs" / "pretrained.md"
    assert card_markdown(name, CARDS[name]) in page.read_text()


def test_model_card_page_is_exactly_what_write_docs_writes(tmp_path):
    # The intro is code too: a page edited by hand, or code left behind a page edit, shows
    # up here before the next ``--write-docs`` silently reverts one of them.
    import shutil
    from pathlib import Path

    from skflow.priors.model_card import write_docs

    page = Path(__file__).resolve().parents[2] / "docs" / "pretrained.md"
    copy = tmp_path / "pretrained.md"
    shutil.copy(page, copy)
    write_docs(copy)
    assert copy.read_text() == page.read_text()


@pytest.mark.exactness
def test_degenerate_supports_give_copies_and_small_spread_stays_near():
    """Issue 34: a constant support (``np.ones((10, 4))`` gave samples 39 away) or a single
    row has no scale; the prior returns copies of its row with a warning naming the fix
    (issue 63: one behaviour for every sampler). A support of small but nonzero spread is
    served in its frame: the samples stay at that scale."""
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=4)
    for S in (np.ones((10, 4)), np.full((1, 4), 2.0)):
        with pytest.warns(MemorizationWarning, match="no spread") as info:
            X = prior.sample(5, support=S, random_state=0)
        np.testing.assert_array_equal(X, np.repeat(S[:1], 5, axis=0))
        messages = [str(w.message) for w in info if w.category is MemorizationWarning]
        assert "sigma_min=0.01, normalize=False" in messages[0]
        np.testing.assert_array_equal(prior.velocity(np.zeros((2, 4)), 0.5, support=S), 0.0)
    batch = prior.sample(5, support=np.stack([np.eye(4)[:3], np.ones((3, 4))]), random_state=0)
    np.testing.assert_array_equal(batch[1], 1.0)  # task 1 only
    assert np.ptp(batch[0], axis=0).min() > 0
    rng = np.random.default_rng(0)
    for eps in (1e-3, 1e-6):
        S = 1.0 + eps * rng.normal(size=(10, 4))
        X = prior.sample(200, support=S, random_state=0)
        assert np.abs(X - 1.0).max() < 20 * eps


# -- one construction path: a prior, a pickle and the end of fit ---------------------------
#: ``from_pretrained("general-16", n_features=3).set_params(solver__n_steps=10).sample(4, support=S,
#: random_state=0)`` with ``S = default_rng(0).normal(size=(12, 3)) * 2 + 1``, computed on the
#: code before the priors moved to skflow.priors (commit 67725a0), on one x86-64 CPU.
#:
#: Numbers stored on one machine are compared with a tolerance, never bit for bit: the network
#: runs in float32 (eps 1.2e-7) and another CPU's kernels (AVX2, AVX-512, NEON; another BLAS)
#: add its sums in another order, so each of the 10 solver steps through 4 attention blocks may
#: round differently. An AMD EPYC (AVX-512) gave differences up to 5.9e-7 here, 1.1e-10 for the
#: tiny fit below; ``MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=default`` (CI's second run) up to 3.0e-6
#: on samples of size ~2 (so 2.1e-6 on an entry of -0.0225: an absolute, not a relative, error).
#: ``STORED_RTOL`` and ``STORED_ATOL`` leave a 3x margin above that; a real change of the loaded
#: weights, the frame or the solver moves the samples by 1e-2 or more. Comparisons inside one
#: process (pickle round trip, repeat calls) stay bit for bit.
STORED_RTOL, STORED_ATOL = 1e-5, 1e-5
BEFORE_D3 = [
    [3.8759748639757197, 0.8052314330045646, 1.8399814381456596],
    [4.908860814020032, 3.9957473995452526, -0.9390641956420233],
    [2.721760486387134, 1.0261798211883926, 0.62527608976605],
    [1.5097315794363768, 0.803329690324183, 2.4083125929764586],
]
#: The same at the full width: ``from_pretrained("general-16").set_params(solver__n_steps=5)
#: .sample(2, support=default_rng(1).normal(size=(8, 16)), random_state=1)``, first 3 columns.
BEFORE_D16 = [
    [1.8958327092440141, -0.022525292876356254, -0.8452271591053946],
    [-0.11900355334099844, -0.19837100531094223, -0.956474918869446],
]


def _close_to_stored(actual, stored):
    np.testing.assert_allclose(actual, np.array(stored), rtol=STORED_RTOL, atol=STORED_ATOL)


@pytest.mark.exactness
@pytest.mark.stored
def test_loaded_prior_samples_match_the_stored_ones():
    S = np.random.default_rng(0).normal(size=(12, 3)) * 2.0 + 1.0
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=3)
    prior.set_params(solver__n_steps=10)
    X = prior.sample(4, support=S, random_state=0)
    _close_to_stored(X, BEFORE_D3)
    # one process: bit for bit
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(prior)).sample(4, support=S, random_state=0), X
    )
    S16 = np.random.default_rng(1).normal(size=(8, 16))
    full = LearnedFlowSampler.from_pretrained("general-16").set_params(solver__n_steps=5)
    _close_to_stored(full.sample(2, support=S16, random_state=1)[:, :3], BEFORE_D16)


def _tiny_fit():
    X = np.random.default_rng(0).normal(size=(30, 2))
    return LearnedFlowSampler(
        NetworkOptions(d_model=8, n_heads=2, n_layers=1),
        training=TrainingOptions(max_iter=3, batch_tasks=2, support_size=5, n_targets=4),
        solver=SolverOptions(n_steps=5),
        random_state=0,
    ).fit(X)


def _same_fitted(a, b):
    for name in (*FITTED, "n_features_in_", "_prior"):
        va, vb = getattr(a, name), getattr(b, name)
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb)
        else:
            assert va == vb and type(va) is type(vb), name
    for (k, x), (k2, y) in zip(
        a.model_.state_dict().items(), b.model_.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(x, y), k


@pytest.mark.stored
def test_fit_and_warm_start_give_the_samples_of_before():
    """The end of ``fit`` now builds the sampler through ``restore``: the same numbers as the
    code before (commit 67725a0), after a fit and after a warm-started second fit (stored on
    one CPU: compared within ``STORED_RTOL``)."""
    lf = _tiny_fit()
    before = [[0.5709780225941131, 0.7059248963035687], [-0.12131427597545621, 1.3880416086449996]]
    _close_to_stored(lf.sample(2, random_state=0), before)
    lf.set_params(warm_start=True, training__max_iter=2).fit(
        np.random.default_rng(0).normal(size=(30, 2))
    )
    warm = [[0.5599139219160464, 0.6915674621393443], [-0.13135040753992822, 1.3658430730782691]]
    assert lf.n_iter_ == 5
    _close_to_stored(lf.sample(2, random_state=0), warm)


def test_fit_pickle_and_prior_share_one_construction(monkeypatch):
    """``restore`` builds every fitted sampler: the end of ``fit``, unpickling and
    ``from_pretrained``; its ``(config, state)`` is the whole fitted state."""
    from skflow.samplers import learned

    calls = []
    monkeypatch.setattr(learned, "restore", lambda *a: calls.append(1) or restore(*a))
    lf = _tiny_fit()
    assert calls == [1] and lf.support_ is not None and len(lf.loss_curve_) == 3
    clone = pickle.loads(pickle.dumps(lf))
    assert calls == [1, 1]
    _same_fitted(lf, clone)
    config, state = fitted_config(lf)
    assert set(config["fitted"]) == {*FITTED, "n_features_in_"}
    _same_fitted(lf, restore(LearnedFlowSampler(**lf.get_params()), config, state))
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=3)
    assert calls == [1, 1, 1] and prior._prior == ("general-16", 16)
    params, config, state = load_prior("general-16", n_features=3)
    # the card's parameters are flat (JSON): grouped as from_pretrained groups them
    grouped = learned_params_from_flat(params)
    _same_fitted(prior, restore(LearnedFlowSampler(**grouped), config, state))
    # a prior's card keeps the model, not the run: no curves, no support
    card_config, _ = fitted_config(prior, run_record=False)
    assert set(card_config["fitted"]) == {*CARDS["general-16"]["fitted"], "n_features_in_"}


@pytest.mark.exactness
def test_pickle_of_an_older_skflow_still_loads():
    """Before the fitted state had one construction, a pickle held the network as
    ``model_ = {"__skflow_model__", "config", "state_dict"}`` beside the fitted attributes."""
    lf = _tiny_fit()
    old = {k: v for k, v in vars(lf).items() if k not in ("_warm", "_prior")}
    old["model_"] = {
        "__skflow_model__": True,
        "config": dict(lf.model_.config),
        "state_dict": {k: v.clone() for k, v in lf.model_.state_dict().items()},
    }
    clone = LearnedFlowSampler.__new__(LearnedFlowSampler)
    clone.__setstate__(old)
    _same_fitted(lf, clone)
    np.testing.assert_array_equal(clone.sample(3, random_state=0), lf.sample(3, random_state=0))


def test_shipped_files_are_package_data():
    """A non-editable install carries the weights: pyproject's package data names every
    file of skflow/priors/data (and the files the card names exist)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["skflow.priors"]
    package = root / "skflow" / "priors"
    shipped = {p for pattern in patterns for p in package.glob(pattern)}
    data = {p for p in PRIORS_DIR.iterdir() if p.suffix in (".npz", ".json")}
    assert data and data <= shipped
    for card in CARDS.values():
        assert PRIORS_DIR / card["weights_file"] in shipped


@pytest.mark.parametrize("name", NAMES)
def test_card_finetune_params_are_the_recipes(name):
    """The card says what ``from_pretrained`` sets: the recipe's fine-tuning parameters
    (``python -m skflow.priors NAME --refresh-finetune`` writes them after a change)."""
    from skflow.priors import RECIPES

    assert CARDS[name]["finetune_params"] == json.loads(json.dumps(RECIPES[name]["finetune"]))
    assert LearnedFlowSampler.from_pretrained(name).normalize == "auto"


def test_refresh_finetune_rewrites_only_the_cards_finetune_params(tmp_path, monkeypatch):
    from skflow.priors import RECIPES
    from skflow.priors.__main__ import main

    card = json.loads((PRIORS_DIR / "general-16.json").read_text())
    stale = {**card, "finetune_params": {"warm_start": True}}
    (tmp_path / "general-16.json").write_text(json.dumps(stale))
    monkeypatch.setitem(RECIPES["general-16"], "finetune", {"warm_start": True, "max_iter": 7})
    assert main(["general-16", "--refresh-finetune", "--out", str(tmp_path)]) == 0
    fresh = json.loads((tmp_path / "general-16.json").read_text())
    assert fresh == {**card, "finetune_params": {"warm_start": True, "max_iter": 7}}
    assert not list(tmp_path.glob("*.npz"))  # no weights written: nothing was trained


def test_the_sized_prior_is_the_recipe_with_the_size_embedding():
    """``general-16-sized`` changes one thing of ``general-16``: its network sees m."""
    base, sized = RECIPES["general-16"], RECIPES["general-16-sized"]
    assert {k: v for k, v in sized["sampler"].items() if k != "size_embedding"} == base["sampler"]
    assert sized["sampler"]["size_embedding"] and "size_embedding" not in base["sampler"]
    assert sized["tasks"] == base["tasks"] and sized["finetune"] == base["finetune"]
    prior = LearnedFlowSampler.from_pretrained("general-16-sized", n_features=3)
    assert prior.size_embedding and prior.model_.size_embedding
    assert CARDS["general-16-sized"]["network"]["size_embedding"] is True
    assert not LearnedFlowSampler.from_pretrained("general-16", n_features=3).model_.size_embedding
