"""What happened over time in a batch, sampled between step() calls, and its plot.

    history = History(sim)
    for _ in range(100):
        sim.step(10)
        history.record()
    history.plot("run.png")           # or history.arrays() for your own analysis

Each sample holds, for every world: the contact force between each body pair [N] (its
magnitude), the kinetic and potential energy [J], and the last step's contacts and solver
iterations; and, for the batch, the polygons per world and step since the previous sample. The
plot (matplotlib, an optional dependency: pip install "taichi-hydro[plot]") shows world 0 as a
line and, for several worlds, the spread (min to max over the worlds) as a band."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import HydroError
from .output import atomic_write, check_output
from .rotation import rotation_matrices
from .types import BODY_DYNAMIC

__all__ = ["History", "energies", "figure_of", "write_plot"]

LABELLED_PAIRS = 6
"""Body pairs with their own colour and legend entry in the force panel (the largest peaks)."""


def energies(sim, state: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(kinetic, potential) energy of every world [J], shape (worlds,): sum over the dynamic
    bodies of 1/2 m |v_cm|^2 + 1/2 w . I_W w and -m g . p_cm, with each world's own masses and
    gravity (set_parameters) and the inertia scaled with the mass as the simulator scales it."""
    state = sim.get_state() if state is None else state
    host = sim.model.host
    params = sim.parameters()
    dyn = np.flatnonzero(host.body_kind == BODY_DYNAMIC)
    R = rotation_matrices(state["orientation"][:, dyn])  # (W, D, 3, 3)
    com_W = np.einsum("wdij,dj->wdi", R, host.body_com_B[dyn])
    omega = state["angular_velocity"][:, dyn]
    v_cm = state["velocity"][:, dyn] + np.cross(omega, com_W)
    m = params["mass"][:, dyn]
    inertia_W = np.einsum("wdij,djk,wdlk->wdil", R, host.body_inertia_B[dyn], R) * (m / host.body_mass[dyn])[:, :, None, None]
    kinetic = (0.5 * m * np.einsum("wdi,wdi->wd", v_cm, v_cm) + 0.5 * np.einsum("wdi,wdij,wdj->wd", omega, inertia_W, omega)).sum(axis=1)
    potential = -(m * np.einsum("wi,wdi->wd", params["gravity"], state["position"][:, dyn] + com_W)).sum(axis=1)
    return kinetic, potential


class History:
    """Samples of one Simulator's batch (see the module docstring); record() after step()."""

    def __init__(self, sim):
        self.sim = sim
        self.pairs, _ = sim.pair_forces()
        self._samples: list[dict] = []
        self._last = sim.step_totals()

    def record(self) -> None:
        """Take one sample of every world at the simulator's current time."""
        sim = self.sim
        state = sim.get_state()
        kinetic, potential = energies(sim, state)
        _, forces = sim.pair_forces()
        stats = sim.solver_stats()
        totals = sim.step_totals()
        steps = totals["steps"] - self._last["steps"]
        polygons = (totals["polygons"] - self._last["polygons"]) / max(steps, 1.0) / sim.worlds
        self._last = totals
        self._samples.append({"time": sim.time, "force": np.linalg.norm(forces, axis=2), "kinetic": kinetic,
                              "potential": potential, "contacts": stats["contacts"], "iterations": stats["iterations"],
                              "polygons": polygons})

    def __len__(self) -> int:
        return len(self._samples)

    def arrays(self) -> dict[str, np.ndarray]:
        """time (n,) [s]; force (n, worlds, pairs) [N] (pairs: self.pairs); kinetic, potential
        (n, worlds) [J]; contacts, iterations (n, worlds) of each sample's last step; polygons
        (n,) per world and step since the previous sample."""
        if not self._samples:
            raise HydroError("History.arrays: no sample yet; call record() after step()")
        return {key: np.array([s[key] for s in self._samples]) for key in self._samples[0]}

    def plot(self, path) -> Path:
        """Write figure() to `path` (PNG) atomically; returns the path."""
        return write_plot(path, self.arrays() if self._samples else {}, self.pairs, self.sim.scene.source)

    def figure(self):
        """figure_of this history (close it with matplotlib.pyplot.close)."""
        return figure_of(self.arrays() if self._samples else {}, self.pairs, self.sim.scene.source)


def write_plot(path, arrays: dict, pairs: list, source: str) -> Path:
    """Write figure_of(arrays, pairs, source) to `path` (PNG) atomically; returns the path."""
    path = check_output(path, (".png",), "plot", create_folder=True)
    fig = figure_of(arrays, pairs, source)
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path


def figure_of(arrays: dict, pairs: list, source: str):
    """A matplotlib figure of four panels over time: contact force per body pair, polygons and
    contacts, solver iterations, energy. arrays: History.arrays(); pairs: History.pairs (the
    body names of each force column); source: the scene, for the title. A pure function of its
    arguments, so that a child process can draw it (plot_process.py)."""
    samples = len(arrays.get("time", ()))
    if samples < 2:
        raise HydroError(f"plot: {samples} sample(s); record at least two")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise HydroError('plots need matplotlib: pip install "taichi-hydro[plot]"') from exc
    a = arrays
    t = a["time"]
    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True, layout="constrained")
    worlds = a["kinetic"].shape[1]
    spread = "world 0" if worlds == 1 else f"world 0 (line) and the spread over {worlds} worlds"
    fig.suptitle(f"{source}: {spread}", fontsize=10)
    peak = a["force"].max(axis=(0, 1)) if len(pairs) else np.zeros(0)
    order = [i for i in np.argsort(-peak) if peak[i] > 0]  # pairs that never touched are left out
    for rank, i in enumerate(order):
        lo, hi = pairs[i]
        if rank < LABELLED_PAIRS:
            _series(axes[0], t, a["force"][:, :, i], f"{lo} - {hi}")
        else:  # the rest in grey, one legend entry for all of them
            label = f"{len(order) - LABELLED_PAIRS} other pairs" if rank == LABELLED_PAIRS else None
            axes[0].plot(t, a["force"][:, 0, i], color="0.7", linewidth=0.6, label=label, zorder=0)
    axes[0].set_ylabel("contact force [N]")
    axes[1].plot(t, a["polygons"], label="polygons per world and step")
    _series(axes[1], t, a["contacts"], "contacts (last step)")
    axes[1].set_ylabel("count")
    _series(axes[2], t, a["iterations"], "solver iterations (last step)")
    axes[2].set_ylabel("iterations")
    _series(axes[3], t, a["kinetic"] + a["potential"], "kinetic + potential")
    _series(axes[3], t, a["kinetic"], "kinetic")
    axes[3].set_ylabel("energy [J]")
    axes[3].set_xlabel("time [s]")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right", ncol=2 if ax is axes[0] else 1)
        ax.grid(alpha=0.3)
    return fig


def _series(ax, t: np.ndarray, values: np.ndarray, label: str) -> None:
    """World 0 of values (n, worlds) as a line, the min-max over the worlds as a band."""
    (line,) = ax.plot(t, values[:, 0], label=label)
    if values.shape[1] > 1:
        ax.fill_between(t, values.min(axis=1), values.max(axis=1), color=line.get_color(), alpha=0.2, linewidth=0)
