"""The ATI Net F/T wire protocols, as bytes in and values out (no sockets here).

Sources: ATI's Net F/T installation and operation manual (document 9620-05-NET FT),
sections on Raw Data Transfer (RDT), the TCP interface and the XML configuration page.

- RDT over UDP, port 49152. Request: 8 bytes big-endian ``uint16 header = 0x1234,
  uint16 command, uint32 sample_count`` (0 = stream until stopped). Response records:
  36 bytes big-endian ``uint32 rdt_sequence, uint32 ft_sequence, uint32 status,
  int32 Fx, Fy, Fz, Tx, Ty, Tz`` in counts; buffered mode packs several records into one
  datagram.
- Calibration over TCP, port 49151: the 20-byte READCALINFO request (0x01 then 19 zero
  bytes) answers 24 bytes ``uint16 0x1234, uint8 force_units, uint8 torque_units,
  uint32 counts_per_force, uint32 counts_per_torque, uint16 scale_factors[6]``.
- Calibration over HTTP: ``/netftapi2.xml`` holds ``cfgcpf`` and ``cfgcpt`` (counts per
  force and torque unit), ``scfgfu`` and ``scfgtu`` (the unit names) and ``comrdtrate``
  (the RDT output rate, Hz).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
import re
import struct

RDT_PORT = 49152
TCP_PORT = 49151
HEADER = 0x1234


class ProtocolError(ValueError):
    """Bytes that are not a valid Net F/T message (the message says what is wrong)."""


class Command(IntEnum):
    """RDT request commands."""

    STOP = 0x0000
    START_REALTIME = 0x0002
    START_BUFFERED = 0x0003
    SET_SOFTWARE_BIAS = 0x0042


_REQUEST = struct.Struct('>HHI')
_RECORD = struct.Struct('>III6i')
_CALINFO = struct.Struct('>HBBII6H')
READCALINFO = b'\x01' + bytes(19)

RECORD_SIZE = _RECORD.size  # 36


def pack_request(command: Command, sample_count: int = 0) -> bytes:
    """An 8-byte RDT request."""
    if not 0 <= sample_count < 2**32:
        raise ProtocolError(f'sample_count must fit in 32 bits, got {sample_count}')
    return _REQUEST.pack(HEADER, int(command), sample_count)


def parse_request(data: bytes) -> tuple[Command, int]:
    """(command, sample_count) of an RDT request; raises ProtocolError when malformed."""
    if len(data) != _REQUEST.size:
        raise ProtocolError(f'an RDT request has 8 bytes, got {len(data)}')
    header, command, count = _REQUEST.unpack(data)
    if header != HEADER:
        raise ProtocolError(f'RDT request header is 0x{header:04x}, expected 0x1234')
    try:
        return Command(command), count
    except ValueError:
        raise ProtocolError(f'unknown RDT command 0x{command:04x}') from None


@dataclass(frozen=True)
class RdtRecord:
    """One RDT record: sequence numbers, status word and the six raw counts."""

    rdt_sequence: int
    ft_sequence: int
    status: int
    counts: tuple[int, int, int, int, int, int]


def pack_records(records: list[RdtRecord]) -> bytes:
    """One datagram of records (one for real-time mode, several for buffered mode)."""
    return b''.join(
        _RECORD.pack(r.rdt_sequence, r.ft_sequence, r.status, *r.counts) for r in records
    )


def parse_datagram(data: bytes) -> list[RdtRecord]:
    """The records of one RDT datagram; raises ProtocolError unless it holds whole records."""
    if not data or len(data) % RECORD_SIZE:
        raise ProtocolError(f'an RDT datagram holds 36-byte records, got {len(data)} bytes')
    out = []
    for offset in range(0, len(data), RECORD_SIZE):
        rdt, ft, status, *counts = _RECORD.unpack_from(data, offset)
        out.append(RdtRecord(rdt, ft, status, tuple(counts)))  # type: ignore[arg-type]
    return out


# Units: code (TCP), names as the XML page writes them, and the factor to SI.
FORCE_UNITS = {
    1: ('lbf', 4.4482216152605),
    2: ('N', 1.0),
    3: ('klbf', 4448.2216152605),
    4: ('kN', 1000.0),
    5: ('kgf', 9.80665),
    6: ('gf', 0.00980665),
}
TORQUE_UNITS = {
    1: ('lbf-in', 0.1129848290276167),
    2: ('lbf-ft', 1.3558179483314004),
    3: ('N-m', 1.0),
    4: ('N-mm', 0.001),
    5: ('kgf-cm', 0.0980665),
    6: ('kN-m', 1000.0),
}


def _normalise(unit: str) -> str:
    return re.sub(r'[\s\-·.*]', '', unit).lower()


_FORCE_BY_NAME = {_normalise(name): (name, f) for name, f in FORCE_UNITS.values()}
_TORQUE_BY_NAME = {_normalise(name): (name, f) for name, f in TORQUE_UNITS.values()}


@dataclass(frozen=True)
class Calibration:
    """How to turn counts into SI units.

    Attributes:
        counts_per_force: counts per force unit.
        counts_per_torque: counts per torque unit.
        force_unit, torque_unit: unit names (as in FORCE_UNITS / TORQUE_UNITS).
        rdt_rate_hz: the sensor's RDT output rate (0 when unknown).
    """

    counts_per_force: float
    counts_per_torque: float
    force_unit: str = 'N'
    torque_unit: str = 'N-m'
    rdt_rate_hz: float = 0.0

    def __post_init__(self) -> None:
        if not (self.counts_per_force > 0 and self.counts_per_torque > 0):
            raise ProtocolError(
                'counts per force and per torque must be positive, got '
                f'{self.counts_per_force} and {self.counts_per_torque}'
            )
        if _normalise(self.force_unit) not in _FORCE_BY_NAME:
            raise ProtocolError(
                f'unknown force unit {self.force_unit!r}; known: '
                + ', '.join(n for n, _ in FORCE_UNITS.values())
            )
        if _normalise(self.torque_unit) not in _TORQUE_BY_NAME:
            raise ProtocolError(
                f'unknown torque unit {self.torque_unit!r}; known: '
                + ', '.join(n for n, _ in TORQUE_UNITS.values())
            )

    @property
    def newton_per_count(self) -> float:
        return _FORCE_BY_NAME[_normalise(self.force_unit)][1] / self.counts_per_force

    @property
    def newton_metre_per_count(self) -> float:
        return _TORQUE_BY_NAME[_normalise(self.torque_unit)][1] / self.counts_per_torque

    def to_si(self, counts: tuple[int, ...]) -> tuple[float, float, float, float, float, float]:
        """(Fx, Fy, Fz [N], Tx, Ty, Tz [N m]) of raw counts."""
        f, t = self.newton_per_count, self.newton_metre_per_count
        return (
            counts[0] * f,
            counts[1] * f,
            counts[2] * f,
            counts[3] * t,
            counts[4] * t,
            counts[5] * t,
        )

    def to_counts(self, wrench: tuple[float, ...]) -> tuple[int, int, int, int, int, int]:
        """Raw counts (rounded) of an SI wrench: what a sensor would send."""
        f, t = self.newton_per_count, self.newton_metre_per_count
        return tuple(  # type: ignore[return-value]
            int(round(w / (f if i < 3 else t))) for i, w in enumerate(wrench)
        )


def calibration_request() -> bytes:
    """The TCP READCALINFO request."""
    return READCALINFO


def pack_calibration_response(cal: Calibration) -> bytes:
    """The 24-byte TCP answer to READCALINFO (scale factors zero: unused by RDT)."""
    fu = next(
        c for c, (n, _) in FORCE_UNITS.items() if _normalise(n) == _normalise(cal.force_unit)
    )
    tu = next(
        c for c, (n, _) in TORQUE_UNITS.items() if _normalise(n) == _normalise(cal.torque_unit)
    )
    return _CALINFO.pack(
        HEADER, fu, tu, int(cal.counts_per_force), int(cal.counts_per_torque), *([0] * 6)
    )


def parse_calibration_response(data: bytes) -> Calibration:
    """Calibration from the TCP READCALINFO answer."""
    if len(data) != _CALINFO.size:
        raise ProtocolError(f'a READCALINFO answer has 24 bytes, got {len(data)}')
    header, fu, tu, cpf, cpt, *_ = _CALINFO.unpack(data)
    if header != HEADER:
        raise ProtocolError(f'READCALINFO header is 0x{header:04x}, expected 0x1234')
    if fu not in FORCE_UNITS or tu not in TORQUE_UNITS:
        raise ProtocolError(f'unknown unit codes: force {fu}, torque {tu}')
    return Calibration(cpf, cpt, FORCE_UNITS[fu][0], TORQUE_UNITS[tu][0])


def _xml_field(text: str, tag: str) -> str:
    m = re.search(rf'<{tag}>\s*([^<]*?)\s*</{tag}>', text)
    if m is None:
        raise ProtocolError(f'netftapi2.xml has no <{tag}> field')
    return m.group(1)


def parse_calibration_xml(text: str) -> Calibration:
    """Calibration from the sensor's ``netftapi2.xml`` page."""
    try:
        cpf = float(_xml_field(text, 'cfgcpf'))
        cpt = float(_xml_field(text, 'cfgcpt'))
    except ValueError as exc:
        raise ProtocolError(f'netftapi2.xml counts are not numbers: {exc}') from None
    rate = 0.0
    try:
        rate = float(_xml_field(text, 'comrdtrate'))
    except (ProtocolError, ValueError):
        pass
    return Calibration(
        cpf, cpt, _xml_field(text, 'scfgfu'), _xml_field(text, 'scfgtu'), rdt_rate_hz=rate
    )


def calibration_xml(cal: Calibration) -> str:
    """A ``netftapi2.xml`` page with the fields a driver reads (what the emulator serves)."""
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<netft>\n'
        f'<cfgcpf>{cal.counts_per_force:g}</cfgcpf>\n'
        f'<cfgcpt>{cal.counts_per_torque:g}</cfgcpt>\n'
        f'<scfgfu>{cal.force_unit}</scfgfu>\n'
        f'<scfgtu>{cal.torque_unit}</scfgtu>\n'
        f'<comrdtrate>{cal.rdt_rate_hz:g}</comrdtrate>\n'
        '</netft>\n'
    )


# The system status word (manual, "System Status Code"). Bit 31 summarises errors.
STATUS_BITS = {
    0: 'watchdog reset',
    1: 'DAC/ADC check result too high',
    2: 'DAC/ADC check result too low',
    3: 'artificial analog ground out of range',
    4: 'power supply too high',
    5: 'power supply too low',
    6: 'bad active calibration',
    7: 'EEPROM failure',
    8: 'configuration invalid',
    11: 'sensor temperature too high',
    12: 'sensor temperature too low',
    17: 'CAN bus error',
    31: 'error (summary)',
}
ERROR_BIT = 1 << 31


def decode_status(status: int) -> list[str]:
    """Names of the set status bits (unknown bits as 'bit N')."""
    return [STATUS_BITS.get(b, f'bit {b}') for b in range(32) if status >> b & 1]


class SequenceTracker:
    """Counts lost and out-of-order datagrams from ``rdt_sequence`` (32-bit, wraps)."""

    def __init__(self) -> None:
        self.last: int | None = None
        self.received = 0
        self.lost = 0
        self.out_of_order = 0

    def update(self, sequence: int) -> bool:
        """Account for one record; True when it is newer than every one seen before."""
        self.received += 1
        if self.last is None:
            self.last = sequence
            return True
        delta = (sequence - self.last) % 2**32
        if delta == 0 or delta >= 2**31:  # a repeat or an older record: arrived late
            self.out_of_order += 1
            # It was counted lost when the gap was seen; it is not lost after all.
            self.lost = max(0, self.lost - 1) if delta else self.lost
            return False
        self.lost += delta - 1
        self.last = sequence
        return True
