"""One command line for every pipeline step: ``polyinterp <step> ...`` / ``python -m polyinterp ...``.

Each study registers its steps (``polyinterp.<study>.steps.register``). A step takes its input and
output paths as options and its experiment parameters as one JSON object (``--params``), which the
Snakemake rules build from the config. Rules hold no logic of their own.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys

from polyinterp.errors import PolyinterpError

STUDY_STEP_MODULES = ("polyinterp.mnist.steps", "polyinterp.cubic.steps", "polyinterp.figures.steps")


def json_object(text: str) -> dict:
    """argparse type: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--params is not valid JSON ({exc}): {text[:200]!r}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--params must be a JSON object")
    return value


def add_params(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", type=json_object, default={}, help="step parameters as a JSON object")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="polyinterp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True, metavar="STEP")
    for name in STUDY_STEP_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr
    )
    try:
        args.func(args)
    except PolyinterpError as exc:
        print(f"polyinterp {args.step}: error: {exc}", file=sys.stderr)
        return 2
    return 0
