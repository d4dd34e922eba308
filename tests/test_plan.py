"""Launch plans bind every kernel argument by name, checked when the plan is built."""

import dataclasses
import itertools

import numpy as np
import pytest
import taichi as ti

import taichi_hydro as th
from taichi_hydro.errors import BindingError
from taichi_hydro.plan import Plan, kernel_parameters
from taichi_hydro.types import nd

from conftest import ROOT

COMBINATIONS = [(schedule, method, deterministic, sleep)
                for schedule, method, deterministic, sleep in itertools.product(
                    ("world", "contact"), ("jacobi", "accelerated", "gauss_seidel"), (False, True), (False, True))
                if not (schedule == "contact" and method == "gauss_seidel")]


@ti.kernel
def copy_rows(src: nd(dtype=ti.math.vec3, ndim=2), dst: nd(dtype=ti.math.vec3, ndim=2), scale: float):
    for i, j in src:
        dst[i, j] = scale * src[i, j]


def test_every_step_plan_binds_every_parameter_to_an_array_of_its_kind(arch):
    """For each solver configuration: the step plan of a scene with every pair type the pile and
    the box stack have is built (Plan.add checks names and kinds), every launch binds each of
    its kernel's parameters, in signature order, and the bindings still check against the
    arguments of a run."""
    pile = th.load_scene(ROOT / "scenes" / "pile.toml")
    for schedule, method, deterministic, sleep in COMBINATIONS:
        settings = dataclasses.replace(pile.solver, schedule=schedule, method=method, deterministic=deterministic, sleep=sleep,
                                       iterations=3)
        sim = th.Simulator(dataclasses.replace(pile, solver=settings), worlds=2)
        plan, args = sim.step_plan, sim.bindings()
        assert [name for name, _ in sim.stages] == ["collide", "assemble", "solve", "integrate"]
        for kernel, names in plan.launches:
            assert len(names) == len(kernel_parameters(kernel)), kernel.__name__
        plan.check(args)
        kernels = {kernel.__name__ for kernel, _ in plan.launches}
        assert ("solve_world" in kernels) == (schedule == "world")
        assert ("gather" in kernels) == (deterministic and schedule == "contact")
        if schedule == "contact":
            assert sum(k.__name__ == "sweep" for k, _ in plan.launches) == 3


def test_a_binding_to_an_unknown_name_or_the_wrong_kind_fails_when_the_plan_is_built(arch):
    a, b = ti.ndarray(ti.math.vec3, (2, 3)), ti.ndarray(ti.math.vec3, (2, 3))
    flat = ti.ndarray(ti.math.vec3, 6)
    ints = ti.ndarray(ti.i32, (2, 3))
    plan = Plan("test", {"src": a, "dst": b, "scale": 2.0, "flat": flat, "ints": ints, "count": 3})
    plan.add(copy_rows)
    plan.add(copy_rows, scale=0.5)  # a literal
    with pytest.raises(BindingError, match=r"copy_rows\(dst\) is bound to 'target', which no container provides"):
        plan.add(copy_rows, dst="target")
    with pytest.raises(BindingError, match="has no parameter 'destination'"):
        plan.add(copy_rows, destination="dst")
    with pytest.raises(BindingError, match="takes ndim=2"):
        plan.add(copy_rows, src="flat")
    with pytest.raises(BindingError, match="takes elements of"):
        plan.add(copy_rows, src="ints")
    with pytest.raises(BindingError, match="takes a float"):
        plan.add(copy_rows, scale="count")
    assert len(plan.launches) == 2
    for graph in (False, True):
        a.from_numpy(np.ones((2, 3, 3), dtype=np.float32))
        b.fill(0)
        plan.run({"src": a, "dst": b, "scale": 2.0}, graph=graph)
        assert np.all(b.to_numpy() == 0.5), graph  # the literal launch ran last


def test_two_containers_may_not_claim_one_name(arch):
    sim = th.Simulator(th.load_scene(ROOT / "scenes" / "box_stack.toml"))
    sim.solver.body_p = sim.state.body_p
    with pytest.raises(BindingError, match="'body_p' is claimed by two containers"):
        sim.bindings()


def test_every_body_geometry_lookup_has_its_map(arch):
    """geom_i's body column and body_geom_start/body_geoms are inverse maps; pairs name the
    bodies of their two geometries, lower first."""
    host = th.Simulator(th.load_scene(ROOT / "scenes" / "box_stack.toml")).model.host
    for b in range(host.body_count):
        assert all(host.geom_body[g] == b for g in host.geoms_of(b))
    assert sorted(np.concatenate([host.geoms_of(b) for b in range(host.body_count)]).tolist()) == list(range(len(host.geometries)))
    from taichi_hydro.types import P_BODY_HI, P_BODY_LO, P_FLIP, P_GEOM_A, P_GEOM_B
    for row in host.pair_i:
        bodies = host.geom_body[[row[P_GEOM_A], row[P_GEOM_B]]]
        assert (row[P_BODY_LO], row[P_BODY_HI]) == (bodies.min(), bodies.max())
        assert row[P_FLIP] == int(bodies[0] > bodies[1])
