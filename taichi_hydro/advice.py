"""Warnings for settings that are legal but almost surely not meant (HydroWarning, one per
finding, when a Simulator is built; the command line prints them on stderr).

The rules, each an estimate from the model's own scales:

- Sinking. A dynamic body of mass m resting on a contact sinks delta = m |g| / k under its own
  weight, where k is the contact's stiffness: the smaller of the pressure field's, g_p A (g_p
  the pressure gradient [Pa/m] of the compliant side, E over its half thickness or E/H for a
  slab, in series when both sides are compliant; A = (2 L)^2, the footprint of a body whose
  smallest half extent is L; for a body of several geometries, L of the geometry in the
  contact, carrying the body's whole weight), and the
  near-rigid cap m (beta/dt)^2 the solver applies (SolverSettings.beta). When delta exceeds
  half the body's half thickness L (the smallest half extent of its bounding box) the pressure
  field is crossed past its core and the body may pass through: the time step is too large
  (dt > beta sqrt(L / (2 |g|))) or the modulus too small.
- Tunnelling. A body whose initial speed carries it farther than L in one step can skip a
  contact (no continuous collision detection): |v| dt > L.
- Far from the origin. A position |p| where the device float's spacing (|p| 2^-23 in float32)
  exceeds 1e-3 L quantises the body's contact geometry and its motion.
- Relaxation. The Jacobi methods move each impulse by a fraction omega of its correction per
  sweep: after the iteration cap n at most 1 - (1 - omega)^n of it; below 0.99 the solve
  cannot converge within the cap."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .backend import current_precision
from .errors import HydroWarning
from .types import BODY_DYNAMIC, G_BODY, G_COMPLIANT, HALFSPACE, P_GEOM_A, P_GEOM_B

__all__ = ["findings", "warn_unlikely"]


def _half_thickness(host, g: int) -> float:
    """Smallest half extent of geometry g's body-frame bounding box [m] (inf for a half-space)."""
    if host.geometries[g].kind == HALFSPACE:
        return math.inf
    box = host.geom_box_G[g]
    return float(0.5 * np.min(box[1] - box[0]))


def _gradient(host, g: int) -> float:
    """Pressure gradient of geometry g's field [Pa/m]: E over its half thickness, E/H for a
    compliant slab, inf for a rigid geometry."""
    if not host.geom_i[g][G_COMPLIANT]:
        return math.inf
    if host.geometries[g].kind == HALFSPACE:
        return float(host.geom_slab_gradient[g])
    return float(host.geom_modulus[g]) / _half_thickness(host, g)


def findings(scene, host, beta: float, relaxation_fraction: float | None, precision: str | None = None) -> list[str]:
    """The messages of every rule of the module docstring that `scene` trips (host: its
    model.ModelData). relaxation_fraction: 1 - (1 - omega)^n for a Jacobi method, else None.
    precision: the device float ("f32" | "f64"; default: the current runtime's)."""
    out = []
    g_mag = float(np.linalg.norm(scene.gravity))
    names = [b.name for b in scene.bodies]
    precision = current_precision() if precision is None else precision
    float_spacing = 2.0**-23 if precision != "f64" else 2.0**-52
    geom_body = host.geom_i[:, G_BODY]
    for b, body in enumerate(scene.bodies):
        if host.body_kind[b] != BODY_DYNAMIC:
            continue
        geoms = host.geoms_of(b)  # the scene's (a compliant twin has its geometry's extent)
        if len(geoms) == 0:
            continue
        L = min(_half_thickness(host, g) for g in geoms)
        m = float(host.body_mass[b])
        for p in range(len(host.pair_i)):
            ga, gb = int(host.pair_i[p][P_GEOM_A]), int(host.pair_i[p][P_GEOM_B])
            if geom_body[ga] != b and geom_body[gb] != b:
                continue
            own, other = (ga, gb) if geom_body[ga] == b else (gb, ga)
            compliance = sum(1.0 / _gradient(host, g) for g in (ga, gb))
            if compliance == 0.0:
                continue
            L_own = _half_thickness(host, own)  # the whole weight on this one geometry: the worst case
            footprint = (2.0 * L_own) ** 2
            k = min(footprint / compliance, m * (beta / scene.dt) ** 2)
            sink = m * g_mag / k
            if sink > 0.5 * L_own:
                what = f"body '{body.name}'" if len(geoms) == 1 else f"body '{body.name}' (geometry '{host.geom_name[own]}')"
                out.append(f"{scene.source}: {what} would sink about {sink:.3g} m into "
                           f"'{names[geom_body[other]]}' under its own weight (stiffness {k:.3g} N/m), more than half its "
                           f"half thickness {L_own:.3g} m, and may pass through it: use dt <= "
                           f"{beta * math.sqrt(L_own / (2.0 * max(g_mag, 1e-30))):.3g} s or a larger modulus "
                           "(rule: taichi_hydro.advice)")
        speed = float(np.linalg.norm(body.v_WB))
        if speed * scene.dt > L:
            out.append(f"{scene.source}: body '{body.name}' starts at {speed:.3g} m/s and moves {speed * scene.dt:.3g} m per "
                       f"step, more than its half thickness {L:.3g} m: it can pass through a contact within one step")
        reach = float(np.max(np.abs(body.p_WB)))
        if reach * float_spacing > 1e-3 * L:
            out.append(f"{scene.source}: body '{body.name}' is {reach:.3g} m from the origin, where the device float's spacing "
                       f"{reach * float_spacing:.3g} m exceeds 1e-3 of its half thickness {L:.3g} m: move the scene "
                       "closer to the origin")
    if relaxation_fraction is not None and relaxation_fraction < 0.99:
        out.append(f"{scene.source}: [solver] relaxation = {scene.solver.relaxation:g} moves an impulse by at most "
                   f"{relaxation_fraction:.3g} of its correction within iterations = {scene.solver.iterations}: the "
                   "solve cannot converge; raise relaxation (0.9 is the default) or iterations")
    return out


def warn_unlikely(scene, host, options, precision: str | None = None) -> None:
    """Issue a HydroWarning per finding (see findings) for the scene a Simulator is built on
    (options: its resolved solver.SolverOptions; precision: as findings takes it)."""
    fraction = None
    if options.method in ("jacobi", "accelerated"):
        fraction = 1.0 - (1.0 - options.relaxation) ** options.iterations
    for message in findings(scene, host, options.beta, fraction, precision):
        warnings.warn(message, HydroWarning, stacklevel=3)
