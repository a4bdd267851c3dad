"""Layer 3: pretrained models and their inputs: resolving model ids and devices, subword
tokenization and truncation, batching, task heads and output columns, the ONNX backend."""
