#!/usr/bin/env bash
# One call on a lent GPU machine (the `device` tool; ../shared/gpu/README.md): CUDA correctness
# of the collision skin and Newton's block schedule, then the numbers the README's GPU
# sections quote, each step under its own time limit so that a slow or hung step leaves the
# others' results. From the project root, with the wheels in .whl/ (../shared/gpu/fetch_wheels.sh):
#
#     bash bench/gpu_session.sh            # results and logs under $OUT (default: ./gpu_out)
#
# ARCH and WORLDS override the backend and the batch (e.g. ARCH=cpu WORLDS=4 to try the script
# here). A shared/reference/solver_prototype beside the tests (a copy of the dumped problems)
# enables the one-block timing.
set -u
ARCH=${ARCH:-cuda}
WORLDS=${WORLDS:-1024}
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
PY=${PY:-python3}
if [ -d .whl ] && ! $PY -c "import taichi" 2> /dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 TI_OFFLINE_CACHE_FILE_PATH=/tmp/ti_cache_gpu_session TH_SHARED=$PWD/shared
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
git log -1 --format='commit %h' 2> /dev/null

step() {  # step NAME SECONDS COMMAND...: run under a limit, log to $OUT/NAME.log, say how it ended
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "== $name: rc $? after $((SECONDS - t0)) s (limit $limit s)"
}

step newton_bench 170 $PY -m bench.run dynamics --arch "$ARCH" --cases pile_27,pile_27_settled --worlds "$WORLDS" \
    --method newton --out "$OUT/newton_$WORLDS.json"
step skin_tests 100 $PY -m pytest -q -x -p no:cacheprovider --arch "$ARCH" tests/test_skin.py
step default_bench 100 $PY -m bench.run dynamics --arch "$ARCH" --cases pile_27,pile_27_settled --worlds "$WORLDS" \
    --out "$OUT/default_$WORLDS.json"
step settled_profile 60 $PY -m bench.profile_kernels --arch "$ARCH" --case pile_27_settled --worlds "$WORLDS" --steps 10 \
    --method newton
if [ -d shared/reference/solver_prototype ]; then
    step block_timing 110 $PY -m bench.compile_newton --arch "$ARCH" --kernel block --timing --repeats 4
    # the same with Taichi's cfg_optimization off, as on cpu and vulkan (backend.CFG_OPTIMIZATION)
    step block_timing_cfg_off 110 $PY -m bench.compile_newton --arch "$ARCH" --kernel block --timing --repeats 4 --cfg off
fi
step newton_scaling 90 $PY -m bench.run dynamics --arch "$ARCH" --cases pile_27_settled --worlds 128,4096 --method newton \
    --out "$OUT/newton_scaling.json"

for f in "$OUT"/*.log; do echo "---- $f"; tail -n 6 "$f"; done
for f in "$OUT"/*.json; do
    echo "---- $f"
    $PY - "$f" << 'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "case" in r:
        print(r["case"], r["worlds"], r.get("solver"), "world-steps/s %.0f" % r["world_steps_per_s"], "compile %.0f s" % r["compile_s"],
              "it", r.get("iterations_mean_p95_max"), {k: round(v, 3) for k, v in r.get("stage_share", {}).items()})
EOF
done
