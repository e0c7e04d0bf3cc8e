"""Profiler tables: run nsys or torch.profiler, read what nsys/nvprof wrote, and analyse kernel time.

Tables travel as `dict[str, ProfileTable]` (report name -> a DataFrame of rows with normalised columns,
times in int ns, read as row dicts where rows are wanted; table.py); a snapshot's tables are lists of
those rows. Analyses (analyses.py: category and phase shares, top kernels) are computed from them on demand.
May import: the shared vocabulary at core/'s top (today it needs none of it).
"""
