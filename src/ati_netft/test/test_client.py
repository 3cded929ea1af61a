"""The RDT client against the emulator, over real UDP, TCP and HTTP sockets on loopback."""

from __future__ import annotations

import socket
import time

from ati_netft.client import RdtClient, fetch_calibration_http, fetch_calibration_tcp
from ati_netft.emulator import NetFTEmulator
from ati_netft.protocol import ERROR_BIT, RdtRecord, pack_records
import pytest

from .conftest import CAL


def wait_for(condition, timeout: float = 3.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return False


def test_calibration_is_read_over_http_and_tcp(emulator: NetFTEmulator) -> None:
    assert fetch_calibration_http('127.0.0.1', emulator.http_port) == CAL
    tcp = fetch_calibration_tcp('127.0.0.1', emulator.tcp_port)
    assert (tcp.counts_per_force, tcp.torque_unit) == (1e6, 'N-mm')
    with pytest.raises(ConnectionError, match='could not read'):
        fetch_calibration_tcp('127.0.0.1', 1, timeout_s=0.5)


def test_stream_is_scaled_to_si_including_newton_millimetre_torque(
    emulator: NetFTEmulator,
) -> None:
    with RdtClient('127.0.0.1', CAL, port=emulator.rdt_port) as client:
        assert wait_for(lambda: client.stats.received >= 50)
        sample = client.latest
        assert sample is not None
        assert sample.wrench == pytest.approx((1.0, -2.0, 3.0, 0.004, -0.005, 0.006), abs=1e-6)
        assert client.stats.lost == 0 and client.stats.out_of_order == 0
        time.sleep(0.3)
        rate = client.stats.received / (time.monotonic() - client.stats.started_monotonic)
        assert 700 < rate < 1100


def test_software_bias_and_sensor_bias(emulator: NetFTEmulator) -> None:
    with RdtClient('127.0.0.1', CAL, port=emulator.rdt_port) as client:
        assert wait_for(lambda: client.stats.received > 10)
        client.bias_software()
        assert wait_for(lambda: client.latest is not None and abs(client.latest.wrench[2]) < 1e-9)
        emulator.wrench[2] = 5.0  # type: ignore[attr-defined]
        assert wait_for(lambda: client.latest.wrench[2] == pytest.approx(2.0, abs=1e-6))  # type: ignore[union-attr]
        # On the sensor: its counts become relative to now, the software bias is dropped.
        client.bias_sensor()
        assert wait_for(lambda: client.latest.wrench[2] == pytest.approx(0.0, abs=1e-6))  # type: ignore[union-attr]
        emulator.wrench[0] = 3.0  # type: ignore[attr-defined]
        assert wait_for(lambda: client.latest.wrench[0] == pytest.approx(2.0, abs=1e-6))  # type: ignore[union-attr]


def test_a_tare_on_the_sensor_never_reads_the_offset_it_takes_out(
    emulator: NetFTEmulator,
) -> None:
    # The software bias was cleared before the sensor applied its own: the records on the
    # way read the whole offset (here 5 N on z) for a moment.
    seen: list[float] = []
    emulator.bias_latency_s = 0.01  # a datagram of ten records
    with RdtClient('127.0.0.1', CAL, port=emulator.rdt_port) as client:
        emulator.wrench[2] = 5.0  # type: ignore[attr-defined]
        assert wait_for(lambda: client.latest is not None and client.latest.wrench[2] == 5.0)
        client.bias_software()
        assert wait_for(lambda: client.latest is not None and abs(client.latest.wrench[2]) < 1e-9)
        client.on_sample = lambda sample: seen.append(sample.wrench[2])
        client.bias_sensor()
        assert wait_for(lambda: len(seen) > 50)
    assert max(abs(z) for z in seen) < 1e-6, max(seen)


def test_lost_and_out_of_order_datagrams_are_counted(emulator: NetFTEmulator) -> None:
    with RdtClient('127.0.0.1', CAL, port=emulator.rdt_port) as client:
        assert wait_for(lambda: client.stats.received > 20)
        emulator.drop(5)
        assert wait_for(lambda: client.stats.lost == 5)
        emulator.swap_next()
        assert wait_for(lambda: client.stats.out_of_order == 1)
        time.sleep(0.05)
        assert client.stats.lost == 5  # the late datagram is not counted lost


def test_status_error_bits_are_reported(emulator: NetFTEmulator) -> None:
    with RdtClient('127.0.0.1', CAL, port=emulator.rdt_port) as client:
        emulator.status = ERROR_BIT | (1 << 11)
        assert wait_for(lambda: client.error)
        assert client.stats.status == ERROR_BIT | (1 << 11)


def test_datagrams_from_another_address_are_ignored(emulator: NetFTEmulator) -> None:
    with RdtClient('127.0.0.1', CAL, port=emulator.rdt_port) as client:
        assert wait_for(lambda: client.stats.received > 5)
        port = client._sock.getsockname()[1]  # type: ignore[union-attr]
        intruder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        intruder.bind(('127.0.0.2', 0))
        fake = pack_records([RdtRecord(10**6, 0, 0, (10**9,) * 6)])
        for _ in range(5):
            intruder.sendto(fake, ('127.0.0.1', port))
        intruder.close()
        assert wait_for(lambda: client.stats.foreign == 5)
        assert client.latest.wrench[0] == pytest.approx(1.0, abs=1e-6)  # type: ignore[union-attr]


def test_timeout_and_recovery(emulator: NetFTEmulator) -> None:
    with RdtClient('127.0.0.1', CAL, port=emulator.rdt_port) as client:
        assert wait_for(lambda: client.stats.received > 5)
        emulator.pause(0.4)
        assert wait_for(lambda: client.seconds_since_data() > 0.2)
        before = client.stats.received
        assert wait_for(lambda: client.stats.received > before + 10, timeout=2.0)
        assert client.seconds_since_data() < 0.05
        assert client.stats.lost > 300  # the sensor sampled on during the dropout


def test_a_restarted_sensor_is_asked_to_stream_again() -> None:
    emu = NetFTEmulator(CAL, rate_hz=500.0).start()
    port = emu.rdt_port
    with RdtClient('127.0.0.1', CAL, port=port, restart_after_s=0.2) as client:
        assert wait_for(lambda: client.stats.received > 5)
        emu.stop()
        emu2 = NetFTEmulator(CAL, rate_hz=500.0, rdt_port=port).start()  # forgot its client
        try:
            before = client.stats.received
            assert wait_for(lambda: client.stats.received > before + 5, timeout=3.0)
        finally:
            emu2.stop()
