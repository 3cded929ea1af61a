"""Output files that are never half-written: write beside the target, then rename.

A failed or interrupted write leaves the previous file (if any) as it was and no partial
file behind. Output paths are checked before any work starts (:func:`check_output`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
import contextlib
import os
from pathlib import Path
import shutil
import tempfile

import yaml

from slide_core.errors import SlideInputError


def check_output(path: str | Path, suffixes: tuple[str, ...], what: str) -> Path:
    """Return ``path`` if a file with one of ``suffixes`` can be written there, else raise
    SlideInputError saying why (wrong suffix, a folder in the way, no writable parent)."""
    p = Path(path)
    if suffixes and p.suffix.lower() not in suffixes:
        raise SlideInputError(f'{what} must name a {" or ".join(suffixes)} file, got {p}')
    if p.is_dir():
        raise SlideInputError(f'{what} {p} is a folder; give a file name')
    parent = p.parent if str(p.parent) else Path('.')
    existing = parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise SlideInputError(f'{what} {p}: cannot write in {existing}')
    return p


@contextlib.contextmanager
def atomic_path(path: str | Path, directory: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path``; on success it is renamed onto ``path``, on any
    error (or KeyboardInterrupt) it is removed and ``path`` is left untouched.

    With ``directory`` the temporary path does not exist yet (a bag writer creates it) and
    ``path`` must not exist either (folders are not replaced)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if directory:
        if target.exists():
            raise SlideInputError(f'{target} exists: give a new path')
        tmp = Path(tempfile.mkdtemp(prefix=f'.{target.name}.', dir=target.parent))
        tmp.rmdir()
    else:
        fd, name = tempfile.mkstemp(prefix=f'.{target.name}.', dir=target.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if directory:
            tmp.rename(target)
        else:
            os.replace(tmp, target)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` to produce the file at a temporary path, then move it onto
    ``path`` (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text))


def read_yaml(path: str | Path, error: type[SlideInputError], what: str = 'file') -> object:
    """The parsed YAML document at ``path``; ``error`` (one line, naming the file) when it
    cannot be read or is not YAML."""
    p = Path(path)
    try:
        return yaml.safe_load(p.read_text())
    except OSError as exc:
        raise error(f'{p}: cannot read the {what} ({exc.strerror})') from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise error(f'{p}: not valid YAML ({str(exc).splitlines()[0]})') from None
