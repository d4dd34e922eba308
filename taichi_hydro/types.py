"""Element types and the layouts of packed records, shared by every kernel module.

One place names what a column of a packed record means, so that no kernel reads a bare index.
Records stay packed where one thread reads a whole row (a polygon, a contact row): one load
instead of one per quantity.

Float vectors and matrices are of the run-time precision (backend.init's `precision`: f32 or
f64). Taichi fixes the element type of `ti.types.vector(n, float)` (and of ti.math.vec3) when
the type object is made, i.e. when this module is imported, before ti.init; the types below
read Taichi's default float instead whenever Taichi asks, so the same kernels, annotations
and arrays follow the precision of the runtime they compile and run in."""

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang.matrix import MatrixType, VectorType
from taichi.types.compound_types import _type_factory


class _DefaultFloat:
    """Mixin of RealVector and RealMatrix: the element type is the current Taichi runtime's
    default float (ti.init's default_fp), read at each use (kernel compilation, argument
    checks, array allocation, construction inside a kernel)."""

    def _taichi_owned(self) -> None:
        # Taichi's AST transformer warns about a call to a "non-taichi function" (vec3(...) in a
        # kernel) unless the callee's __module__ is Taichi's; these are Taichi matrix types.
        self.__module__ = MatrixType.__module__

    @property
    def dtype(self):
        return impl.get_runtime().default_fp

    @property
    def tensor_type(self):
        return _type_factory.get_tensor_type(self.get_shape(), self.dtype)


class RealVector(_DefaultFloat, VectorType):
    """A Taichi vector type of n floats of the run-time precision (types module docstring)."""

    def __init__(self, n: int):
        self.n, self.m, self.ndim = n, 1, 1
        self._taichi_owned()


class RealMatrix(_DefaultFloat, MatrixType):
    """A Taichi n x m matrix type of floats of the run-time precision (types module docstring)."""

    def __init__(self, n: int, m: int):
        self.n, self.m, self.ndim = n, m, 2
        self._taichi_owned()


def host_float() -> type:
    """The NumPy float type of device float arrays in the current runtime (np.float32 or
    np.float64), for host arrays uploaded into them."""
    return np.float64 if impl.get_runtime().default_fp == ti.f64 else np.float32


nd = ti.types.ndarray
vec2 = RealVector(2)
vec3 = RealVector(3)
vec4 = RealVector(4)
vec6 = RealVector(6)
"""A spatial vector: linear part (0:3), angular part (3:6)."""
vec8 = RealVector(8)
mat3 = RealMatrix(3, 3)
ivec2 = ti.math.ivec2
ivec3 = ti.math.ivec3
ivec4 = ti.types.vector(4, ti.i32)
ivec8 = ti.types.vector(8, ti.i32)
box3 = RealMatrix(2, 3)
"""An axis-aligned box: row 0 the lower corner, row 1 the upper corner [m]."""
tet_vertices = RealMatrix(4, 3)
"""tet_X_G: the 4 vertices of a tet, one per row, in its geometry's frame G [m]."""
tri_vertices = RealMatrix(3, 3)
"""tri_X_G: the 3 vertices of a triangle, one per row, in its geometry's frame G [m]."""

# world_status codes: 0 running; otherwise the world is frozen, and the code says which check
# tripped (integrator.check_divergence; the highest code when several did).
RUNNING, FROZEN_SPEED, FROZEN_SPIN, FROZEN_POSE = 0, 1, 2, 3
FROZEN_REASONS = {
    FROZEN_SPEED: "a body's speed became non-finite or exceeded 1e4 m/s (the solve diverged)",
    FROZEN_SPIN: "a body's angular velocity became non-finite or exceeded 1e5 rad/s (the solve diverged)",
    FROZEN_POSE: "a body's pose was not finite (written through a state view)",
}

# Body kinds (body_kind).
BODY_DYNAMIC, BODY_STATIC, BODY_KINEMATIC = 0, 1, 2
BODY_KINDS = ("dynamic", "static", "kinematic")

# Geometry kinds (geom_i[g][G_KIND], geometry.build.Geometry.kind).
TETMESH, TRIMESH, HALFSPACE = 0, 1, 2

# geom_i columns: owning body, kind, compliant (0/1), first element in its pool, element count,
# first index in the query element range (-1 when the geometry is in no mesh-mesh pair), root
# node of its mesh's tree in the BVH pool (collision.bvh; -1 for a half-space).
G_BODY, G_KIND, G_COMPLIANT, G_POOL_START, G_ELEM_COUNT, G_QUERY_START, G_BVH_ROOT = range(7)

# pair_i columns: geometry in role a, geometry in role b, PairType, flip (1 when role a's body
# has the higher scene index), lower body, higher body, twin (1 when the pair is two rigid
# geometries, one of them standing in as its compliant twin: geometry.twin).
P_GEOM_A, P_GEOM_B, P_TYPE, P_FLIP, P_BODY_LO, P_BODY_HI, P_TWIN = range(7)

# pair_f columns (per world or shared): Coulomb friction mu [-], Hunt-Crossley d [s/m],
# Kelvin-Voigt tau [s].
PF_MU, PF_D, PF_TAU = range(3)


class PairType:
    """How a geometry pair makes contact polygons. Role a is listed first."""

    TET_TET = 0  # compliant mesh a - compliant mesh b
    TET_TRI = 1  # compliant mesh a - rigid mesh b
    TET_PLANE = 2  # compliant mesh a - rigid half-space b
    TET_SLAB = 3  # compliant mesh a - compliant half-space b
    SLAB_TRI = 4  # compliant half-space a - rigid mesh b
    MESH_MESH = (TET_TET, TET_TRI)  # element pairs found through the tree of mesh b
    PLANAR = (TET_PLANE, TET_SLAB, SLAB_TRI)  # each element of the mesh tested against the plane
    NAMES = ("tet-tet", "tet-triangle", "tet-halfspace", "tet-slab", "slab-triangle")


# Collision pool counters (counts[]): rows each pool needed in the last pass.
C_CANDIDATES, C_POLYGONS = range(2)
COUNTER_SLOTS = 8

# Polygons: at most POLY_MAX vertices (a tet slice clipped by a tet: 8).
POLY_MAX = 8
poly_vertex_values = RealVector(POLY_MAX)
"""poly_vp: a value per polygon vertex (the pressure [Pa])."""
poly_vertices = RealMatrix(POLY_MAX, 3)
"""poly_v: the vertices of a polygon, one per row [m]."""
poly_record = RealVector(8)
"""poly_g: one polygon's scalars (columns POLY_*)."""
# poly_g columns: area [m^2], pressure at the centroid p0 [Pa], directional gradients gA, gB
# [Pa/m] (inf on a rigid side), |grad pA|, |grad pB| [Pa/m].
POLY_AREA, POLY_P0, POLY_GA, POLY_GB, POLY_GRAD_A, POLY_GRAD_B = range(6)

# Polygon identity (poly_i, c_key, cand columns): world, pair, element of a, element of b
# (the element's index within its geometry's element range).
K_WORLD, K_PAIR, K_ELEM_A, K_ELEM_B = range(4)

# c_ids columns: world, body a, body b, pair (a: the pair's lower body, normal from a into b).
ID_WORLD, ID_A, ID_B, ID_PAIR = range(4)

# c_model columns: stiffness k [N/m], phi0 [m], dissipation time scale tau [s], static force
# A p0 [N].
M_K, M_PHI0, M_TAU, M_FORCE0 = range(4)

contact_reg = RealVector(8)
"""c_reg: one contact row's regularisation and step metric (columns R_*)."""
# c_reg columns: R_t, R_n [1/kg], v_hat_n [m/s], s_t, s_n [1/sqrt(kg)], mu, 1/s_t, 1/s_n.
R_RT, R_RN, R_VHAT, R_ST, R_SN, R_MU, R_INV_ST, R_INV_SN = range(8)

# stat_sums slots: steps, polygons, contacts, solver iterations (sums over worlds since reset).
S_STEPS, S_POLYGONS, S_CONTACTS, S_ITERATIONS = range(4)

# b_law columns (solver.bilateral): compliance R [u per unit impulse], bias [m/s or rad/s],
# lower and upper bound of the impulse [N s or N m s].
L_R, L_BIAS, L_LOWER, L_UPPER = range(4)
UNBOUNDED = 1e30
"""The bound of an unbounded row's impulse [N s]: finite, so that no kernel compares with an
infinity (fast-math code may assume there is none)."""
