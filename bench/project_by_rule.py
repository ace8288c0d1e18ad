"""A published run's time on another machine, rule by rule, from a smaller run made on both machines.

    python bench/project_by_rule.py TARGET_RUN_JSON --from REFERENCE_RUN_JSON --sample SAMPLE_RUN_JSON

TARGET_RUN_JSON is the ``run.json`` of the run to project (``docs/results/paper/run.json``), measured on
machine X; REFERENCE_RUN_JSON a run of another config on the same machine X
(``docs/results/default/run.json``); SAMPLE_RUN_JSON the same config as the reference, run on machine Y
(``polyinterp publish --run <run> --to /tmp/sample`` writes one without touching ``docs/``). Each rule of
the target takes its CPU seconds × (the rule's CPU seconds in the sample / in the reference): Y's speed on
that rule's work. A rule the reference or the sample lacks takes the ratio of the two runs' Σ CPU over the
rules both have (marked "all rules"). The projected wall time is Σ CPU / cores at the target run's own
packing (its Σ CPU / cores / wall), the assumption being that the DAG packs the same on Y.

Prints a Markdown table of the rules (largest first) and the sums. Exits with a message naming the file if
one is missing, is not JSON, or has no ``rules`` (a run published before run records), and if the
reference and the sample share no rule with CPU seconds.

This is the projection to use where only the published records of the long run are at hand; with the long
run's own results folder, ``bench/run_time.py --project`` prices it job by job.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load_run(path: str) -> dict:
    """A run.json's contents; exits naming the file when it cannot be read or lacks rules with CPU s."""
    try:
        run = json.loads(Path(path).read_text())
    except OSError as err:
        raise SystemExit(f"project_by_rule: cannot read {path} ({err.strerror})")
    except ValueError as err:
        raise SystemExit(f"project_by_rule: {path} is not JSON ({err})")
    rules = run.get("rules") if isinstance(run, dict) else None
    if not isinstance(rules, dict) or not all(isinstance(r, dict) and "cpu_s" in r for r in rules.values()):
        raise SystemExit(f"project_by_rule: {path} has no 'rules' with 'cpu_s' per rule; give a run.json "
                         "written by `polyinterp publish`")
    return run


def project(target: dict, reference: dict, sample: dict) -> dict:
    """Per rule of ``target``: (its CPU s, the factor, where the factor came from, projected CPU s); the
    overall factor; Σ CPU and wall projected at ``target``'s packing (see the module docstring)."""
    ref, smp = reference["rules"], sample["rules"]
    shared = [r for r in ref if r in smp and ref[r]["cpu_s"] > 0]
    if not shared:
        raise SystemExit("project_by_rule: the reference and the sample share no rule with CPU seconds; "
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
    cores = target.get("cores", 2)
    cpu = sum(r["cpu_s"] for r in rows)
    packing = cpu / cores / target["wall_s"]
    projected = sum(r["projected_cpu_s"] for r in rows)
    return {"rows": rows, "overall": overall, "cores": cores, "packing": packing, "cpu_s": cpu,
            "projected_cpu_s": projected, "projected_wall_s": projected / cores / packing}


def main(argv=None) -> None:
    """Parse the arguments, project, print the table (the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", help="run.json of the run to project (machine X)")
    ap.add_argument("--from", dest="reference", required=True, help="run.json of another config on machine X")
    ap.add_argument("--sample", required=True, help="run.json of the reference's config on machine Y")
    args = ap.parse_args(argv)
    out = project(load_run(args.target), load_run(args.reference), load_run(args.sample))
    print("| rule | CPU s (target) | factor | projected CPU s |\n| --- | --- | --- | --- |")
    for r in out["rows"]:
        print(f"| {r['rule']} | {r['cpu_s']:.0f} | {r['factor']:.2f} ({r['source']}) | {r['projected_cpu_s']:.0f} |")
    print(f"| **all** | {out['cpu_s']:.0f} | {out['projected_cpu_s'] / out['cpu_s']:.2f} | {out['projected_cpu_s']:.0f} |")
    print(f"\nall rules' factor {out['overall']:.3f}; the target's packing (Σ CPU / {out['cores']} cores / wall) "
          f"{out['packing']:.3f}; projected wall {out['projected_wall_s']:.0f} s")


if __name__ == "__main__":
    main()
