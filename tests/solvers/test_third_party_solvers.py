"""Third-party ODE solvers on the samplers' ``velocity`` with no clamping wrapper (issue 34).

Adaptive solvers (torchdiffeq's ``dopri5``, flow_matching's ``ODESolver``) take a whole step
past ``t = 1`` and interpolate back, so they evaluate the field at ``t > 1`` (1.05 to 1.5 in
the runs of the issue). ``time_tolerance=inf`` (the default of the estimators and of
``NWField``) freezes the field at the nearest end there; the callables below only adapt the
argument order and the array type. Agreement with ``sample(noise=...)``: 1e-4 for the exact
NW flow; 5e-4 for the pretrained prior (a float32 network, integrated in float64 to
``rtol = atol = 1e-7`` by both sides; its field is rougher than the NW field).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions
from skflow.field import NWField

torchdiffeq = pytest.importorskip("torchdiffeq")

NW_TOL, PRIOR_TOL = 1e-4, 5e-4


def _as_ode(est, support=None, seen=None):
    """``f(t, x)`` for torchdiffeq: the estimator's velocity, Torch in and out."""

    def f(t, x):
        if seen is not None:
            seen.append(float(t))
        return torch.as_tensor(est.velocity(x.numpy(), float(t), support=support))

    return f


def _nw():
    S = np.random.default_rng(2).normal(size=(30, 8))
    X0 = np.random.RandomState(0).standard_normal((32, 8))
    est = NWFlowSampler(sigma_min=0.05, solver=SolverOptions("dopri5", rtol=1e-9, atol=1e-9)).fit(S)
    return est, S, X0, X0, est.sample(32, noise=X0)


def _prior():
    S = np.random.default_rng(3).normal(size=(20, 4)) * [1.0, 2.0, 0.5, 1.0] + 3.0
    X0 = np.random.RandomState(1).standard_normal((16, 4))
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=4)
    prior.set_params(solver=SolverOptions("dopri5", rtol=1e-7, atol=1e-7))
    _, path = prior.sample_trajectories(16, support=S, noise=X0, n_points=2)
    return prior, S, X0, path[0], path[-1]  # the flow starts from the noise in S's frame


def test_torchdiffeq_dopri5_on_nw_velocity_lands_where_sample_lands():
    est, _, X0, _, reference = _nw()
    seen = []
    grid = torch.tensor([0.0, 1.0], dtype=torch.float64)
    path = torchdiffeq.odeint(
        _as_ode(est, seen=seen), torch.as_tensor(X0), grid, method="dopri5", rtol=1e-9, atol=1e-9
    )
    assert max(seen) > 1.0  # the case of the issue: stages past the end
    np.testing.assert_allclose(path[-1].numpy(), reference, rtol=0, atol=NW_TOL)


def test_torchdiffeq_dopri5_on_the_prior_velocity_lands_where_sample_lands():
    prior, S, _, start, reference = _prior()
    seen = []
    grid = torch.tensor([0.0, 1.0], dtype=torch.float64)
    f = _as_ode(prior, support=S, seen=seen)
    path = torchdiffeq.odeint(
        f, torch.as_tensor(start), grid, method="dopri5", rtol=1e-7, atol=1e-7
    )
    assert max(seen) > 1.0
    np.testing.assert_allclose(path[-1].numpy(), reference, rtol=0, atol=PRIOR_TOL)


def test_nwfield_velocity_takes_dopri5_by_default_and_refuses_with_a_finite_tolerance():
    est, S, X0, _, reference = _nw()
    grid = torch.tensor([0.0, 1.0], dtype=torch.float64)
    field = NWField(torch.as_tensor(S), sigma_min=0.05)
    path = torchdiffeq.odeint(
        lambda t, x: field.velocity(x, t),
        torch.as_tensor(X0),
        grid,
        method="dopri5",
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(path[-1].numpy(), reference, rtol=0, atol=NW_TOL)
    strict = NWField(torch.as_tensor(S), sigma_min=0.05, time_tolerance=1e-6)
    with pytest.raises(ValueError, match=r"got 1\.\d+\. If .*time_tolerance"):
        torchdiffeq.odeint(
            lambda t, x: strict.velocity(x, t), torch.as_tensor(X0), grid, method="dopri5"
        )
    sampler = NWFlowSampler(sigma_min=0.05, solver=SolverOptions(time_tolerance=1e-6)).fit(S)
    with pytest.raises(
        ValueError,
        match=r"got 1\.2\. .*NWFlowSampler with solver=SolverOptions\(time_tolerance=inf\)",
    ):
        sampler.velocity(X0, 1.2)


@pytest.mark.exactness
@pytest.mark.parametrize("cls", ["nw", "prior"])
def test_frozen_extension_outside_the_interval(cls):
    """``velocity`` at ``t > 1`` is the field at 1, at ``t < 0`` the field at 0, for every
    fitted sampler and for the network itself (its ``forward``)."""
    est, S, X0, _, _ = _nw() if cls == "nw" else _prior()
    X = np.asarray(X0)[:5]
    kw = {} if cls == "nw" else {"support": S}
    for outside, end in ((1.49, 1.0), (7.0, 1.0), (-0.3, 0.0)):
        np.testing.assert_array_equal(est.velocity(X, outside, **kw), est.velocity(X, end, **kw))
    np.testing.assert_array_equal(
        est.velocity(X, [1.2, 0.5, -1.0, 1.0, 0.0], **kw),
        est.velocity(X, [1.0, 0.5, 0.0, 1.0, 0.0], **kw),
    )
    if cls == "prior":
        net = est.model_
        x = torch.as_tensor(X, dtype=torch.float32)[None]
        s = torch.as_tensor(S, dtype=torch.float32)[None]
        with torch.no_grad():
            assert torch.equal(net(x, s, 1.3), net(x, s, 1.0))
    with pytest.raises(ValueError, match="finite; got nan"):
        est.velocity(X, float("nan"), **kw)


class _Model(torch.nn.Module):
    """flow_matching's ``ModelWrapper`` interface (``forward(x, t)``) over a velocity."""

    def __init__(self, est, support=None):
        super().__init__()
        self.est, self.support = est, support

    def forward(self, x, t, **extras):
        return torch.as_tensor(self.est.velocity(x.numpy(), float(t), support=self.support))


@pytest.mark.parametrize("method", ["midpoint", "dopri5"])
@pytest.mark.parametrize("cls", ["nw", "prior"])
def test_flow_matching_ode_solver_lands_where_sample_lands(cls, method):
    pytest.importorskip("flow_matching")
    from flow_matching.solver import ODESolver

    est, S, X0, start, reference = _nw() if cls == "nw" else _prior()
    support = None if cls == "nw" else S
    solver = ODESolver(velocity_model=_Model(est, support))
    if method == "midpoint":  # the same scheme and grid as the sampler's midpoint
        est.set_params(solver=SolverOptions("midpoint", n_steps=100))
        reference = est.sample(len(X0), support=support, noise=X0)
        kw = {"step_size": 1.0 / 100}
    else:
        kw = {"step_size": None, "atol": 1e-9, "rtol": 1e-9}
    out = solver.sample(
        x_init=torch.as_tensor(start),
        method=method,
        time_grid=torch.tensor([0.0, 1.0], dtype=torch.float64),
        **kw,
    )
    tol = NW_TOL if cls == "nw" else PRIOR_TOL
    np.testing.assert_allclose(out.numpy(), reference, rtol=0, atol=tol)
