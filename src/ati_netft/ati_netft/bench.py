"""Driver benchmark: emulator at 1000 Hz, the node, a subscriber, all over loopback.

Figures: received rate, lost packets and the 99th percentile latency from the moment the
emulator creates a sample to the subscriber's callback (clean run); then a run with a
1 s dropout in the middle: time until diagnostics flag it, and time from the sensor's
return to the first new wrench at the subscriber.
"""

from __future__ import annotations

from collections.abc import Callable
import threading
import time
from typing import Any

import numpy as np

from ati_netft.emulator import NetFTEmulator
from ati_netft.protocol import Calibration


def _run(
    seconds: float, dropout_at: float | None, progress: Callable[[str], None]
) -> dict[str, Any]:
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from geometry_msgs.msg import WrenchStamped
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data

    from ati_netft.node import NetFTNode

    created: dict[int, float] = {}
    holder: dict[str, NetFTEmulator] = {}

    def source(t: float) -> tuple[float, float, float, float, float, float]:
        # Fx carries the sequence number (1 count per N) so latency can be matched.
        seq = holder['emu'].next_sequence
        created[seq] = time.monotonic()
        return (float(seq), 0.0, 0.0, 0.0, 0.0, 0.0)

    cal = Calibration(1, 1, 'N', 'N-m', 1000.0)
    emu = NetFTEmulator(cal, rate_hz=1000.0, source=source)
    holder['emu'] = emu
    emu.start()
    context = Context()
    rclpy.init(context=context)
    node = NetFTNode(
        context=context,
        parameter_overrides=[
            Parameter('address', value='127.0.0.1'),
            Parameter('rdt_port', value=emu.rdt_port),
            Parameter('http_port', value=emu.http_port),
            Parameter('timeout_s', value=0.1),
        ],
    )
    probe = rclpy.create_node('bench_probe', context=context)
    latencies: list[float] = []
    arrivals: list[float] = []
    error_times: list[float] = []

    def on_wrench(msg: WrenchStamped) -> None:
        now = time.monotonic()
        arrivals.append(now)
        t0 = created.pop(int(round(msg.wrench.force.x)), None)
        if t0 is not None:
            latencies.append(now - t0)

    def on_diag(msg: DiagnosticArray) -> None:
        if any(s.level == DiagnosticStatus.ERROR for s in msg.status):
            error_times.append(time.monotonic())

    probe.create_subscription(WrenchStamped, '/netft/wrench', on_wrench, qos_profile_sensor_data)
    probe.create_subscription(DiagnosticArray, '/diagnostics', on_diag, 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(probe)
    stop = threading.Event()
    spinner = threading.Thread(
        target=lambda: [executor.spin_once(0.05) for _ in iter(stop.is_set, True)]
    )
    spinner.start()
    try:
        # Let discovery settle, then measure.
        time.sleep(0.5)
        start = time.monotonic()
        received_before = len(arrivals)
        lost_before = node.client.stats.lost
        dropout_start = dropout_end = None
        while time.monotonic() - start < seconds:
            if (
                dropout_at is not None
                and dropout_start is None
                and time.monotonic() - start > dropout_at
            ):
                progress('dropout: the emulated sensor goes silent for 1 s')
                emu.pause(1.0)
                dropout_start = time.monotonic()
                dropout_end = dropout_start + 1.0
            time.sleep(0.01)
        elapsed = time.monotonic() - start
        out: dict[str, Any] = {
            'rate_hz': (len(arrivals) - received_before) / elapsed,
            'lost_packets': node.client.stats.lost - lost_before,
            'latency_ms_p50': 1e3 * float(np.percentile(latencies, 50)),
            'latency_ms_p99': 1e3 * float(np.percentile(latencies, 99)),
        }
        if dropout_start is not None and dropout_end is not None:
            flagged = [t for t in error_times if t >= dropout_start]
            back = [t for t in arrivals if t >= dropout_end]
            out['dropout_flagged_s'] = flagged[0] - dropout_start if flagged else None
            out['dropout_recovered_s'] = back[0] - dropout_end if back else None
        return out
    finally:
        stop.set()
        spinner.join()
        node.destroy_node()
        probe.destroy_node()
        executor.shutdown()
        rclpy.shutdown(context=context)
        emu.stop()


def run(progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Both runs of ``slide bench ft``."""
    progress('clean run: 1000 Hz for 5 s')
    clean = _run(5.0, None, progress)
    progress('dropout run: 1000 Hz for 5 s with a 1 s dropout in the middle')
    dropout = _run(5.0, 2.0, progress)
    return {
        'rate_hz': clean['rate_hz'],
        'lost_packets': clean['lost_packets'],
        'latency_ms_p50': clean['latency_ms_p50'],
        'latency_ms_p99': clean['latency_ms_p99'],
        'dropout_flagged_s': dropout['dropout_flagged_s'],
        'dropout_recovered_s': dropout['dropout_recovered_s'],
        'sensor_rate_hz': 1000.0,
    }
