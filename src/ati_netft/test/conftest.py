"""Shared fixtures: an emulated sensor on loopback."""

from __future__ import annotations

from collections.abc import Iterator

from ati_netft.emulator import NetFTEmulator
from ati_netft.protocol import Calibration
import pytest

CAL = Calibration(1_000_000, 1_000_000, 'N', 'N-mm', 1000.0)
WRENCH = (1.0, -2.0, 3.0, 0.004, -0.005, 0.006)  # what the emulator fixture sends [N, N m]


@pytest.fixture
def emulator() -> Iterator[NetFTEmulator]:
    wrench = list(WRENCH)
    emu = NetFTEmulator(CAL, rate_hz=1000.0, source=lambda t: tuple(wrench)).start()
    emu.wrench = wrench  # type: ignore[attr-defined]  # tests change it in place
    yield emu
    emu.stop()
