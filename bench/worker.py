"""Running one measurement in a process of its own (Taichi has one runtime per process, set at
init: an arch, a pool size) and keeping the rows: the pattern of bench.launch_cost,
bench.loop_balance and bench.replay_kernel, whose `--one` mode prints one JSON row."""

import json
import subprocess
import sys


def run_one(module: str, args: list[str], label: str) -> dict | None:
    """`python -m module --one ...args` in a new process: its last line of output as a JSON row,
    or None (the failure and the end of its stderr printed, naming `label`)."""
    proc = subprocess.run([sys.executable, "-m", module, "--one", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{label}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_rows(path: str | None, rows: list[dict]) -> None:
    """The rows as one JSON list at `path` (written atomically; nothing when path is None)."""
    if path:
        from taichi_hydro.output import atomic_write

        atomic_write(path, lambda tmp: tmp.write_text(json.dumps(rows, indent=1)))
