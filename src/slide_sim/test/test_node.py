"""The twin node's emulated F/T sensor, read by the real driver's protocol code over UDP."""

from __future__ import annotations

import time

import pytest

pytest.importorskip('rclpy')

from ati_netft.client import RdtClient, fetch_calibration_tcp  # noqa: E402
import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402

from slide_ros.params import ParameterError  # noqa: E402
from slide_sim.node import TwinNode  # noqa: E402
from slide_sim.testing import twin_parameters  # noqa: E402

pytestmark = pytest.mark.ros


def twin(context: Context, **extra: object) -> TwinNode:
    return TwinNode(
        context=context, namespace='/ft_offset_test', parameter_overrides=twin_parameters(**extra)
    )


def test_the_emulated_sensor_reads_its_offset_with_nothing_touching() -> None:
    context = Context()
    rclpy.init(context=context)
    offset = [1.0, -0.6, 0.5, 0.01, -0.02, 0.003]
    node = twin(context, ft_offset=offset)
    try:
        port = node.emulator.rdt_port
        calibration = fetch_calibration_tcp('127.0.0.1', node.emulator.tcp_port)
        with RdtClient('127.0.0.1', calibration, port=port) as client:
            deadline = time.monotonic() + 10.0
            while client.stats.received < 50 and time.monotonic() < deadline:
                time.sleep(0.02)
            sample = client.latest
            assert sample is not None
            # The fingertip is up in the air: the reading is the offset (to the counts'
            # resolution).
            assert sample.wrench == pytest.approx(offset, abs=1e-3)
        with pytest.raises(ParameterError, match='ft_offset must be'):
            twin(context, ft_offset=[1.0, 2.0])
    finally:
        node.destroy_node()
        context.try_shutdown()
