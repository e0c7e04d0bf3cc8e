"""A console process's CPU time from its start: its imports alone (`import`), or those and the console mounted
headless at 80x24 until its first idle moment (`mount`). Prints the CPU seconds and whether pandas was imported.

    for r in 1 2 3 4 5 6; do for t in before after; do for w in import mount; do
      echo "$t $w $(PYTHONPATH=/tmp/cs/shim-$t .venv/bin/python docs/results/probes/console_process_cpu.py $w)"
    done; done; done

where /tmp/cs/shim-TREE/perfconsole/{core,model,tui} link to a tree's folders (`git archive REV` for before)."""
import asyncio
import resource
import sys

from perfconsole.tui.app import PerfConsole

if sys.argv[1] == "mount":
    async def main():
        async with PerfConsole().run_test(size=(80, 24)) as pilot:
            await pilot.pause()

    asyncio.run(main())
r = resource.getrusage(resource.RUSAGE_SELF)
print(f"{r.ru_utime + r.ru_stime:.3f} {'pandas' in sys.modules}")
