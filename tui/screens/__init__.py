"""The console's panes (launch, live, kernels, NVTX, runs, compare) and its dialogs."""
