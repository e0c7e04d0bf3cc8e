"""Widgets that draw one thing each: the step chart, stats, GPU panel, sortable tables, category bars."""
