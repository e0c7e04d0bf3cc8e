"""The console's panes, one widget a tab of the main screen: launch, live, the profile tables (kernels, NVTX),
runs, compare, grids and timeline. The screens shown over them are tui.screens."""
