"""Outputs are written whole or not at all, with the permissions a plain write gives."""

from __future__ import annotations

from pathlib import Path
import stat

import pytest

from slide_core.errors import OutputError, SlideInputError
from slide_core.files import (
    atomic_path,
    check_bag_folder,
    check_folder,
    check_output,
    write_text_atomic,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_mode_of_a_plain_write(tmp_path: Path) -> None:
    plain = tmp_path / 'plain.yaml'
    plain.write_text('a: 1\n')
    written = write_text_atomic(tmp_path / 'atomic.yaml', 'a: 1\n')
    # mkstemp's 0600 made beliefs and pictures unreadable to the group and the others.
    assert mode(written) == mode(plain)


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / 'belief.yaml'
    target.write_text('old\n')
    target.chmod(0o640)
    write_text_atomic(target, 'new\n')
    assert target.read_text() == 'new\n' and mode(target) == 0o640


def test_a_failed_write_leaves_nothing_not_even_the_folders_it_made(tmp_path: Path) -> None:
    (tmp_path / 'keep').mkdir()
    with pytest.raises(RuntimeError), atomic_path(tmp_path / 'keep' / 'a' / 'b' / 'x.png') as tmp:
        tmp.write_bytes(b'half')
        raise RuntimeError('drawing failed')
    assert [p.name for p in tmp_path.iterdir()] == ['keep']
    assert list((tmp_path / 'keep').iterdir()) == []


@pytest.mark.skipif(not Path('/proc/self').is_dir(), reason='needs Linux /proc')
def test_a_path_the_machine_will_not_write_is_its_output_error_not_a_missing_input(
    tmp_path: Path,
) -> None:
    # /proc takes no new files: mkstemp's FileNotFoundError named the hidden temporary, and
    # the command line, taking it for a missing input, said 'bad input' (exit 2).
    for directory in (False, True):
        with pytest.raises(OutputError) as e, atomic_path('/proc/x.yaml', directory) as tmp:
            tmp.write_text('a: 1\n')
        assert e.value.filename == '/proc/x.yaml' and e.value.strerror
        assert not isinstance(e.value, FileNotFoundError)
    with pytest.raises(FileNotFoundError), atomic_path(tmp_path / 'y.yaml'):  # the body's
        Path('/nonexistent/input.bag').read_bytes()


def test_a_folder_is_written_under_its_own_name_and_moved_in_whole(tmp_path: Path) -> None:
    target = tmp_path / 'bag'
    with atomic_path(target, directory=True) as tmp:
        assert tmp.name == 'bag' and tmp.parent.name.startswith('.bag.')
        assert not target.exists()
        tmp.mkdir()
        (tmp / 'bag.mcap').write_bytes(b'data')
    assert [p.name for p in tmp_path.iterdir()] == ['bag']
    assert (target / 'bag.mcap').read_bytes() == b'data'
    with pytest.raises(SlideInputError, match='exists'), atomic_path(target, directory=True):
        pass


def test_outputs_are_checked_before_any_work(tmp_path: Path) -> None:
    (tmp_path / 'file').write_text('')
    (tmp_path / 'dir').mkdir()
    with pytest.raises(SlideInputError, match='cannot write in'):
        check_output(tmp_path / 'file' / 'bag', (), '--out', directory=True)
    with pytest.raises(SlideInputError, match='exists'):
        check_output(tmp_path / 'dir', (), '--out', directory=True)
    with pytest.raises(SlideInputError, match='is a folder'):
        check_output(tmp_path / 'dir', (), '--png')
    with pytest.raises(SlideInputError, match='must name a .png file'):
        check_output(tmp_path / 'x.jpg', ('.png',), '--png')
    assert check_output(tmp_path / 'new' / 'deeper' / 'bag', (), '--out', directory=True)
    # A folder no file can be made in, whatever its permissions say (root was told /proc
    # was writable, and a bench's picture failed there after its minutes of work).
    if Path('/proc/self').is_dir():
        with pytest.raises(SlideInputError, match='cannot write in /proc'):
            check_output(Path('/proc/x.png'), ('.png',), '--png')


def test_a_folder_for_logs_is_checked_as_outputs_are(tmp_path: Path) -> None:
    (tmp_path / 'file').write_text('')
    with pytest.raises(SlideInputError, match='is a file: give a folder'):
        check_folder(tmp_path / 'file', '--log-dir')
    with pytest.raises(SlideInputError, match='cannot write in'):
        check_folder(tmp_path / 'file' / 'logs', '--log-dir')
    assert check_folder(tmp_path, '--log-dir') == tmp_path  # an existing folder is fine
    assert check_folder(tmp_path / 'new' / 'logs', '--log-dir')


def test_a_bag_folder_is_not_named_as_its_data_file() -> None:
    # slide record --out b.mcap wrote a folder b.mcap/ holding b.mcap.mcap.
    for name in ('b.mcap', 'b.DB3'):
        with pytest.raises(SlideInputError, match='a bag is a folder'):
            check_bag_folder(name, '--out')
    assert check_bag_folder('runs/b', '--out') == Path('runs/b')
