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
  force and torque unit), ``scfgfu`` and ``scfgtu`` (the unit names), ``comrdtrate``
  (the RDT output rate, Hz) and ``cfgmr`` (the rating of each axis, ``;``-separated, in the
  configured units).

What a datagram from the sensor's address and port must pass before its records are used
(:class:`RdtStream`): whole 36-byte records (:func:`parse_datagram`), plausible content
(:class:`Plausibility`: counts within the sensor's range, no reserved status bits) and a
sequence number that follows the stream (:class:`SequenceTracker`: a jump is held until the
next record confirms it, so one corrupt or spoofed record neither stalls the stream nor
poisons a counter, and a sensor that restarts its sequence is followed after one record).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
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


@dataclass(frozen=True, slots=True)
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
        max_rating: the rating of each axis (Fx, Fy, Fz, Tx, Ty, Tz) in the configured units
            (empty when unknown: READCALINFO does not carry it).
    """

    counts_per_force: float
    counts_per_torque: float
    force_unit: str = 'N'
    torque_unit: str = 'N-m'
    rdt_rate_hz: float = 0.0
    max_rating: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.max_rating and (
            len(self.max_rating) != 6 or not all(r > 0 for r in self.max_rating)
        ):
            raise ProtocolError(
                f'max_rating needs 6 positive values (Fx..Tz), got {self.max_rating}'
            )
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

    @cached_property
    def newton_per_count(self) -> float:
        return _FORCE_BY_NAME[_normalise(self.force_unit)][1] / self.counts_per_force

    @cached_property
    def newton_metre_per_count(self) -> float:
        return _TORQUE_BY_NAME[_normalise(self.torque_unit)][1] / self.counts_per_torque

    @property
    def rating_si(self) -> tuple[float, ...]:
        """max_rating in N and N m (empty when unknown)."""
        if not self.max_rating:
            return ()
        f = _FORCE_BY_NAME[_normalise(self.force_unit)][1]
        t = _TORQUE_BY_NAME[_normalise(self.torque_unit)][1]
        return tuple(r * (f if i < 3 else t) for i, r in enumerate(self.max_rating))

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
    rating: tuple[float, ...] = ()
    try:
        rating = tuple(float(v) for v in _xml_field(text, 'cfgmr').split(';') if v.strip())
    except (ProtocolError, ValueError):
        pass
    if len(rating) != 6 or not all(r > 0 for r in rating):
        rating = ()  # unknown: no count bound from the rating
    return Calibration(
        cpf,
        cpt,
        _xml_field(text, 'scfgfu'),
        _xml_field(text, 'scfgtu'),
        rdt_rate_hz=rate,
        max_rating=rating,
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
        + (
            '<cfgmr>' + ';'.join(f'{r:g}' for r in cal.max_rating) + '</cfgmr>\n'
            if cal.max_rating
            else ''
        )
        + '</netft>\n'
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
# Bits 18 to 30: no status code of the Net F/T uses them, so a record that sets one is not
# from the sensor (a random word sets one with probability 1 - 2^-13). Bits 9, 10 and 13 to
# 16 are left alone: unnamed here, but not known to be unused.
RESERVED_STATUS_BITS = ((1 << 31) - 1) & ~((1 << 18) - 1)


def decode_status(status: int) -> list[str]:
    """Names of the set status bits (unknown bits as 'bit N')."""
    return [STATUS_BITS.get(b, f'bit {b}') for b in range(32) if status >> b & 1]


AXES = ('Fx', 'Fy', 'Fz', 'Tx', 'Ty', 'Tz')
NO_BOUND = 2**31 - 1  # any int32 count
RATING_MARGIN = 4.0  # default plausibility bound: this many times the sensor's rating


@dataclass(frozen=True)
class Plausibility:
    """What a record from a Net F/T can hold.

    Attributes:
        max_counts: the largest |count| of each axis (Fx..Tz) the sensor can send.
        reserved_status: status bits the sensor never sets.
    """

    max_counts: tuple[int, int, int, int, int, int] = (NO_BOUND,) * 6
    reserved_status: int = RESERVED_STATUS_BITS

    @classmethod
    def of(
        cls, calibration: Calibration, max_force_n: float = 0.0, max_torque_nm: float = 0.0
    ) -> Plausibility:
        """Bounds from explicit limits in N and N m, else from the sensor's rating.

        A limit of 0 takes RATING_MARGIN times the rating of each axis when the calibration
        knows it (netftapi2.xml's ``cfgmr``), and leaves that axis unbounded otherwise.
        """
        rating = calibration.rating_si
        per_count = (calibration.newton_per_count,) * 3 + (calibration.newton_metre_per_count,) * 3
        bounds = []
        for i in range(6):
            limit = max_force_n if i < 3 else max_torque_nm
            if limit <= 0 and rating:
                limit = RATING_MARGIN * rating[i]
            counts = limit / per_count[i] if limit > 0 else NO_BOUND
            bounds.append(int(min(counts, NO_BOUND)))
        return cls(tuple(bounds))  # type: ignore[arg-type]

    def problem(self, record: RdtRecord) -> str | None:
        """What makes ``record`` implausible (None when it is plausible)."""
        reserved = record.status & self.reserved_status
        if reserved:
            return f'status 0x{record.status:08x} sets reserved bits 0x{reserved:08x}'
        for axis, count, bound in zip(AXES, record.counts, self.max_counts, strict=True):
            if not -bound <= count <= bound:
                return f'{axis} of {count} counts is beyond the plausible +-{bound}'
        return None


class Verdict(IntEnum):
    """What :meth:`SequenceTracker.update` made of a record."""

    NEW = 0  # follows the stream: use it
    LATE = 1  # older than the newest (or a repeat): counted, not used
    HELD = 2  # a jump: kept until the next record confirms it
    CONFIRMED = 3  # follows a held record: use the held one, then this one


_WRAP = 2**32
_MASK = _WRAP - 1


class SequenceTracker:
    """Follows ``rdt_sequence`` (32-bit, wraps): loss, reordering, restarts.

    A record up to ``max_gap`` ahead of the newest is used at once (the records in between
    count as lost); one up to ``max_late`` behind arrived late (counted, not used). Any other
    sequence is a jump: the record is held, and used only when the next record follows it
    (within ``max_gap``); so is the first record of a stream. Then a jump forward of less
    than ``max_dropout`` was a dropout (the sensor sampled on: its records count as lost),
    and anything else was a restart of the sensor's stream (counted in ``resyncs``; nothing
    lost). A held record that nothing confirms counts in ``unconfirmed``. So one corrupt or
    spoofed record can neither stall the stream nor move the loss counter by more than
    ``max_gap``. A sensor that restarts within its first ``max_late`` records looks late for
    at most that many records.

    Attributes:
        received: records seen.
        lost, out_of_order, resyncs, unconfirmed: counters as above.
        last_resync: (newest sequence before, first sequence after) of the latest restart.
    """

    def __init__(self, max_gap: int = 32, max_late: int = 256, max_dropout: int = 2**24) -> None:
        self.max_gap = max_gap
        self.max_late = max_late
        self.max_dropout = max_dropout
        self.last: int | None = None
        self.held: int | None = None
        self.received = 0
        self.lost = 0
        self.out_of_order = 0
        self.resyncs = 0
        self.unconfirmed = 0
        self.last_resync: tuple[int, int] | None = None
        self._before_restart: int | None = None  # the newest sequence when START was resent
        self._missing: set[int] = set()  # sequences counted lost that may still come late

    def restart(self) -> None:
        """The stream was asked to start again (START sent anew), so its sequence begins
        again at 1: the next records are taken as a new stream's first, not as late ones
        of the old. (Otherwise a sensor that rebooted before sending ``max_late`` records,
        and sent fewer than that between two requests, was never heard again: each new
        START restarted it within the window it was held late in.) The counters stay; the
        new stream, once confirmed, counts as a resync, or its gap as lost records when it
        goes on from the old one (a dropout)."""
        if self.last is not None:
            self._before_restart = self.last
        self.last = None
        self.held = None
        self._missing.clear()

    def _note_missing(self, last: int, sequence: int) -> None:
        """Remember the sequences skipped between ``last`` and ``sequence`` (a late one
        takes its loss back; a duplicate of a record already used must not: it had
        cancelled a real loss), forgetting those beyond ``max_late``."""
        for k in range(1, (sequence - last) & _MASK):
            self._missing.add((last + k) & _MASK)
        if len(self._missing) > 2 * self.max_late:
            self._missing = {s for s in self._missing if (sequence - s) & _MASK <= self.max_late}

    def update(self, sequence: int) -> Verdict:
        """Account for one record's sequence number."""
        self.received += 1
        last = self.last
        if last is None:  # the first record: held like a jump, so a bad one poisons nothing
            held = self.held
            if held is not None and 0 < (sequence - held) & _MASK <= self.max_gap:
                self.lost += ((sequence - held) & _MASK) - 1
                self._note_missing(held, sequence)
                before, self._before_restart = self._before_restart, None
                if before is not None:
                    gap = (held - before) & _MASK
                    if 0 < gap < self.max_dropout:  # the old stream went on: a dropout
                        self.lost += gap - 1
                        if gap <= self.max_late:
                            self._note_missing(before, held)
                    else:
                        self.resyncs += 1
                        self.last_resync = (before, held)
                self.last = sequence
                self.held = None
                return Verdict.CONFIRMED
            if held is not None:
                self.unconfirmed += 1
            self.held = sequence
            return Verdict.HELD
        delta = (sequence - last) & _MASK
        if 0 < delta <= self.max_gap:
            if delta > 1:
                self.lost += delta - 1
                self._note_missing(last, sequence)
            self.last = sequence
            if self.held is not None:  # the jump was not the stream's: drop it
                self.unconfirmed += 1
                self.held = None
            return Verdict.NEW
        if delta == 0 or delta >= _WRAP - self.max_late:
            self.out_of_order += 1
            if sequence in self._missing:  # counted lost when the gap was seen: it was not
                self._missing.discard(sequence)
                self.lost -= 1
            return Verdict.LATE
        held = self.held
        if held is not None and 0 < (sequence - held) & _MASK <= self.max_gap:
            jump = (held - last) & _MASK
            if jump < self.max_dropout:  # a dropout: the sensor sampled on meanwhile
                self.lost += jump - 1 + ((sequence - held) & _MASK) - 1
                if jump <= self.max_late:
                    self._note_missing(last, held)
            else:  # the sensor restarted its stream (or jumped far): follow it
                self.resyncs += 1
                self.last_resync = (last, held)
                self.lost += ((sequence - held) & _MASK) - 1
                self._missing.clear()
            self._note_missing(held, sequence)
            self.last = sequence
            self.held = None
            return Verdict.CONFIRMED
        if held is not None:
            self.unconfirmed += 1
        self.held = sequence
        return Verdict.HELD


class RdtStream:
    """Datagrams from the sensor in, the records to use out (in order).

    Each datagram must hold whole records; each record must be plausible and follow the
    stream (see :class:`SequenceTracker`). Nothing here raises on bad bytes: they are
    counted (``malformed`` datagrams, ``implausible`` records) and the latest reason is kept
    in ``last_problem``.
    """

    def __init__(self, plausibility: Plausibility | None = None) -> None:
        self.plausibility = plausibility or Plausibility()
        self.tracker = SequenceTracker()
        self.datagrams = 0
        self.malformed = 0
        self.implausible = 0
        self.last_problem = ''
        self._held: RdtRecord | None = None

    def feed(self, data: bytes) -> list[RdtRecord]:
        """The records of one datagram that can be used (none for a bad datagram)."""
        self.datagrams += 1
        if not data or len(data) % RECORD_SIZE:
            self.malformed += 1
            self.last_problem = f'a datagram of {len(data)} bytes is not whole 36-byte records'
            return []
        out: list[RdtRecord] = []
        reserved = self.plausibility.reserved_status
        mx, my, mz, ma, mb, mc = self.plausibility.max_counts
        update = self.tracker.update
        for rdt, ft, status, fx, fy, fz, tx, ty, tz in _RECORD.iter_unpack(data):
            if status & reserved or not (
                -mx <= fx <= mx
                and -my <= fy <= my
                and -mz <= fz <= mz
                and -ma <= tx <= ma
                and -mb <= ty <= mb
                and -mc <= tz <= mc
            ):
                record = RdtRecord(rdt, ft, status, (fx, fy, fz, tx, ty, tz))
                self.implausible += 1
                self.last_problem = f'record {rdt}: {self.plausibility.problem(record)}'
                continue
            verdict = update(rdt)
            if verdict == Verdict.NEW:
                out.append(RdtRecord(rdt, ft, status, (fx, fy, fz, tx, ty, tz)))
            elif verdict == Verdict.HELD:
                self._held = RdtRecord(rdt, ft, status, (fx, fy, fz, tx, ty, tz))
                self.last_problem = f'record {rdt}: a sequence jump, held until confirmed'
            elif verdict == Verdict.CONFIRMED:
                if self._held is not None:
                    out.append(self._held)
                    self._held = None
                out.append(RdtRecord(rdt, ft, status, (fx, fy, fz, tx, ty, tz)))
            else:
                self.last_problem = f'record {rdt}: behind the stream (late or repeated)'
        return out

    def restart(self) -> None:
        """START was sent anew: the sensor's sequence begins again (:meth:`SequenceTracker.
        restart`), and a record held from before is dropped."""
        self.tracker.restart()
        self._held = None
