"""What a finished record becomes: Markdown/CSV/JSON documents for runs, sweeps, attention grids and
comparisons (`export` is the table of which kind exports how), and run comparisons themselves.
May import: core.grids (their record types), core.profiling, core.telemetry (its summaries), the
shared vocabulary; never core.cli.
"""
