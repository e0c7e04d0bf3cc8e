"""The timeline: when each kernel, copy, range and launch ran, from a torch profiler trace, as lanes of
intervals (model), read from the trace (load), indexed by sorted starts for any window (index), drawn into text
rows of a given width (render), told in words beside the drawing (captions), and put together as `perfconsole
timeline` prints it, as coloured text and as an SVG (drawing). The tables say which kernels take the time; the
timeline says when.
May import: the shared vocabulary at core/'s top and core.profiling (its categories and the torch trace's
event kinds); core.reports, core.cli and the console read it.
"""
