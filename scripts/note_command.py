"""Put the command that made a Markdown report under its title: note_command.py FILE COMMAND [HOW]."""
from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    path, command = Path(argv[0]), argv[1]
    how = f" (run by `{argv[2]}`)" if len(argv) > 2 else ""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if any(line.startswith("Command: ") for line in lines[:4]):
        return 0
    lines[1:1] = ["\n", f"Command: `{command}`{how}\n"]
    path.write_text("".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
