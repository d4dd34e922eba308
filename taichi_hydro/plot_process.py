"""A History plot drawn in a child process, on another core than the simulation.

At the end of the main job, the plot cost about 2.5 s on a fresh machine: importing matplotlib
(which builds its font cache on first use) and drawing four panels. A PlotProcess is started at
the beginning of a run: the child imports matplotlib while the parent compiles kernels and
steps, then waits for the history's arrays and draws them while the parent writes its other
outputs (README, "The main job"). The child is spawned (a fresh interpreter, never a fork of a
process that may run Taichi's or BLAS's threads) and is a daemon: it ends with its parent.

    plot = PlotProcess()                       # early
    ...
    plot.submit(path, history.arrays(), history.pairs, scene.source)
    ...                                        # other work
    plot.result()                              # waits; raises the child's error as HydroError
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from .errors import HydroError

__all__ = ["PlotProcess"]


class PlotProcess:
    """One plot drawn by a child process (see the module docstring)."""

    def __init__(self):
        context = multiprocessing.get_context("spawn")
        self._conn, child_end = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_end,), name="taichi-hydro-plot", daemon=True)
        self._process.start()
        child_end.close()
        self._submitted = False

    def submit(self, path, arrays: dict, pairs: list, source: str) -> None:
        """Have the child draw history.write_plot(path, arrays, pairs, source)."""
        if self._submitted:
            raise HydroError("PlotProcess draws one plot; this one was already submitted")
        self._submitted = True
        self._conn.send((str(path), arrays, list(pairs), source))

    def result(self) -> Path:
        """Wait for the plot; its path, or the child's error as HydroError."""
        if not self._submitted:
            raise HydroError("PlotProcess.result: no plot was submitted")
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise HydroError(f"the plot process ended (exit code {self._process.exitcode}) without drawing the plot") from None
        finally:
            self.close()
        if status != "ok":
            raise HydroError(value)
        return Path(value)

    def close(self) -> None:
        """End the child (also when nothing was submitted, e.g. after a failed run)."""
        self._conn.close()
        self._process.join(timeout=5.0)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()


def _serve(conn) -> None:
    """The child: import matplotlib now, draw the one plot it is sent, answer (status, value)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401  (the import is the head start)
    except ImportError:
        pass  # figure_of reports it when asked to draw
    try:
        path, arrays, pairs, source = conn.recv()
    except EOFError:  # the parent closed without a plot
        return
    from .history import write_plot

    try:
        conn.send(("ok", str(write_plot(path, arrays, pairs, source))))
    except Exception as exc:  # every failure goes back to the parent as its message
        conn.send(("error", str(exc) or type(exc).__name__))
    finally:
        conn.close()
