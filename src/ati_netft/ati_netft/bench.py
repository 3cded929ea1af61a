"""Driver benchmark: an emulated sensor, the driver node and a subscriber over loopback.

As deployed, three processes: the sensor (the emulator, in a process of its own, steered
over a pipe), the driver (``python -m ati_netft.node``, what ``netft_node`` runs) and the
subscriber (this process). Until issue 18 all three shared one Python process, one GIL and
one executor, so the bench charged the subscriber's executor (most of a core at 1 kHz) and
the emulator to the driver. Everything is measured through the driver's public interface:
``~/wrench`` and ``/diagnostics``.

Each record carries its sequence number in Fx and its creation time (CLOCK_MONOTONIC, which
all processes share) in Fy and Ty, linearly, so that the mean of a block of records carries
the mean creation time; Fz, Tx and Tz carry a fixed signature that no spoofed or garbage
record has.

The subscriber runs rclpy's EventsExecutor (``subscriber_executor``): on the
SingleThreadedExecutor that most rclpy code uses, the subscriber alone takes about half a
core at 1 kHz and adds milliseconds of latency (its wait set is rebuilt in Python on every
wake-up), so the clean run is repeated with it (``default_executor_*``): what such a
subscriber of the driver gets.

Figures:
- clean run at 1 kHz: ``rate_hz`` at the subscriber, ``lost_packets`` (driver's count),
  ``latency_ms_p50``/``p99`` from the record's creation to the subscriber's callback,
  ``clean_max_gap_ms`` (the longest time between two wrenches: scheduling jitter);
- a 1 s dropout: ``dropout_flagged_s`` (until diagnostics say ERROR),
  ``dropout_recovered_s`` (from the sensor's return to the first new wrench);
- faults: ``spoofed_published`` (5 records of 999 N from another port of the sensor's
  address), ``garbage_published`` and ``garbage_lost_counted`` (7 random datagrams from
  the sensor's port whose lengths are multiples of 36), ``reset_recovered_s`` (the sensor
  restarts its sequence at 1, until the first wrench of the new stream),
  ``jump_max_gap_ms`` (the longest silence in the 0.5 s after one record 2^30 ahead: the
  previous driver published nothing for 2 s and more);
- a 7 kHz sensor: ``rate7k_sent_hz`` (offered by the emulator), ``rate7k_received_hz``
  (records per second counted by the driver), ``rate7k_lost``, ``rate7k_published_hz``
  (block means at the subscriber), ``rate7k_lag_ms_start``/``end`` (median latency in the
  first and last 0.5 s: a growing backlog shows as a growing lag).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
import multiprocessing
from multiprocessing.connection import Connection
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

from ati_netft.protocol import Calibration, RdtRecord, pack_records

CPF = CPT = 1_000_000  # counts per N and per N m
SIGNATURE = (2.0, 0.25, -0.5)  # Fz [N], Tx, Tz [N m] of every genuine record
SPOOF_N = 999.0
MASK = 2**32 - 1


# -- the sensor process --------------------------------------------------------------------
def _sensor_main(conn: Connection, rate_hz: float) -> None:
    from ati_netft.emulator import NetFTEmulator

    holder: dict[str, NetFTEmulator] = {}

    def source(t: float) -> tuple[float, float, float, float, float, float]:
        us = int(time.monotonic() * 1e6) % 10**9
        seq = holder['emu'].next_sequence
        fz, tx, tz = SIGNATURE
        return (seq / CPF, (us % 10**6) / CPF, fz, tx, us // 10**6 / CPT, tz)

    rating = (1000.0,) * 3 + (100.0,) * 3
    cal = Calibration(CPF, CPT, 'N', 'N-m', rate_hz, rating)
    emu = NetFTEmulator(cal, rate_hz=rate_hz, source=source)
    holder['emu'] = emu
    emu.start()
    conn.send((emu.rdt_port, emu.http_port))
    while True:
        command, *args = conn.recv()
        if command == 'stop':
            break
        if command == 'pause':
            emu.pause(args[0])
            conn.send(time.monotonic())
        elif command == 'restart':
            emu.restart_sequence()
            conn.send(time.monotonic())
        elif command == 'inject':
            emu.inject(args[0])
            conn.send(time.monotonic())
        elif command == 'state':
            conn.send((emu.client, emu.next_sequence, emu.records_sent, time.monotonic()))
    emu.stop()
    conn.send('stopped')


class _Sensor:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def __call__(self, *command: Any) -> Any:
        self.conn.send(command)
        return self.conn.recv()


@contextmanager
def _sensor(rate_hz: float) -> Iterator[tuple[_Sensor, int, int]]:
    ctx = multiprocessing.get_context('spawn')  # no fork of a process that runs DDS
    ours, theirs = ctx.Pipe()
    process = ctx.Process(target=_sensor_main, args=(theirs, rate_hz), daemon=True)
    process.start()
    try:
        if not ours.poll(30.0):
            raise RuntimeError('the emulated sensor did not start within 30 s')
        rdt_port, http_port = ours.recv()
        yield _Sensor(ours), rdt_port, http_port
    finally:
        try:
            ours.send(('stop',))
            ours.poll(5.0)
        except OSError:
            pass
        process.join(timeout=5.0)
        if process.is_alive():
            process.kill()


# -- the driver process --------------------------------------------------------------------
@contextmanager
def _driver(rdt_port: int, http_port: int, env: dict[str, str]) -> Iterator[subprocess.Popen]:  # type: ignore[type-arg]
    params = {
        'address': '127.0.0.1',
        'rdt_port': rdt_port,
        'http_port': http_port,
        'timeout_s': 0.1,
    }
    args = [sys.executable, '-m', 'ati_netft.node', '--ros-args']
    for key, value in params.items():
        args += ['-p', f'{key}:={value}']
    log = tempfile.TemporaryFile()  # a pipe nobody reads could fill and stall the driver
    process = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    process.log = log  # type: ignore[attr-defined]
    try:
        yield process
    finally:
        process.terminate()  # SIGTERM: rclpy shuts down, the node stops the sensor
        try:
            process.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


# -- the subscriber ------------------------------------------------------------------------
class _Probe:
    """Subscribes to the driver's wrench and diagnostics; callbacks only store.

    ``events``: rclpy's EventsExecutor (the cheapest Python subscriber) where it exists;
    otherwise, or when False, the SingleThreadedExecutor most rclpy code uses.
    """

    def __init__(self, domain_id: int, events: bool = True) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data

        self.rclpy = rclpy
        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(
            'bench_probe', context=self.context, start_parameter_services=False
        )
        self.wrenches: list[tuple[float, float, float, float, float, float, float]] = []
        self.diagnostics: list[tuple[float, int, str, dict[str, str]]] = []

        def on_wrench(msg: WrenchStamped) -> None:
            f, t = msg.wrench.force, msg.wrench.torque
            self.wrenches.append((time.monotonic(), f.x, f.y, f.z, t.x, t.y, t.z))

        def on_diagnostics(msg: DiagnosticArray) -> None:
            for s in msg.status:
                if s.name == 'netft: sensor':
                    values = {kv.key: kv.value for kv in s.values}
                    self.diagnostics.append((time.monotonic(), s.level[0], s.message, values))

        self.node.create_subscription(
            WrenchStamped, '/netft/wrench', on_wrench, qos_profile_sensor_data
        )
        self.node.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, 10)
        self.events = False
        if events:
            try:
                from rclpy.experimental import EventsExecutor

                self.executor = EventsExecutor(context=self.context)
                self.events = True
            except ImportError:
                pass
        if not self.events:
            self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def counter(self, key: str) -> int:
        """The driver's latest value of a diagnostics counter."""
        for _, _, _, values in reversed(self.diagnostics):
            if key in values:
                return int(values[key])
        raise RuntimeError(f'the driver published no diagnostics with {key!r}')

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.node.destroy_node()
        self.executor.shutdown()
        self.rclpy.shutdown(context=self.context)


def _latency_ms(w: tuple[float, ...]) -> float:
    created_us = w[5] * CPT * 10**6 + w[2] * CPF  # linear: a block mean is a mean time
    now_us = w[0] * 1e6
    return ((now_us - created_us) % 10**9) / 1e3


def _genuine(w: tuple[float, ...]) -> bool:
    return all(abs(a - b) < 1e-6 for a, b in zip((w[3], w[4], w[6]), SIGNATURE, strict=True))


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f'{what} within {timeout:g} s')
        time.sleep(0.01)


class _Rig:
    def __init__(self, sensor: _Sensor, probe: _Probe, domain_id: int) -> None:
        self.sensor, self.probe, self.domain_id = sensor, probe, domain_id

    def replace_probe(self, events: bool) -> _Probe:
        self.probe.close()
        self.probe = _Probe(self.domain_id, events)
        probe = self.probe
        _wait(
            lambda: len(probe.wrenches) > 100 and len(probe.diagnostics) > 2,
            30.0,
            'no wrench and diagnostics at the new subscriber',
        )
        return self.probe


@contextmanager
def _rig(rate_hz: float, progress: Callable[[str], None]) -> Iterator[_Rig]:
    domain_id = 200 + os.getpid() % 32  # a graph of its own (the tests use 100 to 199)
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST')
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    with _sensor(rate_hz) as (sensor, rdt_port, http_port):
        rig = _Rig(sensor, _Probe(domain_id), domain_id)
        probe = rig.probe
        try:
            with _driver(rdt_port, http_port, env) as driver:

                def streaming() -> bool:
                    if driver.poll() is not None:
                        driver.log.seek(0)  # type: ignore[attr-defined]
                        out = driver.log.read().decode(errors='replace').strip()  # type: ignore[attr-defined]
                        raise RuntimeError(f'the driver exited: {out}')
                    return len(probe.wrenches) > 100 and len(probe.diagnostics) > 2

                _wait(streaming, 30.0, 'no wrench and diagnostics from the driver')
                progress(f'sensor at {rate_hz:g} Hz, driver and subscriber up')
                yield rig
        finally:
            rig.probe.close()


def _clean(probe: _Probe, seconds: float) -> dict[str, Any]:
    time.sleep(0.5)
    lost0 = probe.counter('lost')
    n0, t0 = len(probe.wrenches), time.monotonic()
    time.sleep(seconds)
    n1, t1 = len(probe.wrenches), time.monotonic()
    time.sleep(0.25)  # the diagnostics of the run's end
    clean = probe.wrenches[n0:n1]
    latencies = [_latency_ms(w) for w in clean]
    gaps = np.diff([w[0] for w in clean])
    return {
        'rate_hz': len(clean) / (t1 - t0),
        'max_gap_ms': 1e3 * float(np.max(gaps)),
        'lost_packets': probe.counter('lost') - lost0,
        'latency_ms_p50': float(np.percentile(latencies, 50)),
        'latency_ms_p99': float(np.percentile(latencies, 99)),
    }


def _clean_and_dropout(rig: _Rig, progress: Callable[[str], None]) -> dict[str, Any]:
    kind = 'EventsExecutor' if rig.probe.events else 'SingleThreadedExecutor'
    progress(f'clean run: 1000 Hz for 5 s, subscriber on the {kind}')
    out = _clean(rig.probe, 5.0)
    out['clean_max_gap_ms'] = out.pop('max_gap_ms')
    out['subscriber_executor'] = kind
    progress('clean run: 1000 Hz for 5 s, subscriber on the SingleThreadedExecutor')
    default = _clean(rig.replace_probe(events=False), 5.0)
    out['default_executor_rate_hz'] = default['rate_hz']
    out['default_executor_latency_ms_p50'] = default['latency_ms_p50']
    out['default_executor_latency_ms_p99'] = default['latency_ms_p99']
    sensor, probe = rig.sensor, rig.replace_probe(events=True)
    progress('dropout: the emulated sensor goes silent for 1 s')
    start = sensor('pause', 1.0)
    end = start + 1.0
    time.sleep(2.0)
    flagged = [t for t, level, _, _ in probe.diagnostics if t >= start and level == 2]
    back = [w[0] for w in probe.wrenches if w[0] >= end]
    out['dropout_flagged_s'] = flagged[0] - start if flagged else None
    out['dropout_recovered_s'] = back[0] - end if back else None
    return out


def _faults(rig: _Rig, progress: Callable[[str], None]) -> dict[str, Any]:
    sensor, probe = rig.sensor, rig.probe
    out: dict[str, Any] = {}
    progress('faults: 5 spoofed records from another port of the sensor address')
    client, next_seq, _, _ = sensor('state')
    n0 = len(probe.wrenches)
    spoofer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    spoofer.bind(('127.0.0.1', 0))
    try:
        for i in range(5):
            counts = (0, 0, int(SPOOF_N * CPF), 0, 0, 0)
            record = RdtRecord((next_seq + 2 + i) & MASK, 0, 0, counts)
            spoofer.sendto(pack_records([record]), tuple(client))
    finally:
        spoofer.close()
    time.sleep(0.3)
    out['spoofed_published'] = sum(abs(w[3] - SPOOF_N) < 1.0 for w in probe.wrenches[n0:])

    progress('faults: 7 random datagrams from the sensor port')
    lost0 = probe.counter('lost')
    n0 = len(probe.wrenches)
    rng = random.Random(19)
    for k in range(7):
        sensor('inject', rng.randbytes(36 * (1 + k % 3)))
    time.sleep(0.3)
    out['garbage_published'] = sum(not _genuine(w) for w in probe.wrenches[n0:])
    out['garbage_lost_counted'] = probe.counter('lost') - lost0

    progress('faults: one record 2^30 ahead')
    _, next_seq, _, _ = sensor('state')
    counts = (0, 0, int(SIGNATURE[0] * CPF), int(SIGNATURE[1] * CPT), 0, int(-0.5 * CPT))
    sent = sensor('inject', pack_records([RdtRecord((next_seq + 2**30) & MASK, 0, 0, counts)]))
    time.sleep(0.5)
    times = [sent] + [w[0] for w in probe.wrenches if w[0] > sent]
    out['jump_max_gap_ms'] = 1e3 * float(np.max(np.diff(times))) if len(times) > 1 else None

    progress('faults: the sensor restarts its sequence at 1')
    resyncs0 = probe.counter('resyncs')
    restarted = sensor('restart')
    time.sleep(0.5)
    new = [w[0] for w in probe.wrenches if w[0] >= restarted and round(w[1] * CPF) <= 100]
    out['reset_recovered_s'] = new[0] - restarted if new else None
    out['reset_resyncs_counted'] = probe.counter('resyncs') - resyncs0
    return out


def _fast(rig: _Rig, progress: Callable[[str], None]) -> dict[str, Any]:
    sensor, probe = rig.sensor, rig.probe
    progress('7 kHz sensor for 5 s')
    time.sleep(0.5)
    _, _, sent0, ts0 = sensor('state')
    received0, lost0 = probe.counter('received'), probe.counter('lost')
    n0, t0 = len(probe.wrenches), time.monotonic()
    time.sleep(5.0)
    _, _, sent1, ts1 = sensor('state')
    n1, t1 = len(probe.wrenches), time.monotonic()
    time.sleep(0.25)
    # The diagnostics counters are sampled at 10 Hz: rate over their own timestamps.
    diag = [(t, v) for t, _, _, v in probe.diagnostics if 'received' in v and t0 <= t <= t1 + 0.2]
    (ta, va), (tb, vb) = diag[0], diag[-1]
    run = probe.wrenches[n0:n1]
    first = [_latency_ms(w) for w in run if w[0] < t0 + 0.5]
    last = [_latency_ms(w) for w in run if w[0] > t1 - 0.5]
    return {
        'rate7k_sent_hz': (sent1 - sent0) / (ts1 - ts0),
        'rate7k_received_hz': (int(vb['received']) - int(va['received'])) / (tb - ta),
        'rate7k_lost': probe.counter('lost') - lost0,
        'rate7k_received_total': probe.counter('received') - received0,
        'rate7k_published_hz': len(run) / (t1 - t0),
        'rate7k_records_per_wrench': int(va['records_per_wrench']),
        'rate7k_lag_ms_start': float(np.median(first)),
        'rate7k_lag_ms_end': float(np.median(last)),
    }


def run(progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every run of ``slide bench ft``."""
    with _rig(1000.0, progress) as rig:
        out = _clean_and_dropout(rig, progress)
        out.update(_faults(rig, progress))
    with _rig(7000.0, progress) as rig:
        out.update(_fast(rig, progress))
    out['sensor_rate_hz'] = 1000.0
    return out
