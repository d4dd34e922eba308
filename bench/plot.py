"""Scaling plot of dynamics benchmarks: world-steps/s against worlds, one panel per case, one
line per backend (and solver schedule when a backend ran with several), Drake as horizontal
lines. Every file but the last is a results file (JSON lines); the last is the image.

    python -m bench.plot bench/results/dynamics_2core_epyc.json bench/results/dynamics_h100.json bench/results/dynamics_scaling.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = argv if argv is not None else sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    lines = [json.loads(x) for path in args[:-1] for x in Path(path).read_text().splitlines() if x.strip()]
    machines = list(dict.fromkeys(_machine(x["meta"].get("machine", {})) for x in lines if "meta" in x))
    rows = [r for r in lines if r.get("suite") == "dynamics"]
    solvers = {}
    for r in rows:
        solvers.setdefault(r["arch"], set()).add(r.get("solver"))
    for r in rows:
        r["label"] = r["arch"] + (f" ({r['solver'].split('/')[-1]} schedule)" if len(solvers[r["arch"]]) > 1 else "")
    cases = list(dict.fromkeys(r["case"] for r in rows))
    fig, axes = plt.subplots(1, len(cases), figsize=(3.2 * len(cases), 3.2), squeeze=False)
    for ax, case in zip(axes[0], cases):
        ours = [r for r in rows if r["case"] == case and not r["arch"].startswith("drake")]
        for label in sorted(dict.fromkeys(r["label"] for r in ours)):
            pts = sorted((r["worlds"], r["world_steps_per_s"]) for r in ours if r["label"] == label)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
        for r in rows:
            if r["case"] == case and r["arch"].startswith("drake") and r["world_steps_per_s"] == r["world_steps_per_s"]:
                n = r["worlds"]  # processes, one world and one thread each
                ax.axhline(r["world_steps_per_s"], ls="--" if r["arch"].endswith("sap") else ":", color="k",
                           label=r["arch"] + (f" ({n} processes, 1 thread each)" if n > 1 else " (1 world, 1 thread)"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(case)
        ax.set_xlabel("worlds")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("world-steps/s")
    handles = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), fontsize=8, loc="lower center", ncol=min(len(handles), 4))
    fig.suptitle("; ".join(machines), fontsize=8)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.savefig(args[-1], dpi=110)
    return 0


def _machine(m: dict) -> str:
    """One line per machine: its GPU if it has one, else its CPU and cores."""
    return m["gpu"] if m.get("gpu") else f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores"


if __name__ == "__main__":
    sys.exit(main())
