"""Parsing of command-line values shared by several ``slide`` subcommands."""

from __future__ import annotations

from slide_core.errors import SlideInputError


def parse_range(text: str) -> list[int]:
    """'0-4' or '0,2,5-7' -> push indices, in order; a repeated index is refused."""
    out: list[int] = []
    try:
        for part in text.split(','):
            part = part.strip()
            if '-' in part[1:]:
                a, b = (int(v) for v in part.split('-', 1))
                if a < 0 or b < a:
                    raise ValueError
                out.extend(range(a, b + 1))
            else:
                v = int(part)
                if v < 0:
                    raise ValueError
                out.append(v)
    except ValueError:
        raise SlideInputError(f'push range {text!r} is not like 0-4 or 0,2,5-7') from None
    seen: set[int] = set()
    repeated = sorted({i for i in out if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    if repeated:
        raise SlideInputError(
            f'push range {text!r} names push {", ".join(map(str, repeated))} more than once'
        )
    return out
