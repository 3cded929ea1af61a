"""A Net F/T client over real sockets: calibration fetch and the RDT stream.

No ROS here: the node wraps :class:`RdtClient`. A reader thread drains the UDP socket as
fast as datagrams arrive (a driver that reads one datagram per timer tick falls behind and
builds a growing lag), accepts datagrams only from the configured sensor address, keeps
sequence statistics and hands each new sample to a callback.
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
    ProtocolError,
    SequenceTracker,
    calibration_request,
    pack_request,
    parse_calibration_response,
    parse_calibration_xml,
    parse_datagram,
)

Wrench = tuple[float, float, float, float, float, float]


def fetch_calibration_http(address: str, port: int = 80, timeout_s: float = 2.0) -> Calibration:
    """Read counts per unit and units from the sensor's ``netftapi2.xml``."""
    url = f'http://{address}:{port}/netftapi2.xml'
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:  # noqa: S310
            return parse_calibration_xml(reply.read().decode('utf-8', 'replace'))
    except OSError as exc:
        raise ConnectionError(f'could not read the calibration from {url}: {exc}') from exc


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
            f'could not read the calibration from {address}:{port}: {exc}'
        ) from exc
    return parse_calibration_response(data)


@dataclass
class Sample:
    """One received record in SI units (bias applied)."""

    wrench: Wrench
    status: int
    rdt_sequence: int
    received_monotonic: float


@dataclass
class Stats:
    """What the stream has done so far."""

    received: int = 0
    lost: int = 0
    out_of_order: int = 0
    foreign: int = 0  # datagrams from another address, ignored
    malformed: int = 0
    status: int = 0
    last_monotonic: float = 0.0
    started_monotonic: float = field(default_factory=time.monotonic)


class RdtClient:
    """Streams RDT records from one Net F/T sensor.

    Args:
        address: the sensor's IP address; datagrams from anywhere else are ignored.
        calibration: counts per unit and units (see ``fetch_calibration_*``).
        on_sample: called from the reader thread with each new sample (keep it short).
        port: the sensor's RDT port.
        restart_after_s: while no data arrives for this long, the start request is sent
            again (a sensor that rebooted or lost the client resumes streaming).
    """

    def __init__(
        self,
        address: str,
        calibration: Calibration,
        on_sample: Callable[[Sample], None] | None = None,
        port: int = RDT_PORT,
        restart_after_s: float = 0.5,
    ) -> None:
        self.address = socket.gethostbyname(address)
        self.port = port
        self.calibration = calibration
        self.on_sample = on_sample
        self.restart_after_s = restart_after_s
        self.stats = Stats()
        self._tracker = SequenceTracker()
        self._bias = (0.0,) * 6
        self._bias_pending = False
        self._latest: Sample | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._running = False

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Open the socket, ask the sensor to stream, start the reader thread."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind(('', 0))
        sock.settimeout(0.05)
        self._sock = sock
        self._running = True
        self.stats = Stats()
        self._send(Command.START_REALTIME)
        self._thread = threading.Thread(target=self._read, name='netft-rdt', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the sensor to stop and close the socket."""
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._sock is not None:
            try:
                self._send(Command.STOP)
            except OSError:
                pass
            self._sock.close()
            self._sock = None

    def __enter__(self) -> RdtClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands ---------------------------------------------------------------------------
    def bias_software(self) -> None:
        """Tare in software: the next sample becomes the zero."""
        with self._lock:
            self._bias_pending = True

    def bias_sensor(self) -> None:
        """Tare on the sensor itself (RDT command 0x0042); the software bias is cleared."""
        with self._lock:
            self._bias = (0.0,) * 6
        self._send(Command.SET_SOFTWARE_BIAS)

    @property
    def latest(self) -> Sample | None:
        with self._lock:
            return self._latest

    def seconds_since_data(self) -> float:
        """Seconds since the last accepted datagram (since start when none came)."""
        last = self.stats.last_monotonic or self.stats.started_monotonic
        return time.monotonic() - last

    # -- internals --------------------------------------------------------------------------
    def _send(self, command: Command) -> None:
        if self._sock is not None:
            self._sock.sendto(pack_request(command), (self.address, self.port))

    def _read(self) -> None:
        assert self._sock is not None
        sock = self._sock
        last_request = time.monotonic()
        while self._running:
            try:
                data, (host, _) = sock.recvfrom(65536)
            except TimeoutError:
                now = time.monotonic()
                if now - last_request > self.restart_after_s and self.seconds_since_data() > (
                    self.restart_after_s
                ):
                    try:
                        self._send(Command.START_REALTIME)
                    except OSError:
                        pass
                    last_request = now
                continue
            except OSError:
                if not self._running:
                    return
                continue
            now = time.monotonic()
            if host != self.address:
                self.stats.foreign += 1
                continue
            try:
                records = parse_datagram(data)
            except ProtocolError:
                self.stats.malformed += 1
                continue
            for record in records:
                newest = self._tracker.update(record.rdt_sequence)
                self.stats.received = self._tracker.received
                self.stats.lost = self._tracker.lost
                self.stats.out_of_order = self._tracker.out_of_order
                self.stats.last_monotonic = now
                if not newest:
                    continue  # late records are counted, not published
                self.stats.status = record.status
                raw = self.calibration.to_si(record.counts)
                with self._lock:
                    if self._bias_pending:
                        self._bias = raw
                        self._bias_pending = False
                    wrench = tuple(r - b for r, b in zip(raw, self._bias, strict=True))
                    sample = Sample(wrench, record.status, record.rdt_sequence, now)  # type: ignore[arg-type]
                    self._latest = sample
                if self.on_sample is not None:
                    self.on_sample(sample)

    @property
    def error(self) -> bool:
        """True when the last status word has its error summary bit set."""
        return bool(self.stats.status & ERROR_BIT)
