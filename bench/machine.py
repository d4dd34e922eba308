"""Describe the machine a benchmark ran on (CPU, memory, GPU or Vulkan driver)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess


def _first(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out else None


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name with its family and model numbers, from /proc/cpuinfo (or the text
    `cpuinfo`): a virtual machine may show a line's name only ("AMD EPYC"), and the numbers
    tell its generations apart. They matter here: Taichi 1.7.4's LLVM optimises kernels for
    the CPU it recognises, and for one it does not (AMD family 26, Zen 5) for baseline x86-64,
    with vectors half as wide (README, "The host CPU decides the vector width")."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return platform.processor() or "unknown CPU"
    fields = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:  # the first processor's block ends
                break
            continue
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        return None
    return None


def vulkan_driver() -> str:
    """The Vulkan device, e.g. 'llvmpipe (Mesa 25.0.7)' for Mesa's software lavapipe."""
    name = None
    out = _first(["vulkaninfo", "--summary"])
    if out is not None:
        try:
            text = subprocess.run(["vulkaninfo", "--summary"], capture_output=True, text=True, timeout=20).stdout
            for line in text.splitlines():
                if "deviceName" in line:
                    name = line.split("=", 1)[1].strip()
                    break
        except (OSError, subprocess.SubprocessError):
            pass
    mesa = _first(["dpkg-query", "-W", "-f=${Version}", "mesa-vulkan-drivers"])
    gpu = _first(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if gpu:
        return gpu
    if mesa:
        return f"{name or 'lavapipe'} (Mesa {mesa.split('-')[0]}, software)"
    return name or "unknown Vulkan device"


def describe(arch: str) -> str:
    """One line naming the device that runs `arch`."""
    if arch == "cpu":
        return f"{cpu_model()}, {os.cpu_count()} cores"
    if arch == "cuda":
        return _first(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]) or "CUDA GPU"
    return vulkan_driver()


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "gpu": _first(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]),
    }


def pool_cores() -> list[int] | str:
    """The cores the cpu backend's pool threads were pinned to, one per thread (backend.init's
    pin_threads), or why they were not."""
    import taichi_hydro as th

    pinned = th.backend.pinned_threads()
    return pinned if isinstance(pinned, str) else [pinned[t] for t in sorted(pinned)]
