"""TopK sparse autoencoder (Gao et al. 2024, "Scaling and evaluating sparse autoencoders") in plain PyTorch.

    pre(x)  = W_enc (x − b_dec) + b_enc                    b_dec: pre-encoder bias, init = geometric median
    z(x)    = ReLU(TopK(pre(x)))                           only the k largest pre-activations survive
    x̂(z)    = W_dec z + b_dec                              columns of W_dec have unit norm

Training loss: normalised MSE  ‖x − x̂‖² / ‖x − x̄‖²  plus ``aux_coef`` × AuxK loss. AuxK: a latent is
*dead* when it has not fired on any of the last ``dead_threshold`` training samples; the top
``aux_k`` pre-activations among dead latents reconstruct the main residual e = x − x̂ (detached),
scored as ‖e − ê‖² / ‖e − ē‖², which sends gradient to dead latents. Decoder columns stay unit-norm:
the gradient component parallel to each column is removed before the optimiser step and the columns
are renormalised after it. W_enc is initialised as W_decᵀ.
"""

from __future__ import annotations

import logging
import math
import time

import pandas as pd
import torch
from torch import nn

from polyinterp.config import config_hash
from polyinterp.errors import ConfigError, DataError, TrainingError

log = logging.getLogger(__name__)


def geometric_median(points: torch.Tensor, iters: int = 100, tol: float = 1e-7) -> torch.Tensor:
    """Weiszfeld's algorithm (float64): the point minimising the sum of Euclidean distances."""
    x = points.double()
    y = x.mean(0)
    for _ in range(iters):
        dist = (x - y).norm(dim=1).clamp_min(1e-12)
        w = 1.0 / dist
        y_new = (w[:, None] * x).sum(0) / w.sum()
        if (y_new - y).norm() <= tol * (1 + y.norm()):
            y = y_new
            break
        y = y_new
    return y.to(points.dtype)


_MASK_MAX_K = 8  # topk_relu selects by masks up to this k; above it torch.topk is cheaper
_MASK_ROWS = 4096  # rows per block of the mask selection (keeps the working copy in cache)


def _topk_mask(pre: torch.Tensor, k: int) -> torch.Tensor | None:
    """Mask of the k largest entries of each row of a 2-D tensor, in ``pre``'s dtype (1 on them, 0
    elsewhere), or None when some row's mask does not hold exactly k entries: a tie among its k largest
    values or at the k-th, a NaN, +∞ (or −∞ among its k largest), values near the dtype's largest. Then
    ``torch.topk`` decides.

    k − 1 rounds lower each row's maximum by the dtype's largest value, below every other entry; the
    row's k-th largest value is then its maximum, and the mask marks the entries at or above it. Only
    float passes (sign, add, max): on the CPU a comparison or a boolean mask costs four to five times a
    float pass over the SAE's 64-wide rows (bench/README.md, "The SAE's step without boolean
    temporaries"), and ``torch.topk`` about ten times this whole selection. Whatever the rounds did, a
    row whose mask holds exactly k entries holds k entries at or above a value that every other entry
    is below: its top-k set. That is checked row by row, so the mask is never wrong, only sometimes
    None.
    """
    lower = torch.finfo(pre.dtype).max
    masks = []
    for block in pre.split(_MASK_ROWS):
        work = block.clone()
        for _ in range(k - 1):
            at_max = (work - work.amax(-1, keepdim=True)).sign_().add_(1)  # 1 at the row's maximum, 0 below
            work.sub_(at_max, alpha=lower)
        # 1 where block ≥ the k-th largest (the sign of the difference is exact), 0 below, NaN with a NaN
        masks.append((block - work.amax(-1, keepdim=True)).sign_().add_(1).clamp_(max=1))
    keep = masks[0] if len(masks) == 1 else torch.cat(masks)
    return keep if bool((keep.sum(-1) == k).all()) else None


def topk_relu(pre: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest entries of each row (ReLU applied to them), zero the rest."""
    if pre.dim() == 2 and 1 <= k <= min(_MASK_MAX_K, pre.shape[1] - 1) and len(pre):
        keep = _topk_mask(pre.detach(), k)
        if keep is not None:
            return torch.relu(pre) * keep  # same numbers (and gradient) as the topk/scatter below
    vals, idx = pre.topk(k, dim=-1)
    return torch.zeros_like(pre).scatter(-1, idx, torch.relu(vals))


def most_positive(z: torch.Tensor) -> torch.Tensor:
    """The most positive entries any row of ``z`` (≥ 0, e.g. ReLU of pre-activations) has: a scalar for
    ``[n, m]``, one per leading index for ``[P, n, m]``; NaN where ``z`` holds a NaN."""
    return z.detach().sign().sum(-1).amax(-1)


@torch.no_grad()
def unit_directions_(w: torch.Tensor, dim: int) -> None:
    """Scale ``w`` in place so that its vectors along ``dim`` (a decoder's directions) have unit norm."""
    w.div_(w.norm(dim=dim, keepdim=True).clamp_min(1e-12))


@torch.no_grad()
def remove_parallel_grad_(w: torch.Tensor, dim: int) -> None:
    """Project out of ``w.grad``'s vectors along ``dim`` their component along ``w``'s (unit) vectors,
    in place; nothing when ``w`` has no gradient."""
    if w.grad is None:
        return
    g = w.grad
    g.sub_(w * (w * g).sum(dim, keepdim=True))


def training_schedule(n: int, params: dict, generator: torch.Generator, device):
    """An SAE's ``params["steps"]`` training steps over ``n`` rows: per step (1-based) the row indices of
    its batch (``batch_size`` rows of a fresh permutation of the rows, drawn from ``generator`` when the
    current one has too few left) and its learning rate (``lr``, decaying linearly to 0 over the last
    ``decay_frac`` of the steps). One schedule for one SAE and for a batch of SAEs trained as one."""
    steps, bs = params["steps"], params["batch_size"]
    perm, pos = None, n
    for step in range(1, steps + 1):
        if pos + bs > n:
            perm, pos = torch.randperm(n, generator=generator).to(device), 0
        idx = perm[pos : pos + bs]
        pos += bs
        yield step, idx, params["lr"] * min(1.0, (steps - step + 1) / max(1, int(params["decay_frac"] * steps)))


class TopKSAE(nn.Module):
    def __init__(self, d: int, m: int, k: int):
        super().__init__()
        if not 1 <= k <= m:
            raise ConfigError(f"config key 'cubic.sae.k' ({k}) must be between 1 and cubic.sae.latents ({m}).")
        self.d, self.m, self.k = d, m, k
        self.W_enc = nn.Parameter(torch.zeros(m, d))
        self.b_enc = nn.Parameter(torch.zeros(m))
        self.W_dec = nn.Parameter(torch.zeros(d, m))
        self.b_dec = nn.Parameter(torch.zeros(d))

    def init_weights(self, generator: torch.Generator, b_dec: torch.Tensor | None = None) -> None:
        with torch.no_grad():
            w = torch.randn(self.d, self.m, generator=generator)
            self.W_dec.copy_(w / w.norm(dim=0, keepdim=True))
            self.W_enc.copy_(self.W_dec.T)
            self.b_enc.zero_()
            self.b_dec.copy_(b_dec if b_dec is not None else torch.zeros(self.d))

    def pre(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.b_dec) @ self.W_enc.T + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return topk_relu(self.pre(x), self.k)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return z @ self.W_dec.T + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        unit_directions_(self.W_dec, dim=0)

    @torch.no_grad()
    def remove_parallel_grad(self) -> None:
        """Project out of each decoder column's gradient its component along the (unit) column."""
        remove_parallel_grad_(self.W_dec, dim=0)

    def state(self) -> dict:
        return {"d": self.d, "m": self.m, "k": self.k,
                "state": {n: p.detach().cpu().clone() for n, p in self.state_dict().items()}}

    @classmethod
    def from_state(cls, blob: dict) -> "TopKSAE":
        sae = cls(blob["d"], blob["m"], blob["k"])
        sae.load_state_dict(blob["state"])
        return sae


def auxk_loss(sae: TopKSAE, pre: torch.Tensor, residual: torch.Tensor, dead: torch.Tensor, aux_k: int) -> torch.Tensor:
    """AuxK loss: reconstruct ``residual`` from the top ``aux_k`` pre-activations of dead latents."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return pre.new_zeros(())
    # Where a row has at most aux_k positive pre-activations among its dead latents, they are all among
    # its top aux_k dead ones, and the others chosen there have ReLU 0 and no gradient: the selection
    # changes nothing, the same numbers and gradient as topk, far cheaper (always so with n_dead <= aux_k).
    z = torch.relu(pre) * dead.to(pre.dtype)
    if n_dead > aux_k and not bool(most_positive(z) <= aux_k):  # NaN: selected
        z = topk_relu(pre.masked_fill(~dead, float("-inf")), aux_k)  # only dead latents win
    recon = z @ sae.W_dec.T
    denom = (residual - residual.mean(0)).pow(2).sum(-1).mean().clamp_min(1e-12)
    return (residual - recon).pow(2).sum(-1).mean() / denom


@torch.no_grad()
def evaluate_sae(sae: TopKSAE, x: torch.Tensor, batch: int = 65536) -> dict:
    """Held-out R² (1 − SSE/SST over all dimensions), mean L0, per-latent firing rates and means."""
    sse, fires, sums, l0 = 0.0, torch.zeros(sae.m, dtype=torch.float64), torch.zeros(sae.m, dtype=torch.float64), 0.0
    device = sae.W_dec.device
    for i in range(0, len(x), batch):
        xb = x[i : i + batch].to(device)
        z = sae.encode(xb)
        sse += float((sae.decode(z) - xb).double().pow(2).sum())
        active = (z > 0).double().cpu()
        fires += active.sum(0)
        sums += z.double().cpu().sum(0)
        l0 += float(active.sum())
    sst = float((x.double() - x.double().mean(0)).pow(2).sum())
    n = len(x)
    return {"r2": 1 - sse / sst, "l0": l0 / n, "fire_rate": fires / n, "mean_act": sums / n,
            "dead_frac": float((fires == 0).double().mean())}


def train_sae(x: torch.Tensor, params: dict, seed: int, device=torch.device("cpu")):
    """Fit a TopK SAE on the rows of ``x`` ([n, d]). Returns (sae, curve rows, samples_since_fired).

    Runs on torch's threads as the caller set them (the rules give the training steps one thread:
    ``threads: 1``); one and two threads give bit-identical results (bench/README.md, "Cubic threads").
    """
    from polyinterp.cubic.regressor.task import STREAM_SAE, generator

    n, d = x.shape
    m, k = params["latents"], params["k"]
    if params["batch_size"] > n:
        raise ConfigError(f"config key 'cubic.sae.batch_size' ({params['batch_size']}) exceeds the {n} activations.")
    gen = generator(seed, STREAM_SAE)
    sae = TopKSAE(d, m, k)
    gm_n = min(n, params["geometric_median_samples"])
    gm_idx = torch.randperm(n, generator=gen)[:gm_n]
    sae.init_weights(gen, geometric_median(x[gm_idx], iters=params["geometric_median_iters"]))
    sae.to(device)
    x_dev = x.to(device)
    var = float((x.double() - x.double().mean(0)).pow(2).sum(-1).mean())
    if var <= 0:
        raise DataError("the activations to fit the SAE on are constant (zero variance); the regressor's last hidden layer is dead.")
    opt = torch.optim.Adam(sae.parameters(), lr=params["lr"], betas=(0.9, 0.999), eps=6.25e-10, foreach=True)
    since_fired = torch.zeros(m, dtype=torch.long, device=device)
    steps, bs = params["steps"], params["batch_size"]
    curve, acc = [], {"mse": 0.0, "aux": 0.0, "count": 0}
    t0 = time.time()
    for step, idx, lr in training_schedule(n, params, gen, device):
        xb = x_dev.index_select(0, idx)
        for group in opt.param_groups:
            group["lr"] = lr
        pre = sae.pre(xb)
        z = topk_relu(pre, k)
        recon = sae.decode(z)
        mse = (recon - xb).pow(2).sum(-1).mean() / var
        # z >= 0: (z > 0).any(0) in one float pass (a boolean one costs twenty times more; they differ
        # only where z holds a NaN, and a NaN ends the fit as diverged at the next log step)
        fired = z.detach().amax(0) > 0
        since_fired += bs
        since_fired.masked_fill_(fired, 0)
        dead = since_fired >= params["dead_threshold"]
        aux = auxk_loss(sae, pre, (xb - recon).detach(), dead, params["aux_k"])
        loss = mse + params["aux_coef"] * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        sae.remove_parallel_grad()
        opt.step()
        sae.normalize_decoder()
        acc["mse"] += float(mse.detach())
        acc["aux"] += float(aux.detach())
        acc["count"] += 1
        if step % params["log_every"] == 0 or step == steps:
            if not math.isfinite(acc["mse"]):
                raise TrainingError(f"SAE training (seed {seed}) diverged by step {step}; lower cubic.sae.lr.")
            row = {"step": step, "nmse": acc["mse"] / acc["count"], "aux_loss": acc["aux"] / acc["count"],
                   "dead_frac": float(dead.double().mean()), "lr": lr}
            curve.append(row)
            log.info("SAE step %d  nMSE %.4f  aux %.4f  dead %.3f  (%.1f s)", step, row["nmse"], row["aux_loss"],
                     row["dead_frac"], time.time() - t0)
            acc = {"mse": 0.0, "aux": 0.0, "count": 0}
    return sae.eval(), curve, since_fired.cpu()


def sae_step(*, acts: str, model: str, sae: str, metrics: str, latents: str, curve: str, params: dict) -> None:
    """Rule ``cubic_sae``: fit the TopK SAE on the train split of ``acts`` (on the rule's one thread),
    score it on the held-out split and spliced into the regressor ``model`` at the hidden layer
    ``acts`` holds (recorded in ``sae`` for the later steps); write ``sae``, the ``metrics``, per-latent
    ``latents`` and training ``curve`` tables."""
    from polyinterp.cubic.sae.activations import load_activations
    from polyinterp.cubic.regressor.model import load_model
    from polyinterp.cubic.regressor.task import target
    from polyinterp.device import resolve_device
    from polyinterp.io import save_parquet, save_torch

    seed = int(params["seed"])
    device = resolve_device(params["device"])
    blob = load_activations(acts)
    x_tr, ho = blob["train"]["acts"], blob["heldout"]
    t0 = time.time()
    fitted, curve_rows, since_fired = train_sae(x_tr, params, seed, device)
    seconds = time.time() - t0
    ev = evaluate_sae(fitted, ho["acts"])
    ev_tr = evaluate_sae(fitted, x_tr)

    # Downstream: the regressor finished from the SAE reconstruction instead of its own activation.
    net = load_model(model, device)
    layer = net.check_layer(blob["layer"])
    if x_tr.shape[1] != net.widths[layer]:
        raise DataError(f"{acts} holds {x_tr.shape[1]}-wide activations but hidden layer {layer} of {model} is "
                        f"{net.widths[layer]} wide; rebuild {acts} with the cubic_activations rule.")
    with torch.no_grad():
        y_true = target(ho["inputs"]).double()
        y_splice = net.from_layer(fitted(ho["acts"].to(device)), layer).cpu().double()
    var_y = float(y_true.var())
    rel_spliced = float((y_splice - y_true).pow(2).mean()) / var_y
    rel_model = float((ho["y_model"].double() - y_true).pow(2).mean()) / var_y

    dead_train = float((since_fired >= params["dead_threshold"]).double().mean())
    metrics_df = pd.DataFrame([{
        "seed": seed, "layer": layer, "width": fitted.d, "latents": fitted.m, "k": fitted.k, "r2_heldout": ev["r2"], "r2_train": ev_tr["r2"],
        "l0_heldout": ev["l0"], "dead_frac_heldout": ev["dead_frac"], "dead_frac_train": dead_train,
        "rel_mse_model": rel_model, "rel_mse_spliced": rel_spliced, "r2_target": float(params["r2_target"]),
        "r2_target_met": bool(ev["r2"] >= params["r2_target"]), "train_seconds": seconds,
    }])
    log.info("SAE held-out R² %.5f (target %.3f), L0 %.3f, dead %.3f; regressor rel-MSE %.2e, spliced %.2e",
             ev["r2"], params["r2_target"], ev["l0"], ev["dead_frac"], rel_model, rel_spliced)
    if ev["r2"] < params["r2_target"]:
        log.warning("SAE R² TARGET NOT MET: held-out R² %.5f < %.3f (raise cubic.sae.steps)", ev["r2"], params["r2_target"])
    latents_df = pd.DataFrame({
        "seed": seed, "latent": range(fitted.m), "fire_rate": ev["fire_rate"].numpy(),
        "mean_act": ev["mean_act"].numpy(), "dead": (ev["fire_rate"] == 0).numpy(),
        "decoder_norm": fitted.W_dec.detach().norm(dim=0).cpu().double().numpy(),
    })
    curve_df = pd.DataFrame(curve_rows)
    curve_df.insert(0, "seed", seed)
    save_torch({**fitted.state(), "seed": seed, "layer": layer, "config_hash": config_hash(params)}, sae)
    save_parquet(metrics_df, metrics)
    save_parquet(latents_df, latents)
    save_parquet(curve_df, curve)


def load_sae(path, device="cpu") -> TopKSAE:
    from polyinterp.io import load_torch

    blob = load_torch(path)
    if "state" not in blob or "m" not in blob:
        raise DataError(f"{path} is not an SAE file; rebuild it with the cubic_sae rule.")
    return TopKSAE.from_state(blob).to(device).eval()


def sae_layer(path) -> int:
    """The hidden layer (1 … n_hidden) the SAE file ``path`` was fitted on."""
    from polyinterp.io import load_torch

    return int(load_torch(path)["layer"])
