"""Operator fusion of an fp32 ONNX export for ONNX Runtime's CPU kernels (``--backend onnx``).

``torch.onnx.export(dynamo=True)`` writes attention as separate MatMul/Softmax/Where nodes and
each LayerNorm, residual Add and GELU as nodes of their own. ONNX Runtime's own load-time
optimizer does not recognise the dynamo export's attention, so :func:`fuse` rewrites the
graph with onnxscript's ORT fusion rules (``onnxscript.rewriter.ort_fusions.optimize_for_ort``:
``Attention``, ``SkipLayerNormalization``, ``BiasGelu``, ONNX Runtime contrib operators with
fused CPU kernels). On the fine-tuned MiniLM this made fp32 prediction 1.24x (Abortion tweets)
to 1.28x (Toxic comments) faster (bench/RESULTS.md, "ONNX Runtime and int8 inference").

A fused graph is kept only when it computes what the unfused one does: both are run on the
export's sample batch (which has padding) and the fused graph is refused when any output
differs by more than :data:`TOLERANCE`; the unfused graph is then used, and the manifest says
why. int8 is quantized from the fused graph (:mod:`quantformer.models.onnx.backend`): on this
2-core AVX2 CPU, int8 of the unfused graph was no faster than fused fp32, int8 of the fused
graph 1.2x faster, with as many changed labels (bench/RESULTS.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: largest absolute difference between fused and unfused outputs on the sample batch
TOLERANCE = 1e-4


def fuse(src: Path, dst: Path, sample: dict[str, np.ndarray]) -> dict:
    """Write the fused version of the ONNX model ``src`` to ``dst`` if it passes the check.

    Args:
        src: the unfused fp32 ONNX model (one file, no external data).
        dst: where the fused model goes; written only when the fusion is kept.
        sample: input name -> int64 array, a padded batch to compare the two graphs on.

    Returns:
        ``{"applied": True, "fusions": {name: count}, "max_abs_diff": float}`` when ``dst`` was
        written, else ``{"applied": False, "reason": str}`` (no fusion matched, the rewriter
        failed, or the outputs differed by more than :data:`TOLERANCE`). Never raises for a
        graph it cannot fuse: the unfused graph is always a valid answer.
    """
    from onnxscript import ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    try:
        model, counts = optimize_for_ort(ir.load(str(src)))
    except Exception as exc:  # noqa: BLE001 - any rewriter failure means: keep the unfused graph
        return {"applied": False, "reason": f"the rewriter failed: {type(exc).__name__}"}
    counts = {name: n for name, n in counts.items() if n}
    if not counts:
        return {"applied": False, "reason": "no fusion pattern matched this graph"}
    tmp = dst.with_name(f".{dst.name}.part")
    ir.save(model, str(tmp))
    diff = max_abs_diff(src, tmp, sample)
    if not diff <= TOLERANCE:  # also refuses NaN
        tmp.unlink()
        return {"applied": False,
                "reason": f"fused outputs differed by {diff:.2e} > {TOLERANCE:g}"}
    tmp.replace(dst)
    return {"applied": True, "fusions": counts, "max_abs_diff": float(diff)}


def max_abs_diff(a: Path, b: Path, sample: dict[str, np.ndarray]) -> float:
    """Largest absolute difference between the first outputs of two ONNX models on ``sample``;
    ``inf`` when the second cannot be loaded or run."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    outputs = []
    for path in (a, b):
        try:
            session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            feed = {i.name: sample[i.name] for i in session.get_inputs()}
            outputs.append(session.run(None, feed)[0])
        except Exception:  # noqa: BLE001 - a fused graph ONNX Runtime cannot run is refused
            return float("inf")
    return float(np.abs(outputs[0].astype(np.float64) - outputs[1]).max())
