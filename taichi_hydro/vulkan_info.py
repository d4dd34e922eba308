"""What Vulkan devices the loader offers, read with ctypes (no Vulkan SDK needed).

Used to recognise a machine whose only Vulkan devices are CPU implementations (Mesa's
lavapipe), where Taichi 1.7.4 has a hard per-process limit (see backend.LaunchBudget)."""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

__all__ = ["VulkanDevice", "vulkan_devices"]

_DEVICE_TYPE_CPU = 4  # VK_PHYSICAL_DEVICE_TYPE_CPU
_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1


@dataclass(frozen=True)
class VulkanDevice:
    name: str
    device_type: int  # VkPhysicalDeviceType: 1 integrated, 2 discrete, 3 virtual, 4 cpu
    local_heap_bytes: int = 0  # size of its largest device-local memory heap [bytes]

    @property
    def is_cpu(self) -> bool:
        return self.device_type == _DEVICE_TYPE_CPU


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.c_void_p),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


def vulkan_devices() -> list[VulkanDevice]:
    """The physical devices of the Vulkan loader ([] when there is no loader or no device)."""
    path = ctypes.util.find_library("vulkan") or "libvulkan.so.1"
    try:
        vk = ctypes.CDLL(path)
    except OSError:
        return []
    instance = ctypes.c_void_p()
    info = _InstanceCreateInfo(sType=_STRUCTURE_TYPE_INSTANCE_CREATE_INFO)
    if vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        return []
    try:
        count = ctypes.c_uint32(0)
        if vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None) != 0 or count.value == 0:
            return []
        handles = (ctypes.c_void_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        devices = []
        for handle in handles[: count.value]:
            # VkPhysicalDeviceProperties: five uint32 (api, driver, vendor, device id, type),
            # then char deviceName[256], then limits; 4 KiB holds all of it.
            props = ctypes.create_string_buffer(4096)
            vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(handle), props)
            device_type = int.from_bytes(props.raw[16:20], "little")
            name = props.raw[20:276].split(b"\0", 1)[0].decode(errors="replace")
            devices.append(VulkanDevice(name, device_type, _largest_local_heap(vk, handle)))
        return devices
    finally:
        vk.vkDestroyInstance(instance, None)


def _largest_local_heap(vk, handle) -> int:
    """Largest VK_MEMORY_HEAP_DEVICE_LOCAL_BIT heap of a physical device [bytes].
    VkPhysicalDeviceMemoryProperties: uint32 memoryTypeCount, 32 VkMemoryType (8 bytes each),
    uint32 memoryHeapCount at byte 260, then 16 VkMemoryHeap {uint64 size, uint32 flags} (16
    bytes each, 8-aligned) from byte 264."""
    props = ctypes.create_string_buffer(520)
    vk.vkGetPhysicalDeviceMemoryProperties(ctypes.c_void_p(handle), props)
    count = min(int.from_bytes(props.raw[260:264], "little"), 16)
    sizes = [int.from_bytes(props.raw[264 + 16 * i: 272 + 16 * i], "little") for i in range(count)
             if int.from_bytes(props.raw[272 + 16 * i: 276 + 16 * i], "little") & 1]
    return max(sizes, default=0)


if __name__ == "__main__":
    # `python -P taichi_hydro/vulkan_info.py`: exit status 0 when the loader offers a device.
    # Run as a file it imports neither the package nor Taichi (scripts/main.sh: 0.2 s instead
    # of 4.7 s); -P keeps this folder off sys.path, where types.py would shadow the standard one.
    import sys

    sys.exit(0 if vulkan_devices() else 1)
