"""Tests for the meta-training loop: reproducibility under max_time, EMA, warm starts,
checkpoints, regression targets and the progress bar."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from skflow import NetworkOptions, SolverOptions, TrainingOptions
from skflow.nn.training import flow_matching_loss, sample_times, train_flow_model
from skflow.nn.transformer import CrossAttentionVelocity
from skflow.paths import OTPath
from skflow.samplers.learned import LearnedFlowSampler
from skflow.tasks import GaussianMixtureTasks, SingleDatasetTasks

SMALL = dict(
    network=NetworkOptions(d_model=16, n_heads=2, n_layers=1),
    training=TrainingOptions(max_iter=20, batch_tasks=4, support_size=8, n_targets=16),
    solver=SolverOptions(n_steps=8),
)
TRAIN = dict(
    sigma_min=0.01,
    learning_rate=1e-2,
    weight_decay=0.0,
    warmup=0,
    lr_schedule="constant",
    clip_grad=None,
    time_sampling="uniform",
)


def with_training(params, **fields):
    """``params`` with these fields of its ``training`` group replaced."""
    return {**params, "training": replace(params["training"], **fields)}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def gmm2():
    return GaussianMixtureTasks(n_features=2)


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _recording_run(n_iter, **kwargs):
    """train_flow_model on a tiny network, recording the weights before every step."""
    torch.manual_seed(0)
    model = CrossAttentionVelocity(2, d_model=8, n_heads=2, n_layers=1)
    tasks, rng = GaussianMixtureTasks(2), np.random.default_rng(0)
    seen = []

    def draw():
        seen.append([p.detach().clone() for p in model.parameters()])
        return tasks.sample_tasks(3, 6, 8, random_state=rng)

    gen = torch.Generator().manual_seed(0)
    result = train_flow_model(model, draw, max_iter=n_iter, generator=gen, **TRAIN, **kwargs)
    final = [result.state["weights"][k] for k, _ in model.named_parameters()]
    return model, seen[1:] + [final], result  # weights after steps 1 .. n_iter


# --------------------------------------------------------------------------------------------
# reproducibility
# --------------------------------------------------------------------------------------------
@pytest.mark.exactness
def test_max_time_not_reached_is_bit_identical(gmm2):
    kw = with_training(SMALL, warmup=2)  # the cosine phase is where wall-clock progress used to act
    a = LearnedFlowSampler(**kw, random_state=3).fit(gmm2)
    b = LearnedFlowSampler(**with_training(kw, max_time=600.0), random_state=3).fit(gmm2)
    assert b.n_iter_ == SMALL["training"].max_iter
    assert a.loss_curve_ == b.loss_curve_ and _same_weights(a.model_, b.model_)


# --------------------------------------------------------------------------------------------
# EMA and checkpoints
# --------------------------------------------------------------------------------------------
def test_ema_weights_are_the_documented_average():
    decay = 0.8
    model, trajectory, _ = _recording_run(12, ema_decay=decay)
    torch.manual_seed(0)
    expected = [p.detach().clone() for p in CrossAttentionVelocity(2, 8, 2, 1).parameters()]
    for k, weights in enumerate(trajectory, start=1):
        d = min(decay, (1.0 + k) / (10.0 + k))
        expected = [d * e + (1 - d) * w for e, w in zip(expected, weights, strict=True)]
    for p, e in zip(model.parameters(), expected, strict=True):
        torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=1e-6)
    raw = trajectory[-1]
    assert any(not torch.allclose(p, r) for p, r in zip(model.parameters(), raw, strict=True))


@pytest.mark.parametrize("ema_decay", [None, 0.5])
def test_checkpoint_keeps_the_sampling_weights_of_the_best_check(ema_decay):
    tasks = GaussianMixtureTasks(2)
    validation = tasks.sample_tasks(3, 6, 8, random_state=5)
    # tol huge: only the first check (after step 4) counts as an improvement
    model, trajectory, result = _recording_run(
        12, ema_decay=ema_decay, validation=validation, validation_interval=4, tol=1e9
    )
    assert result.best_iter == 4 and len(result.validation_scores) == 3
    if ema_decay is None:
        expected = trajectory[3]
    else:
        torch.manual_seed(0)
        expected = [p.detach().clone() for p in CrossAttentionVelocity(2, 8, 2, 1).parameters()]
        for k, weights in enumerate(trajectory[:4], start=1):
            d = min(ema_decay, (1.0 + k) / (10.0 + k))
            expected = [d * e + (1 - d) * w for e, w in zip(expected, weights, strict=True)]
    for p, e in zip(model.parameters(), expected, strict=True):
        torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# warm start
# --------------------------------------------------------------------------------------------
@pytest.mark.exactness
@pytest.mark.parametrize("ema_decay", [None, 0.9])
def test_warm_start_continues_the_same_run(gmm2, ema_decay):
    kw = with_training(SMALL, warmup=3, lr_schedule="constant", ema_decay=ema_decay)
    one = LearnedFlowSampler(**with_training(kw, max_iter=20), random_state=0).fit(gmm2)
    two = LearnedFlowSampler(**with_training(kw, max_iter=10), warm_start=True, random_state=0)
    two.fit(gmm2)
    first = list(two.loss_curve_)
    two.fit(gmm2)
    assert two.n_iter_ == 20 and two.loss_curve_[:10] == first
    assert two.loss_curve_ == one.loss_curve_
    assert _same_weights(one.model_, two.model_)


@pytest.mark.exactness
def test_warm_start_false_restarts_and_zero_iterations_keep_weights(gmm2):
    lf = LearnedFlowSampler(**SMALL, random_state=0).fit(gmm2)
    trained = {k: v.clone() for k, v in lf.model_.state_dict().items()}
    lf.set_params(training__max_iter=0, warm_start=True).fit(gmm2)
    assert all(torch.equal(trained[k], v) for k, v in lf.model_.state_dict().items())
    assert lf.n_iter_ == SMALL["training"].max_iter
    lf.set_params(warm_start=False).fit(gmm2)  # a fresh, untrained network
    assert lf.n_iter_ == 0 and not torch.equal(lf.model_.out.weight, trained["out.weight"])
    assert torch.count_nonzero(lf.model_.out.weight) == 0


def test_warm_start_rejects_other_features(gmm2):
    lf = LearnedFlowSampler(**SMALL, warm_start=True, random_state=0).fit(gmm2)
    with pytest.raises(ValueError, match="warm_start=True but the data have 3 features"):
        lf.fit(GaussianMixtureTasks(n_features=3))


# --------------------------------------------------------------------------------------------
# regression targets
# --------------------------------------------------------------------------------------------
def _task_batch(seed=0):
    tasks = GaussianMixtureTasks(2)
    S, Q, params = tasks.sample_tasks(4, 6, 64, random_state=seed, return_params=True)
    gen = torch.Generator().manual_seed(seed)
    x0 = torch.randn(Q.shape, generator=gen, dtype=torch.float64)
    t = sample_times(Q.shape[:2], sigma_min=0.01, method="uniform", generator=gen).double()
    return tasks, torch.as_tensor(S), torch.as_tensor(Q), params, x0, t


@pytest.mark.exactness
def test_exact_goal_is_the_population_velocity_and_lowers_the_loss():
    tasks, S, Q, params, x0, t = _task_batch()

    def exact(xt, tt):
        return torch.as_tensor(tasks.velocity(xt.numpy(), tt.numpy(), params))

    def oracle(xt, s, tt):
        return exact(xt, tt)

    assert flow_matching_loss(oracle, S, Q, x0, t, 0.01, goal=exact) == 0.0
    untrained = CrossAttentionVelocity(2, d_model=8, n_heads=2, n_layers=1).double()
    with torch.no_grad():
        cond = flow_matching_loss(untrained, S, Q, x0, t, 0.01)
        low = flow_matching_loss(untrained, S, Q, x0, t, 0.01, goal=exact)
    # E|u_cond - v|^2 = E|u_exact - v|^2 + E|u_cond - u_exact|^2: the exact target drops the
    # irreducible conditional variance
    gap = flow_matching_loss(oracle, S, Q, x0, t, 0.01)
    assert float(low) < float(cond) and float(gap) > 0.1 * float(cond - low)


def test_marginal_goal_is_the_nw_field_of_the_reference():
    from skflow.field import nw_velocity
    from skflow.nn.objective import marginal_goal

    _, _, Q, _, x0, t = _task_batch(1)
    xt = OTPath(0.01).sample_xt(x0, Q, t[..., None])
    u = marginal_goal(Q, 0.01)(xt, t)
    for b in range(Q.shape[0]):
        ref = nw_velocity(xt[b].numpy(), Q[b].numpy(), t[b].numpy(), sigma_min=0.01)
        np.testing.assert_allclose(u[b].numpy(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["exact", "marginal"])
def test_fit_with_low_variance_targets(gmm2, target):
    lf = LearnedFlowSampler(**with_training(SMALL, target=target), random_state=0).fit(gmm2)
    ref = LearnedFlowSampler(**SMALL, random_state=0).fit(gmm2)
    assert lf.n_iter_ == SMALL["training"].max_iter and np.all(np.isfinite(lf.loss_curve_))
    assert lf.loss_curve_ != ref.loss_curve_  # another regression target


def test_exact_target_needs_a_source_with_velocity():
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(ValueError, match="target='exact' needs a task source"):
        LearnedFlowSampler(**with_training(SMALL, target="exact")).fit(X)
    with pytest.raises(ValueError, match="target='exact' needs .* SingleDatasetTasks"):
        LearnedFlowSampler(**with_training(SMALL, target="exact")).fit(SingleDatasetTasks(X))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"training__target": "oracle"}, "target must be one of"),
        ({"training__ema_decay": 1.0}, r"ema_decay must be a finite real number in \(0, 1\)"),
        ({"training__ema_decay": 0.0}, r"ema_decay must be a finite real number in \(0, 1\)"),
        ({"warm_start": "yes"}, "warm_start must be a bool"),
    ],
)
def test_bad_training_options(gmm2, params, match):
    with pytest.raises(ValueError, match=match):
        LearnedFlowSampler(**SMALL).set_params(**params).fit(gmm2)


# --------------------------------------------------------------------------------------------
# progress bar
# --------------------------------------------------------------------------------------------
def test_progress_bar_when_verbose(gmm2, capsys):
    LearnedFlowSampler(
        **with_training(SMALL, validation_interval=10), verbose=1, random_state=0
    ).fit(gmm2)
    captured = capsys.readouterr()
    assert "training" in captured.err and "20/20" in captured.err  # tqdm, on stderr
    assert captured.out.count("loss") == 2  # log lines through tqdm.write, on stdout
    LearnedFlowSampler(**SMALL, random_state=0).fit(gmm2)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


# --------------------------------------------------------------------------------------------
# torch.compile
# --------------------------------------------------------------------------------------------
class _CountingBackend:
    """A ``torch.compile`` backend that runs each captured graph as is and counts them: a
    graph captured after the first step is a recompilation."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def test_compiled_training_compiles_once_for_every_support():
    """The exact head's field reads host numbers of each new support (float32 precision
    check, time range): it runs outside the compiled graph, so new supports neither break
    the graph nor recompile it (on CUDA the recompilations hit dynamo's limit; GPU run 2)."""
    backend, graphs_before_step = _CountingBackend(), []
    torch.manual_seed(0)
    model = CrossAttentionVelocity(2, d_model=8, n_heads=2, n_layers=1)
    tasks, rng = GaussianMixtureTasks(2), np.random.default_rng(0)

    def draw():
        graphs_before_step.append(backend.graphs)
        return tasks.sample_tasks(3, 6, 8, random_state=rng)

    compiled = torch.compile(model, backend=backend)
    gen = torch.Generator().manual_seed(0)
    result = train_flow_model(model, draw, max_iter=8, generator=gen, forward=compiled, **TRAIN)
    assert next(model.parameters()).dtype == torch.float32  # the precision check's dtype
    assert graphs_before_step[1] > 0 and len(set(graphs_before_step[1:])) == 1
    # the same run without compiling gives the same losses
    torch.manual_seed(0)
    eager_model = CrossAttentionVelocity(2, d_model=8, n_heads=2, n_layers=1)
    rng = np.random.default_rng(0)
    eager = train_flow_model(
        eager_model,
        lambda: tasks.sample_tasks(3, 6, 8, random_state=rng),
        max_iter=8,
        generator=torch.Generator().manual_seed(0),
        **TRAIN,
    )
    np.testing.assert_allclose(result.loss_curve, eager.loss_curve, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# the initial weights as an early-stopping candidate
# --------------------------------------------------------------------------------------------
@pytest.mark.exactness
@pytest.mark.parametrize("score_initial", [True, False])
def test_score_initial_keeps_the_untrained_weights_when_training_only_hurts(score_initial):
    """A learning rate that wrecks the model: with ``score_initial`` the weights before the
    first step (iteration 0) validate best and come back; without it a trained check wins."""
    torch.manual_seed(0)
    model = CrossAttentionVelocity(2, d_model=8, n_heads=2, n_layers=1)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    tasks, rng = GaussianMixtureTasks(2), np.random.default_rng(0)
    validation = tasks.sample_tasks(4, 6, 8, random_state=1)
    wreck = {**TRAIN, "learning_rate": 30.0}
    result = train_flow_model(
        model,
        lambda: tasks.sample_tasks(3, 6, 8, random_state=rng),
        max_iter=6,
        generator=torch.Generator().manual_seed(0),
        validation=validation,
        validation_interval=2,
        score_initial=score_initial,
        **wreck,
    )
    n_checks = 3 + int(score_initial)
    assert len(result.validation_scores) == n_checks
    kept = all(torch.equal(model.state_dict()[k], v) for k, v in initial.items())
    assert kept == score_initial
    assert (result.best_iter == 0) == score_initial
    assert result.best_validation_score == max(result.validation_scores)


def test_the_progress_bar_names_the_training_cap():
    """A training with a wall-clock cap names it in the bar, to 3 significant digits (the
    cap of one training is often a share of ``max_time``, e.g. 0.491836 s)."""
    from skflow.nn.training import _progress_bar

    bar = _progress_bar(1, None, 0.491836)(10)
    try:
        assert bar.desc.startswith("training (max_time 0.492 s)")
    finally:
        bar.close()
    plain = _progress_bar(1, None)(10)
    try:
        assert plain.desc.startswith("training") and "max_time" not in plain.desc
    finally:
        plain.close()


# --------------------------------------------------------------------------------------------
# max_time: the whole run, its initial and final checks included, within the budget
# --------------------------------------------------------------------------------------------
class _Clock:
    """A clock that moves only when the model is scored: one second per loss evaluation
    (a training step or a validation batch); reading it costs nothing."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


@pytest.mark.parametrize("max_time", [9.0, 10.0, 11.0, 12.0])
def test_a_run_stopped_by_max_time_ends_within_it_checks_included(monkeypatch, max_time):
    """A run with an initial check and, stopped between two checks, a final one keeps both
    inside ``max_time``: the loop stops a check's duration early."""
    from skflow.nn import training

    clock, loss = _Clock(), training.flow_matching_loss

    def timed_loss(*args, **kwargs):
        clock.now += 1.0
        return loss(*args, **kwargs)

    monkeypatch.setattr(training, "time", clock)
    monkeypatch.setattr(training, "flow_matching_loss", timed_loss)
    model = CrossAttentionVelocity(2, d_model=8, n_heads=2, n_layers=1)
    tasks, rng = GaussianMixtureTasks(2), np.random.default_rng(0)
    result = train_flow_model(
        model,
        lambda: tasks.sample_tasks(3, 6, 8, random_state=rng),
        max_iter=100,
        generator=torch.Generator().manual_seed(0),
        validation=tasks.sample_tasks(4, 6, 8, random_state=1),
        validation_interval=3,
        score_initial=True,
        max_time=max_time,
        **TRAIN,
    )
    assert result.stop_reason == "max_time" and 0 < result.n_iter < 100
    assert clock.now <= max_time and result.elapsed == clock.now
    assert clock.now > max_time - 2  # and no earlier than a step and a check require
