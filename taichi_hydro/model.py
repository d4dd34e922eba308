"""The static model: geometry, pairs and materials, built once from a Scene and shared by all
worlds. ModelData is the host (NumPy) description; DeviceModel holds the same on the device.

Element pools are shared by identical shapes (a pile of equal spheres stores one sphere mesh):
geometries reference a range of the tet pool or the triangle pool."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import taichi as ti

from .errors import SceneError
from .geometry.build import HALFSPACE, TETMESH, TRIMESH, Geometry, build_geometry
from .scene import Scene

__all__ = ["ModelData", "DeviceModel", "build_model", "PairType"]


class PairType:
    """How a geometry pair makes contact polygons. Role a is listed first."""

    TET_TET = 0  # compliant mesh a - compliant mesh b
    TET_TRI = 1  # compliant mesh a - rigid mesh b
    TET_PLANE = 2  # compliant mesh a - rigid half-space b
    TET_SLAB = 3  # compliant mesh a - compliant half-space b
    SLAB_TRI = 4  # compliant half-space a - rigid mesh b
    HASHED = (TET_TET, TET_TRI)
    PLANAR = (TET_PLANE, TET_SLAB, SLAB_TRI)
    NAMES = ("tet-tet", "tet-triangle", "tet-halfspace", "tet-slab", "slab-triangle")


BODY_DYNAMIC, BODY_STATIC, BODY_KINEMATIC = 0, 1, 2
BODY_KINDS = ("dynamic", "static", "kinematic")

# geom_i columns
G_BODY, G_KIND, G_COMPLIANT, G_POOL_START, G_ELEM_COUNT, G_HASH_START = range(6)
# pair_i columns
P_GEOM_A, P_GEOM_B, P_TYPE, P_FLIP, P_BODY_LO, P_BODY_HI = range(6)


@dataclass
class ModelData:
    """Host arrays (float64 / int32) of the model; shapes in the comments.

    tet_X_G (T, 4, 3) [m], tet_p (T, 4) [Pa], tet_grad_G (T, 3) [Pa/m]: tet pool.
    tri_X_G (F, 3, 3) [m], tri_n_G (F, 3): triangle pool (outward unit normals).
    geom_i (G, 8): body, kind, compliant, pool start, element count, start in the hashed
      element range (-1 if the geometry is in no hashed pair).
    geom_f (G, 4): modulus E [Pa], slab gradient E/H [Pa/m], margin [m], element size [m].
    geom_box_G (G, 2, 3): body-frame bounding box [m] (meshes only).
    geom_ball_G (G, 4): body-frame bounding ball, centre [m] and radius [m] (meshes only): its
      world box does not grow when the body turns, unlike the rotated box's.
    hash_elem_geom (H,): geometry of each hashed element.
    pair_i (P, 8): geometry a, geometry b (roles), PairType, flip (1 when body(a) > body(b): the
      output normal points from the lower body index to the higher), lower body, higher body.
    pair_f (P, 4): friction mu, Hunt-Crossley d [s/m], Kelvin-Voigt tau [s], 0 (unused) (Drake's
      combination rules: mu = 2 mu_a mu_b / (mu_a + mu_b), d weighted by the moduli,
      tau = tau_a + tau_b; see combine_pair_parameters).
    pair_table (G, G): pair id of a hashed pair or -1.
    geom_pair_start (G+1,), geom_pair_list (...): hashed pairs of each geometry (CSR).
    plane_task (K, 2): (pair, element index within the mesh geometry) for every planar pair.
    cell_size [m]: spatial hash cell edge.
    body_kind (B,): BODY_DYNAMIC, BODY_STATIC or BODY_KINEMATIC.
    body_mass (B,) [kg] (0 unless dynamic); body_inertia_B (B, 3, 3) [kg m^2] about the centre
      of mass, body axes; body_com_B (B, 3) [m] centre of mass in the body frame.
    body_reach (B,) [m]: distance from the centre of mass to the farthest point of the body's
      geometry (bounding ball; 0 for a half-space): |dv| + reach |dw| bounds the velocity change
      of every point of the body (the solver's stopping test).
    """

    scene: Scene
    geometries: list[Geometry]
    tet_X_G: np.ndarray
    tet_p: np.ndarray
    tet_grad_G: np.ndarray
    tri_X_G: np.ndarray
    tri_n_G: np.ndarray
    geom_i: np.ndarray
    geom_f: np.ndarray
    geom_box_G: np.ndarray
    geom_ball_G: np.ndarray
    hash_elem_geom: np.ndarray
    pair_i: np.ndarray
    pair_f: np.ndarray
    pair_table: np.ndarray
    geom_pair_start: np.ndarray
    geom_pair_list: np.ndarray
    plane_task: np.ndarray
    cell_size: float
    body_kind: np.ndarray
    body_mass: np.ndarray
    body_inertia_B: np.ndarray
    body_com_B: np.ndarray
    body_reach: np.ndarray

    @property
    def body_count(self) -> int:
        return len(self.scene.bodies)

    @property
    def pair_count(self) -> int:
        return len(self.pair_i)

    def pair_names(self, p: int) -> tuple[str, str]:
        lo, hi = self.pair_i[p, P_BODY_LO], self.pair_i[p, P_BODY_HI]
        return self.scene.bodies[lo].name, self.scene.bodies[hi].name


def _pair_type(ga: Geometry, gb: Geometry) -> tuple[int, bool] | None:
    """(PairType, swapped) for geometries a, b, or None when they make no hydroelastic surface."""
    def key(g: Geometry) -> str:
        if g.kind == HALFSPACE:
            return "slab" if g.compliant else "plane"
        return "tet" if g.kind == TETMESH else "tri"

    ka, kb = key(ga), key(gb)
    rules = {
        ("tet", "tet"): PairType.TET_TET,
        ("tet", "tri"): PairType.TET_TRI,
        ("tet", "plane"): PairType.TET_PLANE,
        ("tet", "slab"): PairType.TET_SLAB,
        ("slab", "tri"): PairType.SLAB_TRI,
    }
    if (ka, kb) in rules:
        return rules[(ka, kb)], False
    if (kb, ka) in rules:
        return rules[(kb, ka)], True
    return None


def build_model(scene: Scene) -> ModelData:
    """Geometry, pools, pairs and the hash set-up for `scene`."""
    geoms = [build_geometry(b, scene.source) for b in scene.bodies]
    G = len(geoms)

    # Shared element pools.
    tet_X, tet_p, tet_g, tri_X, tri_n = [], [], [], [], []
    pool_start: dict[int, int] = {}
    n_tet = n_tri = 0
    geom_i = np.zeros((G, 8), dtype=np.int32)
    geom_f = np.zeros((G, 4), dtype=np.float64)
    geom_box = np.zeros((G, 2, 3), dtype=np.float64)
    geom_ball = np.zeros((G, 4), dtype=np.float64)
    for g, geo in enumerate(geoms):
        geom_i[g, G_BODY] = g
        geom_i[g, G_KIND] = geo.kind
        geom_i[g, G_COMPLIANT] = int(geo.compliant)
        geom_i[g, G_HASH_START] = -1
        geom_f[g, :3] = (geo.modulus, geo.slab_gradient, geo.margin)
        if geo.kind == TETMESH:
            mesh = geo.tets
            if id(mesh) not in pool_start:
                pool_start[id(mesh)] = n_tet
                tet_X.append(mesh.vertices[mesh.tets])
                tet_p.append(mesh.pressure[mesh.tets])
                tet_g.append(mesh.gradients())
                n_tet += mesh.tet_count
            geom_i[g, G_POOL_START] = pool_start[id(mesh)]
            geom_i[g, G_ELEM_COUNT] = mesh.tet_count
            x = mesh.vertices
            edges = mesh.vertices[mesh.tets]
        elif geo.kind == TRIMESH:
            surf = geo.surface
            if id(surf) not in pool_start:
                pool_start[id(surf)] = n_tri
                tri_X.append(surf.vertices[surf.triangles])
                tri_n.append(surf.normals())
                n_tri += surf.triangle_count
            geom_i[g, G_POOL_START] = pool_start[id(surf)]
            geom_i[g, G_ELEM_COUNT] = surf.triangle_count
            x = surf.vertices
            edges = surf.vertices[surf.triangles]
        else:
            continue
        geom_box[g] = (x.min(axis=0), x.max(axis=0))
        centre = 0.5 * (geom_box[g, 0] + geom_box[g, 1])
        geom_ball[g] = (*centre, float(np.linalg.norm(x - centre, axis=1).max()))
        geom_f[g, 3] = float(np.median(np.ptp(edges, axis=1).max(axis=1)))

    # Pairs: every pair of bodies that can make a hydroelastic surface, except two static ones.
    pairs, pair_f = [], []
    for a in range(G):
        for b in range(a + 1, G):
            ba, bb = scene.bodies[a], scene.bodies[b]
            if ba.type == "static" and bb.type == "static" or scene.filtered(ba.name, bb.name):
                continue
            kind = _pair_type(geoms[a], geoms[b])
            if kind is None:
                continue
            ptype, swapped = kind
            ra, rb = (b, a) if swapped else (a, b)
            pairs.append([ra, rb, ptype, int(swapped), a, b, 0, 0])
            pair_f.append(ba.contact.relaxation_time + bb.contact.relaxation_time)
    pair_i = np.array(pairs, dtype=np.int32).reshape(-1, 8)
    friction = np.array([b.contact.friction for b in scene.bodies], dtype=np.float64)
    dissipation = np.array([b.contact.dissipation for b in scene.bodies], dtype=np.float64)
    modulus = np.array([g.modulus if g.compliant else np.nan for g in geoms], dtype=np.float64)
    pair_tau = np.array(pair_f, dtype=np.float64)
    pair_f = combine_pair_parameters(pair_i, pair_tau, friction[None], dissipation[None], modulus[None])[0]

    # Hashed pairs and the elements they hash.
    pair_table = -np.ones((G, G), dtype=np.int32)
    per_geom: list[list[int]] = [[] for _ in range(G)]
    hashed_geoms: set[int] = set()
    for p, row in enumerate(pair_i):
        if row[P_TYPE] in PairType.HASHED:
            a, b = int(row[P_GEOM_A]), int(row[P_GEOM_B])
            pair_table[a, b] = pair_table[b, a] = p
            per_geom[a].append(p)
            per_geom[b].append(p)
            hashed_geoms.update((a, b))
    hash_elem_geom = []
    for g in sorted(hashed_geoms):
        geom_i[g, G_HASH_START] = len(hash_elem_geom)
        hash_elem_geom += [g] * int(geom_i[g, G_ELEM_COUNT])
    geom_pair_start = np.zeros(G + 1, dtype=np.int32)
    geom_pair_start[1:] = np.cumsum([len(x) for x in per_geom])
    geom_pair_list = np.array([p for lst in per_geom for p in lst] or [0], dtype=np.int32)

    tasks = []
    for p, row in enumerate(pair_i):
        if row[P_TYPE] in PairType.PLANAR:
            mesh_geom = row[P_GEOM_B] if row[P_TYPE] == PairType.SLAB_TRI else row[P_GEOM_A]
            n = int(geom_i[mesh_geom, G_ELEM_COUNT])
            tasks.append(np.column_stack([np.full(n, p), np.arange(n)]))
    plane_task = np.vstack(tasks).astype(np.int32) if tasks else np.zeros((0, 2), dtype=np.int32)

    B = len(scene.bodies)
    body_kind = np.array([BODY_KINDS.index(b.type) for b in scene.bodies], dtype=np.int32)
    body_mass = np.zeros(B)
    body_inertia = np.zeros((B, 3, 3))
    body_com = np.zeros((B, 3))
    for i, (body, geo) in enumerate(zip(scene.bodies, geoms)):
        if geo.mass is not None:
            body_com[i] = geo.mass.com_G
        if body.type != "dynamic":
            continue
        mass = body.mass if body.mass is not None else body.density * geo.mass.volume
        body_mass[i] = mass
        body_inertia[i] = geo.mass.inertia(mass)

    sizes = geom_f[sorted(hashed_geoms), 3] if hashed_geoms else np.array([1.0])
    cell_size = 2.0 * float(np.median(sizes))

    def stack(parts, shape):
        return np.concatenate(parts) if parts else np.zeros((0, *shape))

    return ModelData(
        scene=scene,
        geometries=geoms,
        tet_X_G=stack(tet_X, (4, 3)),
        tet_p=stack(tet_p, (4,)),
        tet_grad_G=stack(tet_g, (3,)),
        tri_X_G=stack(tri_X, (3, 3)),
        tri_n_G=stack(tri_n, (3,)),
        geom_i=geom_i,
        geom_f=geom_f,
        geom_box_G=geom_box,
        geom_ball_G=geom_ball,
        hash_elem_geom=np.array(hash_elem_geom, dtype=np.int32),
        pair_i=pair_i,
        pair_f=pair_f,
        pair_table=pair_table,
        geom_pair_start=geom_pair_start,
        geom_pair_list=geom_pair_list,
        plane_task=plane_task,
        cell_size=cell_size,
        body_kind=body_kind,
        body_mass=body_mass,
        body_inertia_B=body_inertia,
        body_com_B=body_com,
        body_reach=body_reach(geom_ball, geom_i, body_com),
    )


def body_reach(geom_ball_G: np.ndarray, geom_i: np.ndarray, body_com_B: np.ndarray) -> np.ndarray:
    """(B,) [m]: per body, the largest distance from its centre of mass to a point of the
    bounding ball of one of its geometries (0 for a body without a mesh: a half-space)."""
    reach = np.zeros(len(body_com_B))
    for g, ball in enumerate(geom_ball_G):
        if ball[3] > 0.0:
            b = geom_i[g, G_BODY]
            reach[b] = max(reach[b], float(np.linalg.norm(ball[:3] - body_com_B[b])) + ball[3])
    return reach


def combine_pair_parameters(pair_i: np.ndarray, pair_tau: np.ndarray, friction: np.ndarray, dissipation: np.ndarray,
                            modulus: np.ndarray) -> np.ndarray:
    """pair_f rows (N, P, 4) of N worlds from per-body values (N, B): friction mu [-],
    Hunt-Crossley d [s/m] and modulus E [Pa] (NaN for a rigid geometry; geometry g belongs to
    body g); pair_tau (P,) Kelvin-Voigt tau [s], the same in every world. Drake's rules:
    mu = 2 mu_a mu_b / (mu_a + mu_b) (0 when both are 0); d = the compliant side's d when the
    other is rigid, (E_b d_a + E_a d_b) / (E_a + E_b) otherwise."""
    a, b = pair_i[:, P_BODY_LO], pair_i[:, P_BODY_HI]
    out = np.zeros((friction.shape[0], len(pair_i), 4), dtype=np.float64)
    if len(pair_i) == 0:
        return out
    mu_a, mu_b = friction[:, a], friction[:, b]
    total = mu_a + mu_b
    out[..., 0] = np.where(total == 0, 0.0, 2.0 * mu_a * mu_b / np.where(total == 0, 1.0, total))
    da, db, ea, eb = dissipation[:, a], dissipation[:, b], modulus[:, a], modulus[:, b]
    rigid_a, rigid_b = np.isnan(ea), np.isnan(eb)
    with np.errstate(invalid="ignore"):
        both = (eb * da + ea * db) / (ea + eb)
    out[..., 1] = np.where(rigid_a, db, np.where(rigid_b, da, both))
    out[..., 2] = pair_tau
    return out


def _upload(dtype, array: np.ndarray, min_len: int = 1):
    """ndarray holding `array` (padded to at least `min_len` rows: Taichi rejects empty arrays)."""
    n = max(len(array), min_len)
    a = ti.ndarray(dtype, shape=(n,))
    if len(array):
        host = np.zeros((n, *array.shape[1:]), dtype=array.dtype)
        host[: len(array)] = array
        a.from_numpy(host.astype(np.int32 if np.issubdtype(array.dtype, np.integer) else _float_np()))
    return a


def _float_np():
    from .backend import current_precision

    return np.float64 if current_precision() == "f64" else np.float32


class DeviceModel:
    """Model arrays on the device (ti.ndarray), same names and meaning as ModelData, except the
    parameters a world may change (Simulator.set_parameters), which have a leading dimension of
    1 here (shared by all worlds): pair_f (1, P), body_inv_mass (1, B) [1/kg],
    body_inv_inertia_B (1, B) [1/(kg m^2)] and geom_scale (1, G) (pressure scale, 1)."""

    def __init__(self, data: ModelData):
        from .backend import require_init

        require_init()
        vec3, vec4 = ti.math.vec3, ti.math.vec4
        ivec8 = ti.types.vector(8, ti.i32)
        self.data = data
        self.tet_X_G = _upload(ti.types.matrix(4, 3, float), data.tet_X_G)
        self.tet_p = _upload(vec4, data.tet_p)
        self.tet_grad_G = _upload(vec3, data.tet_grad_G)
        self.tri_X_G = _upload(ti.types.matrix(3, 3, float), data.tri_X_G)
        self.tri_n_G = _upload(vec3, data.tri_n_G)
        self.geom_i = _upload(ivec8, data.geom_i)
        self.geom_f = _upload(vec4, data.geom_f)
        self.geom_box_G = _upload(ti.types.matrix(2, 3, float), data.geom_box_G)
        self.geom_ball_G = _upload(vec4, data.geom_ball_G)
        self.hash_elem_geom = _upload(ti.i32, data.hash_elem_geom)
        self.pair_i = _upload(ivec8, data.pair_i)
        P = len(data.pair_i)
        # Per-world parameters have a leading dimension of 1 (shared) or the world count.
        self.pair_f = ti.ndarray(vec4, (1, max(P, 1)))
        if P:
            self.pair_f.from_numpy(data.pair_f[None].astype(_float_np()))
        G = len(data.geom_i)
        self.pair_table = ti.ndarray(ti.i32, shape=(G, G))
        self.pair_table.from_numpy(data.pair_table)
        self.geom_pair_start = _upload(ti.i32, data.geom_pair_start)
        self.geom_pair_list = _upload(ti.i32, data.geom_pair_list)
        self.plane_task = _upload(ti.types.vector(2, ti.i32), data.plane_task)
        B = len(data.body_kind)
        self.body_kind = _upload(ti.i32, data.body_kind)
        self.body_com_B = _upload(vec3, data.body_com_B)
        self.body_reach = _upload(float, data.body_reach)
        inv_mass = np.where(data.body_mass > 0, 1.0 / np.where(data.body_mass > 0, data.body_mass, 1.0), 0.0)
        inv_inertia = np.zeros_like(data.body_inertia_B)
        dynamic = data.body_mass > 0
        inv_inertia[dynamic] = np.linalg.inv(data.body_inertia_B[dynamic])
        self.body_inv_mass = ti.ndarray(float, (1, B))
        self.body_inv_mass.from_numpy(inv_mass[None].astype(_float_np()))
        self.body_inv_inertia_B = ti.ndarray(ti.math.mat3, (1, B))
        self.body_inv_inertia_B.from_numpy(inv_inertia[None].astype(_float_np()))
        # Pressure scale of each geometry (E_world / E_scene; see Simulator.set_parameters).
        self.geom_scale = ti.ndarray(float, (1, G))
        self.geom_scale.from_numpy(np.ones((1, G), dtype=_float_np()))
        self.body_count = B
        self.hash_elem_count = len(data.hash_elem_geom)
        self.plane_task_count = len(data.plane_task)
        self.geom_count = G
        self.pair_count = len(data.pair_i)


def check_supported(data: ModelData) -> None:
    """Raise SceneError for a body pair that can touch but that no hydroelastic surface can
    describe: two rigid geometries of which one is dynamic (unless a collision filter lists
    them). Pairs of two immobile bodies have no dynamics and are skipped."""
    scene = data.scene
    for a in range(len(scene.bodies)):
        for b in range(a + 1, len(scene.bodies)):
            ba, bb = scene.bodies[a], scene.bodies[b]
            if "dynamic" not in (ba.type, bb.type) or scene.filtered(ba.name, bb.name):
                continue
            if not data.geometries[a].compliant and not data.geometries[b].compliant:
                raise SceneError(
                    f"{scene.source}: bodies '{ba.name}' and '{bb.name}' are both rigid: hydroelastic contact needs "
                    "one of them compliant (set contact.hydro = \"compliant\" and a modulus on one), or list both in a "
                    "[[collision_filter]]"
                )
