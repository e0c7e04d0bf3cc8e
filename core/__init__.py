"""perfconsole's engine: run specs, the timed loop, the worker and its events, records and exports.

Nothing here imports textual or the tui package (tests/core/test_layers.py enforces it).
"""
