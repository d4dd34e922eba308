"""Contact surfaces as the user sees them: the polygons of one world grouped per body pair,
with the net static pressure force and area-weighted summaries (CONTRACT: contact query)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ContactSurface", "group_surfaces", "kept_polygons"]


@dataclass
class ContactSurface:
    """The hydroelastic contact surface between body_a and body_b (scene order) in one world:
    the polygons of every pair of their geometries together (CONTRACT's surfaces are per body
    pair).

    Summaries exclude speculative polygons (pressure at the centroid < 0):
    faces: number of polygons; area [m^2]; force: net static pressure force on body_b,
    sum of A p0 n (N, world frame; n points from body_a into body_b); centroid: area-weighted
    centroid (m, world); max_pressure: largest vertex pressure [Pa]; mean_pressure:
    area-weighted mean pressure [Pa].

    polygons: every polygon of the pair, speculative ones included: `vertices` is a list of
    (k, 3) arrays (world, counter-clockwise about the normal), `vertex_pressure` a list of (k,)
    arrays, and `area`, `pressure` (at the centroid), `centroid`, `normal`, `g_a`, `g_b`
    (directional pressure gradients [Pa/m], inf on a rigid side), `geometry_a`, `geometry_b`
    (the name of the geometry of body_a and of body_b each polygon lies on), `element_a`,
    `element_b` (tet or triangle index within that geometry's mesh; 0 for a half-space) and
    `contact` (True where the solver makes a point contact of the polygon: its gradients are
    not round-off against |grad p|, contact.assemble; e.g. False where a box's field runs along
    the surface, near its side walls) are arrays.

    A pair of two rigid geometries is computed with the compliant twin of one of them
    (geometry.twin): its polygons name the geometry the twin stands for, their element is a
    tet of the twin, and their pressures are the twin's field (rigid_modulus times depth over
    the twin's half thickness). Such a contact is near-rigid: the solver caps its stiffness
    (contact.assemble), so force here is the twin's static force at the current overlap, not
    the force the step applies (Simulator.pair_forces)."""

    body_a: str
    body_b: str
    faces: int
    area: float
    force: np.ndarray
    centroid: np.ndarray
    max_pressure: float
    mean_pressure: float
    polygons: dict = field(repr=False, default_factory=dict)

    def pressure_center(self) -> np.ndarray:
        """The pressure centre c = sum A p0 x / sum A p0 over the polygons the solver makes
        contacts of (polygons["contact"]) with p0 > 0 (x their centroids) [m], world frame: where
        the static pressure force of the contacts acts. NaN when none has pressure."""
        area, p0, x = self.polygons["area"], self.polygons["pressure"], self.polygons["centroid"]
        f = np.where((p0 > 0.0) & self.polygons["contact"], area * p0, 0.0)
        return (f[:, None] * x).sum(axis=0) / f.sum() if f.sum() > 0 else np.full(3, np.nan)

    def torsional_capacity(self, mu: float) -> float:
        """The largest friction torque [N m] the surface can resist about the axis through its
        pressure centre c along its mean normal nbar (the direction of its static force), at
        friction coefficient mu, with every polygon i sliding at its limit mu A_i p0_i:
            M_max = sum_i mu A_i p0_i |P_i (nbar x (x_i - c))|,
        P_i the projection onto polygon i's tangent plane (its friction acts in that plane).
        For a flat surface this is sum_i mu A_i p0_i |x_i - c|, the distance of each centroid
        from the axis. The sums run over the polygons the solver makes contacts of, each one
        point contact as in the solver (polygons without pressure, or without a contact, carry
        no friction), so this is the torque the simulation itself can resist."""
        area, p0 = self.polygons["area"], self.polygons["pressure"]
        x, n = self.polygons["centroid"], self.polygons["normal"]
        f = np.where((p0 > 0.0) & self.polygons["contact"], area * p0, 0.0)
        if f.sum() <= 0:
            return 0.0
        c = (f[:, None] * x).sum(axis=0) / f.sum()
        nbar = (f[:, None] * n).sum(axis=0)
        nbar /= np.linalg.norm(nbar)
        lever = np.cross(nbar, x - c)
        lever -= (lever * n).sum(axis=1)[:, None] * n
        return float(mu * (f * np.linalg.norm(lever, axis=1)).sum())

    def summary(self) -> dict:
        """The JSON fields of CONTRACT's `taichi-hydro contact`."""
        return {
            "body_a": self.body_a,
            "body_b": self.body_b,
            "faces": int(self.faces),
            "area": float(self.area),
            "force": [float(x) for x in self.force],
            "centroid": [float(x) for x in self.centroid],
            "max_pressure": float(self.max_pressure),
            "mean_pressure": float(self.mean_pressure),
        }


def kept_polygons(poly_g: np.ndarray, deep: np.ndarray) -> np.ndarray:
    """Which polygons (rows of poly_g, columns types.POLY_*) the contact assembly keeps
    (contact.assemble.valid_polygon): positive area, and each side's directional gradient
    positive and above GRADIENT_REL of its |grad p| (inf on a rigid side); in a deep pair
    (deep[i] = 1), any gradient that is not NaN."""
    from ..contact.assemble import GRADIENT_REL
    from ..types import POLY_AREA, POLY_GA, POLY_GRAD_A

    g = poly_g.astype(np.float64)
    ok = g[:, POLY_AREA] > 0.0
    for side in range(2):
        gs, gn = g[:, POLY_GA + side], g[:, POLY_GRAD_A + side]
        with np.errstate(invalid="ignore"):
            ok &= np.where(deep == 1, ~np.isnan(gs), np.isposinf(gs) | (gs > GRADIENT_REL * gn))
    return ok


def group_surfaces(pool: dict[str, np.ndarray], world: int, model, pair_deep: np.ndarray | None = None) -> list[ContactSurface]:
    """Group the polygons of `world` by body pair, in scene order; the polygons of a body pair's
    several geometry pairs make one surface. pool: PolygonPool.to_numpy() arrays (converted to
    float64 here); model: ModelData; pair_deep: the world's row of the collision's pair_deep
    (P,) (None: no deep pair), for polygons["contact"]. Pairs without polygons are omitted."""
    from ..types import P_BODY_HI, P_BODY_LO, P_FLIP, P_GEOM_A, P_GEOM_B, K_PAIR, K_WORLD, POLY_AREA, POLY_GA, POLY_GB, POLY_P0

    pid = pool["poly_i"]
    sel = np.flatnonzero(pid[:, K_WORLD] == world)
    body_pair = model.pair_i[pid[sel, K_PAIR]][:, [P_BODY_LO, P_BODY_HI]]
    # One sort for all: by body pair (scene order), then, within a pair, by centroid: a
    # deterministic polygon order (the device appends in any order).
    c = pool["poly_c"][sel].astype(np.float64)
    order = np.lexsort((c[:, 2], c[:, 1], c[:, 0], body_pair[:, 1], body_pair[:, 0]))
    sel, body_pair = sel[order], body_pair[order]
    g = pool["poly_g"][sel]
    area_all, p0_all = g[:, POLY_AREA].astype(np.float64), g[:, POLY_P0].astype(np.float64)
    normal_all, centroid_all = pool["poly_n"][sel].astype(np.float64), c[order]
    nv = pool["poly_nv"][sel]
    verts_all = [pool["poly_v"][r, :k].astype(np.float64) for r, k in zip(sel, nv)]
    vps_all = [pool["poly_vp"][r, :k].astype(np.float64) for r, k in zip(sel, nv)]
    pairs_all = model.pair_i[pid[sel, K_PAIR]]
    flip = (pairs_all[:, P_FLIP] == 1)[:, None]  # roles (a, b) of the pair against (lower, higher) body
    elements_all = np.where(flip, pid[sel][:, [3, 2]], pid[sel][:, [2, 3]])
    geoms = np.where(flip, pairs_all[:, [P_GEOM_B, P_GEOM_A]], pairs_all[:, [P_GEOM_A, P_GEOM_B]])
    names_all = np.array(model.geom_name, dtype=object)[geoms]
    deep_all = np.zeros(len(sel), int) if pair_deep is None else pair_deep[pid[sel, K_PAIR]]
    contact_all = kept_polygons(g, deep_all)
    starts = np.flatnonzero(np.r_[True, np.any(body_pair[1:] != body_pair[:-1], axis=1)]) if len(sel) else np.zeros(0, int)
    out = []
    for i0, i1 in zip(starts, np.r_[starts[1:], len(sel)]):
        lo, hi = body_pair[i0]
        span = slice(i0, i1)
        area, p0, normal, centroid = area_all[span], p0_all[span], normal_all[span], centroid_all[span]
        vps = vps_all[span]
        real = p0 >= 0.0
        total = float(area[real].sum())
        force = (area[real] * p0[real])[:, None] * normal[real]
        out.append(
            ContactSurface(
                body_a=model.scene.bodies[lo].name,
                body_b=model.scene.bodies[hi].name,
                faces=int(real.sum()),
                area=total,
                force=force.sum(axis=0) if real.any() else np.zeros(3),
                centroid=(area[real, None] * centroid[real]).sum(axis=0) / total if total > 0 else np.zeros(3),
                max_pressure=float(max((v.max() for v, r in zip(vps, real) if r), default=0.0)),
                mean_pressure=float((area[real] * p0[real]).sum() / total) if total > 0 else 0.0,
                polygons={
                    "vertices": verts_all[span],
                    "vertex_pressure": vps,
                    "area": area,
                    "pressure": p0,
                    "centroid": centroid,
                    "normal": normal,
                    "g_a": g[span, POLY_GA].astype(np.float64),
                    "g_b": g[span, POLY_GB].astype(np.float64),
                    "geometry_a": names_all[span, 0].copy(),
                    "geometry_b": names_all[span, 1].copy(),
                    "element_a": elements_all[span, 0].copy(),
                    "element_b": elements_all[span, 1].copy(),
                    "contact": contact_all[span],
                },
            )
        )
    return out
