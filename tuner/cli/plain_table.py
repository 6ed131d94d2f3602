"""A table as plain text, for where rich is not installed (a service-only install's `best`)."""

from __future__ import annotations

from collections.abc import Sequence


def plain_table(title: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]]) -> str:
    """`columns`: (heading, "left" or "right"); every cell whole, the columns as wide as they
    need, two spaces apart."""
    widths = [max([len(name), *(len(row[i]) for row in rows)]) for i, (name, _) in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        placed = (
            cell.ljust(width) if justify == "left" else cell.rjust(width)
            for cell, width, (_, justify) in zip(cells, widths, columns, strict=True)
        )
        return "  ".join(placed).rstrip()

    rule = ["-" * width for width in widths]
    return "\n".join([title, line([name for name, _ in columns]), line(rule), *map(line, rows)])
