# Sourced by main.sh and test.sh: system libraries, a virtual environment in .venv with the
# package installed, and compile caches inside the checkout.
#   needs: "cpu" (libX11 for `import taichi`) or "vulkan" (also the Vulkan loader and Mesa's
#   lavapipe >= 23: older lavapipe miscompiles integer atomics in loops).
set -euo pipefail
TH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$TH_ROOT"

th_log() { echo "[taichi-hydro] $*" >&2; }

th_have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }

th_apt() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    th_log "missing system packages: $*; install them (e.g. sudo apt-get install $*)"
    return 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || {
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
}

th_mesa_major() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | cut -d. -f1 | sed 's/^[0-9]*://' ; }

th_system() {
  th_have_lib libX11.so.6 || th_apt libx11-6
  if [ "${1:-cpu}" = vulkan ]; then
    th_have_lib libvulkan.so.1 || th_apt libvulkan1
    local major; major=$(th_mesa_major || true)
    if [ -z "$major" ] || [ "$major" -lt 23 ]; then
      if [ "$(id -u)" = 0 ] && grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
        th_log "installing Mesa's Vulkan drivers from bookworm-backports (lavapipe >= 23 needed)"
        echo "deb http://deb.debian.org/debian bookworm-backports main" > /etc/apt/sources.list.d/th-backports.list
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers >/dev/null
      else
        th_apt mesa-vulkan-drivers || true
      fi
    fi
  fi
}

# The installer: uv (a pip-compatible installer in one binary, 8 to 17 times faster than pip
# here: README, Benchmarks, "The main job") when it can be had (on PATH, or kept in the user's
# cache folder by an earlier run from any checkout, or put there by pip from the package index),
# else pip. TH_INSTALLER=pip forces pip. Sets TH_UV to the uv binary, or to nothing.
th_find_uv() {
  TH_UV=
  [ "${TH_INSTALLER:-}" = pip ] && return 1
  local kept="${XDG_CACHE_HOME:-$HOME/.cache}/taichi_hydro/uv"
  if command -v uv >/dev/null 2>&1; then
    TH_UV=$(command -v uv)
  elif [ -x "$kept/bin/uv" ]; then
    TH_UV="$kept/bin/uv"
  elif "$1" -m pip --version >/dev/null 2>&1 &&
       "$1" -m pip install -q --disable-pip-version-check --target "$kept" uv >/dev/null 2>&1; then
    TH_UV="$kept/bin/uv"
  fi
  if [ -n "$TH_UV" ] && ! "$TH_UV" --version >/dev/null 2>&1; then
    th_log "uv at $TH_UV does not run: installing with pip"
    TH_UV=
  fi
  [ -n "$TH_UV" ]
}

th_venv() {
  local py=${PYTHON:-python3} spec=".${1:+[$1]}" stamp=.venv/.taichi_hydro_installed key
  # An editable install follows the code by itself: install again only when pyproject.toml or
  # the extra changed (the stamp holds both).
  key="$spec $(cksum < pyproject.toml)"
  if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
    th_log "taichi_hydro${1:+ with [$1]} is installed in .venv (pyproject.toml unchanged)"
    return 0
  fi
  th_install "$py" "$spec" "${1:-}" && echo "$key" > "$stamp"
}

th_install() {
  local py=$1 spec=$2
  if th_find_uv "$py"; then
    if [ ! -x .venv/bin/python ]; then
      th_log "creating .venv (uv)"
      # --seed: pip inside the environment too (th_torch_local and users' own installs use it).
      "$TH_UV" venv -q --seed --python "$("$py" -c 'import sys; print(sys.executable)')" .venv
    fi
    th_log "installing taichi_hydro${3:+ with [$3]} into .venv (uv)"
    if "$TH_UV" pip install -q --python .venv/bin/python -e "$spec"; then
      return 0
    fi
    th_log "uv could not install it (an index that only pip is configured for?): trying pip"
  fi
  if [ ! -x .venv/bin/python ]; then
    th_log "creating .venv"
    "$py" -m venv .venv
  fi
  th_log "installing taichi_hydro${3:+ with [$3]} into .venv (pip)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e "$spec"
}

# torch is optional (tensor state and controls). The test run installs it only from a wheel
# already on this machine (pip's find-links, no download: an index would bring a CUDA build of
# several GB); without one the torch tests are skipped and say so.
th_torch_local() {
  if .venv/bin/python -c "import torch" >/dev/null 2>&1; then return 0; fi
  if .venv/bin/python -c "import importlib.metadata as m; m.version('torch')" >/dev/null 2>&1 ||
     .venv/bin/python -m pip install -q --disable-pip-version-check --no-index --no-deps torch >/dev/null 2>&1; then
    local version; version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('torch'))")
    th_log "torch $version from a local wheel; its dependencies from the index"
    .venv/bin/python -m pip install -q --disable-pip-version-check "torch==$version" ||
      th_log "torch's dependencies did not install: the torch tests will be skipped"
  else
    th_log "no local torch wheel: the torch tests will be skipped"
  fi
}

export TI_OFFLINE_CACHE_FILE_PATH="$TH_ROOT/.cache/taichi"
export MESA_SHADER_CACHE_DIR="$TH_ROOT/.cache/mesa"
export MESA_SHADER_CACHE_MAX_SIZE=2G
mkdir -p "$TI_OFFLINE_CACHE_FILE_PATH" "$MESA_SHADER_CACHE_DIR"
