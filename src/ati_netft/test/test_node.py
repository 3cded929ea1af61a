"""The ROS 2 node against the emulator, over real DDS and real sockets."""

from __future__ import annotations

from collections.abc import Iterator
import time

import pytest

rclpy = pytest.importorskip('rclpy')
from ati_netft.emulator import NetFTEmulator  # noqa: E402
from ati_netft.node import NetFTNode  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import QuaternionStamped, WrenchStamped  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402


class Harness:
    def __init__(self, emulator: NetFTEmulator, **params: object) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        overrides = {
            'address': '127.0.0.1',
            'rdt_port': emulator.rdt_port,
            'http_port': emulator.http_port,
            'frame_id': 'tool0_ft',
            'timeout_s': 0.1,
            **params,
        }
        self.node = NetFTNode(
            context=self.context,
            parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        )
        self.probe = rclpy.create_node('probe', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.executor.add_node(self.probe)
        self.wrenches: list[WrenchStamped] = []
        self.filtered: list[WrenchStamped] = []
        self.limits: list[WrenchStamped] = []
        self.diagnostics: list[DiagnosticStatus] = []
        sub = self.probe.create_subscription
        sub(WrenchStamped, '/netft/wrench', self.wrenches.append, qos_profile_sensor_data)
        sub(WrenchStamped, '/netft/wrench_filtered', self.filtered.append, qos_profile_sensor_data)
        sub(WrenchStamped, '/netft/limit_exceeded', self.limits.append, 10)
        sub(DiagnosticArray, '/diagnostics', lambda m: self.diagnostics.extend(m.status), 10)

    def spin_until(self, condition, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.01)
            if condition():
                return True
        return False

    def call(self, service: str) -> Trigger.Response:
        client = self.probe.create_client(Trigger, service)
        assert client.wait_for_service(timeout_sec=5.0)
        future = client.call_async(Trigger.Request())
        assert self.spin_until(future.done)
        return future.result()

    def close(self) -> None:
        self.node.destroy_node()
        self.probe.destroy_node()
        self.executor.shutdown()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def harness(emulator: NetFTEmulator) -> Iterator[Harness]:
    h = Harness(emulator, force_limit_n=8.0, filter_cutoff_hz=5.0)
    yield h
    h.close()


@pytest.mark.ros
def test_publishes_wrenches_in_si_with_the_configured_frame(harness: Harness) -> None:
    assert harness.spin_until(lambda: len(harness.wrenches) > 100)
    w = harness.wrenches[-1]
    assert w.header.frame_id == 'tool0_ft'
    assert (w.wrench.force.x, w.wrench.force.z) == pytest.approx((1.0, 3.0), abs=1e-6)
    assert w.wrench.torque.z == pytest.approx(0.006, abs=1e-9)  # sensor configured in N.mm
    assert harness.spin_until(lambda: len(harness.filtered) > 10)


@pytest.mark.ros
def test_diagnostics_flag_a_dropout_and_clear_when_data_returns(
    harness: Harness, emulator: NetFTEmulator
) -> None:
    ok = DiagnosticStatus.OK
    assert harness.spin_until(lambda: harness.diagnostics and harness.diagnostics[-1].level == ok)
    emulator.pause(0.6)
    assert harness.spin_until(lambda: harness.diagnostics[-1].level == DiagnosticStatus.ERROR)
    assert 'no data' in harness.diagnostics[-1].message
    count = len(harness.wrenches)
    harness.spin_until(lambda: False, timeout=0.1)
    assert len(harness.wrenches) - count < 5  # nothing stale published meanwhile
    assert harness.spin_until(lambda: harness.diagnostics[-1].level != DiagnosticStatus.ERROR)
    values = {kv.key: kv.value for kv in harness.diagnostics[-1].values}
    assert int(values['lost']) > 300 and float(values['rate_hz']) > 0


@pytest.mark.ros
def test_bias_services_tare_in_software_and_on_the_sensor(
    harness: Harness, emulator: NetFTEmulator
) -> None:
    assert harness.spin_until(lambda: len(harness.wrenches) > 10)
    assert harness.call('/netft/bias').success
    assert harness.spin_until(lambda: abs(harness.wrenches[-1].wrench.force.z) < 1e-9)
    response = harness.call('/netft/bias_sensor')
    assert response.success and '0x0042' in response.message
    harness.spin_until(lambda: False, timeout=0.2)  # the sensor applies it asynchronously
    emulator.wrench[1] = 0.0  # type: ignore[attr-defined]
    ok = harness.spin_until(lambda: harness.wrenches[-1].wrench.force.y == pytest.approx(2.0))
    assert ok, harness.wrenches[-1].wrench


@pytest.mark.ros
def test_limit_event_fires_once_when_the_force_exceeds_its_limit(
    harness: Harness, emulator: NetFTEmulator
) -> None:
    assert harness.spin_until(lambda: len(harness.wrenches) > 10)
    assert harness.limits == []
    emulator.wrench[0] = 9.0  # type: ignore[attr-defined]  # |F| > 8 N
    assert harness.spin_until(lambda: len(harness.limits) >= 1)
    harness.spin_until(lambda: False, timeout=0.2)
    assert len(harness.limits) == 1  # an event, not a stream
    assert harness.limits[0].wrench.force.x == pytest.approx(9.0)


@pytest.mark.ros
def test_gravity_compensation_removes_the_tool_weight(emulator: NetFTEmulator) -> None:
    emulator.wrench[:] = [0.0, 0.0, -9.80665, 0.0, 0.0, 0.0]  # type: ignore[attr-defined]
    h = Harness(emulator, tool_mass_kg=1.0, tool_com=[0.0, 0.0, 0.05])
    try:
        assert h.spin_until(lambda: len(h.wrenches) > 10)
        f = h.wrenches[-1].wrench.force
        assert (f.x, f.y, f.z) == pytest.approx((0.0, 0.0, 0.0), abs=1e-6)
        # The sensor turns upside down (180 deg about x): the tool now pulls along +z_S,
        # and its centre of mass on the z axis still makes no torque.
        emulator.wrench[:] = [0.0, 0.0, 9.80665, 0.0, 0.0, 0.0]  # type: ignore[attr-defined]
        pub = h.probe.create_publisher(QuaternionStamped, '/netft/sensor_orientation', 10)
        flipped = QuaternionStamped()
        flipped.quaternion.x, flipped.quaternion.w = 1.0, 0.0
        assert h.spin_until(lambda: pub.get_subscription_count() > 0)
        pub.publish(flipped)
        assert h.spin_until(lambda: abs(h.wrenches[-1].wrench.force.z) < 1e-6)
        assert abs(h.wrenches[-1].wrench.torque.x) < 1e-6
    finally:
        h.close()


@pytest.mark.ros
def test_sensor_error_bits_reach_diagnostics(harness: Harness, emulator: NetFTEmulator) -> None:
    emulator.status = (1 << 31) | (1 << 5)
    assert harness.spin_until(
        lambda: harness.diagnostics and 'power supply too low' in harness.diagnostics[-1].message
    )
    assert harness.diagnostics[-1].level == DiagnosticStatus.ERROR
