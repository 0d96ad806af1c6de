"""Weights and model cards of the priors shipped with skflow (data only).

Every prior ``NAME`` is two files: ``NAME.npz`` (the network's float32 ``state_dict``) and
``NAME.json`` (its model card: the network and estimator parameters, the SHA-256 of the
weights, the training command, budget, machine and curves). Load one with
:meth:`skflow.LearnedFlowSampler.from_pretrained`; list them with
:meth:`skflow.LearnedFlowSampler.pretrained_models`; train or extend one with
``python -m skflow.pretrain NAME``.

Examples
--------
>>> from skflow import LearnedFlowSampler
>>> card = LearnedFlowSampler.pretrained_models()["general-16"]
>>> card["weights_file"], card["network"]["n_features"]
('general-16.npz', 16)
"""
