"""Starting and ending child processes, in the console's or the CLI's process: `launcher.Launch`
spawns the worker for a RunSpec (under nsys when asked), decodes its stream into events, cancels it
and leaves no process behind; `processes` tracks every live child; `queue` orders the console's runs.
May import: the shared vocabulary at core/'s top and core.profiling (to run nsys), never measure code
itself (the worker is started by module name).
"""
