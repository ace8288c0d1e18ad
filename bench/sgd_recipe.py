"""The paper's SGD baseline at one MNIST checkpoint, under one recipe (a benchmark, not a test).

    python bench/sgd_recipe.py --recipe authors  --mixture results/mnist/mixture.pt --ckpt results/mnist/mlp_relu/seed0/ckpt/step16384.pt
    python bench/sgd_recipe.py --recipe adamw2000 --mixture ... --ckpt ...

``authors``: the authors' procedure (paper.yaml: torch SGD lr 1.8e-2 in ScheduleFreeWrapper, momentum
0.9, 200 steps of 2^10 mixture samples); ``adamw2000``: the config's earlier baseline (2000
AdamW-ScheduleFree steps of 2^10 at lr 1e-3). Prints one JSON line: the fit's seconds, its steps and
its exact FVU under the mixture (polyinterp.approx.evaluate.exact_fvu), so that the time a recipe saves is
read beside what it fits. Time the whole process from outside to include start-up.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from polyinterp.approx import quadratic_approximant
from polyinterp.approx.evaluate.exact_fvu import exact_fvu
from polyinterp.io import load_torch
from polyinterp.mnist.approximants import load_gaussian_mixture
from polyinterp.mnist.model import load_network, polynomial_network

RECIPES = {
    "authors": {"optimizer": "sgd_schedulefree", "lr": 0.018, "momentum": 0.9, "steps": 200, "batch": 1024},
    "adamw2000": {"optimizer": "adamw_schedulefree", "lr": 0.001, "steps": 2000, "batch": 1024},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", choices=sorted(RECIPES), required=True)
    ap.add_argument("--mixture", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--products", choices=("float32", "bfloat16"), default="float32",
                    help="precision of the large product inside each step (SGDOptions.product_dtype)")
    args = ap.parse_args()
    device = torch.device("cpu")
    mix = load_gaussian_mixture(load_torch(args.mixture), device)
    mlp = polynomial_network(load_network(load_torch(args.ckpt), device))
    t0 = time.perf_counter()
    fit = quadratic_approximant(mlp, mix, method="sgd", seed=args.seed, product_dtype=args.products,
                                **RECIPES[args.recipe])
    seconds = time.perf_counter() - t0
    print(json.dumps({"recipe": args.recipe, "products": args.products, "seconds": round(seconds, 2), "steps": fit.fit_info["iterations"],
                      "fvu_exact": exact_fvu(mlp, {"sgd": fit}, mix)["sgd"]}))


if __name__ == "__main__":
    main()
