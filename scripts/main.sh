#!/usr/bin/env bash
# Install taichi_hydro into .venv and run the main job: the contact surfaces of a bundled scene
# on the CPU backend. Extra arguments go to `taichi-hydro contact` (e.g. --json, --arch vulkan).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
th_system cpu
th_venv
exec .venv/bin/taichi-hydro contact scenes/sphere_on_plane.toml "$@"
