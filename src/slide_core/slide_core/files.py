"""Output files that are never half-written: write beside the target, then rename.

A failed or interrupted write leaves the previous file (if any) as it was and no partial
file behind. Output paths are checked before any work starts (:func:`check_output`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import contextlib
import os
from pathlib import Path
import re
import shutil
import tempfile

import yaml

from slide_core.errors import OutputError, SlideInputError


def check_output(
    path: str | Path,
    suffixes: tuple[str, ...],
    what: str,
    directory: bool = False,
    inputs: tuple[str | Path, ...] = (),
) -> Path:
    """Return ``path`` if a file with one of ``suffixes`` (a new folder, with
    ``directory``) can be written there, else raise SlideInputError saying why (wrong
    suffix, a folder or file in the way, no writable parent, or one of the command's
    ``inputs``, or a path inside an input folder: ``slide identify BAG --out
    BAG/metadata.yaml`` overwrote the bag's metadata)."""
    p = Path(path)
    if suffixes and p.suffix.lower() not in suffixes:
        raise SlideInputError(f'{what} must name a {" or ".join(suffixes)} file, got {p}')
    target = p.resolve()
    for given in inputs:
        source = Path(given).resolve()
        if target == source or source in target.parents:
            raise SlideInputError(
                f'{what} {p} would overwrite the input {given}: give a path outside it'
            )
    if directory and (p.exists() or p.is_symlink()):
        raise SlideInputError(f'{what} {p} exists: give a new path')
    if p.is_dir():
        raise SlideInputError(f'{what} {p} is a folder; give a file name')
    _check_writable(p.parent if str(p.parent) else Path('.'), p, what)
    return p


def check_folder(path: str | Path, what: str) -> Path:
    """Return ``path`` if files can be written in that folder (made when missing), else
    raise SlideInputError saying why (a file there or above it, no writable parent)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise SlideInputError(f'{what} {p} is a file: give a folder')
    _check_writable(p, p, what)
    return p


BAG_FILE_SUFFIXES = ('.mcap', '.db3')


def check_bag_folder(path: str | Path, what: str) -> Path:
    """``path`` as a new bag's folder; SlideInputError when its name ends like a bag's
    data file (``b.mcap`` became a folder ``b.mcap/`` holding ``b.mcap.mcap``)."""
    p = Path(path)
    if p.suffix.lower() in BAG_FILE_SUFFIXES:
        raise SlideInputError(
            f'{what} {p}: a bag is a folder, and this names a data file; give the folder '
            f'without {p.suffix} (its data file is named after it)'
        )
    return p


def _check_writable(folder: Path, path: Path, what: str) -> None:
    """SlideInputError unless ``folder``, or the nearest of its parents that exists, is a
    folder this process can write in (``path``, ``what``: for the message): a file is
    made there and removed. Permissions alone said yes to root for /proc, and a bench's
    picture failed there only after its minutes of work."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise SlideInputError(f'{what} {path}: cannot write in {existing}')
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise SlideInputError(
            f'{what} {path}: cannot write in {existing} ({exc.strerror or exc})'
        ) from None


def _umask() -> int:
    """The process's file-creation mask, read without changing it (other threads may be
    creating files)."""
    try:
        for line in Path('/proc/self/status').read_text().splitlines():
            if line.startswith('Umask:'):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


@contextlib.contextmanager
def atomic_path(path: str | Path, directory: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path``; on success it is renamed onto ``path``, on any
    error (or KeyboardInterrupt) it is removed and ``path`` is left untouched, and so are
    the parent folders this made.

    A file gets the permissions a plain write would give it (the umask's), or those of the
    file it replaces. With ``directory`` the temporary path does not exist yet (a bag
    writer creates it) and ``path`` must not exist either (folders are not replaced); the
    temporary path has ``path``'s own name, inside a hidden folder beside it, so that files
    a writer names after its folder (a bag's ``NAME.mcap``) are named as in ``path``."""
    target = Path(path)
    made: list[Path] = []
    parent = target.parent
    while not parent.exists():
        made.append(parent)
        parent = parent.parent
    target.parent.mkdir(parents=True, exist_ok=True)
    holder: Path | None = None
    written: Path | None = None
    try:
        if directory:
            if target.exists():
                raise SlideInputError(f'{target} exists: give a new path')
            holder = Path(tempfile.mkdtemp(prefix=f'.{target.name}.', dir=target.parent))
            tmp = holder / target.name
        else:
            fd, name = tempfile.mkstemp(prefix=f'.{target.name}.', dir=target.parent)
            os.close(fd)
            tmp = written = Path(name)
            mode = target.stat().st_mode & 0o7777 if target.is_file() else 0o666 & ~_umask()
            tmp.chmod(mode)
        yield tmp
        if directory:
            tmp.rename(target)
        else:
            os.replace(tmp, target)
    except BaseException as exc:
        if holder is not None:
            shutil.rmtree(holder, ignore_errors=True)
        elif written is not None:
            written.unlink(missing_ok=True)
        for folder in made:  # innermost first; one that gained other files stays
            try:
                folder.rmdir()
            except OSError:
                break
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            failed = Path(str(exc.filename)) if exc.filename else None
            if (
                failed is not None
                and failed.parent in (target.parent, holder)
                and (failed == target or failed.name.startswith(f'.{target.name}.'))
            ):
                # Named by its hidden temporary, and a missing folder (/proc/x.yaml) read
                # as a missing input, exit 2.
                raise OutputError(exc.errno, exc.strerror, str(target)) from exc
        raise
    if holder is not None:
        holder.rmdir()


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` to produce the file at a temporary path, then move it onto
    ``path`` (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text))


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping: it kept the last,
    and a second ``obstacles: []`` at a workcell file's end dropped the fixture listed
    above it (the plans pushed through it)."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> object:
    seen: set[object] = set()
    for key_node, _ in node.value:
        if key_node.tag == 'tag:yaml.org,2002:merge':  # '<<': merged keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, list | dict):
            continue  # not a key a slide file has; PyYAML refuses it itself
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f'the key {key!r} is given twice', key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
# YAML 1.2's floats too: under PyYAML's 1.1 rules 1e-2 (no dot) was the text '1e-2', and a
# mass written so was 'not a number'.
_UniqueKeyLoader.add_implicit_resolver(
    'tag:yaml.org,2002:float',
    re.compile(r'^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$'),
    list('-+0123456789.'),
)


def read_yaml(path: str | Path, error: type[SlideInputError], what: str = 'file') -> object:
    """The parsed YAML document at ``path``, as ``yaml.safe_load`` reads it; ``error`` (one
    line, naming the file) when it cannot be read, is not YAML or gives a key twice in one
    mapping (the last one silently won)."""
    p = Path(path)
    try:
        return yaml.load(p.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except OSError as exc:
        raise error(f'{p}: cannot read the {what} ({exc.strerror})') from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        where = getattr(exc, 'problem_mark', None)
        at = f' at line {where.line + 1}' if where is not None else ''
        detail = getattr(exc, 'problem', None) or str(exc).splitlines()[0]
        raise error(f'{p}: not valid YAML{at} ({detail})') from None
