"""Writing a file whole: what every command that writes an output file does.

A reader (a browser, Gradescope, a spreadsheet) never sees half a file: the text goes to a temporary
file beside the destination (``.NAME.partial-PID``) that is renamed over it only once it is complete;
an error or an interrupt removes it and leaves any earlier file as it was. An ``OSError`` while
writing becomes one line, ``CODE: cannot write PATH: why``.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from .errors import InputError

__all__ = ["write_json_fields", "written_whole"]


@contextmanager
def written_whole(path: str | os.PathLike, mode: str = "w", *, code: str = "E_FILE_WRITE",
                  newline: str | None = None) -> Iterator[IO]:
    """A file to write ``path`` through (text in UTF-8, or bytes with ``mode="wb"``), renamed into
    place when the block ends without an error."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(tmp, mode, newline=newline, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {e.strerror or e}", code=code) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_fields(write, fields, *, default=None) -> None:
    """One JSON object written through ``write`` field by field: ``fields`` yields ``(key, value)``
    pairs, a value that is neither JSON nor None (an iterator of rows) written row by row as it
    yields them. The bytes ``json.dumps(dict(fields), indent=2, ensure_ascii=False)`` and a newline
    would give, in flat memory (a million rows)."""

    def dumps(v, pad: str) -> str:
        return json.dumps(v, indent=2, ensure_ascii=False, default=default).replace("\n", "\n" + pad)

    write("{")
    written = False
    for key, value in fields:
        write(("," if written else "") + "\n  " + json.dumps(key, ensure_ascii=False) + ": ")
        written = True
        if isinstance(value, (list, dict, str, int, float, bool)) or value is None:
            write(dumps(value, "  "))
            continue
        first = True
        for row in value:
            write(("[\n    " if first else ",\n    ") + dumps(row, "    "))
            first = False
        write("[]" if first else "\n  ]")
    write("\n}\n" if written else "}\n")
