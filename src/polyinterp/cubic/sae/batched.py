"""P TopK SAEs fitted side by side as one batched model, each exactly as ``train_sae`` fits it alone.

:func:`train_saes` fits one SAE per activation set ``x[p]`` (``[P, n, d]``, e.g. the last hidden
layers of P networks on the same inputs) with the settings and seed that
:func:`polyinterp.cubic.sae.autoencoder.train_sae` takes, and does for each, step by step, what
``train_sae`` does for it alone: geometric-median init of its decoder bias on the same rows, the same
initial dictionary, the same batch rows at every step (one seeded generator draws them for all: for a
given seed they do not depend on the activations), the same learning-rate schedule, normalised MSE by
its own variance, its own dead-latent counter and AuxK loss on its own dead latents, decoder columns
kept at unit norm. The loss is the sum of the P SAEs' losses, so each SAE gets exactly its own
gradient, and Adam, elementwise, updates each as alone.

The products are :func:`~polyinterp.cubic.regressor.batched.batched_linear`'s, per SAE the same
GEMMs, forward and backward, as ``TopKSAE``'s; the reductions and the optimiser's elementwise kernels
do per SAE what they do alone. On the CPU (MKL) the SAEs equal ``train_sae``'s bit for bit
(``tests/cubic/test_grid.py``); elsewhere (another BLAS, a GPU) the batched and single products may
round differently in the last bit, and a last-bit difference can flip a TopK choice that is near a
tie and grow from there. A row whose k-th value is tied goes to ``torch.topk``, as in ``train_sae``.
"""

from __future__ import annotations

import logging
import math
import time

import torch
from torch import nn

from polyinterp.cubic.regressor.batched import batched_linear
from polyinterp.cubic.sae.autoencoder import (TopKSAE, geometric_median, most_positive, remove_parallel_grad_,
                                              topk_relu, training_schedule, unit_directions_)
from polyinterp.errors import ConfigError, DataError, TrainingError

log = logging.getLogger(__name__)
_TOPK_ROWS = 4096  # rows per topk_relu call in BatchedTopKSAE.topk


class BatchedTopKSAE(nn.Module):
    """P TopK SAEs of the same size: ``W_enc`` [P, m, d], ``b_enc`` [P, m], ``W_dec`` [P, d, m],
    ``b_dec`` [P, d]; every method is :class:`TopKSAE`'s, per SAE, on ``[P, n, d]`` inputs."""

    def __init__(self, copies: int, d: int, m: int, k: int):
        super().__init__()
        if not 1 <= k <= m:
            raise ConfigError(f"config key 'cubic.sae.k' ({k}) must be between 1 and cubic.sae.latents ({m}).")
        self.copies, self.d, self.m, self.k = copies, d, m, k
        self.W_enc = nn.Parameter(torch.zeros(copies, m, d))
        self.b_enc = nn.Parameter(torch.zeros(copies, m))
        self.W_dec = nn.Parameter(torch.zeros(copies, d, m))
        self.b_dec = nn.Parameter(torch.zeros(copies, d))

    @torch.no_grad()
    def init_weights(self, generator: torch.Generator, b_dec: torch.Tensor) -> None:
        """Every SAE the dictionary ``TopKSAE.init_weights`` draws from ``generator`` (one draw, shared),
        SAE p the decoder bias ``b_dec[p]``."""
        one = TopKSAE(self.d, self.m, self.k)
        one.init_weights(generator)
        self.W_dec.copy_(one.W_dec.expand_as(self.W_dec))
        self.W_enc.copy_(one.W_enc.expand_as(self.W_enc))
        self.b_enc.zero_()
        self.b_dec.copy_(b_dec)

    def pre(self, x: torch.Tensor) -> torch.Tensor:
        return batched_linear(x - self.b_dec.unsqueeze(1), self.W_enc) + self.b_enc.unsqueeze(1)

    def topk(self, pre: torch.Tensor) -> torch.Tensor:
        """``topk_relu`` on every row of every SAE, a few SAEs (about ``_TOPK_ROWS`` rows) per call: rows
        are independent, so each row's selection is the one it gets alone, and the selection's working
        copies stay in cache (one call over every row spent more time on them than on the GEMMs)."""
        per_call = max(1, _TOPK_ROWS // max(1, pre.shape[1]))
        return torch.cat([topk_relu(part.reshape(-1, self.m), self.k).reshape(part.shape)
                          for part in pre.split(per_call)])

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return batched_linear(z, self.W_dec) + self.b_dec.unsqueeze(1)

    def normalize_decoder(self) -> None:
        unit_directions_(self.W_dec, dim=1)

    def remove_parallel_grad(self) -> None:
        """Project out of each decoder column's gradient its component along the (unit) column."""
        remove_parallel_grad_(self.W_dec, dim=1)

    @torch.no_grad()
    def single(self, p: int) -> TopKSAE:
        """SAE ``p`` as a ``TopKSAE`` of its own (weights cloned, on this model's device, eval mode)."""
        sae = TopKSAE(self.d, self.m, self.k).to(self.W_dec.device)
        for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
            getattr(sae, name).copy_(getattr(self, name)[p])
        return sae.eval()


def auxk_losses(sae: BatchedTopKSAE, pre: torch.Tensor, residual: torch.Tensor, dead: torch.Tensor,
                aux_k: int) -> torch.Tensor:
    """Per SAE, ``auxk_loss`` (``[P]``): ``residual`` [P, n, d] reconstructed from the top ``aux_k``
    pre-activations among SAE p's dead latents (``dead`` [P, m]); 0, with no gradient, for an SAE
    without dead latents (only the SAEs with some are computed). As in ``auxk_loss``, an SAE with at
    most ``aux_k`` dead latents uses them all, one with more the ``aux_k`` largest of each row."""
    n_dead = dead.sum(-1)
    some = (n_dead > 0).nonzero().flatten()
    if not len(some):
        return pre.new_zeros(len(pre))
    every = len(some) == len(pre)
    pre_s, res_s = (pre, residual) if every else (pre.index_select(0, some), residual.index_select(0, some))
    w_dec = sae.W_dec if every else sae.W_dec.index_select(0, some)
    chosen = dead[some].unsqueeze(1).to(pre.dtype)  # [S, 1, m]: all dead latents, every row
    many = (n_dead[some] > aux_k).nonzero().flatten()
    if len(many):  # as in auxk_loss: a selection only for an SAE with a row of more than aux_k positive dead
        with torch.no_grad():
            positive = most_positive(torch.relu(pre_s.detach()[many]) * chosen[many])
        many = many[~(positive <= aux_k)]  # NaN: selected, as before
    if len(many):  # rows' own top aux_k among the dead latents
        with torch.no_grad():
            masked = pre_s.detach()[many].masked_fill(chosen[many] == 0, float("-inf"))
            top = torch.zeros_like(masked).scatter_(-1, masked.topk(aux_k, dim=-1).indices, 1.0)
        chosen = chosen.expand_as(pre_s).clone()
        chosen[many] = top
    z = torch.relu(pre_s) * chosen
    recon = batched_linear(z, w_dec)
    denom = (res_s - res_s.mean(1, keepdim=True)).pow(2).sum(-1).mean(-1).clamp_min(1e-12)
    aux = (res_s - recon).pow(2).sum(-1).mean(-1) / denom
    return aux if every else pre.new_zeros(len(pre)).index_copy(0, some, aux)


def train_saes(x: torch.Tensor, params: dict, seed: int, device, names: list[str]):
    """Fit one TopK SAE on the rows of each ``x[p]`` (``x``: ``[P, n, d]``), each as
    ``train_sae(x[p], params, seed, device)`` would. Returns (list of P ``TopKSAE`` in eval mode,
    samples since each latent last fired, ``[P, m]``). ``names[p]`` names activation set p in errors
    (a constant set, a diverged fit)."""
    from polyinterp.cubic.regressor.task import STREAM_SAE, generator

    P, n, d = x.shape
    if len(names) != P:
        raise DataError(f"{len(names)} names for {P} activation sets; give one per set.")
    m, k = params["latents"], params["k"]
    if params["batch_size"] > n:
        raise ConfigError(f"config key 'cubic.sae.batch_size' ({params['batch_size']}) exceeds the {n} activations.")
    gen = generator(seed, STREAM_SAE)
    sae = BatchedTopKSAE(P, d, m, k)
    gm_idx = torch.randperm(n, generator=gen)[: min(n, params["geometric_median_samples"])]
    b_dec = torch.stack([geometric_median(x[p][gm_idx], iters=params["geometric_median_iters"]) for p in range(P)])
    sae.init_weights(gen, b_dec)
    sae.to(device)
    x_dev = x.to(device)
    var = [float((xp.double() - xp.double().mean(0)).pow(2).sum(-1).mean()) for xp in x]
    for name, v in zip(names, var):
        if v <= 0:
            raise DataError(f"the activations to fit the SAE of the {name} on are constant (zero variance); "
                            f"its last hidden layer is dead.")
    var_t = torch.tensor(var, dtype=x.dtype, device=device)
    opt = torch.optim.Adam(sae.parameters(), lr=params["lr"], betas=(0.9, 0.999), eps=6.25e-10, foreach=True)
    since_fired = torch.zeros(P, m, dtype=torch.long, device=device)
    steps, bs = params["steps"], params["batch_size"]
    acc_mse, acc_aux = (torch.zeros(P, dtype=torch.float64, device=device) for _ in range(2))
    count = 0
    t0 = time.time()
    for step, idx, lr in training_schedule(n, params, gen, device):
        xb = x_dev.index_select(1, idx)
        for group in opt.param_groups:
            group["lr"] = lr
        pre = sae.pre(xb)
        z = sae.topk(pre)
        recon = sae.decode(z)
        mse = (recon - xb).pow(2).sum(-1).mean(-1) / var_t
        # z >= 0, so this is train_sae's (z > 0).any(0) per SAE, in one pass without a boolean temporary
        # (the two differ only where z holds a NaN, and a NaN ends the fit as diverged at the next log step)
        fired = z.detach().amax(1) > 0
        since_fired += bs
        since_fired.masked_fill_(fired, 0)
        dead = since_fired >= params["dead_threshold"]
        aux = auxk_losses(sae, pre, (xb - recon).detach(), dead, params["aux_k"])
        loss = (mse + params["aux_coef"] * aux).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        sae.remove_parallel_grad()
        opt.step()
        sae.normalize_decoder()
        acc_mse += mse.detach().double()
        acc_aux += aux.detach().double()
        count += 1
        if step % params["log_every"] == 0 or step == steps:
            bad = [name for name, v in zip(names, acc_mse.tolist()) if not math.isfinite(v)]
            if bad:
                raise TrainingError(f"SAE training (seed {seed}) diverged by step {step} for the "
                                    f"{', the '.join(bad)}; lower cubic.sae.lr.")
            nmse = acc_mse / count
            log.info("%d SAEs, step %d  nMSE mean %.4f max %.4f  aux mean %.4f  dead %.3f  (%.1f s)", P, step,
                     float(nmse.mean()), float(nmse.max()), float(acc_aux.mean()) / count,
                     float(dead.double().mean()), time.time() - t0)
            acc_mse.zero_()
            acc_aux.zero_()
            count = 0
    return [sae.single(p) for p in range(P)], since_fired.cpu()
