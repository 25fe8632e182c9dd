"""The architecture of the GPU the tests run on, as `pipec build --arch` takes it (`sm_90`)."""

from __future__ import annotations


def device_arch() -> str:
    from pipec.runtime.driver import open_device, release_device

    device = open_device(0)
    try:
        return device.arch
    finally:
        release_device(device)
