"""The paper's quadratic approximant, as a baseline: closed form under N(0, I), then schedule-free SGD."""

from __future__ import annotations

import time

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.fits.quadratic_gaussian import quadratic_gaussian
from polyinterp.approx.fits.upper_block_forms import UpperBlockForms

# inputs per block of the forms' upper triangle: 14 blocks at d = 784 (bench/README.md, "The SGD fit on the
# forms' upper block triangle")
FORM_BLOCK = 56

OPTIMIZERS = ("adamw_schedulefree", "sgd_schedulefree")


def quadratic_sgd(model, mixture: GaussianMixture, *, steps: int = 2000, batch: int = 256, lr: float = 1e-3,
                  warmup_steps: int = 0, generator: torch.Generator | None = None, seed: int | None = None,
                  dtype: torch.dtype = torch.float32, init: str = "standard", optimizer: str = "adamw_schedulefree",
                  momentum: float = 0.9, product_dtype: torch.dtype | None = None,
                  form_block: int = FORM_BLOCK) -> Approximant:
    """Start from the closed-form quadratic under N(0, I) (``init="standard"``, as the paper and its
    authors' code) or under the moment-matched Gaussian (``init="moment_matched"``), then minimise the
    mean squared error to ``model`` (mean over samples and outputs) on fresh mixture samples (``steps``
    batches of ``batch``).

    ``optimizer="adamw_schedulefree"``: AdamW-ScheduleFree at ``lr`` with ``warmup_steps``; its averaged
    iterate (``eval()``) is returned. ``optimizer="sgd_schedulefree"``: the authors' procedure
    (EleutherAI/polyapprox, branch quadratic-alice, experiments/sgd_experiment.py: ``torch.optim.SGD``
    at lr 1.8e-2 in ``ScheduleFreeWrapper(momentum=0.9)``, 20 epochs × 10 batches of 2^10 samples);
    their code evaluates the parameters as training leaves them (the wrapper in train mode, no
    ``eval()``), and so does this. Training runs in ``dtype`` (float32 by default); the result is in
    the mixture's dtype.

    ``product_dtype``: the dtype of the large matrix products (the batch times the forms' blocks, most of a
    step's arithmetic at MNIST size) and of their gradients: ``torch.bfloat16`` rounds their inputs and
    results to bfloat16 (the GEMM accumulates in float32), while the parameters, the optimizer's state,
    the linear term, the residuals and the loss stay in ``dtype``; ``None`` (default): ``dtype``. The
    mixture's draws are made in its dtype and mapped to samples in ``dtype`` (the points the fit sees; the
    same points to ``dtype``'s round-off), and the network's outputs are computed at those points.

    The quadratic term is trained as the forms' upper block triangle (:class:`UpperBlockForms`, blocks of
    ``form_block`` inputs), each held entry moved by the gradient of that entry of full matrices: the fit
    is the one of the full matrices trained from the symmetric start (as the authors' code trains them),
    to round-off, from (m + 1)/2m of the products in m blocks (0.54 at d = 784), and the gradients are
    computed by hand, not by autograd (the loss is the mean squared error: its derivative by each output
    is 2 (g(x) − f(x)) / (n·o)). The returned Γ is the forms with their held entries mirrored (bench/README.md,
    "The SGD fit on the forms' upper block triangle")."""
    if not isinstance(form_block, int) or form_block < 1:
        raise ApproxInputError(f"form_block must be a positive int (inputs per block of the forms), got {form_block!r}")
    if steps < 0 or batch < 1:
        raise ApproxInputError(f"need sgd_steps >= 0 and sgd_batch >= 1, got {steps} and {batch}")
    if optimizer not in OPTIMIZERS:
        raise ApproxInputError(f"unknown sgd optimizer {optimizer!r}; use one of {', '.join(OPTIMIZERS)}")
    if not 0 <= momentum < 1:
        raise ApproxInputError(f"sgd momentum must be in [0, 1), got {momentum}")
    if product_dtype not in (None, dtype, torch.bfloat16):
        raise ApproxInputError(f"sgd product_dtype must be None, the training dtype {dtype} or torch.bfloat16, "
                               f"got {product_dtype}")
    low = torch.bfloat16 if product_dtype == torch.bfloat16 and dtype != torch.bfloat16 else None
    import schedulefree

    t0 = time.perf_counter()
    if generator is None:
        generator = torch.Generator(device=mixture.device).manual_seed(0 if seed is None else int(seed))
    if init == "standard":
        mean = torch.zeros(mixture.d, dtype=mixture.dtype, device=mixture.device)
        cov = torch.eye(mixture.d, dtype=mixture.dtype, device=mixture.device)
    elif init == "moment_matched":
        mean, cov = mixture.total_mean(), mixture.total_cov()
    else:
        raise ApproxInputError(f"unknown sgd init {init!r}; use 'standard' or 'moment_matched'")
    start = quadratic_gaussian(model, mean, cov)
    alpha = start.alpha.to(dtype).clone()
    beta = start.beta.to(dtype).clone()
    forms = UpperBlockForms(start.gamma, form_block, dtype)
    params = [alpha, beta, *forms.parameters]
    if optimizer == "adamw_schedulefree":
        opt = schedulefree.AdamWScheduleFree(params, lr=lr, warmup_steps=warmup_steps)
    else:
        opt = schedulefree.ScheduleFreeWrapper(torch.optim.SGD(params, lr=lr), momentum=momentum)
    opt.train()
    diff = None
    with torch.no_grad():
        for _ in range(steps):
            x = mixture.sample(batch, generator, dtype=dtype)  # the draws of the mixture's dtype, mapped in dtype
            target = model(x).to(dtype)
            diff = forms.quadratic(x, low) + x @ beta.T + alpha - target
            r = diff * (2 / diff.numel())  # d mean(diff²) / d g(x)
            alpha.grad = r.sum(0)
            beta.grad = r.T @ x
            forms.set_grad(r, x, low)
            opt.step()
        if optimizer == "adamw_schedulefree":
            opt.eval()  # the schedule-free averaged iterate
        coefficients = (alpha.detach().to(mixture.dtype), beta.detach().to(mixture.dtype),  # without the last .grad
                        forms.gamma().to(mixture.dtype))
    return Approximant(*coefficients, {
        "method": "sgd", "degree": 2, "iterations": steps, "residual": float("nan"), "batch": batch, "lr": lr,
        "init": init, "optimizer": optimizer, "products": str(low or dtype).removeprefix("torch."),
        **({"momentum": momentum} if optimizer == "sgd_schedulefree" else {}),
        "seconds": time.perf_counter() - t0,
        "final_batch_mse": float((diff ** 2).mean()) if diff is not None else float("nan")})
