#!/usr/bin/env bash
# Install taichi_hydro with its test extras into .venv and run the test suite on the CPU
# backend and on Vulkan (Mesa's lavapipe when there is no GPU), side by side. torch, optional, is added
# when a wheel of it lies on this machine (th_torch_local in setup.sh). TH_ARCHES overrides the
# list (e.g. TH_ARCHES=cpu); TH_REQUIRE_VULKAN=1 makes a missing Vulkan driver an error.
# Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
arches=${TH_ARCHES:-cpu vulkan}
# Mesa's lavapipe runs a compute shader 8 invocations at a time on AVX2 machines (256-bit
# vectors); at 128 bits, 4 at a time as on a machine without AVX, its LLVM compiles the solve
# kernels in half the CPU time, and the compiled shaders run about a fifth slower: a trade that
# pays in a test suite, which is mostly cold compiles, not in long runs (README, "Lavapipe's
# vector width"). A hardware Vulkan driver ignores the variable; the user's own setting wins.
export LP_NATIVE_VECTOR_WIDTH=${LP_NATIVE_VECTOR_WIDTH:-128}
case " $arches " in *" vulkan "*) th_system vulkan || true ;; *) th_system cpu ;; esac
th_venv test
th_torch_local
# One pass per backend. With both, the cpu and vulkan passes run side by side (each process is
# mostly one busy thread: the cpu pass compiles and runs small kernels, the vulkan pass pays
# lavapipe's per-launch cost), the vulkan pass's output kept in a log that is printed when it ends.
# Each pass ends with its wall-clock and CPU time (bash's `time`, its child processes included:
# user + sys near twice real means the pass had both cores to itself).
TIMEFORMAT="[taichi-hydro] pass time: real %0Rs, user %0Us, sys %0Ss"

cpu_pass() {  # also cuda
  th_log "pytest --arch $1"
  .venv/bin/python -m pytest -q --durations=15 --arch "$1" "${@:2}"
}

# Taichi 1.7.4 on Mesa's lavapipe crashes after 2**16 descriptor sets per process: tests that
# meet taichi_hydro.backend.LAUNCH_BUDGET after others are listed and rerun in fresh
# processes (two at a time), as many per process as fit; a test that meets the budget with
# no progress made is run alone (and skipped with the reason if it needs more by itself).
vulkan_pass() {
  local status=0 pending next part pids
  th_log "pytest --arch vulkan"
  pending=$(mktemp)
  # Two pytest workers (pytest-xdist, whole files per worker so that module fixtures are made
  # once): lavapipe's per-launch cost keeps one process on one core, and once the cpu pass is
  # done the second core would idle. The files that step jointed scenes go to one worker
  # together (tests/conftest.py: COMPILE_GROUPS), which compiles their step once.
  TH_RERUN_FILE=$pending .venv/bin/python -m pytest -q --durations=15 -n 2 --dist loadfile --arch vulkan "$@" || status=1
  while [ -s "$pending" ]; do
    th_log "rerunning $(wc -l < "$pending") test(s) in fresh processes, two at a time"
    next=$(mktemp)
    split -n r/2 "$pending" "$pending.part."
    pids=()
    for part in "$pending".part.*; do
      [ -s "$part" ] || continue
      xargs -a "$part" env TH_RERUN_FILE="$next" .venv/bin/python -m pytest -q -p no:cacheprovider --arch vulkan &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    rm -f "$pending".part.*
    if [ -s "$next" ] && [ "$(sort "$next")" = "$(sort "$pending")" ]; then
      th_log "no progress: running $(wc -l < "$next") test(s) alone, each in a fresh process"
      xargs -P 2 -I{} .venv/bin/python -m pytest -q -p no:cacheprovider --arch vulkan "{}" < "$next" || status=1
      rm -f "$next"
      break
    fi
    rm -f "$pending"
    pending=$next
  done
  rm -f "$pending"
  return $status
}

status=0
vulkan_log= vulkan_pid=
case " $arches " in
  *" vulkan "*)
    if ! .venv/bin/python -c "import taichi_hydro as th; th.init('vulkan')" >/dev/null 2>&1; then
      if [ "${TH_REQUIRE_VULKAN:-0}" = 1 ]; then
        th_log "Vulkan is required but not usable:"; .venv/bin/python -c "import taichi_hydro as th; th.init('vulkan')" || true
        status=1
      else
        th_log "skipping the vulkan run: no usable Vulkan driver"
      fi
    elif [ "$(echo $arches | wc -w)" -gt 1 ]; then
      vulkan_log=$(mktemp)
      th_log "vulkan pass started alongside the others; its output follows when it ends"
      { time vulkan_pass "$@"; } > "$vulkan_log" 2>&1 &
      vulkan_pid=$!
    else
      time vulkan_pass "$@" || status=1
    fi ;;
esac
for arch in $arches; do
  if [ "$arch" != vulkan ]; then time cpu_pass "$arch" "$@" || status=1; fi
done
if [ -n "$vulkan_pid" ]; then
  wait "$vulkan_pid" || status=1
  cat "$vulkan_log"
  rm -f "$vulkan_log"
fi
exit $status
