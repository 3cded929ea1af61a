"""ROS 2 node for an ATI Net F/T sensor (a lifecycle node that brings itself up by default).

Publishes ``~/wrench`` (geometry_msgs/WrenchStamped, sensor-data QoS), optionally
``~/wrench_filtered`` (low-pass), ``~/limit_exceeded`` (the wrench that broke a force or
torque limit, sent again every ``LIMIT_REPEAT_S`` while it stays broken: an executor aborts
its push on it) and ``/diagnostics`` (rates, every counter
of the stream, status bits, last sample age; ERROR when no usable record arrives within
``timeout_s`` ("no data": records that arrive but cannot be used are no data), with no
stale wrench published meanwhile; WARN for a period in which records
were lost or rejected, or the sensor restarted its sequence). While the sensor's status
word reports an error, its records reach the limit monitor but not ``~/wrench``, and no
tare is taken. Services ``~/bias`` (software tare) and ``~/bias_sensor`` (tare on the
sensor). Tool gravity compensation uses the
``sensor_orientation`` parameter, or the latest valid ``~/sensor_orientation``
(geometry_msgs/QuaternionStamped, sensor in world) once one arrives; a tare (either) takes
the tool's weight as it hangs then into the zero, and the compensation removes only how
it has turned since.

    ros2 run ati_netft netft_node --ros-args -p address:=192.168.1.1 -p frame_id:=ft_sensor

Lifecycle: *configure* resolves the address, reads the calibration (HTTP, TCP or
parameters) and opens the socket; *activate* starts the stream; *deactivate* stops it (the
sensor is told to stop); *cleanup* closes the socket; *shutdown* stops whatever runs. A
transition that fails returns FAILURE and logs one line saying what was wrong and what to
do (no traceback; a warning while autostart will try it again), and can be tried again
(``~/change_state``). With ``autostart`` (default true) the node configures and activates
itself at start-up, so tests and launch files need no lifecycle manager;
``configure_retries`` (-1: for ever) retries a failed start-up with a backoff that starts
at ``retry_backoff_s`` and doubles up to ``retry_backoff_max_s``. ``netft_node`` exits with
status 1 when start-up failed and no retry is left.

Records come from the sensor's address and RDT port only, and only plausible records that
follow the stream are used (see :mod:`ati_netft.client`); none of the counters can be
moved far by one bad datagram, and no message, datagram or callback error stops the node
(it is counted in ``/diagnostics``: ``errors``, ``rejected_messages``, ``last_problem``).

Rate: every record is counted, and every record passes the limit monitor and the low-pass
filter. ``~/wrench`` carries every record while the sensor's RDT rate is at most
``max_publish_rate_hz`` (default 1000 Hz); above it (the Net F/T streams up to 7 kHz), each
message is the mean of a block of n = ceil(rate / max_publish_rate_hz) consecutive records.
Why: a 1 kHz controller gains nothing from 7 kHz messages, while every Python subscriber
pays an executor wake-up per message (about 0.1 to 0.6 ms in rclpy, so 7 kHz saturates a
core and then drops data), and the block mean is an anti-aliasing filter rather than a
decimation that throws records away. A limit breach is never averaged away: the monitor
sees each record. Set ``max_publish_rate_hz`` to 0 to publish every record at any rate.
The rate is ``rdt_rate_hz``, else what the calibration (netftapi2.xml) says, else it is
measured from the stream (the record sequence numbers over their arrival times, the
least-late records', over windows of ``RATE_WINDOW_S`` until two agree:
``filters.RateMeter``; a second or so): until then every record is published and the
filtered output waits.
Assuming 1 kHz had a 7 kHz sensor read over tcp or params published unaveraged, its
low-pass cut-off 7 times too high.
"""

from __future__ import annotations

import math
import sys
import threading
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import QuaternionStamped, WrenchStamped
from lifecycle_msgs.srv import ChangeState
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from std_srvs.srv import Trigger

from ati_netft.client import (
    RdtClient,
    Sample,
    Stats,
    fetch_calibration_http,
    fetch_calibration_tcp,
)
from ati_netft.filters import (
    FORCE_LIMIT_MAX_N,
    GravityCompensation,
    LimitMonitor,
    LowPass,
    RateMeter,
    quaternion_matrix,
)
from ati_netft.protocol import (
    ERROR_BIT,
    NO_BOUND,
    Calibration,
    Plausibility,
    ProtocolError,
    decode_status,
)

WRENCH_QOS = qos_profile_sensor_data
EVENT_QOS = QoSProfile(depth=10)
DIAGNOSTICS_QOS = QoSProfile(depth=10)
SOURCES = ('http', 'tcp', 'params')
MAX_BACKOFF_S = 30.0
LIMIT_REPEAT_S = 0.5
"""How often [s] ``~/limit_exceeded`` is sent again while a limit stays broken: sent once
per crossing, an executor that cleared its flag at a push's start (an event of the last
push) never heard of a force that stayed over the limit, and pushed with no limit."""
RATE_WINDOW_S = 0.5
"""Seconds of records an unknown sensor rate is measured over, per window (the least-late
records' arrival times, within a fraction of a millisecond of their sampling, then give it
to well under 1%)."""
RATE_AGREEMENT = 0.01
"""Two successive windows' rates must agree to this share before the rate is taken (one
begun or ended in a loaded machine's stall of the reader misreads it)."""
MEASURED_SLACK = 0.05
"""A measured rate may lie this share above a multiple of ``max_publish_rate_hz`` and
still be averaged in blocks of that multiple (1003 Hz is a 1 kHz sensor; an emulated 2 kHz
one measured 2038 Hz)."""

# Parameters read by configure: changing them while configured would not take effect.
CONFIGURE_PARAMETERS = frozenset(
    {
        'address',
        'rdt_port',
        'rdt_source_port',
        'calibration_source',
        'http_port',
        'tcp_port',
        'counts_per_force',
        'counts_per_torque',
        'force_units',
        'torque_units',
        'rdt_rate_hz',
        'plausible_force_n',
        'plausible_torque_nm',
        'restart_after_s',
        'frame_id',
        'timeout_s',
        'filter_cutoff_hz',
        'tool_mass_kg',
        'tool_com',
        'max_publish_rate_hz',
    }
)


def _floats(lo: float, hi: float) -> list[FloatingPointRange]:
    return [FloatingPointRange(from_value=lo, to_value=hi)]


def _ints(lo: int, hi: int) -> list[IntegerRange]:
    return [IntegerRange(from_value=lo, to_value=hi, step=1)]


def _port(description: str, lo: int = 1) -> ParameterDescriptor:
    return ParameterDescriptor(description=description, integer_range=_ints(lo, 65535))


def _check(name: str, value: object) -> str | None:
    """Why ``value`` is not a valid ``name`` (None when it is)."""
    if name == 'calibration_source' and value not in SOURCES:
        return f'calibration_source must be one of {", ".join(SOURCES)}, got {value!r}'
    if name == 'address' and not str(value).strip():
        return 'address must name the sensor (an IP address or host name)'
    if name == 'tool_com':
        v = list(value)  # type: ignore[call-overload]
        if len(v) != 3 or not all(math.isfinite(x) for x in v):
            return f'tool_com must be 3 finite numbers [m], got {v}'
    if name == 'sensor_orientation':
        v = list(value)  # type: ignore[call-overload]
        if len(v) != 4 or not all(math.isfinite(x) for x in v) or math.hypot(*v) < 1e-6:
            return f'sensor_orientation must be a quaternion x y z w of non-zero norm, got {v}'
    return None


class BadParameterError(ValueError):
    """A parameter configure cannot work with: retrying with the same value cannot help."""


class NetFTNode(LifecycleNode):
    def __init__(self, **kwargs: object) -> None:
        super().__init__('netft', **kwargs)  # type: ignore[arg-type]
        # rclpy raised RCLError out of ~/change_state for a transition asked by its id that
        # the current state lacks (a manager's configure of the active driver), and the
        # driver's process died of it: such a request is answered success false.
        service = self._service_change_state
        served = service.callback

        def change_state(request: ChangeState.Request, response: ChangeState.Response) -> object:
            wanted = request.transition
            if not wanted.label and all(
                t[0] != wanted.id for t in self._state_machine.available_transitions
            ):
                self.get_logger().warning(
                    f'lifecycle transition {wanted.id} refused: none such from {self.state}'
                )
                response.success = False
                return response
            return served(request, response)

        service.callback = change_state
        d = ParameterDescriptor
        p = self.declare_parameter
        p('address', '192.168.1.1', d(description='sensor IP address or host name'))
        p('rdt_port', 49152, _port('RDT UDP port of the sensor: requests go there'))
        p(
            'rdt_source_port',
            0,
            _port('port the sensor streams from; 0 = rdt_port (others are not read)', lo=0),
        )
        p(
            'calibration_source',
            'http',
            d(description='where counts per unit come from: http, tcp, params'),
        )
        p('http_port', 80, _port('sensor HTTP port'))
        p('tcp_port', 49151, _port('sensor TCP port'))
        positive = _floats(1e-9, 1e12)
        p(
            'counts_per_force',
            1000000.0,
            d(description='params source: counts per force unit', floating_point_range=positive),
        )
        p(
            'counts_per_torque',
            1000000.0,
            d(description='params source: counts per torque unit', floating_point_range=positive),
        )
        p('force_units', 'N', d(description='params source: force unit'))
        p('torque_units', 'N-m', d(description='params source: torque unit'))
        p(
            'rdt_rate_hz',
            0.0,
            d(
                description='sensor RDT rate [Hz]; 0 = from netftapi2.xml, else measured',
                floating_point_range=_floats(0.0, 10000.0),
            ),
        )
        p(
            'plausible_force_n',
            0.0,
            d(
                description='records with a force count beyond this are dropped as corrupt; '
                '0 = 4 x the sensor rating (netftapi2.xml), no bound when unknown',
                floating_point_range=_floats(0.0, 1e7),
            ),
        )
        p(
            'plausible_torque_nm',
            0.0,
            d(
                description='as plausible_force_n, for torque [N m]',
                floating_point_range=_floats(0.0, 1e6),
            ),
        )
        p(
            'restart_after_s',
            0.5,
            d(
                description='no usable record for this long: send the start request again',
                floating_point_range=_floats(0.05, 60.0),
            ),
        )
        p('frame_id', 'ft_sensor', d(description='frame of the published wrenches'))
        p(
            'timeout_s',
            0.1,
            d(
                description='no usable record for this long is an error [s]',
                floating_point_range=_floats(0.005, 10.0),
            ),
        )
        p(
            'filter_cutoff_hz',
            0.0,
            d(
                description='low-pass cut-off for ~/wrench_filtered; 0 = off',
                floating_point_range=_floats(0.0, 1000.0),
            ),
        )
        p(
            'tool_mass_kg',
            0.0,
            d(
                description='tool mass for gravity compensation; 0 = off',
                floating_point_range=_floats(0.0, 50.0),
            ),
        )
        p(
            'tool_com',
            [0.0, 0.0, 0.0],
            d(description='tool centre of mass in the sensor frame [m]'),
        )
        p(
            'sensor_orientation',
            [0.0, 0.0, 0.0, 1.0],
            d(description='sensor orientation in the world, quaternion x y z w'),
        )
        p(
            'force_limit_n',
            0.0,
            d(
                description='|F| above this raises ~/limit_exceeded; 0 = off',
                floating_point_range=_floats(0.0, FORCE_LIMIT_MAX_N),
            ),
        )
        p(
            'torque_limit_nm',
            0.0,
            d(
                description='|T| above this raises ~/limit_exceeded; 0 = off',
                floating_point_range=_floats(0.0, 1000.0),
            ),
        )
        p(
            'max_publish_rate_hz',
            1000.0,
            d(
                description='faster sensors publish the mean of blocks of records; 0 = every one',
                floating_point_range=_floats(0.0, 10000.0),
            ),
        )
        diag_hz = p(
            'diagnostics_rate_hz',
            10.0,
            d(
                description='diagnostics rate (at start-up)',
                floating_point_range=_floats(0.5, 100.0),
                read_only=True,
            ),
        ).value
        self.autostart = p(
            'autostart',
            True,
            d(description='configure and activate at start-up', read_only=True),
        ).value
        p(
            'configure_retries',
            0,
            d(
                description='start-up retries after a failure; -1 = for ever',
                integer_range=_ints(-1, 1000000),
                read_only=True,
            ),
        )
        p(
            'retry_backoff_s',
            1.0,
            d(
                description='first retry delay; doubles up to retry_backoff_max_s',
                floating_point_range=_floats(0.01, MAX_BACKOFF_S),
                read_only=True,
            ),
        )
        p(
            'retry_backoff_max_s',
            MAX_BACKOFF_S,
            d(
                description='longest retry delay (a sensor that is coming up: keep it short)',
                floating_point_range=_floats(0.01, MAX_BACKOFF_S),
            ),
        )
        self.add_on_set_parameters_callback(self._validate_parameters)
        self.add_post_set_parameters_callback(self._store_parameters)

        # Always there, whatever the state: diagnostics, orientation, services.
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', DIAGNOSTICS_QOS)
        self.create_subscription(
            QuaternionStamped, '~/sensor_orientation', self._on_orientation, EVENT_QOS
        )
        self.create_service(Trigger, '~/bias', self._bias_software)
        self.create_service(Trigger, '~/bias_sensor', self._bias_sensor)
        self.create_timer(1.0 / diag_hz, self._publish_diagnostics)

        self.client: RdtClient | None = None
        self.calibration: Calibration | None = None
        self.last_error = ''
        self.gave_up = False  # autostart failed and no retry is left
        self.rejected_messages = 0
        self.last_problem = ''
        self.published = 0
        self.block = 1
        self.pub: object = None
        self.pub_filtered: object = None
        self.pub_limit: object = None
        self._watch_timer: object = None
        self._retry_timer: object = None
        self._retries_left = 0
        self._backoff = 1.0
        self._bad_parameter = False
        self._bringing_up = False  # the configure running is autostart's
        self._lock = threading.Lock()
        # The plausible bounds [N, N m] per axis of the configured sensor (None before).
        self._plausible: tuple[float, ...] | None = None
        self._monitor = LimitMonitor(
            self.get_parameter('force_limit_n').value, self.get_parameter('torque_limit_nm').value
        )
        self._gravity: GravityCompensation | None = None
        # The tool's weight the readings still hold, in the sensor frame: its wrench now less
        # the one their zero holds (its wrench at the latest tare; none at the factory zero).
        self._tool = (0.0,) * 6
        self._R_WS = quaternion_matrix([0.0, 0.0, 0.0, 1.0])
        # The sensor's orientation at the tare the readings' zero was taken at (None: the
        # factory zero, no load), and at the latest tare on the sensor, which outlives the
        # software one's client.
        self._R_WS_zero: object = None
        self._R_WS_zero_sensor: object = None
        self._tares = 0  # the client's software tares taken into the zero above
        self._low_pass: LowPass | None = None
        self.rate_hz = 0.0  # the sensor's (0: not known yet)
        self._max_rate = 0.0
        self._cutoff = 0.0
        self._rate_meter: RateMeter | None = None  # while the rate is measured
        self._window: tuple[float, Stats, int] | None = None
        self._stale = False
        self._resyncs_logged = 0
        self._sum = [0.0] * 6
        self._count = 0
        self._limit_active = False
        self._limit_sent = 0.0  # when ~/limit_exceeded was last sent (monotonic [s])
        self._sim_time = bool(self.get_parameter('use_sim_time').value)

        if self.autostart:
            self._retries_left = self.get_parameter('configure_retries').value
            self._backoff = self.get_parameter('retry_backoff_s').value
            self._bring_up()

    # -- state ------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """The lifecycle state: unconfigured, inactive, active or finalized."""
        return str(self._state_machine.current_state[1])

    def _bring_up(self) -> None:
        """Configure and activate (autostart); schedule a retry when asked."""
        if self._retry_timer is not None:
            self.destroy_timer(self._retry_timer)  # type: ignore[arg-type]
            self._retry_timer = None
        if self.state == 'unconfigured':
            self._bringing_up = True
            try:
                self.trigger_configure()
            finally:
                self._bringing_up = False
        if self.state == 'inactive':
            self.trigger_activate()
        if self.state == 'active' or self.state == 'finalized':
            return
        if self._retries_left == 0 or self._bad_parameter:
            self.gave_up = True
            return
        if self._retries_left > 0:
            self._retries_left -= 1
        delay = self._backoff
        self._backoff = min(
            2.0 * self._backoff, float(self.get_parameter('retry_backoff_max_s').value)
        )
        self.get_logger().info(f'trying again in {delay:g} s')
        self._retry_timer = self.create_timer(delay, self._bring_up)

    def _fail(
        self, what: str, exc: BaseException, retried: bool = False
    ) -> TransitionCallbackReturn:
        """Say why a transition failed: a warning when autostart will try it again (a
        sensor not yet reachable while the workcell powers up), else an error."""
        text = (
            str(exc) if isinstance(exc, OSError | ValueError) else f'{type(exc).__name__}: {exc}'
        )
        self.last_error = f'{what} failed: {text}'
        # (two call sites: rclpy refuses to log from one site at another severity)
        if retried:
            self.get_logger().warning(self.last_error)
        else:
            self.get_logger().error(self.last_error)
        return TransitionCallbackReturn.FAILURE

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except Exception as exc:  # noqa: BLE001 - one line, and the transition can be retried
            self.on_cleanup(state)  # nothing half-made is left for the next try
            # A bad parameter stays bad: autostart gives up at once instead of retrying it
            # (with configure_retries -1, for ever, while the executor waits for wrenches).
            self._bad_parameter = isinstance(exc, BadParameterError)
            retried = self._bringing_up and self._retries_left != 0 and not self._bad_parameter
            return self._fail('configure', exc, retried)
        self.last_error = ''
        self._bad_parameter = False
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        param = {name: self.get_parameter(name).value for name in CONFIGURE_PARAMETERS}
        # sensor_orientation may change while streaming (checked on set), but its start-up
        # value is read here: a zero quaternion made every wrench NaN, and NaN passes any
        # force limit.
        live = {'sensor_orientation': self.get_parameter('sensor_orientation').value}
        for name, value in {**param, **live}.items():
            problem = _check(name, value)
            if problem:
                raise BadParameterError(problem)
        address, source = param['address'], param['calibration_source']
        if source == 'http':
            calibration = fetch_calibration_http(address, param['http_port'])
        elif source == 'tcp':
            calibration = fetch_calibration_tcp(address, param['tcp_port'])
        else:
            try:
                calibration = Calibration(
                    param['counts_per_force'],
                    param['counts_per_torque'],
                    param['force_units'],
                    param['torque_units'],
                )
            except ProtocolError as exc:
                raise BadParameterError(f'{exc}; fix force_units or torque_units') from None
        rate = float(param['rdt_rate_hz'] or calibration.rdt_rate_hz or 0.0)  # 0: measure it
        plausibility = Plausibility.of(
            calibration, param['plausible_force_n'], param['plausible_torque_nm']
        )
        self._plausible = calibration.to_si(plausibility.max_counts)
        problem = self._limits_unseen(
            self.get_parameter('force_limit_n').value, self.get_parameter('torque_limit_nm').value
        )
        if problem:
            raise BadParameterError(problem)
        self.client = RdtClient(
            address,
            calibration,
            self._on_sample,
            port=param['rdt_port'],
            restart_after_s=param['restart_after_s'],
            source_port=param['rdt_source_port'],
            plausibility=plausibility,
        )
        self.client.open()
        self.calibration = calibration
        self._max_rate = float(param['max_publish_rate_hz'])
        self._cutoff = float(param['filter_cutoff_hz'])
        self._rate_meter = None if rate > 0 else RateMeter(RATE_WINDOW_S, RATE_AGREEMENT)
        self._set_rate(rate, slack=1e-9)
        self.timeout_s = param['timeout_s']
        mass = param['tool_mass_kg']
        self._gravity = GravityCompensation(mass, param['tool_com']) if mass > 0 else None
        self._R_WS_zero = self._R_WS_zero_sensor  # a new client holds no software tare
        self._tares = 0
        self._set_orientation(quaternion_matrix(self.get_parameter('sensor_orientation').value))
        self.pub = self.create_lifecycle_publisher(WrenchStamped, '~/wrench', WRENCH_QOS)
        self.pub_filtered = (
            self.create_lifecycle_publisher(WrenchStamped, '~/wrench_filtered', WRENCH_QOS)
            if self._cutoff > 0
            else None
        )
        self.pub_limit = self.create_lifecycle_publisher(
            WrenchStamped, '~/limit_exceeded', EVENT_QOS
        )
        self._msg = self._message_template(param['frame_id'])
        self._msg_filtered = self._message_template(param['frame_id'])
        bound = plausibility.max_counts
        self.get_logger().info(
            f'configured for {address} ({self.client.address}:{param["rdt_port"]}; '
            f'{calibration.force_unit}, {calibration.torque_unit}, '
            f'{calibration.counts_per_force:g} counts/force unit; '
            + (f'{rate:g} Hz' if rate > 0 else 'rate unknown: measured from the stream')
            + (f', published as means of {self.block}' if self.block > 1 else '')
            + ('; no plausibility bound on counts' if min(bound) == NO_BOUND else '')
            + ')'
        )

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self.client is not None
        self._sum, self._count, self._limit_active = [0.0] * 6, 0, False
        self.published = 0
        # Publishers first: the stream's first records must not meet disabled publishers.
        result = super().on_activate(state)
        try:
            self.client.start()
        except OSError as exc:
            super().on_deactivate(state)
            return self._fail('activate', exc)
        self._window = (time.monotonic(), Stats(), 0)
        self._stale = False
        self._resyncs_logged = 0
        # Watch for silence faster than diagnostics are due: report it at once.
        self._watch_timer = self.create_timer(self.timeout_s / 4.0, self._watch)
        self.last_error = ''
        self.get_logger().info('streaming')
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_streaming()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_client()
        for pub in (self.pub, self.pub_filtered, self.pub_limit):
            if pub is not None:
                self.destroy_lifecycle_publisher(pub)  # type: ignore[arg-type]
        self.pub = self.pub_filtered = self.pub_limit = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_client()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_client()
        return TransitionCallbackReturn.SUCCESS

    def _stop_streaming(self) -> None:
        if self._watch_timer is not None:
            self.destroy_timer(self._watch_timer)  # type: ignore[arg-type]
            self._watch_timer = None
        if self.client is not None:
            self.client.stop()

    def _close_client(self) -> None:
        self._stop_streaming()
        self._plausible = None  # the next configure's bounds apply
        if self.client is not None:
            self.client.close()
            self.client = None

    def destroy_node(self) -> None:
        if self._retry_timer is not None:
            self.destroy_timer(self._retry_timer)  # type: ignore[arg-type]
            self._retry_timer = None
        self._close_client()
        super().destroy_node()

    # -- parameters -------------------------------------------------------------------------
    def _validate_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for param in params:
            problem = _check(param.name, param.value)
            if problem:
                return SetParametersResult(successful=False, reason=problem)
            if param.name in CONFIGURE_PARAMETERS and self.state != 'unconfigured':
                return SetParametersResult(
                    successful=False,
                    reason=f'{param.name} is read by configure: deactivate and clean up the '
                    'node, set it, then configure again',
                )
            if param.name in ('force_limit_n', 'torque_limit_nm'):
                m = self._monitor
                force = param.value if param.name == 'force_limit_n' else m.max_force
                torque = param.value if param.name == 'torque_limit_nm' else m.max_torque
                problem = self._limits_unseen(force, torque)
                if problem:
                    return SetParametersResult(successful=False, reason=problem)
        return SetParametersResult(successful=True)

    def _limits_unseen(self, force: float, torque: float) -> str | None:
        """Why a force or torque over its limit would never reach the limit monitor (None
        when it would): a record with an axis beyond its plausible bound is dropped as
        corrupt before the monitor sees it, so every bound must lie above the limit (a 50
        N bound under an 80 N limit made a 100 N load 'no data', and no limit event)."""
        bounds = self._plausible
        if bounds is None:
            return None
        for what, limit, axes, unit in (
            ('force_limit_n', force, bounds[:3], 'N'),
            ('torque_limit_nm', torque, bounds[3:], 'N m'),
        ):
            if limit > 0 and min(axes) <= limit:
                return (
                    f'{what} {limit:g} {unit} is not below the plausible bound of '
                    f'{min(axes):.4g} {unit} (plausible_force_n / plausible_torque_nm, or 4 x '
                    'the rating): a load over the limit would be dropped as corrupt and never '
                    'raise the limit event; lower the limit or raise the bound'
                )
        return None

    def _store_parameters(self, params: list[Parameter]) -> None:
        for param in params:
            if param.name == 'force_limit_n':
                self._store_limits(param.value, None)
            elif param.name == 'torque_limit_nm':
                self._store_limits(None, param.value)
            elif param.name == 'sensor_orientation' and self._gravity is not None:
                self._set_orientation(quaternion_matrix(param.value))

    def _store_limits(self, force: float | None, torque: float | None) -> None:
        m = self._monitor  # replaced whole: the reader thread sees one or the other
        self._monitor = LimitMonitor(
            m.max_force if force is None else force, m.max_torque if torque is None else torque
        )

    # -- orientation ------------------------------------------------------------------------
    def _on_orientation(self, msg: QuaternionStamped) -> None:
        q = msg.quaternion
        v = [q.x, q.y, q.z, q.w]
        if not all(math.isfinite(x) for x in v) or math.hypot(*v) < 1e-6:
            self.rejected_messages += 1
            self.last_problem = f'~/sensor_orientation ignored: {v} is not a rotation'
            self.get_logger().warn(self.last_problem, throttle_duration_sec=5.0)
            return
        self._set_orientation(quaternion_matrix(v))

    def _set_orientation(self, R_WS: object) -> None:
        with self._lock:
            self._R_WS = R_WS
            self._update_tool()

    def _update_tool(self) -> None:
        """The tool's weight the readings still hold (under ``self._lock``): a tare took the
        tool's weight into the zero, and compensating the whole weight after it gave the
        weight back, reversed (a 1 kg tool read +9.8 N in free air, past a 5 N limit)."""
        if self._gravity is None:
            return
        now = self._gravity.tool_wrench(self._R_WS)  # type: ignore[arg-type]
        zero = self._R_WS_zero
        held = self._gravity.tool_wrench(zero) if zero is not None else [0.0] * 6  # type: ignore[arg-type]
        self._tool = tuple(float(a - b) for a, b in zip(now, held, strict=True))

    def _zero_here(self, on_sensor: bool) -> None:
        """Note that the readings' zero now holds the tool's weight as it hangs now: at the
        record a software tare took, or when the sensor is told to tare (it applies that
        within a record or two, which read off by the tool's turn since the last tare)."""
        with self._lock:
            self._R_WS_zero = self._R_WS
            if on_sensor:
                self._R_WS_zero_sensor = self._R_WS
            self._update_tool()

    def _set_rate(self, rate: float, slack: float) -> None:
        """The sensor's rate [Hz] (0: unknown, measured from the stream) and what depends
        on it: the records per published wrench and the low-pass filter."""
        self.rate_hz = rate
        max_rate = self._max_rate
        self.block = math.ceil(rate * (1.0 - slack) / max_rate) if 0 < max_rate < rate else 1
        self._low_pass = LowPass(self._cutoff, rate) if self._cutoff > 0 and rate > 0 else None

    def _measure_rate(self, sample: Sample) -> None:
        """Measure the rate over the records as they come (:class:`RateMeter`), then take
        it (the reader thread; nothing else uses the meter)."""
        meter = self._rate_meter
        if meter is None:
            return
        rate = meter.add(sample.rdt_sequence, sample.received_monotonic)
        if rate is None:
            return
        self._rate_meter = None
        self._sum, self._count = [0.0] * 6, 0
        self._set_rate(rate, slack=MEASURED_SLACK)
        self.get_logger().info(
            f'sensor rate measured: {rate:.0f} Hz (neither rdt_rate_hz nor the calibration '
            'gives it)' + (f'; published as means of {self.block}' if self.block > 1 else '')
        )

    # -- the stream (called on the client's reader thread for every accepted record) --------
    def _on_sample(self, sample: Sample) -> None:
        if self.rate_hz <= 0:
            self._measure_rate(sample)
        if sample.tares != self._tares:  # this record is the new zero
            self._tares = sample.tares
            self._zero_here(on_sensor=False)
        w = sample.wrench
        if self._gravity is not None:
            g = self._tool
            w = (w[0] - g[0], w[1] - g[1], w[2] - g[2], w[3] - g[3], w[4] - g[4], w[5] - g[5])
        monitor = self._monitor
        if monitor.active:
            exceeded = monitor.exceeded(w)
            now = sample.received_monotonic
            if exceeded and (not self._limit_active or now - self._limit_sent >= LIMIT_REPEAT_S):
                self.pub_limit.publish(
                    self._fill(self._message_template(self._msg.header.frame_id), w)
                )  # type: ignore[union-attr]
                self._limit_sent = now
                if not self._limit_active:
                    self.get_logger().warn(
                        'force/torque limit exceeded: ' + str([round(x, 3) for x in w])
                    )
            self._limit_active = exceeded
        if sample.status & ERROR_BIT:
            # The sensor says its readings are bad (gauges, calibration, supply): none is
            # published, as none is when no data comes, so that an executor stops its push
            # rather than trust them (/diagnostics names the bits). The limit still acts.
            return
        filtered = self._low_pass(w) if self._low_pass is not None else None
        if self.block > 1:
            s = self._sum
            for i in range(6):
                s[i] += w[i]
            self._count += 1
            if self._count < self.block:
                return
            k = 1.0 / self._count
            w = (s[0] * k, s[1] * k, s[2] * k, s[3] * k, s[4] * k, s[5] * k)
            self._sum, self._count = [0.0] * 6, 0
        self.pub.publish(self._fill(self._msg, w))  # type: ignore[union-attr]
        if filtered is not None and self.pub_filtered is not None:
            self.pub_filtered.publish(self._fill(self._msg_filtered, filtered))  # type: ignore[attr-defined]
        self.published += 1

    @staticmethod
    def _message_template(frame_id: str) -> WrenchStamped:
        msg = WrenchStamped()
        msg.header.frame_id = frame_id
        return msg

    def _fill(self, msg: WrenchStamped, w: object) -> WrenchStamped:
        # One message object reused: publish() serialises it before returning.
        ns = self.get_clock().now().nanoseconds if self._sim_time else time.time_ns()
        stamp, f, t = msg.header.stamp, msg.wrench.force, msg.wrench.torque
        stamp.sec, stamp.nanosec = divmod(ns, 1_000_000_000)
        f.x, f.y, f.z, t.x, t.y, t.z = (float(v) for v in w)  # type: ignore[attr-defined]
        return msg

    # -- services ---------------------------------------------------------------------------
    def _bias_software(self, _: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if self.client is None:
            response.success = False
            response.message = 'not configured: configure the node first'
            return response
        refused = self._bias_refused()
        if refused:
            response.success, response.message = False, refused
            return response
        self.client.bias_software()  # the zero moves with the record it takes (_on_sample)
        response.success = True
        response.message = 'software bias: the next sample is the new zero'
        return response

    def _bias_refused(self) -> str:
        """Why no tare can be taken now ('' when one can): a zero taken from readings the
        sensor calls bad would offset every later one."""
        assert self.client is not None
        if self.client.error:
            bits = ', '.join(decode_status(self.client.stats.status))
            return f'the sensor reports an error ({bits}): not tared; see /diagnostics'
        return ''

    def _bias_sensor(self, _: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if self.client is None:
            response.success = False
            response.message = 'not configured: configure the node first'
            return response
        refused = self._bias_refused()
        if refused:
            response.success, response.message = False, refused
            return response
        try:
            self.client.bias_sensor()
        except OSError as exc:
            response.success = False
            response.message = f'could not send the bias command: {exc}'
            return response
        self._zero_here(on_sensor=True)
        response.success = True
        response.message = 'bias command (0x0042) sent to the sensor'
        return response

    # -- diagnostics ------------------------------------------------------------------------
    def _watch(self) -> None:
        client = self.client
        if client is None:
            return
        stale = client.seconds_since_data() > self.timeout_s
        if stale != self._stale:
            self._stale = stale
            self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        status = DiagnosticStatus(name='netft: sensor')
        state = self.state
        client = self.client
        values = {'state': state}
        if client is not None:
            status.hardware_id = client.address
        if state == 'active' and client is not None and self._window is not None:
            status.level, status.message = self._stream_status(client, values)
        elif self.last_error:
            status.level, status.message = DiagnosticStatus.ERROR, self.last_error
        else:
            status.level = DiagnosticStatus.OK
            status.message = (
                'inactive: configured, not streaming' if state == 'inactive' else state
            )
        values['rejected_messages'] = str(self.rejected_messages)
        values['last_problem'] = (
            client.stats.last_problem if client is not None else ''
        ) or self.last_problem
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(array)

    def _stream_status(self, client: RdtClient, values: dict[str, str]) -> tuple[bytes, str]:
        stats = client.stats
        now = time.monotonic()
        assert self._window is not None
        t0, before, published0 = self._window
        dt = max(now - t0, 1e-9)
        published = self.published
        self._window = (now, Stats(**vars(stats)), published)
        lost = stats.lost - before.lost
        rejected = (
            stats.implausible
            + stats.unconfirmed
            + stats.malformed
            + stats.foreign
            - before.implausible
            - before.unconfirmed
            - before.malformed
            - before.foreign
        )
        errors = stats.errors - before.errors
        age = client.seconds_since_data()
        if stats.resyncs > self._resyncs_logged:
            self._resyncs_logged = stats.resyncs
            a, b = stats.last_resync or (0, 0)
            self.get_logger().warn(
                f'the sensor restarted its sequence ({a} -> {b}): resynchronised '
                f'({stats.resyncs} so far)'
            )
        bits = decode_status(stats.status)
        if age > self.timeout_s:
            level = DiagnosticStatus.ERROR
            message = f'no data for {age:.2f} s'  # no usable data: accepted records only
            if stats.received > before.received:
                message += (
                    f' ({stats.received - before.received} records arrived, none usable: '
                    f'{stats.last_problem})'
                )
            if lost:
                # A period is reported once: its losses must not vanish behind the dropout.
                message += f'; in the last {dt:.2f} s: {lost} lost'
        elif client.error:
            level, message = DiagnosticStatus.ERROR, 'sensor reports an error: ' + ', '.join(bits)
        elif lost or rejected or errors or stats.resyncs > before.resyncs:
            level = DiagnosticStatus.WARN
            parts = [f'{lost} lost'] if lost else []
            parts += [f'{rejected} rejected ({stats.last_problem})'] if rejected else []
            parts += [f'{errors} errors ({stats.last_problem})'] if errors else []
            if stats.resyncs > before.resyncs:
                parts.append('the sensor restarted its sequence: resynchronised')
            message = f'streaming; in the last {dt:.2f} s: ' + ', '.join(parts)
        else:
            level, message = DiagnosticStatus.OK, 'streaming'
        values.update(
            {
                'rate_hz': f'{(published - published0) / dt:.1f}',
                'received_rate_hz': f'{(stats.received - before.received) / dt:.1f}',
                'sensor_rate_hz': f'{self.rate_hz:.6g}' if self.rate_hz > 0 else 'measuring',
                'records_per_wrench': str(self.block),
                'received': str(stats.received),
                'accepted': str(stats.accepted),
                'published': str(published),
                'lost': str(stats.lost),
                'out_of_order': str(stats.out_of_order),
                'resyncs': str(stats.resyncs),
                'unconfirmed_jumps': str(stats.unconfirmed),
                'implausible': str(stats.implausible),
                'malformed': str(stats.malformed),
                'foreign_datagrams': str(stats.foreign),
                'errors': str(stats.errors),
                'status_word': f'0x{stats.status:08x}',
                'status_bits': ', '.join(bits) or 'none',
                'last_sample_age_s': f'{age:.4f}',
            }
        )
        return level, message


def _executor() -> Executor:
    """rclpy's EventsExecutor where it exists, else the SingleThreadedExecutor.

    The driver publishes from its reader thread; what the executor runs (timers, services)
    holds the GIL meanwhile. Each wake-up of the SingleThreadedExecutor rebuilds its wait set
    in Python (a few hundred microseconds for this node's 16 services and 3 timers, 50 times
    a second); the EventsExecutor does that in C++.
    """
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        return SingleThreadedExecutor()
    return EventsExecutor()


def main(args: list[str] | None = None) -> None:
    """``netft_node``: exits 1 when start-up failed and no retry is left."""
    # The reader thread publishes; let it have the GIL soon after a datagram arrives.
    sys.setswitchinterval(0.0005)
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = NetFTNode()
        executor = _executor()
        executor.add_node(node)
        while rclpy.ok() and not node.gave_up:
            executor.spin_once(timeout_sec=0.2)
        code = 1 if node.gave_up else 0
    except ParameterException as exc:
        rclpy.logging.get_logger('netft').error(f'bad parameter: {exc}')
        code = 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # A SIGINT between rclpy's checks shuts the context down under a spin: no fault.
        if rclpy.ok():
            raise
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    if code:
        sys.exit(code)


if __name__ == '__main__':
    main()
