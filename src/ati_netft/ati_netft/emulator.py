"""A Net F/T sensor emulator that speaks the real protocols over real sockets.

RDT over UDP (real-time and buffered streaming, sample counts, sequence numbers, status
word, the 0x0042 bias), calibration over TCP (READCALINFO) and HTTP (``netftapi2.xml``).
The wrench comes from a source function of time (the MuJoCo twin feeds it later); noise,
dropouts, lost and reordered datagrams, status bits, a restarted output stream and raw
(corrupt) datagrams can be injected for tests.
Only one RDT client is served at a time, as on the real sensor. As the manual describes,
``rdt_sequence`` is 1 for the first record after each start request. Meant for loopback:
it binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import math
import random
import socket
import socketserver
import threading
import time

from ati_netft.protocol import (
    ERROR_BIT,
    READCALINFO,
    Calibration,
    Command,
    ProtocolError,
    RdtRecord,
    calibration_xml,
    pack_calibration_response,
    pack_records,
    parse_request,
)

WrenchSource = Callable[[float], tuple[float, float, float, float, float, float]]


def _saturate(count: int) -> int:
    """A count held within what a 32-bit signed field carries."""
    return max(-(2**31), min(2**31 - 1, count))


class NetFTEmulator:
    """An emulated sensor.

    Args:
        calibration: counts per unit and units the emulated sensor reports and uses.
        rate_hz: RDT records per second.
        source: wrench in SI units as a function of seconds since start.
        host: address to bind (loopback by default).
        noise_counts: standard deviation of the noise added to each count.
        records_per_datagram: records per datagram in buffered mode.
    """

    def __init__(
        self,
        calibration: Calibration | None = None,
        rate_hz: float = 1000.0,
        source: WrenchSource | None = None,
        host: str = '127.0.0.1',
        rdt_port: int = 0,
        tcp_port: int = 0,
        http_port: int = 0,
        noise_counts: float = 0.0,
        records_per_datagram: int = 10,
        seed: int = 0,
    ) -> None:
        self.calibration = calibration or Calibration(1_000_000, 1_000_000, 'N', 'N-m', rate_hz)
        self.rate_hz = rate_hz
        self.source: WrenchSource = source or (lambda t: (0.0,) * 6)
        self.host = host
        self.noise_counts = noise_counts
        self.records_per_datagram = records_per_datagram
        self.status = 0
        # How long [s] after the tare command the sensor's zero moves (a real sensor: its
        # records already sent are on the way)
        self.bias_latency_s = 0.0
        self._rng = random.Random(seed)
        self._bias = (0,) * 6
        self._client: tuple[str, int] | None = None
        self._buffered = False
        self._remaining = 0
        self._rdt_seq = 0
        self._ft_seq = 0
        self._pause_until = 0.0
        self._drop = 0
        self._swap_next = False
        self._held: RdtRecord | None = None
        self._inject: list[bytes] = []
        self._lock = threading.Lock()
        self.records_sent = 0  # records that left the emulator (dropouts excluded)
        # Records a stall of the serving thread left unsent, their sequence numbers used up
        # (a client counts them lost, as the network's)
        self.records_skipped = 0
        self.bad_requests = 0  # RDT requests and TCP commands that were not valid (ignored)
        self._running = False
        self._t0 = time.monotonic()

        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._udp.bind((host, rdt_port))
        except OSError as exc:
            self._udp.close()
            raise _bind_error('RDT (UDP)', host, rdt_port, exc) from None
        self._udp.settimeout(0.01)
        self.rdt_port = self._udp.getsockname()[1]

        emulator = self

        class Calinfo(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data = b''
                while len(data) < 20:
                    chunk = self.request.recv(20 - len(data))
                    if not chunk:
                        return
                    data += chunk
                if data == READCALINFO:
                    self.request.sendall(pack_calibration_response(emulator.calibration))
                else:
                    emulator.bad_requests += 1

        class Page(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split('?')[0] != '/netftapi2.xml':
                    self.send_error(404)
                    return
                body = calibration_xml(emulator.calibration).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'text/xml')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        socketserver.TCPServer.allow_reuse_address = True
        try:
            self._tcp = socketserver.ThreadingTCPServer((host, tcp_port), Calinfo)
        except OSError as exc:
            self._udp.close()
            raise _bind_error('calibration TCP', host, tcp_port, exc) from None
        self.tcp_port = self._tcp.server_address[1]
        try:
            self._http = ThreadingHTTPServer((host, http_port), Page)
        except OSError as exc:
            self._udp.close()
            self._tcp.server_close()
            raise _bind_error('HTTP', host, http_port, exc) from None
        self.http_port = self._http.server_address[1]
        self._threads: list[threading.Thread] = []

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> NetFTEmulator:
        self._running = True
        self._t0 = time.monotonic()
        for target in (self._serve_rdt, self._tcp.serve_forever, self._http.serve_forever):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        if self._running:  # shutdown() waits for a serve_forever() that never ran otherwise
            self._tcp.shutdown()
            self._http.shutdown()
        self._running = False
        for thread in self._threads:
            thread.join(timeout=1.0)
        self._tcp.server_close()
        self._http.server_close()
        self._udp.close()

    def __enter__(self) -> NetFTEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- fault injection --------------------------------------------------------------------
    def pause(self, seconds: float) -> None:
        """Lose everything for ``seconds``, both ways, as a network dropout.

        The sensor samples on (sequence numbers go on); requests sent to it meanwhile are lost.
        """
        self._pause_until = time.monotonic() + seconds

    def restart_sequence(self) -> None:
        """Restart the output stream: the next record carries rdt_sequence and ft_sequence 1.

        What a client sees when the sensor reboots and resumes streaming to it, or when the
        stream is restarted by a start request.
        """
        with self._lock:
            self._rdt_seq = 0
            self._ft_seq = 0

    def inject(self, payload: bytes) -> None:
        """Send ``payload`` to the client from the RDT port, as is (a corrupt datagram)."""
        with self._lock:
            self._inject.append(payload)

    def drop(self, datagrams: int) -> None:
        """Lose the next ``datagrams`` datagrams (their sequence numbers are used up)."""
        self._drop += datagrams

    def swap_next(self) -> None:
        """Send the next two datagrams in the wrong order."""
        self._swap_next = True

    @property
    def client(self) -> tuple[str, int] | None:
        return self._client

    @property
    def next_sequence(self) -> int:
        """The rdt_sequence the next record will carry."""
        return (self._rdt_seq + 1) % 2**32

    # -- internals --------------------------------------------------------------------------
    def _raw(self, t: float) -> tuple[tuple[int, ...], int]:
        """The source's wrench at ``t`` in counts, and the status bits it adds: a wrench
        beyond the 32-bit counts saturates them, as a sensor's converters do (one such
        sample raised out of the serving thread, and the stream ended for good), and one
        that is not a number (the twin's physics failing) reads as the sensor's error."""
        wrench = self.source(t)
        if not all(math.isfinite(w) for w in wrench):
            return (0,) * 6, ERROR_BIT
        return tuple(_saturate(c) for c in self.calibration.to_counts(wrench)), 0

    def _record(self, t: float) -> RdtRecord:
        counts, status = self._raw(t)
        if self.noise_counts:
            counts = tuple(int(round(c + self._rng.gauss(0, self.noise_counts))) for c in counts)
        counts = tuple(_saturate(c - b) for c, b in zip(counts, self._bias, strict=True))
        with self._lock:
            self._rdt_seq = (self._rdt_seq + 1) % 2**32
            self._ft_seq = (self._ft_seq + 1) % 2**32
            return RdtRecord(self._rdt_seq, self._ft_seq, self.status | status, counts)  # type: ignore[arg-type]

    def _handle_request(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            command, count = parse_request(data)
        except ProtocolError:
            self.bad_requests += 1
            return
        if self._client is not None and addr != self._client and command != Command.STOP:
            return  # one RDT client at a time
        if command == Command.STOP:
            if addr == self._client:
                self._client = None
        elif command in (Command.START_REALTIME, Command.START_BUFFERED):
            self._client = addr
            self._buffered = command == Command.START_BUFFERED
            self._remaining = count
            with self._lock:
                self._rdt_seq = 0  # "1 for the first record after the start command"
        elif command == Command.SET_SOFTWARE_BIAS:
            if self.bias_latency_s > 0:  # a sensor that applies it some records later
                threading.Timer(self.bias_latency_s, self._apply_bias).start()
            else:
                self._apply_bias()

    def _apply_bias(self) -> None:
        raw, status = self._raw(time.monotonic() - self._t0)
        if not status:  # the sensor keeps its zero when the reading is bad
            self._bias = raw

    def _serve_rdt(self) -> None:
        period = 1.0 / self.rate_hz
        next_t = time.monotonic()
        while self._running:
            # Requests first, without waiting once streaming.
            try:
                self._udp.settimeout(0 if self._client else 0.01)
                data, addr = self._udp.recvfrom(64)
                if time.monotonic() >= self._pause_until:  # a dropout loses requests too
                    self._handle_request(data, addr)
                continue
            except (BlockingIOError, TimeoutError):
                pass
            except OSError:
                return
            client = self._client
            now = time.monotonic()
            if client is not None and self._inject:
                with self._lock:
                    raw, self._inject = self._inject, []
                for payload in raw:
                    try:
                        self._udp.sendto(payload, client)
                    except OSError:
                        pass
            if client is None:
                next_t = now
                continue
            per = self.records_per_datagram if self._buffered else 1
            if now < next_t:
                time.sleep(min(next_t - now, 0.0005))
                continue
            next_t += per * period
            if now - next_t > 0.1:
                # Far behind (this thread stalled: a loaded machine, a long source call).
                # The sensor sampled on meanwhile and those records never came: their
                # sequence numbers are used up, so a client that measures the rate from
                # them still reads the sensor's rate. No burst to catch up.
                skipped = int((now - next_t) / period)
                with self._lock:
                    self._rdt_seq = (self._rdt_seq + skipped) % 2**32
                    self._ft_seq = (self._ft_seq + skipped) % 2**32
                self.records_skipped += skipped
                next_t += skipped * period
            records = [self._record(now - self._t0) for _ in range(per)]
            if now < self._pause_until:
                continue  # a network dropout: the sensor samples on, nothing arrives
            if self._drop:
                self._drop -= 1
                continue
            if self._swap_next and self._held is None:
                self._held = records[0]
                continue
            payload = pack_records(records)
            try:
                self._udp.sendto(payload, client)
                self.records_sent += len(records)
                if self._held is not None:
                    self._udp.sendto(pack_records([self._held]), client)
                    self.records_sent += 1
                    self._held = None
                    self._swap_next = False
            except OSError:
                continue
            if self._remaining:
                self._remaining -= per
                if self._remaining <= 0:
                    self._client = None


def _bind_error(what: str, host: str, port: int, exc: OSError) -> OSError:
    """The error of a port the emulator could not bind, saying which and what to do."""
    return OSError(
        exc.errno,
        f"cannot bind the emulated sensor's {what} port {host}:{port}: {exc.strerror}; "
        'give a free port (0: any)',
    )


def main() -> None:
    """Run an emulated sensor on loopback until interrupted (for trying the node by hand)."""
    parser = argparse.ArgumentParser(description='ATI Net F/T sensor emulator (loopback)')
    parser.add_argument('--rate', type=float, default=1000.0, help='RDT rate [Hz]')
    parser.add_argument('--rdt-port', type=int, default=49152)
    parser.add_argument('--tcp-port', type=int, default=49151)
    parser.add_argument('--http-port', type=int, default=8080)
    parser.add_argument('--noise', type=float, default=50.0, help='noise [counts]')
    args = parser.parse_args()
    cal = Calibration(1_000_000, 1_000_000, 'N', 'N-mm', args.rate)
    emu = NetFTEmulator(
        cal,
        args.rate,
        rdt_port=args.rdt_port,
        tcp_port=args.tcp_port,
        http_port=args.http_port,
        noise_counts=args.noise,
    ).start()
    print(
        f'emulating a Net F/T at 127.0.0.1 (RDT {emu.rdt_port}, TCP {emu.tcp_port}, '
        f'HTTP {emu.http_port}); Ctrl-C to stop',
        flush=True,
    )
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        emu.stop()
