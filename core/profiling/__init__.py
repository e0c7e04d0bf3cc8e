"""Profiler tables: run nsys or torch.profiler, read what nsys/nvprof wrote, and analyse kernel time.

Tables travel as `dict[str, list[dict]]` (report name -> rows with normalised columns, times in int ns);
analyses (categories, phase shares, top kernels) are computed from them on demand.
May import: the shared vocabulary at core/'s top (today it needs none of it).
"""
