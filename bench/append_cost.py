"""What appending to the polygon pool costs the cpu backend's threads: the same work per item
(a chain of dependent arithmetic standing in for clipping) followed by one record written to
arrays of the polygon pool's layout (collision.pools.PolygonPool: seven arrays, 4 to 96 bytes
per row), three ways:

  append      the row from an atomic counter, as clip_candidates appends its polygons
              (rows of the threads interleave in the pool);
  append_own  the same atomic counter, the row at the item's own index (separates the
              counter's cost from where the rows land);
  own         the row at the item's own index, no counter (one slot per item).

    python -m bench.append_cost --threads 1,2 --out bench/results/append_cost.json

Each thread count runs in a process of its own (Taichi's pool size is set at init; th.init pins
the pool's threads, the row's pool_cores), loops not serialised; the time is the median of `reps` launches after one to compile."""

import argparse
import json
import statistics
import subprocess
import sys
import time

from .machine import describe


def measure(threads: int, items: int, work: int, reps: int) -> dict:
    """Seconds per launch of each way, on a cpu pool of `threads` threads (this process)."""
    import taichi as ti

    from taichi_hydro.types import (
        POLY_MAX, ivec4, nd, poly_record, poly_vertex_values, poly_vertices, vec3)

    import taichi_hydro as th

    th.init("cpu", cpu_threads=threads)  # the pool's threads pinned to cores of their own, as in a run
    counter = ti.ndarray(ti.i32, 1)
    pool = dict(i=ti.ndarray(ivec4, items), g=ti.ndarray(poly_record, items), c=ti.ndarray(vec3, items),
                n=ti.ndarray(vec3, items), nv=ti.ndarray(ti.i32, items), v=ti.ndarray(poly_vertices, items),
                vp=ti.ndarray(poly_vertex_values, items))

    @ti.func
    def record(c: ti.i32, x: vec3, k: ti.i32, pi: ti.template(), pg: ti.template(),
               pc: ti.template(), pn: ti.template(), pnv: ti.template(), pv: ti.template(), pvp: ti.template()):
        for _ in range(work):  # dependent arithmetic: the item's own work
            x = vec3(ti.sin(x[1]) + 0.1 * x[2], 0.9 * x[2] + x[0], 0.5 * x[0] + 0.3)
        pi[k] = ivec4(c, k, 0, 1)
        pg[k] = poly_record(x[0], x[1], x[2], 0.0, 0.0, 0.0, 0.0, 0.0)
        pc[k] = x
        pn[k] = -x
        pnv[k] = 3
        verts = poly_vertices(0.0)
        vp = poly_vertex_values(0.0)
        for j in ti.static(range(POLY_MAX)):
            verts[j, 0], verts[j, 1], verts[j, 2] = x[0] + j, x[1], x[2]
            vp[j] = x[2] * j
        pv[k] = verts
        pvp[k] = vp

    I1, I4, G8 = nd(dtype=ti.i32, ndim=1), nd(dtype=ivec4, ndim=1), nd(dtype=poly_record, ndim=1)
    V3, PV, PP = nd(dtype=vec3, ndim=1), nd(dtype=poly_vertices, ndim=1), nd(dtype=poly_vertex_values, ndim=1)

    @ti.kernel
    def append(counter: I1, pi: I4, pg: G8, pc: V3, pn: V3, pnv: I1, pv: PV, pvp: PP):
        for c in range(items):
            k = ti.atomic_add(counter[0], 1)
            record(c, vec3(0.001 * c, 0.2, 0.3), k, pi, pg, pc, pn, pnv, pv, pvp)

    @ti.kernel
    def append_own(counter: I1, pi: I4, pg: G8, pc: V3, pn: V3, pnv: I1, pv: PV, pvp: PP):
        for c in range(items):
            k = ti.atomic_add(counter[0], 1)
            record(c, vec3(0.001 * c, 0.2, 0.3 + 1e-9 * k), c, pi, pg, pc, pn, pnv, pv, pvp)

    @ti.kernel
    def own(counter: I1, pi: I4, pg: G8, pc: V3, pn: V3, pnv: I1, pv: PV, pvp: PP):
        for c in range(items):
            record(c, vec3(0.001 * c, 0.2, 0.3), c, pi, pg, pc, pn, pnv, pv, pvp)

    out = {}
    for kernel in (append, append_own, own):
        times = []
        for r in range(reps + 1):
            counter.fill(0)
            ti.sync()
            t0 = time.perf_counter()
            kernel(counter, pool["i"], pool["g"], pool["c"], pool["n"], pool["nv"], pool["v"], pool["vp"])
            ti.sync()
            if r > 0:  # the first launch compiles
                times.append(time.perf_counter() - t0)
        out[kernel.__name__] = statistics.median(times)
    pinned = th.backend.pinned_threads()
    return {"threads": threads, "items": items, "work": work, "reps": reps, "device": describe("cpu"),
            "pool_cores": sorted(pinned.values()) if isinstance(pinned, dict) else pinned, "s_per_launch": out}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.append_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", default="1,2", help="comma-separated pool sizes, one process each")
    p.add_argument("--items", type=int, default=65536, help="items per launch (the settled pile at 64 worlds: "
                   "about 65 000 candidates, 50 000 polygons per step)")
    p.add_argument("--work", type=int, default=15, help="iterations of the stand-in work per item")
    p.add_argument("--reps", type=int, default=51)
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # measure this pool size in this process
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.items, args.work, args.reps)))
        return 0
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        proc = subprocess.run([sys.executable, "-m", "bench.append_cost", "--one", str(threads), "--items", str(args.items),
                               "--work", str(args.work), "--reps", str(args.reps)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{threads} threads: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for r in rows:
        s = r["s_per_launch"]
        print(f"{r['threads']} thread(s), {r['items']} items: " + "   ".join(f"{k} {v * 1e3:7.3f} ms" for k, v in s.items())
              + f"   (pool on cores {r['pool_cores']}; {r['device']})")
    if args.out:
        from taichi_hydro.output import atomic_write

        atomic_write(args.out, lambda tmp: tmp.write_text(json.dumps(rows, indent=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
