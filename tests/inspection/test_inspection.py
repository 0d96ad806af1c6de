"""Tests of skflow.inspection: recording attention calls and their NW correspondence."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import pearsonr, spearmanr

from skflow.inspection import (
    AttentionRecorder,
    NWCorrespondence,
    attention_weights,
    nw_correspondence,
    plot_nw_correspondence,
)

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


class SDPAModule(torch.nn.Module):
    """Hand-written multi-head attention through F.scaled_dot_product_attention.

    Keeps the q, k it passes to SDPA (the "hook placed by hand").
    """

    def __init__(self, d_model=12, n_heads=3, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.n_heads = n_heads
        self.wq = torch.nn.Parameter(torch.randn(d_model, d_model, generator=g) / d_model**0.5)
        self.wk = torch.nn.Parameter(torch.randn(d_model, d_model, generator=g) / d_model**0.5)
        self.last = None

    def _split(self, a):
        B, L, D = a.shape
        return a.view(B, L, self.n_heads, D // self.n_heads).transpose(1, 2)

    def forward(self, x, y, attn_mask=None, is_causal=False):
        q, k = self._split(x @ self.wq), self._split(y @ self.wk)
        self.last = (q.detach().clone(), k.detach().clone())
        o = F.scaled_dot_product_attention(q, k, k, attn_mask=attn_mask, is_causal=is_causal)
        return o.transpose(1, 2).reshape(x.shape)


class QKModule(torch.nn.Module):
    """SDPA on given q, k (values = k): the inspected attention is exactly what is passed."""

    def forward(self, q, k, attn_mask=None, scale=None):
        return F.scaled_dot_product_attention(q, k, k, attn_mask=attn_mask, scale=scale)


class Stack(torch.nn.Module):
    def __init__(self, n_layers=12, d_model=8, n_heads=2):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            SDPAModule(d_model, n_heads, seed=i) for i in range(n_layers)
        )

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x, x)
        return x


def no_hooks_left(model):  # per-module and global hooks, and the mode
    return (
        all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())
        and not torch.nn.modules.module._global_forward_pre_hooks
        and not torch.nn.modules.module._global_forward_hooks
        and torch._C._len_torch_function_stack() == 0
    )


# --------------------------------------------------------------------------------------------
# analysis: exact NW heads and the hand computation
# --------------------------------------------------------------------------------------------


def test_equal_norm_keys_give_rho_one_for_every_head():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 16, 6, generator=g, dtype=torch.float64)
    k = 1.7 * F.normalize(torch.randn(2, 4, 10, 6, generator=g, dtype=torch.float64), dim=-1)
    model = QKModule()
    with AttentionRecorder(model) as rec:
        model(q, k, scale=0.8)
    res = nw_correspondence(rec)
    assert len(res) == 4 and res.head.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(res.spearman, 1.0, atol=1e-12)
    np.testing.assert_allclose(res.pearson, 1.0, atol=1e-12)
    np.testing.assert_allclose(res.key_norm_dispersion, 0.0, atol=1e-12)
    assert res.fraction_nw_like()[1].tolist() == [1.0]


def hand_correspondence(q, k, scale, mask=None):
    """Per head: median Spearman/Pearson over rows and the key-norm dispersion, by hand."""
    q, k = q.numpy().astype(np.float64), k.numpy().astype(np.float64)
    B, H = q.shape[:2]
    out = []
    for h in range(H):
        rho, r = [], []
        for b in range(B):
            for j in range(q.shape[2]):
                model = scale * (k[b, h] @ q[b, h, j])
                nw = -np.sum((q[b, h, j] - k[b, h]) ** 2, axis=1) / (2.0 * (1 / scale**0.5) ** 2)
                if mask is not None:  # only the keys the row sees are compared
                    keep = mask[j] if mask.ndim == 2 else mask[b, h, j]
                    model, nw = model[keep], nw[keep]
                rho.append(spearmanr(model, nw).statistic)
                a, w = np.exp(model - model.max()), np.exp(nw - nw.max())
                r.append(pearsonr(a / a.sum(), w / w.sum()).statistic)
        norms = 0.5 * scale * np.sum(k[:, h] ** 2, axis=-1)  # (B, S)
        if mask is not None:  # keys that no row sees are left out
            used = mask.any(axis=-2) if mask.ndim == 2 else mask[:, h].any(axis=-2)
            norms = np.where(used, norms, np.nan)
        out.append((np.median(rho), np.median(r), np.nanstd(norms, axis=-1).mean()))
    return np.array(out)


@pytest.mark.parametrize("masked", [False, True])
def test_spread_key_norms_match_the_hand_computation(masked):
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 3, 9, 5, generator=g, dtype=torch.float64)
    radii = torch.linspace(0.3, 2.5, 11, dtype=torch.float64)[:, None]
    k = radii * F.normalize(torch.randn(2, 3, 11, 5, generator=g, dtype=torch.float64), dim=-1)
    mask = torch.rand(9, 11, generator=g) > 0.3 if masked else None
    if masked:
        mask[:, 0] = True  # every row keeps a key
    model = QKModule()
    with AttentionRecorder(model) as rec:
        model(q, k, attn_mask=mask, scale=0.6)
    res = nw_correspondence(rec)
    expected = hand_correspondence(q, k, 0.6, None if mask is None else mask.numpy())
    np.testing.assert_allclose(res.spearman, expected[:, 0], rtol=1e-10)
    np.testing.assert_allclose(res.pearson, expected[:, 1], rtol=1e-10)
    np.testing.assert_allclose(res.key_norm_dispersion, expected[:, 2], rtol=1e-10)
    assert np.all(res.spearman < 0.999)  # the spread norms do separate the two
    assert (res.n_rows == 18).all()


LENGTHS = (5, 3, 7)  # a padded batch: the shorter sequences carry garbage after their end


def _padding_mask(kind, valid, causal):
    """(B, 1, L, L) mask of a padded batch, encoded as ``kind`` (keys allowed: ``valid``)."""
    allowed = valid[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(valid.shape[1], valid.shape[1], dtype=bool).tril()
    if kind == "bool":
        return allowed
    masked = {"-inf": -math.inf, "-1e4": -1e4}[kind]
    return torch.where(allowed, 0.0, masked).to(torch.float64)


def _batch_and_singles(model, x, mask, forward_single):
    with AttentionRecorder(model) as batched:
        model(*x, attn_mask=mask)
    with AttentionRecorder(model) as singles:
        for b, n in enumerate(LENGTHS):
            forward_single(b, n)
    return nw_correspondence(batched), nw_correspondence(singles)


def _assert_same_as_one_at_a_time(batch, singles, n_rows_per_item, padded_queries):
    """Per head: the batch's rows are the single runs' rows (padding rows NaN), and so are its
    median, row count and key-norm dispersion (mean over the batch items)."""
    H = len(batch)  # one batch record, so one entry per head
    for h in range(H):
        rows = batch.row_spearman[h].reshape(len(LENGTHS), n_rows_per_item)
        pooled = []
        for b in range(len(LENGTHS)):
            single = singles.row_spearman[b * H + h]
            np.testing.assert_allclose(rows[b, : len(single)], single, rtol=1e-9, atol=1e-12)
            assert np.isnan(rows[b, len(single) :]).all()  # the padding's query rows
            pooled.append(single)
        pooled = np.concatenate(pooled)
        assert batch.spearman[h] == pytest.approx(np.nanmedian(pooled), abs=1e-12)
        assert batch.n_rows[h] == np.isfinite(pooled).sum()
        dispersion = np.mean(singles.key_norm_dispersion[h::H])
        assert batch.key_norm_dispersion[h] == pytest.approx(dispersion, rel=1e-12)
    if padded_queries:
        assert (batch.n_rows < len(LENGTHS) * n_rows_per_item).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["bool", "-inf", "-1e4"])
def test_padded_self_attention_batch_equals_one_sentence_at_a_time(kind, causal):
    g = torch.Generator().manual_seed(11)
    model = SDPAModule(d_model=12, n_heads=3, seed=4).double()
    L = max(LENGTHS)
    x = torch.randn(len(LENGTHS), L, 12, generator=g, dtype=torch.float64)
    valid = torch.arange(L)[None, :] < torch.tensor(LENGTHS)[:, None]
    mask = _padding_mask(kind, valid, causal)

    def forward_single(b, n):
        tril = torch.ones(n, n, dtype=bool).tril() if causal else None
        model(x[b : b + 1, :n], x[b : b + 1, :n], attn_mask=tril)

    batch, singles = _batch_and_singles(model, (x, x), mask, forward_single)
    _assert_same_as_one_at_a_time(batch, singles, L, padded_queries=True)
    # Pearson (of the weights) too: one padded sequence against the same sequence unpadded
    with AttentionRecorder(model) as padded:
        model(x[1:2], x[1:2], attn_mask=mask[1:2])
    with AttentionRecorder(model) as unpadded:
        forward_single(1, LENGTHS[1])
    padded, unpadded = nw_correspondence(padded), nw_correspondence(unpadded)
    np.testing.assert_allclose(padded.pearson, unpadded.pearson, rtol=1e-9)
    np.testing.assert_allclose(padded.spearman, unpadded.spearman, rtol=1e-9)


@pytest.mark.parametrize("kind", ["bool", "-inf", "-1e4"])
def test_padded_cross_attention_keys_equal_unpadded_keys(kind):
    # diffusers-style: every query (image token) is real, the keys (text tokens) are padded
    g = torch.Generator().manual_seed(12)
    model = SDPAModule(d_model=12, n_heads=3, seed=5).double()
    L = max(LENGTHS)
    x = torch.randn(len(LENGTHS), 6, 12, generator=g, dtype=torch.float64)
    y = torch.randn(len(LENGTHS), L, 12, generator=g, dtype=torch.float64)
    valid = torch.arange(L)[None, :] < torch.tensor(LENGTHS)[:, None]
    mask = _padding_mask(kind, valid, causal=False).expand(-1, 1, 6, -1)
    batch, singles = _batch_and_singles(
        model, (x, y), mask, lambda b, n: model(x[b : b + 1], y[b : b + 1, :n])
    )
    _assert_same_as_one_at_a_time(batch, singles, 6, padded_queries=False)
    np.testing.assert_array_equal(batch.n_rows, 6 * len(LENGTHS))


def test_tidy_structure_and_grouping():
    g = torch.Generator().manual_seed(3)
    model = QKModule()
    with AttentionRecorder(model) as rec:
        for step in range(3):  # sharper keys at later steps: equal norms at the last
            k = torch.randn(1, 2, 8, 4, generator=g)
            k = F.normalize(k, dim=-1) if step == 2 else k * (1 + step)
            model(torch.randn(1, 2, 6, 4, generator=g), k)
    res = nw_correspondence(rec, threshold=0.9)
    rows = res.to_records()
    assert len(rows) == 6 and set(rows[0]) >= {"module", "step", "head", "spearman"}
    assert [r["step"] for r in rows] == [0, 0, 1, 1, 2, 2]
    steps, frac = res.fraction_nw_like("step")
    assert steps.tolist() == [0, 1, 2]
    for s, f in zip(steps, frac, strict=True):
        assert f == np.mean(res.spearman[res.step == s] > 0.9)
    assert frac[-1] == 1.0
    _, med = res.median_by("step")
    assert med[-1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="by must be one of"):
        res.fraction_nw_like("layer")


# --------------------------------------------------------------------------------------------
# recording: same q, k as hooks placed by hand; outputs unchanged
# --------------------------------------------------------------------------------------------


@pytest.mark.exactness
def test_hand_written_sdpa_module_records_its_q_k_exactly():
    m = SDPAModule()
    x, y = torch.randn(2, 7, 12), torch.randn(2, 5, 12)
    out0 = m(x, y)
    with AttentionRecorder(m) as rec:
        out1 = m(x, y)
    assert torch.equal(out0, out1)
    (r,) = rec.records_
    q, k = m.last
    assert r.module == "" and r.kind == "sdpa" and r.scale == pytest.approx(1 / 2.0)
    assert np.array_equal(r.q, q.numpy()) and np.array_equal(r.k, k.numpy())
    assert r.v is None and r.mask is None


def hand_mha_qk(mha, query, key):
    """q, k of nn.MultiheadAttention from its in-projection, written out by hand."""
    if not mha.batch_first:
        query, key = query.transpose(0, 1), key.transpose(0, 1)
    E, H = mha.embed_dim, mha.num_heads
    W, b = mha.in_proj_weight.detach(), mha.in_proj_bias.detach()
    q = query @ W[:E].T + b[:E]
    k = key @ W[E : 2 * E].T + b[E : 2 * E]

    def split(a):
        return a.reshape(a.shape[0], a.shape[1], H, E // H).permute(0, 2, 1, 3).numpy()

    return split(q), split(k)


@pytest.mark.exactness
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("grad", [True, False])
def test_multihead_attention_records_in_projection(batch_first, need_weights, grad):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first).eval()
    x = torch.randn(3, 5, 8) if batch_first else torch.randn(5, 3, 8)
    y = torch.randn(3, 7, 8) if batch_first else torch.randn(7, 3, 8)
    with torch.set_grad_enabled(grad):
        for query, key in ((x, x), (x, y)):  # self-attention takes the fused fast path
            out0, w0 = mha(query, key, key, need_weights=need_weights, average_attn_weights=False)
            with AttentionRecorder(mha) as rec:
                out1, w1 = mha(
                    query, key, key, need_weights=need_weights, average_attn_weights=False
                )
            assert torch.equal(out0, out1)
            (r,) = rec.records_
            q, k = hand_mha_qk(mha, query, key)
            np.testing.assert_allclose(r.q, q, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(r.k, k, rtol=1e-6, atol=1e-6)
            if need_weights:  # the module's own per-head weights, an independent check
                np.testing.assert_allclose(r.weights(), w1.detach().numpy(), atol=1e-6)
    assert no_hooks_left(mha)


def test_multihead_attention_masks_match_its_weights():
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, add_bias_kv=True).eval()
    x, y = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    kpm = torch.tensor([[False] * 5 + [True], [False] * 6])
    am = torch.zeros(4, 6, dtype=torch.bool)
    am[0, 2] = True
    with AttentionRecorder(mha) as rec:
        _, w = mha(x, y, y, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
    np.testing.assert_allclose(rec.records_[0].weights(), w.detach().numpy(), atol=1e-6)
    assert rec.records_[0].k.shape == (2, 2, 7, 4)  # the bias_k key is appended


@pytest.mark.parametrize("unbatched", [False, True])
def test_multihead_attention_separate_projections_and_unbatched(unbatched):
    torch.manual_seed(3)
    mha = torch.nn.MultiheadAttention(8, 4, kdim=6, vdim=5, batch_first=False)
    x, y, z = torch.randn(4, 2, 8), torch.randn(7, 2, 6), torch.randn(7, 2, 5)
    if unbatched:
        x, y, z = x[:, 0], y[:, 0], z[:, 0]
    with AttentionRecorder(mha) as rec:
        _, w = mha(x, y, z, average_attn_weights=False)
    w = w.detach().numpy()
    np.testing.assert_allclose(rec.records_[0].weights(), w[None] if unbatched else w, atol=1e-6)


@pytest.mark.exactness
def test_transformer_decoder_matches_hand_hooks_and_output():
    torch.manual_seed(2)
    layer = torch.nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    dec = torch.nn.TransformerDecoder(layer, num_layers=2).eval()
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 9, 16)
    hand = []

    def grab(name):
        def hook(module, args, kwargs):
            query, key = (list(args) + [kwargs.get("query"), kwargs.get("key")])[:2]
            hand.append((name, *hand_mha_qk(module, query.detach(), key.detach())))

        return hook

    handles = [
        mod.register_forward_pre_hook(grab(name), with_kwargs=True)
        for name, mod in dec.named_modules()
        if isinstance(mod, torch.nn.MultiheadAttention)
    ]
    with torch.no_grad():
        out0 = dec(x, mem)
    for h in handles:
        h.remove()
    with torch.no_grad(), AttentionRecorder(dec) as rec:
        out1 = dec(x, mem)
    assert torch.equal(out0, out1)
    assert (
        [r.module for r in rec.records_]
        == [name for name, _, _ in hand]
        == [
            "layers.0.self_attn",
            "layers.0.multihead_attn",
            "layers.1.self_attn",
            "layers.1.multihead_attn",
        ]
    )
    for r, (_, q, k) in zip(rec.records_, hand, strict=True):
        np.testing.assert_allclose(r.q, q, atol=1e-6)
        np.testing.assert_allclose(r.k, k, atol=1e-6)


def test_sdpa_after_multihead_attention_is_still_seen():
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = torch.nn.MultiheadAttention(12, 3, batch_first=True)
            self.sdpa = SDPAModule()

        def forward(self, x):
            return self.sdpa(self.mha(x, x, x)[0], x)

    m = Mixed().eval()
    with torch.no_grad(), AttentionRecorder(m) as rec:
        m(torch.randn(2, 4, 12))
        m(torch.randn(2, 4, 12))
    assert [(r.module, r.kind, r.step) for r in rec.records_] == [
        ("mha", "multihead_attention", 0),
        ("sdpa", "sdpa", 0),
        ("mha", "multihead_attention", 1),
        ("sdpa", "sdpa", 1),
    ]


@pytest.mark.exactness
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_transformer_encoder_fast_paths_are_kept(norm_first, padding, grad):
    """Eval mode without autograd: fused encoder-layer kernel (and nested tensors with padding)."""
    torch.manual_seed(6)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=norm_first)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=not norm_first).eval()
    x = torch.randn(3, 9, 16)
    kpm = None
    if padding:
        kpm = torch.zeros(3, 9, dtype=torch.bool)
        kpm[0, -4:], kpm[1, -2:] = True, True
    with torch.set_grad_enabled(grad):
        out0 = enc(x, src_key_padding_mask=kpm)
        with AttentionRecorder(enc) as rec:
            out1 = enc(x, src_key_padding_mask=kpm)
    assert torch.equal(out0, out1)
    assert [r.module for r in rec.records_] == ["layers.0.self_attn", "layers.1.self_attn"]
    first = enc.layers[0]
    with torch.no_grad():  # reference: the self-attention's own weights on the layer input
        a = first.norm1(x) if norm_first else x
        _, w = first.self_attn(a, a, a, key_padding_mask=kpm, average_attn_weights=False)
    got, w = rec.records_[0].weights(), w.numpy()
    valid = np.ones((3, 9), bool) if kpm is None else ~kpm.numpy()
    for b in range(3):  # padded rows may be cut off (nested tensors): compare the real ones
        n = valid[b].sum()
        np.testing.assert_allclose(got[b, :, :n, :n], w[b, :, :n, :n], atol=1e-6)
        assert np.all(got[b, :, :n, n:] == 0)
    assert no_hooks_left(enc)


@pytest.mark.parametrize("variant", ["causal", "bool_mask", "float_mask", "gqa"])
def test_sdpa_variants_weights_reproduce_the_output(variant):
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 4, 6, 8, generator=g, dtype=torch.float64)
    k = torch.randn(2, 2 if variant == "gqa" else 4, 6, 8, generator=g, dtype=torch.float64)
    v = torch.randn(k.shape, generator=g, dtype=torch.float64)
    kw = {
        "causal": {"is_causal": True},
        "bool_mask": {"attn_mask": torch.rand(6, 6, generator=g) > 0.2},
        "float_mask": {"attn_mask": torch.randn(2, 1, 6, 6, generator=g, dtype=torch.float64)},
        "gqa": {"enable_gqa": True},
    }[variant]
    if variant == "bool_mask":
        kw["attn_mask"][:, 0] = True

    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, **kw)

    m = Attn()
    with AttentionRecorder(m, record_values=True) as rec:
        out = m(q, k, v)
    (r,) = rec.records_
    assert r.k.shape == r.v.shape == (2, 4, 6, 8)
    np.testing.assert_allclose(r.weights() @ r.v, out.numpy(), atol=1e-12)


# --------------------------------------------------------------------------------------------
# filters and memory
# --------------------------------------------------------------------------------------------


def test_one_layer_of_twelve_keeps_only_that_layers_tensors():
    model = Stack(n_layers=12)
    x = torch.randn(2, 10, 8)
    with AttentionRecorder(model, modules="layers.7") as rec:
        model(x)
        model(x)
    assert [(r.module, r.step) for r in rec.records_] == [("layers.7", 0), ("layers.7", 1)]
    arrays = [a for r in rec.records_ for a in (r.q, r.k, r.v, r.mask) if isinstance(a, np.ndarray)]
    assert len(arrays) == 4  # q and k of the two calls, nothing else
    assert sum(a.nbytes for a in arrays) == 2 * 2 * (2 * 2 * 10 * 4) * 4
    assert rec.calls_seen_ == {f"layers.{i}": 2 for i in range(12)}


@pytest.mark.exactness
def test_heads_queries_steps_and_calls_filters():
    model = Stack(n_layers=3)
    x = torch.randn(1, 20, 8)
    with AttentionRecorder(
        model, modules=["layers.[02]"], steps=[1, 2], heads=1, max_queries=5, random_state=0
    ) as rec:
        for _ in range(3):
            model(x)
    assert [(r.module, r.step) for r in rec.records_] == [
        ("layers.0", 1),
        ("layers.2", 1),
        ("layers.0", 2),
        ("layers.2", 2),
    ]
    r = rec.records_[0]
    assert r.heads.tolist() == [1] and r.q.shape == (1, 1, 5, 4) and r.k.shape == (1, 1, 20, 4)
    q_full = model.layers[2].last[0][:, 1:2].numpy()
    last = rec.records_[-1]
    assert np.array_equal(last.q, q_full[:, :, last.query_index])
    assert len(set(last.query_index.tolist())) == 5
    with AttentionRecorder(model, modules="layers.1", calls=[0, 2]) as rec2:
        for _ in range(3):
            model(x)
    assert [r.call for r in rec2.records_] == [0, 2]


def test_query_subsample_is_seeded():
    model = SDPAModule(n_heads=1)
    x = torch.randn(1, 50, 12)

    def rows(seed):
        with AttentionRecorder(model, max_queries=6, random_state=seed) as rec:
            model(x, x)
        return rec.records_[0].query_index.tolist()

    assert rows(0) == rows(0)
    assert rows(0) != rows(1)


def test_positions_of_two_calls_in_one_forward_and_attention_weights():
    class TwoCalls(torch.nn.Module):
        def forward(self, q, k1, k2):
            return F.scaled_dot_product_attention(q, k1, k1) + F.scaled_dot_product_attention(
                q, k2, k2
            )

    m = TwoCalls()
    q, k1, k2 = torch.randn(1, 2, 4, 3), torch.randn(1, 2, 5, 3), torch.randn(1, 2, 6, 3)
    with AttentionRecorder(m) as rec:
        m(q, k1, k2)
    assert [(r.call, r.position) for r in rec.records_] == [(0, 0), (1, 1)]
    with pytest.raises(ValueError, match="differ in batch, heads or keys"):
        attention_weights(rec, "")
    with pytest.raises(ValueError, match="no record of module"):
        attention_weights(rec, "nope")


# --------------------------------------------------------------------------------------------
# errors and clean-up
# --------------------------------------------------------------------------------------------


def test_module_without_attention_call_raises_clear_error():
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with pytest.raises(ValueError, match="no attention call was made inside Sequential"):
        with AttentionRecorder(mlp):
            mlp(torch.randn(2, 4))
    assert no_hooks_left(mlp)


def test_filters_that_exclude_everything_say_what_was_seen():
    model = Stack(n_layers=2)
    with pytest.raises(ValueError, match=r"none of the attention calls .* 'layers.0' \(1\)"):
        with AttentionRecorder(model, modules="layers.1", steps=5):
            model(torch.randn(1, 3, 8))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"modules": "decoder.*"}, "matches no module"),
        ({"modules": []}, "modules must be None"),
        ({"steps": -1}, "steps must be None"),
        ({"calls": "0"}, "calls must be None"),
        ({"max_queries": 0}, "max_queries must be None or a positive int"),
        ({"record_values": 1}, "record_values must be a bool"),
    ],
)
def test_invalid_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        with AttentionRecorder(Stack(n_layers=1), **kwargs):
            pass


def test_head_out_of_range_and_non_module():
    m = SDPAModule(n_heads=3)
    with pytest.raises(ValueError, match="has 3 heads"):
        with AttentionRecorder(m, heads=[0, 3]):
            m(torch.randn(1, 2, 12), torch.randn(1, 2, 12))
    assert no_hooks_left(m)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        with AttentionRecorder(lambda x: x):
            pass


def test_nothing_left_behind_after_an_exception_inside_multihead_attention():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    with pytest.raises((RuntimeError, AssertionError), match="shape"):
        with AttentionRecorder(mha):
            mha(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 5, 8))  # bad shapes
    assert no_hooks_left(mha)
    x = torch.randn(1, 3, 8)
    mha.eval()
    with torch.no_grad():  # the mode is gone: has_torch_function is False again
        assert not torch.overrides.has_torch_function((x,))


def test_nw_correspondence_validation():
    with pytest.raises(ValueError, match="recording is empty"):
        nw_correspondence([])
    with pytest.raises(ValueError, match="threshold must be a real number"):
        nw_correspondence([], threshold="high")


def test_plot_returns_two_panels():
    import matplotlib

    matplotlib.use("Agg")
    model = QKModule()
    with AttentionRecorder(model) as rec:
        for _ in range(2):
            model(torch.randn(1, 2, 5, 3), torch.randn(1, 2, 6, 3))
    res = nw_correspondence(rec)
    fig = plot_nw_correspondence(res, x=[0.5, 1.0], xlabel="t")
    assert len(fig.axes) == 2 and fig.axes[1].get_xlabel() == "t"
    np.testing.assert_allclose(fig.axes[1].lines[0].get_ydata(), res.fraction_nw_like()[1])
    with pytest.raises(ValueError, match="one value per step"):
        plot_nw_correspondence(res, x=[1.0])
    assert isinstance(res, NWCorrespondence)


# --------------------------------------------------------------------------------------------
# skflow's learned model: the inspector reproduces LearnedFlowSampler.attention_weights
# --------------------------------------------------------------------------------------------


def test_learned_sampler_attention_through_the_inspector():
    from skflow import LearnedFlowSampler, NetworkOptions, SolverOptions, TrainingOptions
    from skflow.tasks import GaussianMixtureTasks

    tasks = GaussianMixtureTasks(n_features=2)
    lf = LearnedFlowSampler(
        NetworkOptions(d_model=16, n_heads=2, n_layers=2, exact_head=True),
        training=TrainingOptions(max_iter=3, batch_tasks=4, support_size=12, n_targets=8),
        solver=SolverOptions(n_steps=5),
        random_state=0,
    ).fit(tasks)
    S, X = tasks.sample_task(12, 9, random_state=1)
    expected = lf.attention_weights(X, 0.7, support=S)  # (L, H, n, m), explicit softmax
    with AttentionRecorder(lf.model_, modules="blocks.*.attn") as rec:
        lf.velocity(X, 0.7, support=S)
    got = np.stack([attention_weights(rec, f"blocks.{i}.attn")[0] for i in range(2)])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert "head" in rec.calls_seen_  # the exact NW head's own SDPA call, filtered out


# --------------------------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------------------------


@pytest.mark.exactness
@CUDA
@pytest.mark.cuda
def test_cuda_recording_matches_cpu():
    torch.manual_seed(5)
    dec = torch.nn.TransformerDecoder(
        torch.nn.TransformerDecoderLayer(16, 4, 32, batch_first=True), 2
    ).eval()
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 9, 16)
    with torch.no_grad(), AttentionRecorder(dec, heads=[0, 2], max_queries=3, random_state=0) as a:
        dec(x, mem)
    dec_c = dec.cuda()
    with torch.no_grad():
        out0 = dec_c(x.cuda(), mem.cuda())
        with AttentionRecorder(dec_c, heads=[0, 2], max_queries=3, random_state=0) as b:
            out1 = dec_c(x.cuda(), mem.cuda())
    assert torch.equal(out0, out1)
    for r_cpu, r_gpu in zip(a.records_, b.records_, strict=True):
        assert isinstance(r_gpu.q, np.ndarray)
        assert np.array_equal(r_cpu.query_index, r_gpu.query_index)
        np.testing.assert_allclose(r_gpu.q, r_cpu.q, atol=1e-4)
        np.testing.assert_allclose(r_gpu.k, r_cpu.k, atol=1e-4)
    res = nw_correspondence(b)
    assert np.isfinite(res.spearman).all() and not math.isnan(res.pearson[0])


# --------------------------------------------------------------------------------------------
# diffusers (optional extra "inspect"): a tiny random UNet with IP-Adapter processors
# --------------------------------------------------------------------------------------------


def tiny_ip_adapter_unet():
    """A randomly initialised UNet2DConditionModel with IP-Adapter attention processors."""
    from diffusers import UNet2DConditionModel
    from diffusers.models.attention_processor import AttnProcessor2_0, IPAdapterAttnProcessor2_0
    from diffusers.models.embeddings import ImageProjection, MultiIPAdapterImageProjection

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=8,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        norm_num_groups=8,
    ).eval()
    widths = {"down_blocks.0": 32, "mid_block": 64, "up_blocks.1": 32}
    procs = {}
    for name in unet.attn_processors:
        if name.endswith("attn1.processor"):
            procs[name] = AttnProcessor2_0()
        else:
            width = next(w for prefix, w in widths.items() if name.startswith(prefix))
            procs[name] = IPAdapterAttnProcessor2_0(width, cross_attention_dim=32, num_tokens=(4,))
    unet.set_attn_processor(procs)
    unet.encoder_hid_proj = MultiIPAdapterImageProjection(
        [ImageProjection(cross_attention_dim=32, image_embed_dim=16, num_image_text_embeds=4)]
    )
    unet.config.encoder_hid_dim_type = "ip_image_proj"
    return unet


@pytest.mark.exactness
def test_diffusers_ip_adapter_unet_end_to_end():
    pytest.importorskip("diffusers")
    unet = tiny_ip_adapter_unet()
    x, text, image = torch.randn(1, 4, 8, 8), torch.randn(1, 5, 32), [torch.randn(1, 1, 16)]
    tokens = []
    unet.encoder_hid_proj.register_forward_hook(lambda m, a, out: tokens.append(out[0]))

    def denoise():
        for step in (999, 500, 1):
            unet(x, step, encoder_hidden_states=text, added_cond_kwargs={"image_embeds": image})

    with torch.no_grad():
        out0 = unet(x, 10, encoder_hidden_states=text, added_cond_kwargs={"image_embeds": image})
        with AttentionRecorder(unet, modules="*attn2", heads=[0, 1]) as rec:
            out1 = unet(
                x, 10, encoder_hidden_states=text, added_cond_kwargs={"image_embeds": image}
            )
        with AttentionRecorder(unet, modules="mid_block.*attn2") as rec3:
            denoise()
    assert torch.equal(out0.sample, out1.sample)
    # two calls per cross-attention module: text tokens (position 0), image tokens (1)
    assert [r.position for r in rec.records_] == [0, 1] * 4
    name = "mid_block.attentions.0.transformer_blocks.0.attn2"
    text_call, image_call = (r for r in rec.records_ if r.module == name)
    assert text_call.k.shape[2] == 5 and image_call.k.shape[2] == 4
    assert np.array_equal(text_call.q, image_call.q)  # one query, two key sets
    attn = unet.get_submodule(name)

    def heads(a):
        return a.view(1, -1, attn.heads, a.shape[-1] // attn.heads).transpose(1, 2)[:, :2]

    with torch.no_grad():
        k_text = heads(attn.to_k(text)).numpy()
        k_image = heads(attn.processor.to_k_ip[0](tokens[1])).numpy()
    np.testing.assert_allclose(text_call.k, k_text, atol=1e-6)
    np.testing.assert_allclose(image_call.k, k_image, atol=1e-6)
    res = nw_correspondence(rec3)
    assert sorted(set(res.step.tolist())) == [0, 1, 2] and np.isfinite(res.spearman).all()


@pytest.mark.exactness
def test_attention_experiment_stores_the_inspector_diagnosis(tmp_path):
    from skflow_experiments import attention

    res = attention.run("tiny", output_dir=tmp_path)
    for name in ("no_head", "exact_head"):
        ins = res["models"][name]["inspector"]
        assert np.shape(ins["median_spearman"]) == (6, 2, 2)  # (t, layer, head)
        assert np.shape(ins["key_norm_dispersion"]) == (6, 2, 2)
        frac = np.asarray(ins["fraction_nw_like"])
        med = np.asarray(ins["median_spearman"])
        np.testing.assert_array_equal(frac, np.mean(med > 0.9, axis=(1, 2)))
        assert len(res["summary"][name]["inspector_best_median_per_t"]) == 6
