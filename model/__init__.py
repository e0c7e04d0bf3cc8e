"""The Transformer LM that perfconsole measures: pure PyTorch, no UI, no I/O.

Import `perfconsole.model.transformer` for the network; `perfconsole.model.config` holds the sizes and
does not import torch, so the console can list sizes without loading it.
"""
