"""Contact assembly: each contact polygon becomes one compliant point contact
(Masterjohn 2022 §IV, DESIGN §2), rows grouped by world for the solver.

Per polygon of area A, pressure p0 at the centroid and directional gradients gA, gB:
    g = gA gB / (gA + gB)  (= gA when b is rigid)       eq. 23
    k = g A, phi0 = -p0 / g                               eq. 16
A polygon whose gA or gB is below 1e-6 of its side's |grad p| is skipped: at box edges the
gradient lies in the surface up to round-off and would give phi0 ~ -1e13 m (DESIGN §1).

Deep overlap (collision.depth: a compliant mesh with part of its core, the medial axis where
its pressure is largest, inside the rigid half-space or mesh of its pair): the pressure on
the rigid surface grows as the bodies separate, gA < 0 on (nearly) every polygon, and where
the surface cuts the core along its length (an upright capsule or tall box, a fan mesh's side
tets) the gradient lies in the surface, gA ~ 0. The rule above skips them all: the compliant
body used to fall through while the contact query reported its static force pushing it out.
For such a pair the point contact of every polygon uses
    gA* = max(|gA|, 1e-6 |grad pA|),  k = gA* A,  phi0 = -p0 / gA*
so the force at the current pose is the static A p0 along n, with a positive stiffness (the
true rate, a pressure that grows with separation, would be a negative one), and a polygon
whose gradient lies in the surface keeps A p0 over the step. Once the core is out, the pair
is an ordinary one again. Other pairs are unchanged: gA <= 1e-6 |grad pA| is skipped, as in
Drake, where gA < 0 marks the far faces of a thin rigid feature.

Regularisation of the cone complementarity problem (Drake SAP, Chrono; DESIGN §3):
    R_n = 1 / (dt k (dt + tau)),   v_hat_n = -phi0 / (dt + tau),   R_t = sigma w
with tau = tau_KelvinVoigt + d_HuntCrossley (-phi0)+ and w the trace/3 of the contact's
Delassus block W_ii = J_i M^-1 J_i^T. Near-rigid floor: SAP bounds R_n >= beta^2/(4 pi^2) w per
contact. Applied contact by contact, that floor makes the normal compliance proportional to w
instead of 1/k and skews the pressure distribution of a stiff patch (a coin's pressure would pile
up at its centre). We apply the same bound to a whole patch (the polygons of one pair of
geometries) at once: every k of the patch is scaled by s = min_i(k_max,i / k_i, 1), which
keeps R_n,i proportional to 1/k_i (the hydroelastic distribution) and satisfies every
contact's floor.

Warm start: a polygon that existed at the previous step (same pair and elements, see
warmstart.py) starts from its previous impulse; a new one from the previous total impulse of
its pair of geometries, shared in proportion to A p0 (the static pressure force).

Kernels are made per compile-time option (deterministic, warm_start, split) by the functions
that return them, once per combination."""

import functools

import taichi as ti

from .. import backend

from ..math3d import orthonormal_frame, quat_to_mat, skew
from ..solver.cone import project_cone
from ..types import (
    BODY_DYNAMIC, C_POLYGONS, ID_A, ID_B, ID_PAIR, ID_WORLD, K_PAIR, K_WORLD, M_K, M_PHI0, M_TAU, P_BODY_HI, P_BODY_LO,
    PF_D, PF_MU, PF_TAU, POLY_AREA, POLY_GA, POLY_GB, POLY_GRAD_A, POLY_GRAD_B, POLY_P0, contact_reg, ivec4, ivec8, mat3, nd,
    poly_record, vec3, vec4,
)

INF = ti.math.inf

# A directional gradient below this fraction of |grad p| is round-off (DESIGN §1).
GRADIENT_REL = 1e-6
TWO_PI_SQ = 39.47841760435743  # (2 pi)^2


@ti.func
def valid_polygon(g: poly_record, deep: ti.i32) -> ti.i32:
    """1 when a polygon can be a point contact: positive area and gradients gA, gB that are
    positive and not round-off relative to |grad p| (inf on a rigid side); in a deep pair
    (deep = 1), gradients of any sign and size (not NaN: see deep_gradient)."""
    ok = 1 if g[POLY_AREA] > 0.0 else 0
    for side in ti.static(range(2)):
        gs, gn = g[POLY_GA + side], g[POLY_GRAD_A + side]
        if deep == 1:
            if not ti.abs(gs) >= 0.0:  # NaN
                ok = 0
        elif gs != INF and not gs > GRADIENT_REL * gn:
            ok = 0
    return ok


@ti.func
def deep_gradient(gs: float, gn: float) -> float:
    """The directional gradient a deep pair's point contact uses [Pa/m]: |gs|, at least
    GRADIENT_REL |grad p| = gn (a rigid side's inf stays inf: no arithmetic on it, which
    fast math does not keep)."""
    out = gs
    if gs != INF:
        out = ti.max(ti.abs(gs), GRADIENT_REL * gn)
    return out


@ti.func
def series_gradient(ga: float, gb: float) -> float:
    """g = ga gb / (ga + gb), with g = ga when gb = inf and g = gb when ga = inf."""
    g = 0.0
    if ga == INF:
        g = gb
    elif gb == INF:
        g = ga
    else:
        g = ga * gb / (ga + gb)
    return g


@ti.func
def body_delassus(inv_mass: float, inv_inertia_W: mat3, r: vec3, frame: mat3) -> mat3:
    """One body's part of W_ii in the contact frame: F (m^-1 1 - [r] I^-1 [r]) F^T."""
    S = skew(r)
    block = inv_mass * ti.math.eye(3) - S @ inv_inertia_W @ S
    return frame @ block @ frame.transpose()


@functools.lru_cache(maxsize=None)
def count_contacts(deterministic: bool):
    """The kernel that counts and places rows, for this compile-time option."""

    @ti.kernel
    def count(
        counts: nd(dtype=ti.i32, ndim=1),
        poly_i: nd(dtype=ivec4, ndim=1),
        poly_g: nd(dtype=poly_record, ndim=1),
        pair_i: nd(dtype=ivec8, ndim=1),
        body_kind: nd(dtype=ti.i32, ndim=1),
        world_status: nd(dtype=ti.i32, ndim=1),
        world_start: nd(dtype=ti.i32, ndim=1),
        body_contacts: nd(dtype=ti.i32, ndim=2),
        pair_scale: nd(dtype=float, ndim=2),
        pair_weight: nd(dtype=float, ndim=2),
        poly_slot: nd(dtype=ti.i32, ndim=1),
        pair_rows: nd(dtype=ti.i32, ndim=2),
        pair_deep: nd(dtype=ti.i32, ndim=2),
    ):
        """Writes poly_slot (index of the polygon's contact within its world, -1 if skipped;
        deterministic: its arrival index within its pair, and pair_rows the count per pair, see
        ordering.py), world_start (rows per world; the scan that follows makes them offsets),
        body_contacts (contacts touching each dynamic body), and resets the per-pair scale (1)
        and warm-start weights (0)."""
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for w in range(world_start.shape[0]):
            world_start[w] = 0
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for w, b in ti.ndrange(body_contacts.shape[0], body_contacts.shape[1]):
            body_contacts[w, b] = 0
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for w, p in ti.ndrange(pair_scale.shape[0], pair_scale.shape[1]):
            pair_scale[w, p] = 1.0
            pair_weight[w, p] = 0.0
            pair_rows[w, p] = 0
        n = ti.min(counts[C_POLYGONS], poly_i.shape[0])
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for k in range(n):
            w, pair = poly_i[k][K_WORLD], poly_i[k][K_PAIR]
            slot = -1
            if world_status[w] == 0 and valid_polygon(poly_g[k], pair_deep[w, pair]) == 1:
                slot = ti.atomic_add(world_start[w], 1)
                if ti.static(deterministic):
                    slot = ti.atomic_add(pair_rows[w, pair], 1)
                for side in ti.static(range(2)):
                    b = pair_i[pair][P_BODY_LO + side]
                    if body_kind[b] == BODY_DYNAMIC:
                        ti.atomic_add(body_contacts[w, b], 1)
            poly_slot[k] = slot

    return count


@ti.func
def write_row(c, w, a, b, pair, key, centroid, nrm, stiffness, phi0, force0, pair_f: ti.template(), body_p: ti.template(),
              body_q: ti.template(), body_com_B: ti.template(), body_inv_mass: ti.template(),
              body_inv_inertia_W: ti.template(), dt, beta, c_ids: ti.template(), c_key: ti.template(),
              c_frame: ti.template(), c_ra: ti.template(), c_rb: ti.template(), c_model: ti.template()):
    """Writes contact row c of world w (bodies a, b, geometry pair `pair`, warm-start key `key`):
    a point contact at `centroid` [m, W] with normal `nrm` (from a into b), stiffness k [N/m],
    phi0 [m] and static force [N]; tau [s] from the pair's material at that depth. Returns the
    near-rigid cap on its stiffness, k_max / k (module docstring: the patch takes the least)."""
    t1, t2 = orthonormal_frame(nrm)
    frame = mat3([t1[0], t1[1], t1[2]], [t2[0], t2[1], t2[2]], [nrm[0], nrm[1], nrm[2]])
    ra = centroid - (body_p[w, a] + quat_to_mat(body_q[w, a]) @ body_com_B[a])
    rb = centroid - (body_p[w, b] + quat_to_mat(body_q[w, b]) @ body_com_B[b])
    mat = pair_f[w % pair_f.shape[0], pair]
    tau = mat[PF_TAU] + mat[PF_D] * ti.max(-phi0, 0.0)
    wm = w % body_inv_mass.shape[0]
    Wc = mat3(0.0)
    for side in range(2):  # a runtime loop: body_delassus inlined once (compile time)
        body = a if side == 0 else b
        Wc += body_delassus(body_inv_mass[wm, body], body_inv_inertia_W[w, body], ra if side == 0 else rb, frame)
    w_diag = (Wc[0, 0] + Wc[1, 1] + Wc[2, 2]) / 3.0
    k_max = TWO_PI_SQ / (beta * beta * w_diag * dt * (dt + tau))
    c_ids[c] = ivec4(w, a, b, pair)
    c_key[c] = key
    c_frame[c] = frame
    c_ra[c] = ra
    c_rb[c] = rb
    c_model[c] = vec4(stiffness, phi0, tau, force0)
    return k_max / stiffness


@functools.lru_cache(maxsize=None)
def assemble_contacts(deterministic: bool):
    """The kernel that writes the contact rows, for this compile-time option."""

    @ti.kernel
    def assemble(
        counts: nd(dtype=ti.i32, ndim=1),
        poly_i: nd(dtype=ivec4, ndim=1),
        poly_g: nd(dtype=poly_record, ndim=1),
        poly_c: nd(dtype=vec3, ndim=1),
        poly_n: nd(dtype=vec3, ndim=1),
        poly_slot: nd(dtype=ti.i32, ndim=1),
        world_start: nd(dtype=ti.i32, ndim=1),
        pair_i: nd(dtype=ivec8, ndim=1),
        pair_f: nd(dtype=vec4, ndim=2),
        body_p: nd(dtype=vec3, ndim=2),
        body_q: nd(dtype=vec4, ndim=2),
        body_com_B: nd(dtype=vec3, ndim=1),
        body_inv_mass: nd(dtype=float, ndim=2),
        body_inv_inertia_W: nd(dtype=mat3, ndim=2),
        dt: float,
        beta: float,
        pair_scale: nd(dtype=float, ndim=2),
        pair_weight: nd(dtype=float, ndim=2),
        c_ids: nd(dtype=ivec4, ndim=1),
        c_key: nd(dtype=ivec4, ndim=1),
        c_frame: nd(dtype=mat3, ndim=1),
        c_ra: nd(dtype=vec3, ndim=1),
        c_rb: nd(dtype=vec3, ndim=1),
        c_model: nd(dtype=vec4, ndim=1),
        pair_deep: nd(dtype=ti.i32, ndim=2),
    ):
        """Point-contact model of each kept polygon, written at its world's rows.
        Writes c_ids (columns types.ID_*), c_key (the polygon's identity: world, pair, element
        of a, element of b), c_frame (rows t1, t2, n; n from a into b), c_ra/c_rb (centroid
        minus each body's centre of mass, W), c_model (columns types.M_*: k [N/m], phi0 [m],
        tau [s], A p0 [N]); reduces per pair the near-rigid scale and, unless deterministic
        (then ordering.sum_pair_weights does it in row order), the warm-start weight."""
        n = ti.min(counts[C_POLYGONS], poly_i.shape[0])
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for k in range(n):
            slot = poly_slot[k]
            if slot >= 0:
                w, pair = poly_i[k][K_WORLD], poly_i[k][K_PAIR]
                c = world_start[w] + slot
                g8 = poly_g[k]
                a, b = pair_i[pair][P_BODY_LO], pair_i[pair][P_BODY_HI]
                ga, gb = g8[POLY_GA], g8[POLY_GB]
                if pair_deep[w, pair] == 1:  # deep overlap (module docstring)
                    ga, gb = deep_gradient(ga, g8[POLY_GRAD_A]), deep_gradient(gb, g8[POLY_GRAD_B])
                g = series_gradient(ga, gb)
                stiffness = g * g8[POLY_AREA]
                phi0 = -g8[POLY_P0] / g
                force0 = g8[POLY_AREA] * g8[POLY_P0]
                scale = write_row(c, w, a, b, pair, poly_i[k], poly_c[k], poly_n[k], stiffness, phi0, force0, pair_f,
                                  body_p, body_q, body_com_B, body_inv_mass, body_inv_inertia_W, dt, beta,
                                  c_ids, c_key, c_frame, c_ra, c_rb, c_model)
                # The scale is mostly 1, pair_scale's reset value: no atomic (a compare-and-swap loop for
                # a float on cpu) unless the row lowers the minimum, which only falls, so a stale read
                # can only cost an atomic, never skip a lower scale.
                if scale < pair_scale[w, pair]:
                    ti.atomic_min(pair_scale[w, pair], scale)
                if ti.static(not deterministic):
                    ti.atomic_add(pair_weight[w, pair], ti.max(force0, 0.0))

    return assemble


@functools.lru_cache(maxsize=None)
def finalize_contacts(warm_start: bool, split: bool):
    """The kernel that regularises the rows and warm-starts them, for these options."""

    @ti.kernel
    def finalize(
        world_start: nd(dtype=ti.i32, ndim=1),
        c_ids: nd(dtype=ivec4, ndim=1),
        c_frame: nd(dtype=mat3, ndim=1),
        c_ra: nd(dtype=vec3, ndim=1),
        c_rb: nd(dtype=vec3, ndim=1),
        c_model: nd(dtype=vec4, ndim=1),
        pair_f: nd(dtype=vec4, ndim=2),
        pair_scale: nd(dtype=float, ndim=2),
        body_contacts: nd(dtype=ti.i32, ndim=2),
        body_inv_mass: nd(dtype=float, ndim=2),
        body_inv_inertia_W: nd(dtype=mat3, ndim=2),
        dt: float,
        sigma: float,
        c_reg: nd(dtype=contact_reg, ndim=1),
        c_gamma: nd(dtype=vec3, ndim=1),
    ):
        """Writes c_reg (columns types.R_*: R_t, R_n [1/kg], v_hat_n [m/s], s_t, s_n
        [1/sqrt(kg)], mu, 1/s_t, 1/s_n) and c_gamma, the warm-start impulse (contact frame,
        projected on the friction cone; with warm_start, from the world-frame impulse that
        warmstart.look_up_impulses left in c_gamma, else 0). s_t^2 and s_n^2 are the diagonal
        of W_ii + R_i, with split: W_ii^split (mass splitting, Tonge 2012: each body's mass is
        shared among its contacts), the metric of the solver's local step."""
        W = world_start.shape[0] - 1
        ti.loop_config(serialize=backend.SERIAL_LOOPS)
        for c in range(world_start[W]):
            ids = c_ids[c]
            w, a, b, pair = ids[ID_WORLD], ids[ID_A], ids[ID_B], ids[ID_PAIR]
            model = c_model[c]
            frame = c_frame[c]
            wm = w % body_inv_mass.shape[0]
            # W_ii and, with split, W_ii^split: both bodies in a runtime loop, so that
            # body_delassus is inlined once per matrix (compile time).
            Wc, Ws = mat3(0.0), mat3(0.0)
            for side in range(2):
                body = a if side == 0 else b
                r = c_ra[c] if side == 0 else c_rb[c]
                inv_mass, inv_inertia = body_inv_mass[wm, body], body_inv_inertia_W[w, body]
                Wc += body_delassus(inv_mass, inv_inertia, r, frame)
                if ti.static(split):  # each body's mass shared among its contacts (Tonge 2012)
                    share = ti.max(body_contacts[w, body], 1)
                    Ws += body_delassus(share * inv_mass, share * inv_inertia, r, frame)
            if ti.static(not split):
                Ws = Wc
            w_diag = (Wc[0, 0] + Wc[1, 1] + Wc[2, 2]) / 3.0
            stiffness = pair_scale[w, pair] * model[M_K]
            tau = model[M_TAU]
            Rn = 1.0 / (dt * stiffness * (dt + tau))
            Rt = sigma * w_diag
            v_hat = -model[M_PHI0] / (dt + tau)
            s_t = ti.sqrt(0.5 * (Ws[0, 0] + Ws[1, 1]) + Rt)
            s_n = ti.sqrt(Ws[2, 2] + Rn)
            mu = pair_f[w % pair_f.shape[0], pair][PF_MU]
            c_reg[c] = contact_reg(Rt, Rn, v_hat, s_t, s_n, mu, 1.0 / s_t, 1.0 / s_n)
            gamma = vec3(0.0)
            if ti.static(warm_start):  # c_gamma holds the world-frame impulse (warmstart.look_up_impulses)
                gamma = project_cone(frame @ c_gamma[c], mu)
            c_gamma[c] = gamma

    return finalize
