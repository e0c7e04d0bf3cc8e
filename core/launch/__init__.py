"""Starting and ending child processes, in the console's or the CLI's process: `launcher.Launch`
spawns the worker for a RunSpec (under nsys when asked), decodes its stream into events, cancels it
and leaves no process behind; `replicates` runs a spec in N processes in turn (--repeat);
`torchrun` runs a data-parallel job under torchrun and names the rank that failed; `scaling` runs
the one-process spec before the job (--scaling);
`telemetry` samples NVML over the child's measured steps; `processes` tracks every live child and
turns Ctrl-C, SIGTERM and SIGHUP into a cancel; `queue` orders the console's runs; `model_choice` tells
the launch form a model's sizes and what its files say is wrong with it, before anything is launched.
May import: the shared vocabulary at core/'s top, core.profiling (to run nsys) and core.telemetry,
never measure code itself (the worker is started by module name).
"""
