"""A large `nsys stats` CSV file read without holding it as text: the shape `nsys stats -o` writes (a
header, then rows to the end of the file), or a captured log with one table after its status lines.

The file is scanned in chunks for what would make the text reader (stats_text) see it differently:
a line break other than `\\n` (splitlines() breaks at `\\r`, `\\v`, `\\f`, `\\x1c`-`\\x1e`, U+0085,
U+2028, U+2029), a NUL, or a line that ends the table (blank, `SKIPPED:`, a Processing line) with more
text after it. Any of those, or a table the CSV library reads differently (csv_frames), and
`read_stats_file` returns None: the caller reads the whole text as before. Only the first MiB is
decoded, to find the header as the text reader would.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import IO

from perfconsole.core.profiling.columns import normalise_column
from perfconsole.core.profiling.csv_frames import INT_COLUMNS, read_table
from perfconsole.core.profiling.gpu_trace import read_trace
from perfconsole.core.profiling.stats_text import StatsParse, ends_table, first_csv_table, which_report
from perfconsole.core.profiling.table import ProfileTable

FAST_MIN_BYTES = 4 << 20  # smaller files are read whole: the text reader is quick on them
HEAD = 1 << 20
CHUNK = 8 << 20
SAMPLE = 50  # data lines _which_report looks at (cuda_api_sum vs osrt_sum)
_ODD_BYTES = (b"\x00", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")
# a line that may end the table: empty, or led by a space, a tab, S (SKIPPED), P or R (Processing/Running)
_MAY_END = re.compile(rb"\n(?=[ \tSPR\n])")


class _Until:
    """A file read from where it stands up to `end` (a byte offset): the table and not what follows."""

    def __init__(self, f: IO[bytes], end: int) -> None:
        self.f, self.end, self.closed = f, end, False

    def read(self, n: int = -1) -> bytes:
        left = self.end - self.f.tell()
        return self.f.read(left if n is None or n < 0 else min(n, left)) if left > 0 else b""

    def readable(self) -> bool:
        return True


def read_stats_file(path: Path, hint: str | None, size: int) -> tuple[StatsParse, bool, int] | None:
    """(the parse, whether the file ends in a newline, its line count) for a file this path can read;
    None for any other (the caller reads the text)."""
    if size < FAST_MIN_BYTES:
        return None
    with path.open("rb") as f:
        head = f.read(HEAD)
        last_nl = head.rfind(b"\n")
        if last_nl < 0 or _odd(head):
            return None
        lines = head[:last_nl].decode("utf-8", "replace").split("\n")
        start = first_csv_table(lines, str(path), hint)
        if start is None or start.line + 1 >= len(lines):
            return None
        header_at = _offset_of_line(head, start.line)
        first = normalise_column(start.headers[0])[0]
        scan = _scan(f, header_at, find_end=not _numeric(first))
        if scan is None:
            return None
        end_at, region_lines, newlines, ends_nl = scan
        sample = lines[start.line + 1:start.line + 1 + min(SAMPLE, region_lines - 1)]
        report = which_report(start.headers, start.hint, sample)
        if report is None:
            return None
        f.seek(header_at)
        if report == "cuda_gpu_trace":
            frame = read_trace(_Until(f, end_at), start.headers)
            frame = None if isinstance(frame, str) else frame
        else:
            frame = read_table(_Until(f, end_at), start.headers, report, region_lines - 1)
    if frame is None:
        return None
    return StatsParse(tables={report: ProfileTable(frame)}), ends_nl, newlines + 1


def _numeric(name: str) -> bool:
    return name.endswith(("_ns", "_mb", "_pct")) or name in INT_COLUMNS


def _offset_of_line(data: bytes, line: int) -> int:
    at = 0
    for _ in range(line):
        at = data.index(b"\n", at) + 1
    return at


def _odd(block: bytes) -> bool:
    # each test is a memchr over the block; the two-byte UTF-8 forms only where their lead byte occurs
    return (any(b in block for b in _ODD_BYTES) or (b"\xc2" in block and b"\xc2\x85" in block)
            or (b"\xe2" in block and (b"\xe2\x80\xa8" in block or b"\xe2\x80\xa9" in block)))


def _scan(f: IO[bytes], header_at: int, find_end: bool) -> tuple[int, int, int, bool] | None:
    """From the header line to the end: (where the table ends, its lines with the header, the file's
    newlines, whether it ends in one); None for an odd byte, or for text after a line that ends it.

    `find_end`: look for the line that ends the table. A table whose first column is a number need
    not: the CSV library refuses such a line as a row (a word or a blank where a number goes), and a
    blank line, which it skips, leaves it a row short of the line count."""
    f.seek(0)
    before = f.read(header_at).count(b"\n")
    newlines = 0  # from the header on
    at, carry, tail, end_at, end_lines, last = header_at, b"", b"", None, 0, b""
    while block := f.read(CHUNK):
        if _odd(block) or _odd(tail + block[:2]):  # tail: an odd sequence cut by the chunk's start
            return None
        tail, last = block[-2:], block[-1:]
        if find_end or end_at is not None:
            data = carry + block
            cut = data.rfind(b"\n") + 1
            rest = 0
            if end_at is None:
                found = _table_end(data, cut)
                if found is not None:
                    end_at, rest = at + found, found
                    end_lines = newlines + data.count(b"\n", 0, found) - carry.count(b"\n")
            if end_at is not None and data[rest:cut].strip(b" \t\n"):
                return None  # more than blank lines after the table: another table, a SKIPPED line...
            at += cut
            carry = data[cut:]
        newlines += block.count(b"\n")
    if not (find_end or end_at is not None):
        size = f.tell()
        f.seek(max(header_at, size - 1))
        at, carry = size, b"" if f.read(1) == b"\n" else b"?"
        blank_tail = _blank_lines_at_end(f, header_at, size)
        return size, newlines - blank_tail + (1 if carry else 0), before + newlines, last == b"\n"
    region_lines = end_lines if end_at is not None else newlines
    if carry:  # the last line, with no newline after it
        if end_at is None and _ends(carry, 0):
            end_at = at
        elif end_at is None:
            region_lines += 1
        elif carry.strip(b" \t\n"):
            return None
    return (end_at if end_at is not None else at + len(carry)), region_lines, before + newlines, last == b"\n"


def _blank_lines_at_end(f: IO[bytes], header_at: int, size: int) -> int:
    """Empty lines at the end of the file ("\n\n\n"): the CSV library skips them, as the text reader does."""
    f.seek(max(header_at, size - 4096))
    end = f.read()
    stripped = end.rstrip(b"\n")
    return max(0, len(end) - len(stripped) - 1) if stripped else 0


_LINE_LEADS = (b"\n\n", b"\n ", b"\n\t", b"\nS", b"\nP", b"\nR")


def _table_end(data: bytes, stop: int) -> int | None:
    """The offset in `data` (whole lines up to `stop`, from a line's start) of the first line that
    ends the table, as the text reader decides it; None if none does."""
    if stop and _ends(data, 0):
        return 0
    at = 0
    while True:
        hits = [i for i in (data.find(lead, at, stop) for lead in _LINE_LEADS) if i >= 0]
        if not hits:
            return None
        line = min(hits) + 1
        if line < stop and _ends(data, line):
            return line
        at = line


def _ends(data: bytes, at: int) -> bool:
    """Whether the line starting at `at` ends the table (stats_text's rule, on the decoded line)."""
    stop = data.find(b"\n", at)
    line = data[at:stop if stop >= 0 else len(data)]
    return (not line or line[:1] in (b" ", b"\t", b"S", b"P", b"R")) and ends_table(line.decode("utf-8", "replace"))
