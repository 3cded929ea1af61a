"""Opening a rosbag2 for reading, whatever state it is in, and saying what is wrong with it.

A bag is a folder with ``metadata.yaml`` and its data files (``ros2 bag record``, rosbags'
writer, ``slide record``, the recorder node), or, when the recorder never closed it, a
folder or a single ``.mcap`` file without metadata. :func:`open_bag` reads MCAP data with
:mod:`slide_core.io.mcap` (complete records up to where the file stops) and sqlite3 data
with rosbags, and checks the metadata against the data. Everything that is not as it
should be but leaves data to use becomes one line in :attr:`Bag.warnings`; only a bag with
nothing to read raises :class:`BagError`.

Message types come from the definitions the bag holds (rosbag2 stores them with the data),
then from ROS 2 Jazzy's standard types. A topic of a type that neither knows is listed in
:attr:`Bag.unknown` with the reason, and its messages are never decoded.

:func:`interfaces_typestore` is the type store of writers: Jazzy's types plus
slide_interfaces' messages, read from their ``.msg`` files through ``AMENT_PREFIX_PATH``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
import os
from pathlib import Path
import re
from typing import Any

import yaml

from slide_core.errors import SlideInputError
from slide_core.io.mcap import McapError, McapReader, McapScan

DATA_SUFFIXES = ('.mcap', '.db3')


class BagError(SlideInputError):
    """A bag with nothing that can be read (the reason says why and what to do)."""


@dataclass(frozen=True)
class TopicInfo:
    """A topic of the bag: message type and the number of messages its data holds."""

    name: str
    type: str
    count: int


@dataclass
class Bag:
    """An opened bag: its topics, what is wrong with it, and its messages (raw CDR).

    Attributes:
        path: what was opened.
        files: the data files read.
        topics: by name.
        unknown: topics whose messages cannot be decoded, with the reason.
        warnings: one line per problem that left data to use (a truncated file, metadata
            that disagrees with the data, messages that do not decode).
        truncated: some data is known or likely to be lost (a file stops in the middle, was
            never closed, or holds a record that could not be read).
        first_ns, last_ns: log times of the first and last message.
        listed: messages per topic as metadata.yaml counts them (empty without it).
    """

    path: Path
    files: list[Path]
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    truncated: bool = False
    first_ns: int | None = None
    last_ns: int | None = None
    listed: dict[str, int] = field(default_factory=dict)
    _store: Any = None
    _sqlite: bool = False
    _bad_decodes: dict[str, int] = field(default_factory=dict)

    def messages(self, topics: Iterable[str]) -> Iterator[tuple[str, int, bytes]]:
        """(topic, log time [ns], CDR bytes) of the given topics, in file order."""
        wanted = set(topics) - set(self.unknown)
        if self._sqlite:
            yield from _sqlite_messages(self.files[0].parent, wanted)
            return
        for path in self.files:
            reader = McapReader(path)
            channels = reader.messages(lambda c: c.topic in wanted)
            for cid, t_ns, data in channels:
                yield reader.scan.channels[cid].topic, t_ns, data

    def decode(self, topic: str, data: bytes) -> Any | None:
        """The message, or None when these bytes are not a message of the topic's type
        (counted; :meth:`decode_warnings` reports it)."""
        try:
            return self._store.deserialize_cdr(data, self.topics[topic].type)
        except Exception:  # noqa: BLE001 - any decoder failure is one undecodable message
            self._bad_decodes[topic] = self._bad_decodes.get(topic, 0) + 1
            return None

    def layout(self, type_name: str) -> tuple[Any, ...] | None:
        """The wire layout of a message type as this bag defines it (:func:`wire_layout`),
        None when the bag cannot read the type."""
        if self._store is None or type_name not in self._store.fielddefs:
            return None
        return wire_layout(self._store, type_name)

    def decode_warnings(self) -> list[str]:
        """One line per topic with messages that did not decode."""
        return [
            f'{topic}: {n} message(s) do not decode as {self.topics[topic].type}; skipped'
            for topic, n in sorted(self._bad_decodes.items())
        ]


# -- opening -----------------------------------------------------------------------------------
def open_bag(path: str | Path) -> Bag:
    """Open the bag at ``path`` (a rosbag2 folder or an ``.mcap`` file): scan its data once,
    check the metadata, build the type store. Raises BagError when nothing can be read."""
    path = Path(path)
    if not path.exists():
        raise BagError(f'{path}: no such bag')
    metadata: dict[str, Any] | None = None
    warnings: list[str] = []
    if path.is_file():
        if path.suffix != '.mcap':
            raise BagError(f'{path}: not a bag (give a rosbag2 folder or an .mcap file)')
        files = [path]
        warnings.append(f'{path.name}: read without metadata.yaml (a bare MCAP file)')
    else:
        metadata, files = _layout(path, warnings)
    if any(f.suffix == '.db3' for f in files):
        if metadata is None:
            raise BagError(f'{path}: an sqlite3 bag needs its metadata.yaml, which is missing')
        bag = Bag(path, files[:1], warnings=warnings, _sqlite=True)
        _scan_sqlite(bag)
    else:
        bag = Bag(path, files, warnings=warnings)
        _scan_mcap(bag)
    if metadata is not None:
        _check_metadata(bag, metadata)
    return bag


def _layout(folder: Path, warnings: list[str]) -> tuple[dict[str, Any] | None, list[Path]]:
    """The folder's metadata (None when absent or unreadable) and its data files."""
    # In the recorder's order: split files are numbered (name_2 before name_10).
    present = sorted(
        (p for p in folder.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file()),
        key=lambda p: [
            int(part) if part.isdigit() else part for part in re.split(r'(\d+)', p.name)
        ],
    )
    meta_path = folder / 'metadata.yaml'
    if not meta_path.exists():
        if not present:
            raise BagError(f'{folder}: not a bag (no metadata.yaml and no .mcap or .db3 file)')
        warnings.append(
            f'{folder.name}: no metadata.yaml (the recorder did not close the bag); read '
            f'{", ".join(p.name for p in present)} as it is'
        )
        return None, present
    try:
        doc = yaml.safe_load(meta_path.read_text())
        info = doc['rosbag2_bagfile_information']
        named = [folder / str(p) for p in info['relative_file_paths']]
        mode = str(info.get('compression_mode') or '')
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError) as exc:
        if not present:
            raise BagError(
                f'{meta_path}: unreadable ({type(exc).__name__}) and the folder holds no data'
            ) from None
        warnings.append(f'{meta_path.name} is unreadable ({type(exc).__name__}): it is ignored')
        return None, present
    if mode.upper() == 'FILE':
        raise BagError(
            f'{folder}: its files are compressed whole ({info.get("compression_format")}); '
            'run ros2 bag decompress on it first'
        )
    missing = [p for p in named if not p.exists()]
    if missing:
        rest = [p for p in named if p.exists()] or present
        if not rest:
            raise BagError(
                f'{folder}: metadata.yaml names {", ".join(p.name for p in missing)}, which '
                'the folder lacks, and it holds no other data file'
            )
        warnings.append(
            f'metadata.yaml names {", ".join(p.name for p in missing)}, which the folder '
            f'lacks: read {", ".join(p.name for p in rest)} instead'
        )
        return info, rest
    return info, named


def _scan_mcap(bag: Bag) -> None:
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    types: dict[str, str] = {}
    counts: dict[str, int] = {}
    schemas: dict[str, tuple[str, str]] = {}  # type -> (encoding, definition)
    readable, errors = [], []
    for path in bag.files:
        try:
            reader = McapReader(path)
        except McapError as exc:
            errors.append(str(exc))
            continue
        for _ in reader.messages(lambda c: False):
            pass
        scan: McapScan = reader.scan
        readable.append(path)
        bag.warnings.extend(scan.problems)
        bag.truncated |= scan.lost_after_ns is not None or scan.damaged or not scan.closed
        for c in scan.channels.values():
            schema = scan.schemas.get(c.schema_id)
            name = schema.name if schema is not None else ''
            if c.topic in types and name and types[c.topic] != name:
                bag.warnings.append(
                    f'{c.topic} is recorded as {types[c.topic]} and as {name}: only '
                    f'{types[c.topic]} is read'
                )
                bag.unknown.setdefault(c.topic, f'it has two types ({types[c.topic]}, {name})')
            types.setdefault(c.topic, name)
            counts[c.topic] = counts.get(c.topic, 0) + scan.counts.get(c.id, 0)
            if c.encoding != 'cdr':
                bag.unknown[c.topic] = f'its messages are {c.encoding!r}, not CDR'
            if schema is not None and name not in schemas:
                schemas[name] = (schema.encoding, schema.data)
        for t in (scan.first_ns, scan.last_ns):
            if t is not None:
                bag.first_ns = t if bag.first_ns is None else min(bag.first_ns, t)
                bag.last_ns = t if bag.last_ns is None else max(bag.last_ns, t)
    if not readable:
        raise BagError(f'{bag.path}: ' + '; '.join(errors))
    bag.warnings.extend(f'{e}: skipped' for e in errors)
    bag.files = readable
    bag.topics = {t: TopicInfo(t, types[t], counts[t]) for t in sorted(types)}
    bag._store = store
    _register(bag, store, schemas)


def _register(bag: Bag, store: Any, schemas: dict[str, tuple[str, str]]) -> None:
    """Types from the bag's own definitions; a topic whose type is neither defined there nor
    one of Jazzy's is unknown."""
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    failed: dict[str, str] = {}
    for name, (encoding, text) in schemas.items():
        if not text.strip():
            continue  # no definition: only a type Jazzy knows can be read
        try:
            if encoding == 'ros2msg':
                store.register(get_types_from_msg(text, name))
            elif encoding in ('ros2idl', 'omgidl'):
                store.register(get_types_from_idl(text))
            elif text:
                failed[name] = f'its definition is in {encoding!r}, which is not read'
        except Exception as exc:  # noqa: BLE001 - a definition rosbags cannot parse
            failed[name] = f'its definition does not parse ({str(exc).splitlines()[0]})'
    for topic, info in bag.topics.items():
        if topic in bag.unknown:
            continue
        if not info.type:
            bag.unknown[topic] = 'the bag names no message type for it'
        elif info.type not in store.types:
            bag.unknown[topic] = f'its type {info.type} is unknown: ' + failed.get(
                info.type, 'the bag holds no definition of it'
            )


def _check_metadata(bag: Bag, info: dict[str, Any]) -> None:
    """Lines for every way metadata.yaml disagrees with the data (the data is what is read)."""
    try:
        listed = {
            str(t['topic_metadata']['name']): (
                str(t['topic_metadata']['type']),
                int(t.get('message_count', 0)),
            )
            for t in info.get('topics_with_message_count') or []
        }
        total = int(info.get('message_count', 0))
    except (KeyError, TypeError, ValueError):
        bag.warnings.append('metadata.yaml lists its topics in an unknown form: it is ignored')
        return
    bag.listed = {name: count for name, (_, count) in listed.items()}
    counts: list[str] = []
    for name, (typ, count) in sorted(listed.items()):
        have = bag.topics.get(name)
        held = 0 if have is None else have.count
        if have is not None and have.type and typ != have.type:
            bag.warnings.append(
                f'metadata.yaml says {name} is {typ}, the data says {have.type}: the data is read'
            )
        if count != held:
            counts.append(f'{name} {count} listed, {held} held')
    if counts:
        bag.warnings.append(
            'metadata.yaml disagrees with the data, which is read: ' + '; '.join(counts)
        )
    extra = sorted(set(bag.topics) - set(listed))
    if extra and listed:
        bag.warnings.append(f'metadata.yaml does not list {", ".join(extra)}: read anyway')
    held = sum(t.count for t in bag.topics.values())
    if total and total != held and not listed:
        bag.warnings.append(
            f'metadata.yaml counts {total} messages, the data holds {held}: the data is read'
        )


# -- sqlite3 (rosbags) -----------------------------------------------------------------------
def _scan_sqlite(bag: Bag) -> None:
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag2 import ReaderError

    try:
        with AnyReader([bag.path]) as reader:
            bag.topics = {
                name: TopicInfo(name, info.msgtype or '', info.msgcount)
                for name, info in reader.topics.items()
            }
            bag._store = reader.typestore
            if reader.message_count:
                bag.first_ns, bag.last_ns = reader.start_time, reader.end_time
    except (AnyReaderError, ReaderError, OSError) as exc:
        raise BagError(f'{bag.path}: the sqlite3 bag cannot be read ({exc})') from None
    for topic, info in bag.topics.items():
        if info.type not in bag._store.types:
            bag.unknown[topic] = f'its type {info.type} is unknown'


def _sqlite_messages(folder: Path, wanted: set[str]) -> Iterator[tuple[str, int, bytes]]:
    from rosbags.highlevel import AnyReader

    with AnyReader([folder]) as reader:
        conns = [c for c in reader.connections if c.topic in wanted]
        for conn, t_ns, raw in reader.messages(connections=conns):
            yield conn.topic, int(t_ns), bytes(raw)


# -- writers -------------------------------------------------------------------------------
def flush_chunk(writer: Any) -> bool:
    """Close a rosbags MCAP writer's open chunk and hand it to the operating system, so
    that what was written so far survives if the process is killed before it closes the
    bag (a reader then gets every message up to here). False when the writer's storage has
    no chunks to close (sqlite3)."""
    storage = getattr(writer, 'storage', None)
    chunk = getattr(storage, 'chunk', None)
    close, bio = getattr(storage, 'close_chunk', None), getattr(storage, 'bio', None)
    if chunk is None or close is None or bio is None:
        return False
    if chunk.bio.tell():
        close()
    bio.flush()
    return True


def interfaces_dir() -> Path:
    """The installed ``share/slide_interfaces/msg`` folder (via AMENT_PREFIX_PATH)."""
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        candidate = Path(prefix) / 'share' / 'slide_interfaces' / 'msg'
        if prefix and candidate.is_dir():
            return candidate
    raise SlideInputError(
        'slide_interfaces message definitions not found on AMENT_PREFIX_PATH: '
        'run inside the workspace (scripts/run.sh) after scripts/setup.sh'
    )


def wire_layout(store: Any, type_name: str) -> tuple[Any, ...]:
    """The fields of a message type, as a rosbags type store ``store`` defines it, with
    every nested type's fields in place of its name: equal layouts have the same CDR bytes
    (constants, which are not sent, are left out). Raises KeyError for a type the store
    lacks."""
    from rosbags.interfaces import Nodetype

    def node(desc: Any) -> Any:
        kind, detail = desc
        if kind == Nodetype.NAME:
            return ('msg', wire_layout(store, detail))
        if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            inner, count = detail
            return (kind.name.lower(), node(inner), count)
        return ('base', detail)

    _, fields = store.fielddefs[type_name]
    return tuple((name, node(desc)) for name, desc in fields)


def interfaces_typestore() -> Any:
    """ROS 2 Jazzy types plus slide_interfaces' messages (a rosbags Typestore)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    types: dict[str, Any] = {}
    for path in sorted(interfaces_dir().glob('*.msg')):
        types.update(get_types_from_msg(path.read_text(), f'slide_interfaces/msg/{path.stem}'))
    store.register(types)
    return store
