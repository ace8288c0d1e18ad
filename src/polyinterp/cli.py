"""One command line for every pipeline step: ``polyinterp <rule> ...`` / ``python -m polyinterp ...``.

A step is named after the Snakemake rule that runs it, and its function takes keyword arguments
named after that rule's ``input:`` and ``output:`` keys (one name for each file from rule to
function), plus ``params`` (the step's parameters, one JSON object) where it has any. The command
line of a step is generated from its function's signature:

- ``name: str`` (or a path) → ``--name PATH``, required unless the argument has a default;
- ``name: list[str]`` → ``--name PATH [PATH ...]`` (optional, default empty, when it has a default);
- ``params: dict`` → ``--params JSON``.

``--threads N`` (every step) sets torch's intra-op threads (0: torch's default). A step that returns
logs, as its last line, what its process cost: CPU, wall (from the start of :func:`main`, before the step's own
imports: the interpreter's start-up and this module's imports, about 0.1 s, are not counted) and peak RSS
(:func:`polyinterp.run_log.job_line`); the run-time readers take a job's time from it. The table of step
names → functions is ``polyinterp.steps.STEPS``; a function is imported only when its step
runs, so ``polyinterp --help`` stays fast. The command itself is :func:`run`: :func:`main`, then the
process ends without Python's finalisation.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import os
import shlex
import sys
import time
from typing import Callable, NoReturn

from polyinterp.errors import PolyinterpError
from polyinterp.io import record_writer
from polyinterp.run_log import job_line, process_cpu_seconds, process_peak_rss_mb
from polyinterp.steps import STEPS

# Commands that are not rules (the step table is exactly the workflow's rules): name → "module:function".
COMMANDS = {
    "publish": "polyinterp.publish:publish_step",  # a finished run → docs/results/<config>/
    "results_page": "polyinterp.results_page:results_page_step",  # docs/results/ → docs/results.md, README
    "config_page": "polyinterp.config_page:config_page_step",  # the schema → docs/config.md
}


def step_table() -> dict[str, str]:
    """Every step: rule name → ``"module:function"`` (:data:`polyinterp.steps.STEPS`)."""
    return dict(STEPS)


def step_function(target: str) -> Callable:
    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)


def json_object(text: str) -> dict:
    """argparse type: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--params is not valid JSON ({exc}): {text[:200]!r}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--params must be a JSON object")
    return value


def _is_list(annotation) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return text.startswith(("list", "tuple", "Sequence")) or "list[" in text


def step_parser(step: str, func: Callable) -> argparse.ArgumentParser:
    """The argument parser of one step, generated from ``func``'s keyword-only parameters."""
    doc = (inspect.getdoc(func) or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(prog=f"polyinterp {step}", description=doc, allow_abbrev=False)
    for name, p in inspect.signature(func).parameters.items():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"step function {func.__qualname__} must take keyword-only arguments; {name!r} is not")
        required = p.default is inspect.Parameter.empty
        if name == "params":
            parser.add_argument("--params", type=json_object, required=required, default=None if required else p.default,
                                help="step parameters as a JSON object")
        elif _is_list(p.annotation):
            parser.add_argument(f"--{name}", nargs="+" if required else "*", required=required,
                                default=None if required else list(p.default), metavar="PATH")
        else:
            parser.add_argument(f"--{name}", required=required, default=None if required else p.default,
                                metavar="PATH")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
    return parser


def step_params(step: str, params: Callable | None = None) -> Callable:
    """For the workflow, a rule's ``step`` param (``params: **step_args("<rule>", lambda wc: {...})``
    in workflow/rules/common.smk): the step's name (the rule's own, a key of
    :data:`polyinterp.steps.STEPS`) and ``params(wildcards)`` — the dict of exactly the config keys the
    step reads — as ``--params JSON`` (nothing when the step reads none), the head of the rule's command
    (``polyinterp {params.step} …``, the ``STEP`` line of common.smk). It depends on the wildcards only,
    so Snakemake records it and reruns the job when it changes (which is why a key the step does not read
    must not be in it). An unknown step is refused when the workflow is parsed."""
    if step not in STEPS:
        raise ValueError(f"step_params names step {step!r}, which is not in polyinterp.steps.STEPS; name the rule's "
                         "own step")

    def args(wildcards) -> str:
        if params is None:
            return step
        return f"{step} --params " + shlex.quote(json.dumps(params(wildcards), sort_keys=True))

    return args


def step_files(wildcards, input, output) -> str:
    """For the workflow, a rule's ``files`` param (``step_args`` in workflow/rules/common.smk): its named
    inputs and outputs as ``--<key> PATH ...`` (the step function's keyword arguments of the same names;
    an empty list is left out). Snakemake tracks these through the files themselves."""
    parts, seen = [], set()
    for kind, files in (("input", input), ("output", output)):
        named = 0
        for key in files.keys():
            if key in seen:
                raise ValueError(f"the {kind} key {key!r} is also an input key; a step takes each name once")
            seen.add(key)
            value = files[key]
            paths = [value] if isinstance(value, str) else list(value)
            named += len(paths)
            if paths:
                parts.append(" ".join([f"--{key}", *(shlex.quote(str(p)) for p in paths)]))
        if named != len(files):
            raise ValueError(f"every {kind} file of a step's rule needs a key (the step function's argument name); "
                             f"{len(files) - named} of {len(files)} have none")
    return " ".join(parts)


def _top_help(table: dict[str, str]) -> str:
    lines = [__doc__.splitlines()[0], "", "usage: polyinterp STEP [--<input/output key> PATH ...] [--params JSON]",
             "       polyinterp STEP --help", "", "steps:"]
    lines += [f"  {step}" for step in table]
    lines += ["", "commands (not rules):"] + [f"  {name}" for name in COMMANDS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    argv = list(sys.argv[1:] if argv is None else argv)
    table = step_table()
    if not argv or argv[0] in ("-h", "--help"):
        print(_top_help(table))
        return 0 if argv else 2
    step, rest = argv[0], argv[1:]
    table = {**table, **COMMANDS}
    if step not in table:
        print(f"polyinterp: unknown step {step!r}; the steps are: {', '.join(table)}", file=sys.stderr)
        return 2
    func = step_function(table[step])
    args = vars(step_parser(step, func).parse_args(rest))
    threads = args.pop("threads")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr
    )
    if threads:
        import torch

        torch.set_num_threads(threads)
    record_writer(step)  # every file the step writes names it, for the fix an error about the file gives
    try:
        func(**args)
    except PolyinterpError as exc:
        print(f"polyinterp {step}: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()  # what the step printed lands before its record, which stays the log's last line
    logging.getLogger(__name__).info(  # read back by the run-time readers
        job_line(step, process_cpu_seconds(), time.monotonic() - started, process_peak_rss_mb()))
    return 0


def run() -> NoReturn:
    """The command itself (``polyinterp`` and ``python -m polyinterp``, the form the rules use): :func:`main`,
    then the process ends at once, without the interpreter's finalisation.

    When :func:`main` returns, a step's outputs are already whole on disk: each was written to a temporary
    name, closed and renamed (:func:`polyinterp.io.atomic_path`; the commands ``publish``, ``config_page``
    and ``results_page`` rename theirs the same way). What finalisation would still do is tear down torch's
    thousands of modules and objects and run the loaded libraries' static destructors: about 0.6 CPU s a
    process after ``import torch`` alone (bench/README, "A step's process ends at its last line"), nothing a
    run needs. Logging, Python's standard streams and the C library's (what a native library printed) are
    flushed first; a reader that closed the pipe makes the status 120, as Python's own exit does. An
    exception that escapes :func:`main` (a bug: a step's expected failures are :class:`PolyinterpError`)
    and argparse's exits (a step's ``--help``: 0, a usage error: 2) take Python's usual way out."""
    code = main()
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # e.g. `polyinterp --help | head -1`
        code = code or 120
    import ctypes

    try:
        ctypes.CDLL(None).fflush(None)  # C stdio buffers, which os._exit would drop
    except (OSError, AttributeError):  # no C library under the process's own name (not a POSIX system)
        pass
    os._exit(code)
