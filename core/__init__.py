"""perfconsole's engine. Its subpackages follow a run's data flow:

    settings -> launch (child process) -> measure (the worker's timed loop) -> events -> record
             -> store (snapshots) -> reports (md/csv/json, comparisons) ; cli drives it headless

- The modules at this level are the shared vocabulary every part speaks: `settings` (RunSpec),
  `events` (the worker's JSON-line stream), `record` (RunRecord, folded from events), `run_summary`
  and `stats` (what steps add up to), `flops`, `paths` (where files go), `store` (snapshot files).
  They import nothing else of core/ (store names snapshot kinds' classes by module path only).
- `profiling/` reads and runs profilers (nsys, nvprof, torch.profiler) into tables.
- `telemetry/` reads the GPU through NVML.
- `measure/` runs inside the child process: the worker, the timed loop, memory capture.
- `launch/` starts, streams, cancels and reaps child processes from the console or the CLI.
- `grids/` are many runs: sweeps and the attention grid, one process a cell.
- `reports/` turns records into Markdown, CSV and JSON, and compares runs.
- `cli/` is the headless command line over all of it.

Each may import only the parts listed before it (tests/core/test_layers.py holds the order), and
nothing here imports textual or the tui package.
"""
