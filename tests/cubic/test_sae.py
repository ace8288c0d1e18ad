import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from polyinterp.cubic.sae.autoencoder import TopKSAE, auxk_loss, evaluate_sae, geometric_median, topk_relu, train_sae
from polyinterp.errors import ConfigError

SAE_PARAMS = {"latents": 32, "k": 3, "steps": 1500, "batch_size": 512, "lr": 3e-3, "decay_frac": 0.2, "aux_k": 16,
              "aux_coef": 1 / 32, "dead_threshold": 5000, "geometric_median_samples": 2000,
              "geometric_median_iters": 100, "log_every": 500}


def test_topk_keeps_exactly_k_largest():
    g = torch.Generator().manual_seed(0)
    pre = torch.rand(500, 64, generator=g) + 0.01  # all positive: ReLU removes nothing
    for k in (1, 4, 17):
        z = topk_relu(pre, k)
        assert bool(((z != 0).sum(1) == k).all())
        kth = pre.sort(1, descending=True).values[:, k - 1 : k]
        assert bool((z[z != 0] == pre[z != 0]).all())
        assert bool(((pre >= kth) == (z != 0)).all())


def test_encoder_is_topk_of_relu_preactivations_and_l0_at_most_k():
    g = torch.Generator().manual_seed(1)
    sae = TopKSAE(15, 64, 4)
    sae.init_weights(g)
    with torch.no_grad():
        sae.b_enc.fill_(10.0)  # every pre-activation positive: exactly k survive
    x = torch.randn(300, 15, generator=g)
    assert bool(((sae.encode(x) != 0).sum(1) == 4).all())
    with torch.no_grad():
        sae.b_enc.fill_(-100.0)  # none positive: ReLU zeroes the survivors
    assert int((sae.encode(x) != 0).sum()) == 0
    with pytest.raises(ConfigError):
        TopKSAE(15, 8, 9)


def test_parallel_gradient_removed_and_decoder_norms_stay_one():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4000, 10, generator=g) @ torch.randn(10, 10, generator=g)
    sae = TopKSAE(10, 24, 3)
    sae.init_weights(g)
    opt = torch.optim.Adam(sae.parameters(), lr=1e-2)
    for _ in range(30):
        loss = (sae(x) - x).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        sae.remove_parallel_grad()
        dots = (sae.W_dec.grad * sae.W_dec.detach()).sum(0)
        assert float(dots.abs().max()) < 1e-5 * max(1.0, float(sae.W_dec.grad.abs().max()))
        opt.step()
        sae.normalize_decoder()
        torch.testing.assert_close(sae.W_dec.norm(dim=0), torch.ones(24), atol=1e-6, rtol=0)


def test_geometric_median_matches_direct_minimisation_and_resists_outliers():
    g = torch.Generator().manual_seed(3)
    pts = torch.randn(300, 4, generator=g, dtype=torch.float64)
    pts[:20] += 50.0  # outliers drag the mean, not the median
    gm = geometric_median(pts, iters=500, tol=1e-12).numpy()
    p = pts.numpy()
    res = minimize(lambda y: np.linalg.norm(p - y, axis=1).sum(), p.mean(0), method="Nelder-Mead",
                   options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000, "maxfev": 40000})
    np.testing.assert_allclose(gm, res.x, atol=1e-4)
    assert np.linalg.norm(gm) < 0.5 < np.linalg.norm(p.mean(0))


def test_auxk_sends_gradient_to_dead_latents_only():
    g = torch.Generator().manual_seed(4)
    sae = TopKSAE(6, 10, 2)
    sae.init_weights(g)
    x = torch.randn(64, 6, generator=g)
    pre = sae.pre(x)
    dead = torch.zeros(10, dtype=torch.bool)
    dead[[1, 7]] = True
    resid = (x - sae(x)).detach()
    loss = auxk_loss(sae, pre, resid, dead, aux_k=4)
    loss.backward()
    rows = sae.W_enc.grad.abs().sum(1)
    assert float(loss.detach()) > 0 and bool((rows[~dead] == 0).all()) and bool((rows[dead] > 0).all())
    assert float(auxk_loss(sae, pre.detach(), resid, torch.zeros(10, dtype=torch.bool), 4)) == 0.0


def test_r2_and_l0_against_direct_computation():
    g = torch.Generator().manual_seed(5)
    sae = TopKSAE(8, 16, 3)
    sae.init_weights(g)
    x = torch.randn(1000, 8, generator=g)
    ev = evaluate_sae(sae, x, batch=300)
    with torch.no_grad():
        z = sae.encode(x)
        r2 = 1 - float(((sae.decode(z) - x) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())
    assert ev["r2"] == pytest.approx(r2, rel=1e-6)
    assert ev["l0"] == pytest.approx(float((z > 0).sum(1).double().mean()))
    assert ev["dead_frac"] == pytest.approx(float(((z > 0).sum(0) == 0).double().mean()))


def planted(n=30000, d=15, m=24, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    dic = torch.randn(d, m, generator=g)
    dic /= dic.norm(dim=0, keepdim=True)
    idx = torch.rand(n, m, generator=g).argsort(1)[:, :k]
    codes = torch.zeros(n, m).scatter(1, idx, 0.5 + torch.rand(n, k, generator=g))
    bias = torch.randn(d, generator=g)
    return codes @ dic.T + bias, dic


def test_planted_sparse_dictionary_is_recovered():
    x, dic = planted()
    sae, curve, _ = train_sae(x, {**SAE_PARAMS, "lr": 1e-2}, seed=0)
    cos = (dic.T @ sae.W_dec.detach()).abs()  # [true atoms, learned latents]; both unit-norm
    best = cos.max(1).values
    assert float((best > 0.95).double().mean()) >= 0.9, best
    assert evaluate_sae(sae, x)["r2"] > 0.9
    assert curve[-1]["nmse"] < curve[0]["nmse"]


def test_sae_training_is_seeded():
    x, _ = planted(n=4000)
    p = {**SAE_PARAMS, "steps": 50}
    a, _, _ = train_sae(x, p, seed=1)
    b, _, _ = train_sae(x, p, seed=1)
    c, _, _ = train_sae(x, p, seed=2)
    assert torch.equal(a.W_dec, b.W_dec) and not torch.equal(a.W_dec, c.W_dec)


def _topk_relu_reference(pre, k):
    vals, idx = pre.topk(k, dim=-1)
    return torch.zeros_like(pre).scatter(-1, idx, torch.relu(vals))


@pytest.mark.parametrize("n, m, k", [(1, 64, 1), (300, 64, 4), (5000, 64, 4), (257, 15, 8), (100, 9, 8)])
def test_topk_relu_fast_path_matches_torch_topk_bit_for_bit(n, m, k):
    g = torch.Generator().manual_seed(n + k)
    pre = torch.randn(n, m, generator=g)
    w = torch.randn(n, m, generator=g)
    p1, p2 = pre.clone().requires_grad_(), pre.clone().requires_grad_()
    z1, z2 = topk_relu(p1, k), _topk_relu_reference(p2, k)
    assert torch.equal(z1, z2)
    (z1 * w).sum().backward()
    (z2 * w).sum().backward()
    assert torch.equal(p1.grad, p2.grad)


def test_topk_relu_with_ties_nan_or_masked_rows_matches_torch_topk():
    ties = torch.tensor([[3.0, 1.0, 3.0, 2.0, 0.5],           # tie at the top
                         [1.0, 2.0, 2.0, 0.0, -1.0],          # tie at the 2nd/3rd value
                         [5.0, 4.0, 1.0, 1.0, 0.0],           # tie below the 3rd value
                         [float("-inf"), float("-inf"), 5.0, float("-inf"), 1.0]])  # AuxK-style masking
    with_nan = torch.cat([ties, torch.tensor([[float("nan"), 1.0, 2.0, 3.0, 4.0]])])
    for pre in (ties, with_nan, ties[2:3], ties[3:4]):
        for k in (1, 2, 3, 4):
            torch.testing.assert_close(topk_relu(pre, k), _topk_relu_reference(pre, k), rtol=0, atol=0, equal_nan=True)


def test_topk_relu_at_the_dtypes_extremes_matches_torch_topk():
    """The mask lowers each knocked-out maximum by the dtype's largest value; rows near that value, with
    infinities or subnormals still give topk's numbers and gradient (or topk decides)."""
    big = torch.finfo(torch.float32).max
    pre = torch.tensor([[big, -big, 0.5 * big, -0.5 * big, 1.0, -1.0],
                        [-big, -big * 0.9, -big * 0.8, -big * 0.7, -big * 0.6, -big * 0.5],
                        [float("inf"), 1.0, 2.0, 3.0, float("-inf"), 0.0],
                        [1e-45, 2e-45, 3e-45, 0.0, -1e-45, 4e-45],
                        [3.0, 2.0, 1.0, 0.5, 0.25, 0.125]])
    w = torch.arange(1.0, 31.0).reshape(5, 6)
    for k in (1, 2, 3, 4):
        for rows in (pre, pre[:2], pre[1:2], pre[3:]):
            p1, p2 = rows.clone().requires_grad_(), rows.clone().requires_grad_()
            z1, z2 = topk_relu(p1, k), _topk_relu_reference(p2, k)
            assert torch.equal(z1, z2), (k, rows)
            (z1 * w[: len(rows)]).sum().backward()
            (z2 * w[: len(rows)]).sum().backward()
            assert torch.equal(p1.grad, p2.grad), (k, rows)


def _auxk_against_topk(seed: int, dead_latents: list[int], aux_k: int, pre_of=None):
    """``auxk_loss`` on a small SAE and the same loss from ``torch.topk``'s selection among the dead latents
    (the reference), with their gradients with respect to the pre-activations (``pre_of`` may reshape them)."""
    g = torch.Generator().manual_seed(seed)
    sae = TopKSAE(6, 12, 2)
    sae.init_weights(g)
    x = torch.randn(200, 6, generator=g)
    resid = (x - sae(x)).detach()
    dead = torch.zeros(12, dtype=torch.bool)
    dead[dead_latents] = True
    base = sae.pre(x).detach()
    if pre_of is not None:
        base = pre_of(base, dead, g)
    pre1, pre2 = base.clone().requires_grad_(), base.clone().requires_grad_()
    loss = auxk_loss(sae, pre1, resid, dead, aux_k=aux_k)
    picked = min(aux_k, len(dead_latents))
    z = torch.nan_to_num(_topk_relu_reference(pre2.masked_fill(~dead, float("-inf")), picked), neginf=0.0)
    recon = z @ sae.W_dec.detach().T
    ref = (resid - recon).pow(2).sum(-1).mean() / (resid - resid.mean(0)).pow(2).sum(-1).mean()
    loss.backward()
    ref.backward()
    return loss.detach(), ref.detach(), pre1.grad, pre2.grad, dead


@pytest.mark.parametrize("positive_dead", [2, 5])
def test_auxk_with_more_dead_than_aux_k_matches_topk_selection(positive_dead):
    """More dead latents than aux_k: with at most aux_k positive among a row's dead pre-activations the
    selection is skipped, with more it is made; either way the loss and gradient are topk's, bit for bit."""

    def exactly_positive(base, dead, g):  # in every row, exactly `positive_dead` dead pre-activations > 0
        order = torch.rand(len(base), int(dead.sum()), generator=g).argsort(1)
        base[:, dead] = base[:, dead].abs() * torch.where(order < positive_dead, 1.0, -1.0)
        return base

    loss, ref, grad, ref_grad, dead = _auxk_against_topk(7, [0, 2, 3, 4, 7, 9, 11], 3, exactly_positive)
    assert float(loss) == float(ref) > 0
    assert torch.equal(grad, ref_grad)
    assert bool((grad[:, dead] != 0).any()) and bool((grad[:, ~dead] == 0).all())


def test_auxk_shortcut_when_all_dead_fit_matches_topk_selection():
    loss, ref, grad, ref_grad, _ = _auxk_against_topk(6, [0, 3, 4, 9], 8)  # 4 dead <= aux_k: no selection
    assert float(loss) == float(ref)
    assert torch.equal(grad, ref_grad)
