"""A Net F/T client over real sockets: calibration fetch and the RDT stream.

No ROS here: the node wraps :class:`RdtClient`. A reader thread drains the UDP socket as
fast as datagrams arrive (a driver that reads one datagram per timer tick falls behind and
builds a growing lag), accepts datagrams only from the sensor's address AND port, passes
them through :class:`~ati_netft.protocol.RdtStream` (whole records, plausible content, a
sequence that follows the stream), keeps statistics and hands each accepted sample to a
callback. Nothing a datagram holds and no exception of the callback stops the reader: it
is counted in :class:`Stats` and the latest reason kept in ``Stats.last_problem``.

Staleness (:meth:`RdtClient.seconds_since_data`) is measured from the last ACCEPTED sample:
a sensor that streams records the driver cannot use is a sensor without data. While there
is none for ``restart_after_s``, the start request is sent again (a sensor that rebooted,
lost its client or streams garbage restarts its stream; the sequence tracker follows).

Only datagrams whose IP source address and port are the sensor's are read: this keeps out
other programs and hosts, not an attacker on the sensor's network who forges both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import socket
import threading
import time
import urllib.request

from ati_netft.protocol import (
    ERROR_BIT,
    RDT_PORT,
    TCP_PORT,
    Calibration,
    Command,
    Plausibility,
    ProtocolError,
    RdtStream,
    calibration_request,
    pack_request,
    parse_calibration_response,
    parse_calibration_xml,
)

Wrench = tuple[float, float, float, float, float, float]


def fetch_calibration_http(address: str, port: int = 80, timeout_s: float = 2.0) -> Calibration:
    """Read counts per unit and units from the sensor's ``netftapi2.xml``."""
    url = f'http://{address}:{port}/netftapi2.xml'
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:  # noqa: S310
            text = reply.read().decode('utf-8', 'replace')
    except OSError as exc:
        reason = getattr(exc, 'reason', exc)
        raise ConnectionError(
            f'could not read the calibration from {url}: {reason}; check that the sensor is '
            'powered and reachable at that address, or choose another calibration_source'
        ) from None
    try:
        return parse_calibration_xml(text)
    except ProtocolError as exc:
        raise ProtocolError(f'{url} is not a Net F/T calibration page: {exc}') from None


def fetch_calibration_tcp(
    address: str, port: int = TCP_PORT, timeout_s: float = 2.0
) -> Calibration:
    """Read counts per unit and units with the TCP READCALINFO command."""
    try:
        with socket.create_connection((address, port), timeout=timeout_s) as s:
            s.sendall(calibration_request())
            data = b''
            while len(data) < 24:
                chunk = s.recv(24 - len(data))
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise ConnectionError(
            f'could not read the calibration from {address}:{port} (TCP READCALINFO): {exc}; '
            'check that the sensor is powered and reachable, or choose another '
            'calibration_source'
        ) from None
    return parse_calibration_response(data)


def resolve(address: str) -> str:
    """The IPv4 address of a host name; ConnectionError with a one-line reason otherwise."""
    try:
        return socket.gethostbyname(address)
    except (OSError, UnicodeError) as exc:
        raise ConnectionError(
            f'cannot resolve the sensor address {address!r}: {exc}; set the address parameter '
            "to the sensor's IP address"
        ) from None


@dataclass(slots=True)
class Sample:
    """One accepted record in SI units (bias applied)."""

    wrench: Wrench
    status: int
    rdt_sequence: int
    received_monotonic: float
    tares: int = 0
    """Software tares applied so far, this record's included (the first record a tare
    zeroes is the first with the new count)."""


@dataclass
class Stats:
    """What the stream has done since it was started.

    Attributes:
        received: records from the sensor in whole datagrams (every one is counted, used or
            not).
        accepted: records used (handed on as samples).
        lost: records the sensor sent that never came (from sequence gaps).
        out_of_order: records that came after a newer one (counted, not used).
        resyncs: restarts of the sensor's sequence that were followed.
        unconfirmed: sequence jumps that the next record did not confirm (not used).
        implausible: records whose content a Net F/T cannot send (not used).
        malformed: datagrams that are not whole records.
        foreign: datagrams from another address or port than the sensor's (not read).
        errors: exceptions while handling a datagram or in the sample callback.
        last_problem: what the latest rejected datagram or record, or error, was.
        last_resync: (newest sequence before, first after) of the latest restart followed.
        status: the status word of the latest accepted record.
        last_monotonic: when the latest record was accepted (0 before the first).
    """

    received: int = 0
    accepted: int = 0
    lost: int = 0
    out_of_order: int = 0
    resyncs: int = 0
    unconfirmed: int = 0
    implausible: int = 0
    malformed: int = 0
    foreign: int = 0
    errors: int = 0
    last_problem: str = ''
    last_resync: tuple[int, int] | None = None
    status: int = 0
    settling: int = 0
    """Records dropped while the sensor's own tare settled (:meth:`RdtClient.bias_sensor`)."""
    last_monotonic: float = 0.0
    started_monotonic: float = field(default_factory=time.monotonic)


SENSOR_BIAS_SETTLE_S = 0.05
"""How long [s] after the sensor is told to tare its records are dropped: the tare reaches it
within a millisecond on its network, and the records it sent before are on the way."""


class RdtClient:
    """Streams RDT records from one Net F/T sensor.

    Args:
        address: the sensor's host name or IP address (resolved here: ConnectionError with
            a one-line reason when it cannot be).
        calibration: counts per unit and units (see ``fetch_calibration_*``).
        on_sample: called from the reader thread with each accepted sample (keep it short;
            an exception it raises is counted in ``stats.errors``, the reader goes on).
        port: the sensor's RDT port: requests go there.
        restart_after_s: while no record is accepted for this long, the start request is sent
            again (a sensor that rebooted or lost the client resumes streaming).
        source_port: the port the sensor's datagrams come from (its RDT port unless a
            network in between translates it); datagrams from any other are not read.
        plausibility: what a record may hold (default: the sensor's rating, see
            :meth:`Plausibility.of`).
    """

    def __init__(
        self,
        address: str,
        calibration: Calibration,
        on_sample: Callable[[Sample], None] | None = None,
        port: int = RDT_PORT,
        restart_after_s: float = 0.5,
        source_port: int = 0,
        plausibility: Plausibility | None = None,
    ) -> None:
        self.address = resolve(address)
        self.port = port
        self.source_port = source_port or port
        self.calibration = calibration
        self.plausibility = plausibility or Plausibility.of(calibration)
        self.on_sample = on_sample
        self.restart_after_s = restart_after_s
        self.stats = Stats()
        self._stream = RdtStream(self.plausibility)
        self._bias = (0.0,) * 6
        self._bias_pending = False
        self._settle_until: float | None = None  # the sensor's own tare is settling
        self._tares = 0
        self._latest: Sample | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._running = False

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> None:
        """Open the UDP socket (the sensor streams to its port once started)."""
        if self._sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
                sock.bind(('', 0))
                sock.settimeout(0.05)
            except OSError:
                sock.close()
                raise
            self._sock = sock

    def start(self) -> None:
        """Ask the sensor to stream and start the reader thread (opens the socket if needed)."""
        if self._running:
            return
        self.open()
        self.stats = Stats()
        self._stream = RdtStream(self.plausibility)
        self._send(Command.START_REALTIME)
        self._running = True
        self._thread = threading.Thread(target=self._read, name='netft-rdt', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the reader thread and ask the sensor to stop (the socket stays open)."""
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        try:
            self._send(Command.STOP)
        except OSError:
            pass

    def close(self) -> None:
        """Stop, then close the socket."""
        self.stop()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> RdtClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def streaming(self) -> bool:
        return self._running

    # -- commands ---------------------------------------------------------------------------
    def bias_software(self) -> None:
        """Tare in software: the next sample becomes the zero."""
        with self._lock:
            self._bias_pending = True

    def bias_sensor(self) -> None:
        """Tare on the sensor itself (RDT command 0x0042); the software bias is cleared.

        The sensor applies its zero a record or a few later (the command and the records in
        flight cross on the network): the records of the next ``SENSOR_BIAS_SETTLE_S`` are
        dropped, and the software bias is cleared after them. (Cleared at once, the records
        still in flight read the whole offset the software bias had been taking out.)"""
        self._send(Command.SET_SOFTWARE_BIAS)  # (a send that fails leaves the zero as it was)
        with self._lock:
            self._settle_until = time.monotonic() + SENSOR_BIAS_SETTLE_S

    @property
    def latest(self) -> Sample | None:
        with self._lock:
            return self._latest

    def seconds_since_data(self) -> float:
        """Seconds since the last accepted record (since start when none was)."""
        last = self.stats.last_monotonic or self.stats.started_monotonic
        return time.monotonic() - last

    @property
    def error(self) -> bool:
        """True when the last accepted status word has its error summary bit set."""
        return bool(self.stats.status & ERROR_BIT)

    # -- internals --------------------------------------------------------------------------
    def _send(self, command: Command) -> None:
        if self._sock is not None:
            self._sock.sendto(pack_request(command), (self.address, self.port))

    def _read(self) -> None:
        sock = self._sock
        assert sock is not None
        sensor = (self.address, self.source_port)
        stats = self.stats
        last_request = time.monotonic()
        while self._running:
            try:
                data, source = sock.recvfrom(65536)
            except TimeoutError:
                data, source = b'', None
            except OSError:
                if not self._running:
                    return
                time.sleep(0.01)
                continue
            now = time.monotonic()
            if now - last_request > self.restart_after_s and (
                now - (stats.last_monotonic or stats.started_monotonic) > self.restart_after_s
            ):
                try:  # no usable data: ask again (restarts the sensor's stream at 1)
                    self._send(Command.START_REALTIME)
                    self._stream.restart()
                except OSError:
                    pass
                last_request = now
            if source is None:
                continue
            if source != sensor:
                stats.foreign += 1
                continue
            try:
                self._handle(data, now)
            except Exception as exc:  # noqa: BLE001 - no datagram may stop the reader
                stats.errors += 1
                stats.last_problem = f'{type(exc).__name__}: {exc}'

    def _handle(self, data: bytes, now: float) -> None:
        stream, stats = self._stream, self.stats
        records = stream.feed(data)
        tracker = stream.tracker
        stats.received = tracker.received + stream.implausible
        stats.lost = tracker.lost
        stats.out_of_order = tracker.out_of_order
        stats.resyncs = tracker.resyncs
        stats.last_resync = tracker.last_resync
        stats.unconfirmed = tracker.unconfirmed
        stats.implausible = stream.implausible
        stats.malformed = stream.malformed
        if stream.last_problem:
            stats.last_problem = stream.last_problem
            stream.last_problem = ''
        if not records:
            return
        f = self.calibration.newton_per_count
        t = self.calibration.newton_metre_per_count
        on_sample = self.on_sample
        for record in records:
            c = record.counts
            with self._lock:
                if self._settle_until is not None:
                    if now < self._settle_until:
                        stats.settling += 1
                        continue
                    self._settle_until = None
                    self._bias = (0.0,) * 6
                if self._bias_pending:
                    self._bias = (c[0] * f, c[1] * f, c[2] * f, c[3] * t, c[4] * t, c[5] * t)
                    self._bias_pending = False
                    self._tares += 1
                b = self._bias
                sample = Sample(
                    (
                        c[0] * f - b[0],
                        c[1] * f - b[1],
                        c[2] * f - b[2],
                        c[3] * t - b[3],
                        c[4] * t - b[4],
                        c[5] * t - b[5],
                    ),
                    record.status,
                    record.rdt_sequence,
                    now,
                    self._tares,
                )
                self._latest = sample
            stats.accepted += 1
            stats.status = record.status
            stats.last_monotonic = now
            if on_sample is not None:
                try:
                    on_sample(sample)
                except Exception as exc:  # noqa: BLE001 - a callback bug must not stop the reader
                    stats.errors += 1
                    stats.last_problem = f'sample callback: {type(exc).__name__}: {exc}'
