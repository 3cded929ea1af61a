"""The ``slide`` command line.

Conventions every subcommand follows:

- ``--json`` prints exactly one JSON object on stdout; logs and progress go to stderr. A
  command that ends in an error prints one too: ``{"ok": false, "exit": CODE, "error":
  REASON}`` (the reason also on stderr).
- Exit codes: 0 success; 2 bad input (a one-line reason on stderr, ``slide CMD: error:
  ...``); 3 ran, but failed (an episode that did not lift the object, no goal or plan, no
  model: the JSON or text says why); 130 interrupted (Ctrl-C), 143 terminated (SIGTERM,
  which cleans up as Ctrl-C does: no half-written output); 1 anything unexpected.
- Long work shows a progress bar on stderr (only when stderr is a terminal).

A subcommand is a module in :mod:`slide_bringup.commands` with ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> dict``; the dict is the JSON object, and
``format_text(result)`` (optional) renders it for people.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
import importlib
import json
import logging
import math
import signal
import sys
import threading
from typing import Any, NoReturn

from slide_bringup import __version__
from slide_bringup.signals import Terminated, raise_terminated
from slide_core.errors import NoSolutionError

# Subcommand modules, in the order --help lists them.
COMMAND_MODULES = (
    'slide_bringup.commands.demo',
    'slide_bringup.commands.episode',
    'slide_bringup.commands.launch',
    'slide_bringup.commands.doctor',
    'slide_bringup.commands.objects',
    'slide_bringup.commands.record',
    'slide_bringup.commands.identify',
    'slide_bringup.commands.replay',
    'slide_bringup.commands.evaluate',
    'slide_bringup.commands.plan',
    'slide_bringup.commands.bench',
)

EXIT_SYSTEM = 1
EXIT_BAD_INPUT = 2
EXIT_FAILED = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM
EPILOG = (
    'exit codes: 0 success, 1 the machine failed it (a full disk, a file it may not write), '
    '2 bad input, 3 ran but failed (episode failed, no goal, plan or model), 130 '
    'interrupted, 143 terminated'
)


class CliError(Exception):
    """Bad input or a failed precondition; the message is the one-line reason shown."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, as all slide errors are."""

    def error(self, message: str) -> NoReturn:
        line = f'{message} (see {self.prog} --help)'
        sys.stderr.write(f'{self.prog}: error: {line}\n')
        raise _BadArguments(line)


class _BadArguments(SystemExit):
    """A command line argparse refused; ``reason`` is the one-line message shown."""

    def __init__(self, reason: str) -> None:
        super().__init__(EXIT_BAD_INPUT)
        self.reason = reason


def add_json_flag(parser: argparse.ArgumentParser, nested: bool = False) -> None:
    """The --json flag; nested subcommands (slide objects list) accept it too."""
    parser.add_argument(
        '--json',
        action='store_true',
        default=argparse.SUPPRESS if nested else False,
        help='print exactly one JSON object on stdout (logs and progress on stderr)',
    )


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    """Return the top-level parser and the subcommand modules by name."""
    parser = _Parser(
        prog='slide',
        description='slide: pre-grasp sliding of unknown objects (ROS 2 Jazzy).',
        epilog=EPILOG,
    )
    parser.add_argument('--version', action='version', version=f'slide {__version__}')
    parser.add_argument(
        '-v', '--verbose', action='store_true', help='log debug messages to stderr'
    )
    sub = parser.add_subparsers(dest='command', metavar='COMMAND', parser_class=_Parser)
    modules: dict[str, Any] = {}
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP, epilog=EPILOG)
        add_json_flag(p)
        module.add_arguments(p)
        modules[module.NAME] = module
    return parser, modules


def _default_text(result: dict[str, Any]) -> str:
    return '\n'.join(f'{k}: {v}' for k, v in result.items())


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    as_json = '--json' in words
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, raise_terminated) if main_thread else None
    try:
        return _main(words, as_json)
    except KeyboardInterrupt as exc:  # while the subcommands load, before one ran
        return _interrupted('slide', exc, as_json)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)


def _interrupted(prog: str, exc: KeyboardInterrupt, as_json: bool) -> int:
    # What the command kept, when it says (slide record's bag of the pushes made).
    kept = ''.join(f' ({note})' for note in getattr(exc, '__notes__', []))
    if isinstance(exc, Terminated):
        return _fail(prog, EXIT_TERMINATED, f'terminated{kept}', as_json, None)
    return _fail(prog, EXIT_INTERRUPTED, f'interrupted{kept}', as_json, None)


def _fail(prog: str, code: int, reason: str, as_json: bool, kind: str | None = 'error') -> int:
    """Say why on stderr (one line, ``prog: kind: reason``) and, with --json, as the one
    JSON object on stdout; return the exit code."""
    print(f'{prog}: {kind}: {reason}' if kind else f'{prog}: {reason}', file=sys.stderr)
    if as_json:
        _json_error(code, reason)
    return code


def _json_error(code: int, reason: str) -> None:
    """The one JSON object of a command that ended in an error, on stdout."""
    sys.stdout.write(json.dumps({'ok': False, 'exit': code, 'error': reason}) + '\n')


def _main(words: list[str], as_json: bool) -> int:
    parser, modules = build_parser()
    try:
        args, extra = parser.parse_known_args(words)
        # A command may take words argparse left over: `slide launch pregrasp --log-dir D
        # object:=book` has its name:=value after an option, as ros2 launch allows.
        take = getattr(modules.get(args.command), 'take_extra', None)
        left = take(args, extra) if take is not None and extra else extra
        if left:
            parser.error(f'unrecognized arguments: {" ".join(left)}')
    except _BadArguments as exc:  # already on stderr
        if as_json:
            _json_error(EXIT_BAD_INPUT, exc.reason)
        return EXIT_BAD_INPUT
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stderr,
        format='%(levelname)s %(name)s: %(message)s',
    )
    # PyOpenGL (pulled in by MuJoCo's renderer) logs its optional accelerator at INFO.
    logging.getLogger('OpenGL').setLevel(logging.WARNING)
    logging.getLogger('matplotlib').setLevel(logging.WARNING)
    module = modules[args.command]
    prog = f'slide {args.command}'
    as_json = bool(getattr(args, 'json', False))
    try:
        result = module.run(args)
    except (CliError, ValueError, FileNotFoundError) as exc:
        # Core functions raise ValueError with a message that says what was wrong.
        return _fail(prog, EXIT_BAD_INPUT, _reason(exc), as_json)
    except OSError as exc:
        # The machine failed it (a full disk; a path that passed the early checks and then
        # could not be written): a traceback and no JSON, after the work was done.
        what = f'{exc.strerror or exc}' + (f': {exc.filename}' if exc.filename else '')
        kept = ''.join(f' ({note})' for note in getattr(exc, '__notes__', []))
        return _fail(prog, EXIT_SYSTEM, what + kept, as_json)
    except MemoryError:
        reason = 'not enough memory for this request: ask for less (models, budget, pushes)'
        return _fail(prog, EXIT_BAD_INPUT, reason, as_json)
    except NoSolutionError as exc:
        return _fail(prog, EXIT_FAILED, _reason(exc), as_json, 'failed')
    except KeyboardInterrupt as exc:
        return _interrupted(prog, exc, as_json)
    if as_json:
        sys.stdout.write(json.dumps(finite_json(result), sort_keys=False, allow_nan=False) + '\n')
    else:
        fmt = getattr(module, 'format_text', _default_text)
        print(fmt(result))
    if result.get('exit') in (EXIT_INTERRUPTED, EXIT_TERMINATED):  # its result kept
        return int(result['exit'])
    return EXIT_FAILED if result.get('ok') is False else 0


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float as None: JSON has no NaN, and a bench's
    mean over no episodes printed a bare NaN, which JSON parsers refuse."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


if __name__ == '__main__':
    sys.exit(main())
