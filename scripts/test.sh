#!/usr/bin/env bash
# Install taichi_hydro with its test extras into .venv and run the test suite on the CPU
# backend, then on Vulkan (Mesa's lavapipe when there is no GPU). TH_ARCHES overrides the
# list (e.g. TH_ARCHES=cpu); TH_REQUIRE_VULKAN=1 makes a missing Vulkan driver an error.
# Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
arches=${TH_ARCHES:-cpu vulkan}
case " $arches " in *" vulkan "*) th_system vulkan || true ;; *) th_system cpu ;; esac
th_venv test
status=0
for arch in $arches; do
  if [ "$arch" = vulkan ] && ! .venv/bin/python -c "import taichi_hydro as th; th.init('vulkan')" >/dev/null 2>&1; then
    if [ "${TH_REQUIRE_VULKAN:-0}" = 1 ]; then
      th_log "Vulkan is required but not usable:"; .venv/bin/python -c "import taichi_hydro as th; th.init('vulkan')" || true
      status=1; continue
    fi
    th_log "skipping the vulkan run: no usable Vulkan driver"; continue
  fi
  th_log "pytest --arch $arch"
  if [ "$arch" != vulkan ]; then
    .venv/bin/python -m pytest -q --arch "$arch" "$@" || status=1
    continue
  fi
  # Taichi 1.7.4 on Mesa's lavapipe crashes after 2**16 descriptor sets per process: tests that
  # meet taichi_hydro.backend.LAUNCH_BUDGET after others are listed and rerun one per process.
  rerun=$(mktemp)
  TH_RERUN_FILE=$rerun .venv/bin/python -m pytest -q --arch vulkan "$@" || status=1
  if [ -s "$rerun" ]; then
    th_log "rerunning $(wc -l < "$rerun") test(s) alone, each in a fresh process, two at a time"
    xargs -P 2 -I{} .venv/bin/python -m pytest -q -p no:cacheprovider --arch vulkan "{}" < "$rerun" || status=1
  fi
  rm -f "$rerun"
done
exit $status
