"""The ONNX Runtime backend: export, graph fusion, int8 quantization and the fp32 recheck
of near ties."""
