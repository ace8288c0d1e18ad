"""A published run's time on another machine, rule by rule, from a smaller run made on both machines.

    python bench/project_by_rule.py TARGET_RUN_JSON --from REFERENCE_RUN_JSON --sample SAMPLE_RUN_JSON

TARGET_RUN_JSON is the ``run.json`` of the run to project (``docs/results/paper/run.json``), measured on
machine X; REFERENCE_RUN_JSON a run of another config on the same machine X
(``docs/results/default/run.json``); SAMPLE_RUN_JSON the same config as the reference, run on machine Y
(``polyinterp publish --run <run> --to /tmp/sample`` writes one without touching ``docs/``). Each rule of
the target takes its CPU seconds × (the rule's CPU seconds in the sample / in the reference): Y's speed on
that rule's work. A rule the reference or the sample lacks, or that has 0 CPU seconds in the reference
(rule ``all``), takes the ratio of the two runs' Σ CPU over the rules both have with CPU seconds (marked
"all rules"). The projected wall time is the target's wall × projected Σ CPU / its Σ CPU: the target's own
packing (Σ CPU / cores / wall), the assumption being that the DAG packs the same on Y.

Prints a Markdown table of the rules (largest projected first) and the sums. Exits with a message naming
the file if one is missing, is not JSON, has no ``rules`` with a number of CPU seconds each, or (the target)
no positive ``wall_s`` and Σ CPU; and naming both if the reference and the sample share no rule with CPU
seconds.

This is the projection to use where only the published records of the long run are at hand; with the long
run's own results folder, ``bench/run_time.py --project`` prices it job by job.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load_run(path: str, *, target: bool = False) -> dict:
    """A run.json's contents; exits naming the file when it cannot be read or lacks rules with CPU s, and
    for the ``target`` when its wall or its Σ CPU is not positive."""
    try:
        run = json.loads(Path(path).read_text())
    except OSError as err:
        raise SystemExit(f"project_by_rule: cannot read {path} ({err.strerror})")
    except ValueError as err:
        raise SystemExit(f"project_by_rule: {path} is not JSON ({err})")
    rules = run.get("rules") if isinstance(run, dict) else None
    if not isinstance(rules, dict) or not rules or not all(
            isinstance(r, dict) and isinstance(r.get("cpu_s"), (int, float)) for r in rules.values()):
        raise SystemExit(f"project_by_rule: {path} has no 'rules' with a number 'cpu_s' per rule; give a "
                         "run.json written by `polyinterp publish`")
    if target:
        wall, cpu = run.get("wall_s"), sum(r["cpu_s"] for r in rules.values())
        if not isinstance(wall, (int, float)) or wall <= 0 or cpu <= 0:
            raise SystemExit(f"project_by_rule: {path} needs a positive 'wall_s' and CPU seconds in its rules "
                             f"(wall_s {wall!r}, Σ cpu_s {cpu!r}) to be projected")
    return run


def project(target: dict, reference: dict, sample: dict, names: tuple[str, str] = ("reference", "sample")) -> dict:
    """Per rule of ``target``: (its CPU s, the factor, where the factor came from, projected CPU s); the
    overall factor; Σ CPU and wall projected at ``target``'s packing (see the module docstring)."""
    ref, smp = reference["rules"], sample["rules"]
    shared = [r for r in ref if r in smp and ref[r]["cpu_s"] > 0]
    if not shared:
        raise SystemExit(f"project_by_rule: {names[0]} and {names[1]} share no rule with CPU seconds; "
                         "give two runs of the same config")
    overall = sum(smp[r]["cpu_s"] for r in shared) / sum(ref[r]["cpu_s"] for r in shared)
    rows = []
    for rule, row in target["rules"].items():
        if rule in shared:
            factor, source = smp[rule]["cpu_s"] / ref[rule]["cpu_s"], "rule"
        else:
            factor, source = overall, "all rules"
        rows.append({"rule": rule, "cpu_s": row["cpu_s"], "factor": factor, "source": source,
                     "projected_cpu_s": row["cpu_s"] * factor})
    rows.sort(key=lambda r: -r["projected_cpu_s"])
    cpu = sum(r["cpu_s"] for r in rows)
    projected = sum(r["projected_cpu_s"] for r in rows)
    cores = target.get("cores")
    return {"rows": rows, "overall": overall, "cores": cores, "cpu_s": cpu, "projected_cpu_s": projected,
            "packing": cpu / cores / target["wall_s"] if cores else None,
            "projected_wall_s": target["wall_s"] * projected / cpu}


def main(argv=None) -> None:
    """Parse the arguments, project, print the table (the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", help="run.json of the run to project (machine X)")
    ap.add_argument("--from", dest="reference", required=True, help="run.json of another config on machine X")
    ap.add_argument("--sample", required=True, help="run.json of the reference's config on machine Y")
    args = ap.parse_args(argv)
    out = project(load_run(args.target, target=True), load_run(args.reference), load_run(args.sample),
                  names=(args.reference, args.sample))
    print("| rule | CPU s (target) | factor | projected CPU s |\n| --- | --- | --- | --- |")
    for r in out["rows"]:
        print(f"| {r['rule']} | {r['cpu_s']:.0f} | {r['factor']:.2f} ({r['source']}) | {r['projected_cpu_s']:.0f} |")
    print(f"| **all** | {out['cpu_s']:.0f} | {out['projected_cpu_s'] / out['cpu_s']:.2f} | {out['projected_cpu_s']:.0f} |")
    packing = (f"the target's packing (Σ CPU / {out['cores']} cores / wall) {out['packing']:.3f}; "
               if out["packing"] is not None else "")
    print(f"\nall rules' factor {out['overall']:.3f}; {packing}projected wall {out['projected_wall_s']:.0f} s")


if __name__ == "__main__":
    main()
