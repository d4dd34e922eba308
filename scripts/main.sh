#!/usr/bin/env bash
# Install taichi_hydro into .venv and run the main job on the CPU backend: simulate the pile of
# 27 compliant spheres for 1.5 s and write out/pile.gif (headless GGUI render, pressure-coloured
# contact patches), out/pile_summary.json (final poses, speed, polygons, solver iterations) and
# out/pile_plot.png (contact forces, polygons, solver iterations and energy over time).
# Extra arguments go to `taichi-hydro run` (e.g. --arch vulkan, --worlds 64).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
th_system vulkan || true   # GGUI renders through Vulkan (Mesa's lavapipe on a machine without a GPU)
th_venv plot
record=(--record out/pile.gif)   # one run: simulated once, rendered along the way
if ! .venv/bin/python -P taichi_hydro/vulkan_info.py; then  # -P: its folder stays off sys.path (our types.py)
  th_log "no Vulkan driver: no animation (install libvulkan1 and mesa-vulkan-drivers for out/pile.gif)"
  record=()
fi
# --quick-compile: on a cold compile cache the kernels compile about 2.7x faster and step about
# 1.5x slower, a gain for 750 steps (README, Benchmarks, "The main job").
.venv/bin/taichi-hydro run scenes/pile.toml --time 1.5 --quick-compile --summary out/pile_summary.json --plot out/pile_plot.png \
  "${record[@]}" "$@"
