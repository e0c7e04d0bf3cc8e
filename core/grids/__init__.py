"""Grids built on runs: a sweep (size x ctx x precision x mode x warm-up), the attention grid and the
optimization ladder (a rung per cell), each cell its own child process; `cell_runner` starts the next cells ahead of their turn and saves as it goes,
or (`gpu_pool`) runs one cell per GPU at once.
May import: core.launch, core.measure (the attention worker's shared opening), the shared vocabulary,
never core.reports or core.cli (reports read grids, not the other way round).
"""
