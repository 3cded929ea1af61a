"""A tolerant MCAP reader: every complete record of the data section, in file order.

rosbag2's MCAP files (``ros2 bag record``, rosbags' writer, slide's recorder) keep schemas,
channels and messages in chunks, then a summary and a footer written when the bag is
closed. A recorder that was killed, a full disk or a cut copy leaves a file that stops
somewhere in the data section: readers that start from the footer refuse it whole. This one
reads from the front, record by record, and stops where the file stops (or skips a chunk
that does not decompress or fails its checksum), so what was written completely is used
and :attr:`McapScan.problems` says what was lost, in one line each.

Format: https://mcap.dev/spec (records: opcode u8, length u64, content; little endian).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
import struct
import sys
from typing import BinaryIO
import zlib

from slide_core.errors import SlideInputError

MAGIC = b'\x89MCAP0\r\n'
_HEADER, _FOOTER, _SCHEMA, _CHANNEL, _MESSAGE, _CHUNK = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
_DATA_END = 0x0F
_U16, _U32, _U64 = struct.Struct('<H'), struct.Struct('<I'), struct.Struct('<Q')
_MESSAGE_HEAD = struct.Struct('<HIQQ')  # channel id, sequence, log time, publish time
_CHUNK_HEAD = struct.Struct('<QQQI')  # start time, end time, uncompressed size, crc
_MAX_RECORD = 1 << 34  # 16 GiB: a larger length is garbage, not a record


class McapError(SlideInputError):
    """A file that is not an MCAP bag at all (the reason says why)."""


@dataclass(frozen=True)
class Schema:
    """A message type: its name (``pkg/msg/Type``), encoding (``ros2msg``, ``ros2idl``) and
    definition text."""

    id: int
    name: str
    encoding: str
    data: str


@dataclass(frozen=True)
class Channel:
    """A topic: its name, schema id (0: none), message encoding (``cdr``) and metadata."""

    id: int
    schema_id: int
    topic: str
    encoding: str
    metadata: dict[str, str]


@dataclass
class McapScan:
    """What one pass over a file found (filled as the pass goes).

    Attributes:
        schemas, channels: by id, as they appeared.
        counts: messages per channel id in the complete records.
        closed: the file ends with a footer (the writer closed it).
        problems: one line per thing that could not be read (truncation, a bad chunk).
        lost_after_ns: log time [ns] from which messages are missing because the file
            stops (None when nothing is known to be lost).
        first_ns, last_ns: log times of the first and last message read.
        damaged: a record in the data was malformed and skipped (its messages are lost).
    """

    schemas: dict[int, Schema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    closed: bool = False
    problems: list[str] = field(default_factory=list)
    lost_after_ns: int | None = None
    first_ns: int | None = None
    last_ns: int | None = None
    damaged: bool = False


class _Buffer:
    """Little-endian fields of one record's content, with a clear error past its end."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f'a field of {n} bytes runs past the record')
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return int(_U16.unpack(self.take(2))[0])

    def u32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def string(self) -> str:
        return bytes(self.take(self.u32())).decode()

    def rest(self) -> memoryview:
        return self.take(len(self.data) - self.pos)


def _decompressors() -> dict[str, Callable[[bytes, int], bytes]]:
    def zstd(data: bytes, size: int) -> bytes:
        if sys.version_info >= (3, 14):
            from compression import zstd as z
        else:
            from backports import zstd as z
        return bytes(z.decompress(data))

    def lz4(data: bytes, size: int) -> bytes:
        from lz4.frame import decompress  # type: ignore[import-untyped]

        return bytes(decompress(data))

    return {'': lambda data, size: data, 'zstd': zstd, 'lz4': lz4}


_DECOMPRESS = _decompressors()


def _channel(buf: _Buffer) -> Channel:
    cid, sid = buf.u16(), buf.u16()
    topic, encoding = buf.string(), buf.string()
    meta = _Buffer(buf.take(buf.u32()))
    metadata = {}
    while meta.pos < len(meta.data):
        key = meta.string()
        metadata[key] = meta.string()
    return Channel(cid, sid, topic, encoding, metadata)


def _schema(buf: _Buffer) -> Schema:
    sid = buf.u16()
    name, encoding = buf.string(), buf.string()
    return Schema(sid, name, encoding, bytes(buf.take(buf.u32())).decode())


Message = tuple[int, int, bytes]
"""(channel id, log time [ns], CDR bytes)."""


class McapReader:
    """One MCAP file, read front to back; :meth:`messages` is one pass."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with self.path.open('rb') as f:
                head = f.read(len(MAGIC))
                f.seek(0, 2)
                self.size = f.tell()
        except OSError as exc:
            raise McapError(f'{self.path.name}: cannot read it ({exc.strerror})') from None
        if self.size == 0:
            raise McapError(f'{self.path.name} is empty (the recording never started)')
        if head != MAGIC:
            raise McapError(f'{self.path.name} is not an MCAP file (no MCAP magic at its start)')

    def messages(self, keep: Callable[[Channel], bool] = lambda c: True) -> Iterator[Message]:
        """Messages of the channels ``keep`` accepts, in file order; :attr:`scan` holds
        what this pass found (complete when the iterator is exhausted)."""
        self.scan = McapScan()
        with self.path.open('rb') as f:
            f.seek(len(MAGIC))
            yield from self._records(f, keep)

    def _stop(self, what: str, at: int, start_ns: int | None = None) -> None:
        scan = self.scan
        if what == '':
            scan.problems.append(
                f'{self.path.name} ends at byte {at} without its summary and footer (the '
                'recorder did not close it): what it had not yet written is lost'
            )
            return
        scan.lost_after_ns = start_ns if start_ns is not None else scan.last_ns
        since = ''
        if scan.lost_after_ns is not None and scan.first_ns is not None:
            since = f', messages from {(scan.lost_after_ns - scan.first_ns) * 1e-9:.2f} s on,'
        scan.problems.append(
            f'{self.path.name} stops inside {what} at byte {at} of {self.size} (the bag was '
            f'not closed): the last {self.size - at} bytes{since} are lost'
        )

    def _records(self, f: BinaryIO, keep: Callable[[Channel], bool]) -> Iterator[Message]:
        scan = self.scan
        kept: dict[int, bool] = {}
        while True:
            at = f.tell()
            head = f.read(9)
            if not head:
                self._stop('', at)
                return
            if len(head) < 9:
                self._stop('a record header', at)
                return
            op, length = head[0], int(_U64.unpack(head[1:])[0])
            if length > min(_MAX_RECORD, self.size - at - 9):
                partial = f.read(16) if op == _CHUNK else b''
                start = int(_U64.unpack(partial[:8])[0]) if len(partial) >= 8 else None
                self._stop('a chunk' if op == _CHUNK else f'a record (opcode {op:#x})', at, start)
                return
            if op in (_FOOTER, _DATA_END):
                # The summary after the data section repeats what was read.
                scan.closed = self.size >= len(MAGIC) and self._ends_with_magic(f)
                if not scan.closed:
                    scan.problems.append(
                        f'{self.path.name}: the summary after the data is incomplete (the '
                        'bag was not closed cleanly); every message was read'
                    )
                return
            content = f.read(length)
            try:
                if op == _CHUNK:
                    yield from self._chunk(_Buffer(content), at, keep, kept)
                else:
                    yield from self._record(op, _Buffer(content), keep, kept)
            except (ValueError, UnicodeDecodeError, struct.error) as exc:
                scan.damaged = True
                scan.problems.append(
                    f'{self.path.name}: the record at byte {at} (opcode {op:#x}) is malformed '
                    f'({exc}); skipped'
                )

    def _ends_with_magic(self, f: BinaryIO) -> bool:
        here = f.tell()
        f.seek(self.size - len(MAGIC))
        tail = f.read(len(MAGIC))
        f.seek(here)
        return tail == MAGIC

    def _record(
        self,
        op: int,
        buf: _Buffer,
        keep: Callable[[Channel], bool],
        kept: dict[int, bool],
    ) -> Iterator[Message]:
        for cid, log_ns, data in self._parse(op, buf, keep, kept):
            self._count(cid, log_ns)
            if kept[cid]:
                yield cid, log_ns, data

    def _count(self, cid: int, log_ns: int) -> None:
        scan = self.scan
        scan.counts[cid] = scan.counts.get(cid, 0) + 1
        scan.first_ns = log_ns if scan.first_ns is None else min(scan.first_ns, log_ns)
        scan.last_ns = log_ns if scan.last_ns is None else max(scan.last_ns, log_ns)

    def _parse(
        self,
        op: int,
        buf: _Buffer,
        keep: Callable[[Channel], bool],
        kept: dict[int, bool],
    ) -> list[Message]:
        """The message of a record (a list of one), or none; schemas and channels are
        noted. Raises ValueError when the record is malformed."""
        scan = self.scan
        if op == _SCHEMA:
            s = _schema(buf)
            scan.schemas[s.id] = s
        elif op == _CHANNEL:
            c = _channel(buf)
            scan.channels[c.id] = c
            kept[c.id] = bool(keep(c))
        elif op == _MESSAGE:
            cid, _seq, log_ns, _pub = _MESSAGE_HEAD.unpack(buf.take(_MESSAGE_HEAD.size))
            if cid not in scan.channels:
                raise ValueError(f'a message on channel {cid}, which was never declared')
            return [(int(cid), int(log_ns), bytes(buf.rest()) if kept[cid] else b'')]
        # Other records (indexes, attachments, metadata) say nothing the data does not.
        return []

    def _chunk(
        self,
        buf: _Buffer,
        at: int,
        keep: Callable[[Channel], bool],
        kept: dict[int, bool],
    ) -> Iterator[Message]:
        start_ns, end_ns, size, crc = _CHUNK_HEAD.unpack(buf.take(_CHUNK_HEAD.size))
        compression = buf.string()
        compressed = bytes(buf.take(buf.u64()))
        span = f'messages {start_ns * 1e-9:.3f} to {end_ns * 1e-9:.3f} s'
        if compression not in _DECOMPRESS:
            raise ValueError(f'unknown chunk compression {compression!r}, {span} skipped')
        try:
            data = _DECOMPRESS[compression](compressed, size)
        except Exception as exc:  # noqa: BLE001 - any decompressor failure is a bad chunk
            raise ValueError(f'it does not decompress ({exc}); {span} skipped') from None
        if len(data) != size or (crc and zlib.crc32(data) != crc):
            raise ValueError(f'its contents fail their size or checksum; {span} skipped')
        # A chunk is parsed whole before any of it is used, so that a malformed chunk is
        # skipped whole, never half-used.
        inner = _Buffer(data)
        schemas, channels, flags = dict(self.scan.schemas), dict(self.scan.channels), dict(kept)
        out: list[Message] = []
        try:
            while inner.pos < len(inner.data):
                op = inner.take(1)[0]
                out.extend(self._parse(op, _Buffer(inner.take(inner.u64())), keep, kept))
        except (ValueError, UnicodeDecodeError, struct.error):
            self.scan.schemas, self.scan.channels = schemas, channels
            kept.clear()
            kept.update(flags)
            raise
        for cid, log_ns, data_ in out:
            self._count(cid, log_ns)
            if kept[cid]:
                yield cid, log_ns, data_
