"""ROS 2 node for an ATI Net F/T sensor.

Publishes ``~/wrench`` (geometry_msgs/WrenchStamped, sensor-data QoS) for every record the
sensor sends, optionally ``~/wrench_filtered`` (low-pass), ``~/limit_exceeded`` (the wrench
that broke a force or torque limit: an executor aborts its push on it) and
``/diagnostics`` (rate, loss, out-of-order, status bits, last sample age; ERROR when no
data arrives within ``timeout_s``, with no stale wrench published meanwhile). Services
``~/bias`` (software tare) and ``~/bias_sensor`` (tare on the sensor). Tool gravity
compensation uses the ``sensor_orientation`` parameter, or the latest
``~/sensor_orientation`` (geometry_msgs/QuaternionStamped, sensor in world) once one
arrives.

    ros2 run ati_netft netft_node --ros-args -p address:=192.168.1.1 -p frame_id:=ft_sensor
"""

from __future__ import annotations

import threading
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import QuaternionStamped, WrenchStamped
import numpy as np
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from std_srvs.srv import Trigger

from ati_netft.client import RdtClient, Sample, fetch_calibration_http, fetch_calibration_tcp
from ati_netft.filters import GravityCompensation, LimitMonitor, LowPass, quaternion_matrix
from ati_netft.protocol import Calibration, decode_status

WRENCH_QOS = qos_profile_sensor_data
EVENT_QOS = QoSProfile(depth=10)
DIAGNOSTICS_QOS = QoSProfile(depth=10)


def _range(lo: float, hi: float) -> list[FloatingPointRange]:
    return [FloatingPointRange(from_value=lo, to_value=hi)]


class NetFTNode(Node):
    def __init__(self, **kwargs: object) -> None:
        super().__init__('netft', **kwargs)  # type: ignore[arg-type]
        p = self.declare_parameter
        address = p(
            'address', '192.168.1.1', ParameterDescriptor(description='sensor IP address')
        ).value
        rdt_port = p('rdt_port', 49152, ParameterDescriptor(description='RDT UDP port')).value
        source = p(
            'calibration_source',
            'http',
            ParameterDescriptor(description='where counts per unit come from: http, tcp, params'),
        ).value
        http_port = p('http_port', 80, ParameterDescriptor(description='sensor HTTP port')).value
        tcp_port = p('tcp_port', 49151, ParameterDescriptor(description='sensor TCP port')).value
        cpf = p(
            'counts_per_force',
            1000000.0,
            ParameterDescriptor(description='params source: counts per force unit'),
        ).value
        cpt = p(
            'counts_per_torque',
            1000000.0,
            ParameterDescriptor(description='params source: counts per torque unit'),
        ).value
        fu = p(
            'force_units', 'N', ParameterDescriptor(description='params source: force unit')
        ).value
        tu = p(
            'torque_units', 'N-m', ParameterDescriptor(description='params source: torque unit')
        ).value
        self.frame_id = p(
            'frame_id',
            'ft_sensor',
            ParameterDescriptor(description='frame of the published wrenches'),
        ).value
        self.timeout_s = p(
            'timeout_s',
            0.1,
            ParameterDescriptor(
                description='no data for this long is an error [s]',
                floating_point_range=_range(0.005, 10.0),
            ),
        ).value
        cutoff = p(
            'filter_cutoff_hz',
            0.0,
            ParameterDescriptor(
                description='low-pass cut-off for ~/wrench_filtered; 0 = off',
                floating_point_range=_range(0.0, 1000.0),
            ),
        ).value
        tool_mass = p(
            'tool_mass_kg',
            0.0,
            ParameterDescriptor(
                description='tool mass for gravity compensation; 0 = off',
                floating_point_range=_range(0.0, 50.0),
            ),
        ).value
        tool_com = p(
            'tool_com',
            [0.0, 0.0, 0.0],
            ParameterDescriptor(description='tool centre of mass in the sensor frame [m]'),
        ).value
        q_WS = p(
            'sensor_orientation',
            [0.0, 0.0, 0.0, 1.0],
            ParameterDescriptor(description='sensor orientation in the world, quaternion x y z w'),
        ).value
        f_max = p(
            'force_limit_n',
            0.0,
            ParameterDescriptor(
                description='|F| above this raises ~/limit_exceeded; 0 = off',
                floating_point_range=_range(0.0, 10000.0),
            ),
        ).value
        t_max = p(
            'torque_limit_nm',
            0.0,
            ParameterDescriptor(
                description='|T| above this raises ~/limit_exceeded; 0 = off',
                floating_point_range=_range(0.0, 1000.0),
            ),
        ).value
        diag_hz = p(
            'diagnostics_rate_hz',
            10.0,
            ParameterDescriptor(
                description='diagnostics rate', floating_point_range=_range(0.5, 100.0)
            ),
        ).value

        if source == 'http':
            calibration = fetch_calibration_http(address, http_port)
        elif source == 'tcp':
            calibration = fetch_calibration_tcp(address, tcp_port)
        elif source == 'params':
            calibration = Calibration(cpf, cpt, fu, tu)
        else:
            raise ValueError(f'calibration_source must be http, tcp or params, got {source!r}')
        self.calibration = calibration
        rate = calibration.rdt_rate_hz or 1000.0
        self.low_pass = LowPass(cutoff, rate) if cutoff > 0 else None
        self.gravity = GravityCompensation(tool_mass, tool_com) if tool_mass > 0 else None
        self.R_WS = quaternion_matrix(q_WS)
        self.limits = LimitMonitor(f_max, t_max)

        self.pub = self.create_publisher(WrenchStamped, '~/wrench', WRENCH_QOS)
        self.pub_filtered = (
            self.create_publisher(WrenchStamped, '~/wrench_filtered', WRENCH_QOS)
            if self.low_pass
            else None
        )
        self.pub_limit = self.create_publisher(WrenchStamped, '~/limit_exceeded', EVENT_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', DIAGNOSTICS_QOS)
        # The arm's driver can stream the sensor's orientation for gravity compensation;
        # until it does, the sensor_orientation parameter holds.
        self.create_subscription(
            QuaternionStamped, '~/sensor_orientation', self._on_orientation, EVENT_QOS
        )
        self.create_service(Trigger, '~/bias', self._bias_software)
        self.create_service(Trigger, '~/bias_sensor', self._bias_sensor)
        self._published = 0
        self._rate_window: tuple[float, int] = (time.monotonic(), 0)
        self._limit_active = False
        self._lock = threading.Lock()
        self.client = RdtClient(address, calibration, self._on_sample, port=rdt_port)
        self.client.start()
        self.create_timer(1.0 / diag_hz, self._publish_diagnostics)
        # Watch for silence faster than diagnostics are due: report it at once.
        self._stale = False
        self.create_timer(self.timeout_s / 4.0, self._watch)
        self.get_logger().info(
            f'streaming from {address}:{rdt_port} ({calibration.force_unit}, '
            f'{calibration.torque_unit}, {calibration.counts_per_force:g} counts/force unit)'
        )

    def _on_orientation(self, msg: QuaternionStamped) -> None:
        q = msg.quaternion
        R = quaternion_matrix([q.x, q.y, q.z, q.w])
        with self._lock:
            self.R_WS = R

    # Called on the client's reader thread for every new record: convert and publish.
    def _on_sample(self, sample: Sample) -> None:
        w = np.asarray(sample.wrench)
        if self.gravity is not None:
            with self._lock:
                R_WS = self.R_WS
            w = self.gravity(w, R_WS)
        stamp = self.get_clock().now().to_msg()
        self.pub.publish(self._message(w, stamp))
        if self.low_pass is not None and self.pub_filtered is not None:
            self.pub_filtered.publish(self._message(self.low_pass(w), stamp))
        exceeded = self.limits.exceeded(w)
        if exceeded and not self._limit_active:
            self.pub_limit.publish(self._message(w, stamp))
            self.get_logger().warn(f'force/torque limit exceeded: {np.round(w, 3).tolist()}')
        self._limit_active = exceeded
        with self._lock:
            self._published += 1

    def _message(self, w: np.ndarray, stamp: object) -> WrenchStamped:
        msg = WrenchStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = self.frame_id
        f, t = msg.wrench.force, msg.wrench.torque
        f.x, f.y, f.z, t.x, t.y, t.z = (float(v) for v in w)
        return msg

    def _bias_software(self, _: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.client.bias_software()
        response.success = True
        response.message = 'software bias: the next sample is the new zero'
        return response

    def _bias_sensor(self, _: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            self.client.bias_sensor()
        except OSError as exc:
            response.success = False
            response.message = f'could not send the bias command: {exc}'
            return response
        response.success = True
        response.message = 'bias command (0x0042) sent to the sensor'
        return response

    def _watch(self) -> None:
        stale = self.client.seconds_since_data() > self.timeout_s
        if stale != self._stale:
            self._stale = stale
            self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        stats = self.client.stats
        now = time.monotonic()
        with self._lock:
            published = self._published
        t0, n0 = self._rate_window
        rate = (published - n0) / max(now - t0, 1e-9)
        self._rate_window = (now, published)
        age = self.client.seconds_since_data()
        status = DiagnosticStatus(name='netft: sensor', hardware_id=self.client.address)
        bits = decode_status(stats.status)
        if age > self.timeout_s:
            status.level = DiagnosticStatus.ERROR
            status.message = f'no data for {age:.2f} s'
        elif self.client.error:
            status.level = DiagnosticStatus.ERROR
            status.message = 'sensor reports an error: ' + ', '.join(bits)
        elif stats.lost or stats.out_of_order:
            status.level = DiagnosticStatus.WARN if stats.lost else DiagnosticStatus.OK
            status.message = f'streaming; {stats.lost} lost, {stats.out_of_order} out of order'
        else:
            status.level = DiagnosticStatus.OK
            status.message = 'streaming'
        values = {
            'rate_hz': f'{rate:.1f}',
            'received': str(stats.received),
            'lost': str(stats.lost),
            'out_of_order': str(stats.out_of_order),
            'foreign_datagrams': str(stats.foreign),
            'status_word': f'0x{stats.status:08x}',
            'status_bits': ', '.join(bits) or 'none',
            'last_sample_age_s': f'{age:.4f}',
        }
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(array)

    def destroy_node(self) -> None:
        self.client.stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    node = None
    try:
        node = NetFTNode()
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
