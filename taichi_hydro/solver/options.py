"""The solver's options: the scene's [solver] table resolved for the backend in use."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SceneError
from ..scene import NEWTON_SIGMA, SolverSettings

__all__ = ["SolverOptions", "BLOCK_ARCHS"]

BLOCK_ARCHS = ("cuda", "vulkan")
"""Backends with thread blocks and block barriers (Taichi's ti.simt.block): the block schedule."""


@dataclass(frozen=True)
class SolverOptions:
    """Resolved solver options (scene.SolverSettings documents each key).

    Compile-time (kernels specialise on them with ti.static; each combination compiles once):
    schedule ("world" | "contact" | "block"), method ("jacobi" | "accelerated" | "gauss_seidel" | "newton"),
    coulomb (the De Saxce term), sleep (Gauss-Seidel only), deterministic, warm_start,
    patch_point (one point contact per patch: [solver] contact = "point"), linear (newton's
    step: "auto" | "cholesky" | "cg"; solver.data.SolverData picks for "auto" once it knows the
    batch's size).
    Run-time (kernel arguments, so changing them never recompiles): iterations, tolerance
    [m/s], relaxation omega, beta, sigma, presweeps (newton's Gauss-Seidel sweeps before its
    iterations on the world schedule; 0 for every other method and on the block schedule)."""

    schedule: str
    method: str
    coulomb: bool
    sleep: bool
    deterministic: bool
    warm_start: bool
    iterations: int
    tolerance: float
    relaxation: float
    beta: float
    sigma: float
    patch_point: bool = False
    linear: str = "auto"
    presweeps: int = 0

    @staticmethod
    def resolve(settings: SolverSettings, arch: str, source: str = "<scene>", joints: bool = False) -> "SolverOptions":
        """"auto" becomes the backend's default: the contact schedule with accelerated Jacobi
        on cuda, the world schedule with Newton elsewhere (Gauss-Seidel with mode "convex",
        a relaxation Newton does not solve): at the tolerance asked for, Newton's answer meets
        it where the projected iterations stop tens to thousands of times past it (README,
        "Solve time against accuracy"); Newton also for a scene with joints (the only method
        that solves their rows) and with schedule "block". Newton runs on the
        block schedule (one block of threads per world, solver.newton_block) on cuda and on the
        world schedule elsewhere: cpu has no thread blocks (schedule "block" is refused there),
        and on vulkan the block kernel is selectable but not the default, since Mesa's lavapipe
        (software Vulkan) takes about 10 minutes to compile it, against about 1 minute for the
        world kernel. Newton with [solver] linear = "cg" (conjugate gradients, which only the
        world kernel has) resolves to the world schedule on cuda too, as does a batch too large for
        the dense Hessians (solver.data.resolve_linear); linear set to anything
        but "auto" with a method other than newton is refused."""
        schedule = settings.schedule
        if schedule == "block" and arch not in BLOCK_ARCHS:
            raise SceneError(f"{source}: [solver] schedule \"block\" needs thread blocks (cuda or vulkan), not arch {arch}; "
                             "use schedule \"world\"")
        if schedule == "auto":
            schedule = "contact" if arch == "cuda" else "world"
        method = settings.method
        if (joints or settings.schedule == "block") and method == "auto":
            method = "newton"
        if joints and method != "newton":
            raise SceneError(f"{source}: [solver] method {method}: the scene has joints, which only method newton solves")
        if method == "newton" and settings.schedule == "auto":
            schedule = "world" if arch != "cuda" or settings.linear == "cg" else "block"
        if schedule == "block" and method != "newton":
            raise SceneError(f"{source}: [solver] schedule \"block\" runs method newton only, not {method}")
        if method == "auto":  # Newton does not solve the convex relaxation
            method = ("gauss_seidel" if settings.mode == "convex" else "newton") if schedule == "world" else "accelerated"
        if method == "newton" and settings.mode == "convex":  # never Newton ignoring the mode
            why = "the scene has joints" if joints else f"schedule \"{settings.schedule}\" runs it" if schedule == "block" else "asked for"
            raise SceneError(f"{source}: [solver] mode \"convex\" is a relaxation of the projected iterations; method newton "
                             f"({why}) solves the Coulomb law: use mode = \"coulomb\"")
        if method == "newton" and settings.sigma == 0.0:
            chosen = " (method \"auto\" chose newton here)" if settings.method == "auto" else ""
            raise SceneError(f"{source}: [solver] sigma {NEWTON_SIGMA}{chosen}")
        if method in ("gauss_seidel", "newton") and schedule == "contact":
            raise SceneError(f"{source}: [solver] method {method} needs schedule \"world\"")
        if isinstance(settings.presweeps, bool) or not isinstance(settings.presweeps, int) or settings.presweeps < 0:
            raise SceneError(f"{source}: [solver] presweeps must be an integer >= 0, got {settings.presweeps!r}")
        if settings.presweeps and method != "newton":
            raise SceneError(f"{source}: [solver] presweeps {settings.presweeps}: Gauss-Seidel sweeps that start method newton's "
                             f"solve; this scene runs method {method} (set method = \"newton\", or drop the key)")
        if settings.presweeps and schedule == "block":
            raise SceneError(f"{source}: [solver] presweeps {settings.presweeps}: method newton runs on the block schedule here "
                             f"(arch {arch}), which has no Gauss-Seidel sweeps; set schedule = \"world\", or presweeps = 0")
        if settings.linear != "auto" and method != "newton":
            raise SceneError(f"{source}: [solver] linear \"{settings.linear}\" is how method newton solves its step; "
                             f"this scene runs method {method} (set method = \"newton\", or drop the key)")
        return SolverOptions(
            schedule=schedule, method=method, coulomb=settings.mode == "coulomb",
            sleep=method == "gauss_seidel" and settings.sleep, deterministic=settings.deterministic,
            warm_start=settings.warm_start, iterations=int(settings.iterations), tolerance=float(settings.tolerance),
            relaxation=float(settings.relaxation), beta=float(settings.beta), sigma=float(settings.sigma),
            patch_point=settings.contact == "point", linear=settings.linear, presweeps=int(settings.presweeps),
        )

    @property
    def accelerated(self) -> bool:
        return self.method == "accelerated"

    @property
    def gauss_seidel(self) -> bool:
        return self.method == "gauss_seidel"

    @property
    def split(self) -> bool:
        """Mass splitting in the step metric (Jacobi methods: every contact moves at once)."""
        return self.method in ("jacobi", "accelerated")
