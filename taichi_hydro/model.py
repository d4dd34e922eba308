"""The static model: geometry, pairs and materials, built once from a Scene and shared by all
worlds. ModelData is the host (NumPy) description; Model holds the same on the device.

Element pools are shared by identical shapes (a pile of equal spheres stores one sphere mesh):
geometries reference a range of the tet pool or the triangle pool.

Pairs of two rigid geometries (of two bodies, one dynamic, not filtered) have no pressure field
of their own: one side stands in, for that pair only, as its compliant twin of modulus
[sim] rigid_modulus (geometry.twin), a geometry row of its own after the scene's, so that the
pair is an ordinary compliant-rigid one for every kernel."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import taichi as ti

from . import hostcopy
from .errors import SceneError
from .geometry.bvh import mesh_trees, outward_float32
from .geometry.build import Geometry, body_geometries
from .geometry.mass import UnitMassProperties, gyration_radius, inertia_matrix, union_props
from .geometry.twin import NoTwin, Side, choose_twin, max_gradient
from .scene import Body, Scene
from .types import (
    BODY_KINDS, G_BODY, G_COMPLIANT, G_BVH_ROOT, G_ELEM_COUNT, G_KIND, G_QUERY_START, G_POOL_START, HALFSPACE, P_BODY_HI,
    P_BODY_LO, P_FLIP, P_GEOM_A, P_GEOM_B, P_TWIN, P_TYPE, PF_D, PF_MU, PF_TAU, TETMESH, TRIMESH, PairType, box3, host_float, ivec4, ivec8,
    tet_vertices, tri_vertices, vec3, vec4,
)

__all__ = ["ModelData", "Model", "build_model", "mass_properties", "body_reach", "combine_pair_parameters", "PLANAR_CHUNK"]

PLANAR_CHUNK = 32
"""Elements of a planar pair's mesh per broad-phase thread (collision.broadphase.find_planar):
a thread reads the pair's activity and plane once for its run of elements, so pairs out of
contact cost one test per run, and still leaves E / PLANAR_CHUNK threads to a mesh of E
elements."""


@dataclass
class ModelData:
    """Host arrays (float64 / int32) of the model; shapes in the comments.

    tet_X_G (T, 4, 3) [m], tet_p (T, 4) [Pa], tet_grad_G (T, 3) [Pa/m]: tet pool.
    tri_X_G (F, 3, 3) [m], tri_n_G (F, 3): triangle pool (outward unit normals).
    Geometries: the scene's, body by body in scene order (G_scene of them), then the compliant
    twins of rigid geometries in rigid-rigid pairs (geometry.twin), each a row of its own that
    belongs to the body of the geometry it stands for and serves only its twin pairs.
    geom_twin_of (G,): -1 for a scene geometry, for a twin the scene geometry it stands for.
    unsupported (list of (geometry a, geometry b, reason)): rigid-rigid scene geometry pairs that
      can touch but for which neither side can take a twin (no pair was made; check_supported
      refuses the scene).
    geom_i (G, 8): columns types.G_* (owning body, kind, compliant, pool start, element count,
      start in the query element range or -1, root of its mesh's tree or -1).
    geom_name (G,): each geometry's name within its body (scene.GeometrySpec.name; a twin has
      the name of the geometry it stands for).
    geom_modulus (G,) [Pa] (0 when rigid), geom_slab_gradient (G,) E/H [Pa/m] of a compliant
      half-space, geom_margin (G,) [m], geom_element_size (G,) [m] (median element extent).
    geom_friction (G,) [-], geom_dissipation (G,) [s/m]: each geometry's contact material
      (Coulomb mu, Hunt-Crossley d; a twin's are those of the geometry it stands for),
      combined per pair into pair_f.
    body_geom_start (B + 1,), body_geoms (G_scene,): the scene geometries of each body (CSR,
      the inverse of geom_i[:, G_BODY] without the twins), in the body's scene order; every
      body <-> geometry lookup goes through these two maps. Scene geometries are stored body
      by body, so body_geoms is 0..G_scene-1.
    geom_box_G (G, 2, 3): body-frame bounding box [m] (meshes only).
    geom_ball_G (G, 4): body-frame bounding ball, centre [m] and radius [m] (meshes only): its
      world box does not grow when the body turns, unlike the rotated box's.
    query_elem_geom (H,): geometry of each query element (the elements of the geometries that
      are geometry a of a mesh-mesh pair, one broad-phase thread per world and query element).
    bvh_box_G (N, 2, 3) [m], bvh_node (N, 4), bvh_elem (M,), bvh_elem_box_G (M, 2, 3) [m]: the
      trees of the meshes
      (collision.bvh), mesh frame; geom_i[g, G_BVH_ROOT] is geometry g's root.
    pair_i (P, 8): geometry a, geometry b (roles), PairType, flip (1 when body(a) > body(b): the
      output normal points from the lower body index to the higher), lower body, higher body,
      twin (1 for a rigid-rigid pair, one of whose geometries is a twin).
    pair_f (P, 4): columns types.PF_*: friction mu, Hunt-Crossley d [s/m], Kelvin-Voigt tau [s]
      of the pair's two geometries (Drake's combination rules: mu = 2 mu_a mu_b / (mu_a + mu_b),
      d weighted by the moduli, tau = tau_a + tau_b; see combine_pair_parameters).
    pair_table (G, G): pair id of a mesh-mesh pair or -1.
    geom_pair_start (G+1,), geom_pair_list (...): mesh-mesh pairs of each geometry (CSR).
    planar_task (K, 3): (pair, first element, element count) for every planar pair, its mesh's
      elements (indices within the mesh geometry) in runs of at most PLANAR_CHUNK, in order;
      planar_task_box_G (K, 2, 3) [m]: the box of each run's elements, mesh frame, from the
      vertices as the device stores them (run_boxes).
    body_kind (B,): BODY_DYNAMIC, BODY_STATIC or BODY_KINEMATIC.
    body_mass (B,) [kg] (0 unless dynamic); body_inertia_B (B, 3, 3) [kg m^2] about the centre
      of mass, body axes; body_com_B (B, 3) [m] centre of mass in the body frame (see
      mass_properties).
    body_props (B,): the unit-density mass properties of each body's geometries taken together
      (geometry.mass.union_props, in B), or None where there is no volume or the scene gives
      the inertia (then masses set per world scale body_inertia_B instead).
    body_reach (B,) [m]: see body_reach; |dv| + reach |dw| bounds the velocity change of every
      point of the body (the solver's stopping test).
    """

    scene: Scene
    geometries: list[Geometry]
    geom_twin_of: np.ndarray
    unsupported: list[tuple[int, int, str]]
    tet_X_G: np.ndarray
    tet_p: np.ndarray
    tet_grad_G: np.ndarray
    tri_X_G: np.ndarray
    tri_n_G: np.ndarray
    geom_i: np.ndarray
    geom_name: list[str]
    geom_modulus: np.ndarray
    geom_slab_gradient: np.ndarray
    geom_margin: np.ndarray
    geom_element_size: np.ndarray
    geom_friction: np.ndarray
    geom_dissipation: np.ndarray
    body_geom_start: np.ndarray
    body_geoms: np.ndarray
    geom_box_G: np.ndarray
    geom_ball_G: np.ndarray
    query_elem_geom: np.ndarray
    bvh_box_G: np.ndarray
    bvh_node: np.ndarray
    bvh_elem: np.ndarray
    bvh_elem_box_G: np.ndarray
    pair_i: np.ndarray
    pair_f: np.ndarray
    pair_table: np.ndarray
    geom_pair_start: np.ndarray
    geom_pair_list: np.ndarray
    planar_task: np.ndarray
    planar_task_box_G: np.ndarray
    body_kind: np.ndarray
    body_mass: np.ndarray
    body_inertia_B: np.ndarray
    body_com_B: np.ndarray
    body_props: list[UnitMassProperties | None]
    body_reach: np.ndarray

    @property
    def body_count(self) -> int:
        return len(self.scene.bodies)

    @property
    def scene_geom_count(self) -> int:
        """G_scene: the scene's geometries (the rows before the twins)."""
        return int(np.count_nonzero(self.geom_twin_of < 0))

    @property
    def geom_body(self) -> np.ndarray:
        """(G,) the body each geometry belongs to."""
        return self.geom_i[:, G_BODY]

    def geoms_of(self, b: int) -> np.ndarray:
        """The geometry indices of body b."""
        return self.body_geoms[self.body_geom_start[b]:self.body_geom_start[b + 1]]

    def body_mass_props(self, b: int) -> UnitMassProperties | None:
        """Unit-density mass properties of body b's geometries together (body_props[b])."""
        return self.body_props[b]

    def body_compliant(self) -> np.ndarray:
        """(B,) bool: the body has a compliant geometry."""
        out = np.zeros(self.body_count, dtype=bool)
        out[self.geom_body[(self.geom_i[:, G_COMPLIANT] == 1) & (self.geom_twin_of < 0)]] = True
        return out

    @property
    def pair_count(self) -> int:
        return len(self.pair_i)

    def pair_names(self, p: int) -> tuple[str, str]:
        lo, hi = self.pair_i[p, P_BODY_LO], self.pair_i[p, P_BODY_HI]
        return self.scene.bodies[lo].name, self.scene.bodies[hi].name

    @cached_property
    def body_pairs(self) -> tuple[list[tuple[str, str]], np.ndarray]:
        """(names, column): the body pairs that can touch, as (first, second) body names in the
        order their first geometry pair comes, and for each geometry pair p the index of its
        body pair in that list, shape (P,) (several geometry pairs can join the same bodies)."""
        names: list[tuple[str, str]] = []
        index: dict[tuple[str, str], int] = {}
        column = np.zeros(self.pair_count, dtype=np.int64)
        for p in range(self.pair_count):
            column[p] = index.setdefault(self.pair_names(p), len(index))
            if column[p] == len(names):
                names.append(self.pair_names(p))
        return names, column


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


def _pairs(scene: Scene, geoms: list[Geometry], geom_body: list[int], specs: list, labels: list[str]):
    """The geometry pairs of `scene` (its geometries `geoms` of bodies `geom_body`, with their
    `specs` and message `labels`): every pair of geometries of two different bodies that can
    make a hydroelastic surface, except those of two static bodies or of filtered bodies; a
    pair of two rigid geometries (one body dynamic) through the compliant twin of one side
    (geometry.twin.choose_twin). Returns (pair rows (P, 8) as lists, Kelvin-Voigt tau per pair
    [s], twins as (scene geometry, twin Geometry) in row order after the scene's geometries,
    unsupported pairs (a, b, reason))."""
    G = len(geoms)
    rows, taus, twins, unsupported = [], [], [], []
    twin_row: dict[tuple[int, int], int] = {}

    def body_of(g: int) -> int:
        return geom_body[g] if g < G else geom_body[twins[g - G][0]]

    for a in range(G):
        for b in range(a + 1, G):
            body_a, body_b = sorted((geom_body[a], geom_body[b]))
            ba, bb = scene.bodies[body_a], scene.bodies[body_b]
            if body_a == body_b or ba.type == "static" and bb.type == "static" or scene.filtered(ba.name, bb.name):
                continue
            roles, twin = [a, b], 0
            kind = _pair_type(geoms[a], geoms[b])
            if kind is None:
                if "dynamic" not in (ba.type, bb.type) or geoms[a].compliant or geoms[b].compliant:
                    continue  # nothing moves it, or two half-spaces
                try:
                    side, geometry = choose_twin(Side(a, specs[a], geoms[a], labels[a]),
                                                 Side(b, specs[b], geoms[b], labels[b]), scene.rigid_modulus)
                except NoTwin as exc:
                    unsupported.append((a, b, str(exc)))
                    continue
                key = (roles[side], id(geometry))
                if key not in twin_row:
                    twin_row[key] = G + len(twins)
                    twins.append((roles[side], geometry))
                pair_geoms = [geoms[a], geoms[b]]
                pair_geoms[side] = geometry
                roles[side], twin = twin_row[key], 1
                kind = _pair_type(*pair_geoms)
            ptype, swapped = kind
            ra, rb = roles[::-1] if swapped else roles
            rows.append([ra, rb, ptype, int(body_of(ra) > body_of(rb)), body_a, body_b, twin, 0])
            taus.append(specs[a].contact.relaxation_time + specs[b].contact.relaxation_time)
    return rows, taus, twins, unsupported


def build_model(scene: Scene) -> ModelData:
    """Geometry, pools, pairs and the meshes' trees for `scene`."""
    geoms, geom_body, geom_name, specs, labels = [], [], [], [], []
    for b, body in enumerate(scene.bodies):
        geoms += body_geometries(body, scene.source)
        geom_body += [b] * len(body.geometries)
        geom_name += [spec.name for spec in body.geometries]
        specs += body.geometries
        labels += [body.geometry_label(i) for i in range(len(body.geometries))]
    G_scene, B = len(geoms), len(scene.bodies)
    body_geom_start = np.concatenate([[0], np.cumsum(np.bincount(np.array(geom_body, dtype=np.int64), minlength=B))])
    body_geom_start = body_geom_start.astype(np.int32)
    body_geoms = np.arange(G_scene, dtype=np.int32)  # stored body by body
    pairs, pair_tau, twins, unsupported = _pairs(scene, geoms, geom_body, specs, labels)
    for source, twin in twins:  # after the scene's geometries: rows of their own
        geoms.append(twin)
        geom_body.append(geom_body[source])
        geom_name.append(geom_name[source])
        specs.append(specs[source])
    geom_twin_of = np.array([-1] * G_scene + [source for source, _ in twins], dtype=np.int32)
    G = len(geoms)
    geom_body = np.array(geom_body, dtype=np.int32).reshape(-1)

    # Shared element pools.
    tet_X, tet_p, tet_g, tri_X, tri_n = [], [], [], [], []
    pool_start: dict[int, int] = {}
    n_tet = n_tri = 0
    geom_i = np.zeros((G, 8), dtype=np.int32)
    geom_modulus = np.array([geo.modulus for geo in geoms], dtype=np.float64)
    geom_slab_gradient = np.array([geo.slab_gradient for geo in geoms], dtype=np.float64)
    geom_margin = np.array([geo.margin for geo in geoms], dtype=np.float64)
    geom_element_size = np.zeros(G, dtype=np.float64)
    geom_box = np.zeros((G, 2, 3), dtype=np.float64)
    geom_ball = np.zeros((G, 4), dtype=np.float64)
    for g, geo in enumerate(geoms):
        geom_i[g, G_BODY] = geom_body[g]
        geom_i[g, G_KIND] = geo.kind
        geom_i[g, G_COMPLIANT] = int(geo.compliant)
        geom_i[g, G_QUERY_START] = -1
        geom_i[g, G_BVH_ROOT] = -1
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
        geom_element_size[g] = float(np.median(np.ptp(edges, axis=1).max(axis=1)))

    pair_i = np.array(pairs, dtype=np.int32).reshape(-1, 8)
    friction = np.array([spec.contact.friction for spec in specs], dtype=np.float64)
    dissipation = np.array([spec.contact.dissipation for spec in specs], dtype=np.float64)
    modulus = np.array([g.modulus if g.compliant else np.nan for g in geoms], dtype=np.float64)
    pair_f = combine_pair_parameters(pair_i, np.array(pair_tau, dtype=np.float64), friction[None], dissipation[None],
                                     modulus[None])[0]

    # Mesh-mesh pairs and the elements that query the other mesh's tree.
    pair_table = -np.ones((G, G), dtype=np.int32)
    per_geom: list[list[int]] = [[] for _ in range(G)]
    query_geoms: set[int] = set()
    for p, row in enumerate(pair_i):
        if row[P_TYPE] in PairType.MESH_MESH:
            a, b = int(row[P_GEOM_A]), int(row[P_GEOM_B])
            pair_table[a, b] = pair_table[b, a] = p
            per_geom[a].append(p)
            per_geom[b].append(p)
            query_geoms.add(a)  # candidates are found from a's side only
    query_elem_geom = []
    for g in sorted(query_geoms):
        geom_i[g, G_QUERY_START] = len(query_elem_geom)
        query_elem_geom += [g] * int(geom_i[g, G_ELEM_COUNT])
    geom_pair_start = np.zeros(G + 1, dtype=np.int32)
    geom_pair_start[1:] = np.cumsum([len(x) for x in per_geom])
    geom_pair_list = np.array([p for lst in per_geom for p in lst] or [0], dtype=np.int32)

    tasks, task_boxes = [], []
    for p, row in enumerate(pair_i):
        if row[P_TYPE] in PairType.PLANAR:
            mesh_geom = row[P_GEOM_B] if row[P_TYPE] == PairType.SLAB_TRI else row[P_GEOM_A]
            n = int(geom_i[mesh_geom, G_ELEM_COUNT])
            first = np.arange(0, n, PLANAR_CHUNK)
            tasks.append(np.column_stack([np.full(len(first), p), first, np.minimum(n - first, PLANAR_CHUNK)]))
            geo = geoms[mesh_geom]
            X = geo.tets.vertices[geo.tets.tets] if geo.kind == TETMESH else geo.surface.vertices[geo.surface.triangles]
            task_boxes.append(run_boxes(X.astype(host_float()), PLANAR_CHUNK))
    planar_task = np.vstack(tasks).astype(np.int32) if tasks else np.zeros((0, 3), dtype=np.int32)
    planar_task_box = np.concatenate(task_boxes) if task_boxes else np.zeros((0, 2, 3))
    tree_geoms = {int(row[P_GEOM_B]) for row in pair_i if row[P_TYPE] in PairType.MESH_MESH}
    bvh_box, bvh_node, bvh_elem, bvh_elem_box, roots = mesh_trees(geoms, tree_geoms)
    for g, root in roots.items():
        geom_i[g, G_BVH_ROOT] = root

    body_kind = np.array([BODY_KINDS.index(b.type) for b in scene.bodies], dtype=np.int32)
    body_mass = np.zeros(B)
    body_inertia = np.zeros((B, 3, 3))
    body_com = np.zeros((B, 3))
    body_props = []
    for i, body in enumerate(scene.bodies):
        parts = [geoms[g].mass for g in range(body_geom_start[i], body_geom_start[i + 1]) if geoms[g].mass is not None]
        props = union_props(parts) if parts else None
        body_mass[i], body_inertia[i], body_com[i] = mass_properties(body, props)
        body_props.append(None if body.inertia is not None else props)

    def stack(parts, shape):
        return np.concatenate(parts) if parts else np.zeros((0, *shape))

    return ModelData(
        scene=scene,
        geometries=geoms,
        geom_twin_of=geom_twin_of,
        unsupported=unsupported,
        tet_X_G=stack(tet_X, (4, 3)),
        tet_p=stack(tet_p, (4,)),
        tet_grad_G=stack(tet_g, (3,)),
        tri_X_G=stack(tri_X, (3, 3)),
        tri_n_G=stack(tri_n, (3,)),
        geom_i=geom_i,
        geom_name=geom_name,
        geom_modulus=geom_modulus,
        geom_slab_gradient=geom_slab_gradient,
        geom_margin=geom_margin,
        geom_element_size=geom_element_size,
        geom_friction=friction,
        geom_dissipation=dissipation,
        body_geom_start=body_geom_start,
        body_geoms=body_geoms,
        geom_box_G=geom_box,
        geom_ball_G=geom_ball,
        query_elem_geom=np.array(query_elem_geom, dtype=np.int32),
        bvh_box_G=bvh_box,
        bvh_node=bvh_node,
        bvh_elem=bvh_elem,
        bvh_elem_box_G=bvh_elem_box,
        pair_i=pair_i,
        pair_f=pair_f,
        pair_table=pair_table,
        geom_pair_start=geom_pair_start,
        geom_pair_list=geom_pair_list,
        planar_task=planar_task,
        planar_task_box_G=planar_task_box,
        body_kind=body_kind,
        body_mass=body_mass,
        body_inertia_B=body_inertia,
        body_com_B=body_com,
        body_props=body_props,
        body_reach=body_reach(geom_ball, geom_i, body_com, body_mass, body_inertia),
    )


def mass_properties(body: Body, props: UnitMassProperties | None) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass [kg], inertia (3, 3) [kg m^2] about the centre of mass in body axes, centre of mass
    (3,) [m] in B) of `body`, from `props`, the unit-density properties of its geometries
    together (None: no volume). The geometries share one density: `mass` gives it as mass /
    total volume, or `density` directly; the inertia is the union's scaled by it. The scene's
    `inertia` and `center_of_mass` override the computed ones (a centre of mass alone moves
    the computed distribution: its inertia about the centre of mass is kept). Bodies that are
    not dynamic have mass 0 and inertia 0 (their centre of mass is still the geometry's: the
    integrator moves every body about it)."""
    if body.center_of_mass is not None:
        com = np.array(body.center_of_mass, dtype=np.float64)
    else:
        com = np.array(props.com_G, dtype=np.float64) if props is not None else np.zeros(3)
    if body.type != "dynamic":
        return 0.0, np.zeros((3, 3)), com
    mass = body.mass if body.mass is not None else body.density * props.volume
    inertia = inertia_matrix(body.inertia) if body.inertia is not None else props.inertia(mass)
    return float(mass), inertia, com


def run_boxes(X: np.ndarray, run: int) -> np.ndarray:
    """Boxes (ceil(E / run), 2, 3) of consecutive runs of `run` elements of X (E, k, 3) [m]
    (each element's k vertices). Given the vertices in the device's precision, a run's box
    holds the boxes the device computes for its elements exactly (min and max round nothing)."""
    E = len(X)
    lo, hi = X.min(axis=1), X.max(axis=1)
    starts = np.arange(0, E, run)
    return np.stack([np.minimum.reduceat(lo, starts), np.maximum.reduceat(hi, starts)], axis=1)


def body_reach(geom_ball_G: np.ndarray, geom_i: np.ndarray, body_com_B: np.ndarray, body_mass: np.ndarray,
               body_inertia_B: np.ndarray) -> np.ndarray:
    """(B,) [m]: per body, the largest distance from its centre of mass to a point of the
    bounding ball of one of its geometries (0 for a body whose only geometry is a half-space).
    A dynamic body without any geometry has no points to bound: it gets the radius of the
    uniform ball of its mass and trace of inertia (geometry.mass.gyration_radius), the lever
    arm of a body of that size and inertia."""
    reach = np.zeros(len(body_com_B))
    for g, ball in enumerate(geom_ball_G):
        if ball[3] > 0.0:
            b = geom_i[g, G_BODY]
            reach[b] = max(reach[b], float(np.linalg.norm(ball[:3] - body_com_B[b])) + ball[3])
    has_geometry = np.zeros(len(body_com_B), dtype=bool)
    has_geometry[geom_i[:, G_BODY]] = True
    for b in np.flatnonzero(~has_geometry & (body_mass > 0.0)):
        reach[b] = gyration_radius(float(body_mass[b]), body_inertia_B[b])
    return reach


def combine_pair_parameters(pair_i: np.ndarray, pair_tau: np.ndarray, friction: np.ndarray, dissipation: np.ndarray,
                            modulus: np.ndarray) -> np.ndarray:
    """pair_f rows (N, P, 4) of N worlds from per-geometry values (N, G): friction mu [-],
    Hunt-Crossley d [s/m] and modulus E [Pa] (NaN for a rigid geometry); pair_tau (P,)
    Kelvin-Voigt tau [s], the same in every world. Drake's rules, per pair of geometries:
    mu = 2 mu_a mu_b / (mu_a + mu_b) (0 when both are 0); d = the compliant side's d when the
    other is rigid, (E_b d_a + E_a d_b) / (E_a + E_b) otherwise. A twin pair (column P_TWIN:
    two rigid geometries, one standing in as its compliant twin) is two sides of the same
    modulus, rigid_modulus: d = (d_a + d_b) / 2, whichever side took the twin (the values of
    the geometries, the twin carrying its own geometry's d)."""
    flip = pair_i[:, P_FLIP] == 1  # geometries of the lower and the higher body
    ga = np.where(flip, pair_i[:, P_GEOM_B], pair_i[:, P_GEOM_A])
    gb = np.where(flip, pair_i[:, P_GEOM_A], pair_i[:, P_GEOM_B])
    out = np.zeros((friction.shape[0], len(pair_i), 4), dtype=np.float64)
    if len(pair_i) == 0:
        return out
    mu_a, mu_b = friction[:, ga], friction[:, gb]
    total = mu_a + mu_b
    out[..., PF_MU] = np.where(total == 0, 0.0, 2.0 * mu_a * mu_b / np.where(total == 0, 1.0, total))
    da, db, ea, eb = dissipation[:, ga], dissipation[:, gb], modulus[:, ga], modulus[:, gb]
    rigid_a, rigid_b = np.isnan(ea), np.isnan(eb)
    with np.errstate(invalid="ignore"):
        both = (eb * da + ea * db) / (ea + eb)
    out[..., PF_D] = np.where(pair_i[:, P_TWIN] == 1, 0.5 * (da + db), np.where(rigid_a, db, np.where(rigid_b, da, both)))
    out[..., PF_TAU] = pair_tau
    return out


def _upload(dtype, array: np.ndarray, min_len: int = 1):
    """ndarray holding `array` (padded to at least `min_len` rows: Taichi rejects empty arrays)."""
    n = max(len(array), min_len)
    a = ti.ndarray(dtype, shape=(n,))
    if len(array):
        host = np.zeros((n, *array.shape[1:]), dtype=array.dtype)
        host[: len(array)] = array
        hostcopy.from_numpy(a, host.astype(np.int32 if np.issubdtype(array.dtype, np.integer) else host_float()))
    return a


class Model:
    """The static model on the device (ti.ndarray), shared by every world; same names and
    meaning as ModelData (`host`), plus the gather lists of the deterministic mode. Per-world
    parameters (masses, materials, pressure scales, gravity) are owned by params.WorldParams.

    geom_slab_gradient (G,) E/H [Pa/m]: the only per-geometry float the kernels read.
    body_pair_start (B + 1,), body_pairs: the pairs each body takes part in, by body then pair
      (contact.ordering and the contact schedule's deterministic gather)."""

    def __init__(self, host: ModelData):
        from .backend import require_init, spend_launches

        require_init()
        self.host = host
        self.tet_X_G = _upload(tet_vertices, host.tet_X_G)
        self.tet_p = _upload(vec4, host.tet_p)
        self.tet_grad_G = _upload(vec3, host.tet_grad_G)
        self.tri_X_G = _upload(tri_vertices, host.tri_X_G)
        self.tri_n_G = _upload(vec3, host.tri_n_G)
        self.geom_i = _upload(ivec8, host.geom_i)
        self.geom_slab_gradient = _upload(float, host.geom_slab_gradient)
        self.geom_box_G = _upload(box3, host.geom_box_G)
        self.geom_ball_G = _upload(vec4, host.geom_ball_G)
        self.query_elem_geom = _upload(ti.i32, host.query_elem_geom)
        self.bvh_box_G = _upload(box3, outward_float32(host.bvh_box_G) if host_float() == np.float32 else host.bvh_box_G)
        self.bvh_elem_box_G = _upload(box3, outward_float32(host.bvh_elem_box_G) if host_float() == np.float32
                                      else host.bvh_elem_box_G)
        self.bvh_node = _upload(ivec4, host.bvh_node)
        self.bvh_elem = _upload(ti.i32, host.bvh_elem)
        self.pair_i = _upload(ivec8, host.pair_i)
        G = len(host.geom_i)
        table = -np.ones((max(G, 1), max(G, 1)), dtype=np.int32)  # padded: Taichi rejects empty arrays
        table[:G, :G] = host.pair_table
        self.pair_table = ti.ndarray(ti.i32, shape=table.shape)
        hostcopy.from_numpy(self.pair_table, table)
        self.geom_pair_start = _upload(ti.i32, host.geom_pair_start)
        self.geom_pair_list = _upload(ti.i32, host.geom_pair_list)
        self.planar_task = _upload(ti.types.vector(3, ti.i32), host.planar_task)
        self.planar_task_box_G = _upload(box3, host.planar_task_box_G)
        self.body_kind = _upload(ti.i32, host.body_kind)
        self.body_com_B = _upload(vec3, host.body_com_B)
        self.body_reach = _upload(float, host.body_reach)
        start, pairs = body_pair_lists(host.pair_i, host.body_count)
        self.body_pair_start = _upload(ti.i32, start)
        self.body_pairs = _upload(ti.i32, pairs)
        spend_launches(2)  # the body pair lists (the other uploads were never counted)
        self.body_count = host.body_count
        self.query_elem_count = len(host.query_elem_geom)
        self.planar_task_count = len(host.planar_task)
        self.planar_element_count = int(host.planar_task[:, 2].sum())
        self.geom_count = G
        self.pair_count = len(host.pair_i)

    def arrays(self) -> dict:
        """Every device array, by its kernel parameter name."""
        return {k: v for k, v in vars(self).items() if isinstance(v, ti.Ndarray)}


def body_pair_lists(pair_i: np.ndarray, body_count: int) -> tuple[np.ndarray, np.ndarray]:
    """(start (B + 1,), pairs): the pairs each body takes part in, by body then pair (CSR)."""
    bodies = np.concatenate([pair_i[:, P_BODY_LO], pair_i[:, P_BODY_HI]])
    pairs = np.tile(np.arange(len(pair_i), dtype=np.int32), 2)
    order = np.lexsort((pairs, bodies))
    start = np.concatenate([[0], np.cumsum(np.bincount(bodies, minlength=body_count))]).astype(np.int32)
    return start, pairs[order].astype(np.int32)


def check_supported(host: ModelData) -> None:
    """Raise SceneError for a pair of rigid geometries that can touch (two bodies of which one
    is dynamic, not filtered) but that no compliant twin can serve (geometry.twin: e.g. two
    non-convex surface meshes), naming both bodies and geometries, the reasons and what to do;
    and for a twin whose pressure gradient the device float cannot square (|grad p| above
    1/100 of sqrt(float max / 3): |grad p|^2 summed over three axes would overflow, e.g. a
    rigid_modulus of 1e30 Pa), naming rigid_modulus."""
    from .backend import current_precision, is_initialized

    scene = host.scene
    if host.unsupported:
        a, b, reason = host.unsupported[0]

        def label(g: int) -> str:
            body = int(host.geom_body[g])
            return scene.bodies[body].geometry_label(g - int(host.body_geom_start[body]))

        raise SceneError(
            f"{scene.source}: {label(a)} and {label(b)} are both rigid and can touch, and neither can stand in as a "
            f"compliant twin for their contact ({reason}). Make one of them compliant (key 'contact.hydro' = "
            "\"compliant\" with a 'contact.modulus'), give a non-convex one as a tet mesh (shape type \"tetmesh\", a "
            ".vtk file: its twin is built from its tets), or list both bodies in a [[collision_filter]]"
        )
    dtype = np.float64 if is_initialized() and current_precision() == "f64" else np.float32  # float32 before init
    limit = 0.01 * float(np.sqrt(np.finfo(dtype).max / 3.0))
    for g in np.flatnonzero(host.geom_twin_of >= 0):
        steepest = max_gradient(host.geometries[g])
        if steepest > limit:
            body = scene.bodies[host.geom_body[g]]
            raise SceneError(
                f"{scene.source}: [sim]: key 'rigid_modulus': {scene.rigid_modulus:g} Pa gives the compliant twin of body "
                f"'{body.name}' (geometry '{host.geom_name[g]}') a pressure gradient of {steepest:.3g} Pa/m, past the "
                f"{limit:.3g} Pa/m the device float ({dtype.__name__}) can square; use a smaller rigid_modulus "
                f"(at most about {scene.rigid_modulus * limit / steepest:.3g} Pa)"
            )
