# source scripts/device_env.sh   (on the GPU machine, from the repo root)
# Makes this checkout importable as perfconsole.core/.model/.tui without installing it, and brings
# the carried wheels and the bundled nsys (../shared/device/prepare.sh fills .device/).
[ -f .device/env.sh ] && source .device/env.sh
mkdir -p /tmp/pcroot/perfconsole
for p in core model tui; do ln -sfn "$PWD/$p" /tmp/pcroot/perfconsole/$p; done
export PYTHONPATH=/tmp/pcroot${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
