#!/usr/bin/env bash
# Install taichi_hydro into .venv and run the main job on the CPU backend: simulate the pile of
# 27 compliant spheres for 1.5 s and write out/pile.gif (headless GGUI render, pressure-coloured
# contact patches), out/pile_summary.json (final poses, speed, polygons, solver iterations) and
# out/pile_plot.png (contact forces, polygons, solver iterations and energy over time).
# Extra arguments go to `taichi-hydro run` (e.g. --arch vulkan, --worlds 64).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
th_system vulkan || true   # GGUI renders through Vulkan (Mesa's lavapipe on a machine without a GPU)
th_venv plot
.venv/bin/taichi-hydro run scenes/pile.toml --time 1.5 --summary out/pile_summary.json --plot out/pile_plot.png "$@"
th_log "summary written to out/pile_summary.json, plot to out/pile_plot.png"
.venv/bin/python -c "import json; s = json.load(open('out/pile_summary.json')); print(json.dumps({k: s[k] for k in ('scene', 'arch', 'worlds', 'steps', 'wall_s', 'world_steps_per_s', 'polygons_mean', 'solver_iterations_mean', 'diverged_worlds')}, indent=1))"
.venv/bin/taichi-hydro view scenes/pile.toml --record out/pile.gif --frames 45
th_log "animation written to out/pile.gif"
