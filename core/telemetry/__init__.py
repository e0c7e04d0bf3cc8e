"""Reading the GPU through NVML (utilisation, memory, clocks, power, temperature), with a clean
no-GPU path. May import: the shared vocabulary only.
"""
