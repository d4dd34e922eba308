"""Scaling plot of a dynamics benchmark: world-steps/s against worlds, one panel per case, one
line per backend, Drake (one world, one thread) as horizontal lines.

    python -m bench.plot bench/results/dynamics_2core_lavapipe.json bench/results/dynamics_2core_lavapipe.png
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
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lines = [json.loads(x) for x in Path(args[0]).read_text().splitlines() if x.strip()]
    meta = lines[0].get("meta", {})
    rows = [r for r in lines if r.get("suite") == "dynamics"]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    fig, axes = plt.subplots(1, len(cases), figsize=(3.2 * len(cases), 3.2), squeeze=False)
    for ax, case in zip(axes[0], cases):
        ours = [r for r in rows if r["case"] == case and not r["arch"].startswith("drake")]
        for arch in dict.fromkeys(r["arch"] for r in ours):
            pts = sorted((r["worlds"], r["world_steps_per_s"]) for r in ours if r["arch"] == arch)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=arch)
        for r in rows:
            if r["case"] == case and r["arch"].startswith("drake") and r["world_steps_per_s"] == r["world_steps_per_s"]:
                ax.axhline(r["world_steps_per_s"], ls="--" if r["arch"].endswith("sap") else ":", color="k", label=r["arch"])
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
    fig.legend(handles.values(), handles.keys(), fontsize=8, loc="lower center", ncol=len(handles))
    machine = meta.get("machine", {})
    fig.suptitle(f"{machine.get('cpu', '')}, {machine.get('cores', '')} cores", fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(args[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
