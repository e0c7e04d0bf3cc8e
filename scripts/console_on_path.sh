# source scripts/console_on_path.sh   (on the GPU machine, from the repository root, after scripts/device_env.sh)
# The console the chaos tests drive in tmux: a `perfconsole` on PATH (this checkout, importable through
# scripts/device_env.sh) and tmux from .chaosdebs where the machine has none (carry .chaosdebs). Without them the
# mid-nsys-run chaos trials start nothing, and their cue never shows.
mkdir -p /tmp/pcbin
if ! command -v tmux >/dev/null && ls .chaosdebs/*.deb >/dev/null 2>&1; then
    mkdir -p /tmp/devlibs
    for f in .chaosdebs/*.deb; do dpkg -x "$f" /tmp/devlibs; done
    ln -sf /tmp/devlibs/usr/bin/tmux /tmp/pcbin/tmux
fi
printf '#!/bin/sh\nexec python3 -c "import sys; from perfconsole.tui.main import main; sys.exit(main())" "$@"\n' \
    > /tmp/pcbin/perfconsole
chmod +x /tmp/pcbin/perfconsole
export PATH=/tmp/pcbin:$PATH PERFCONSOLE_CHAOS_BIN=/tmp/pcbin/perfconsole
