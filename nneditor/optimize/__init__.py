"""Quantization and pruning: previews (streamed, cancellable) and plain-data edit plans.

Qt-free. Previews never modify anything; plans (:class:`nneditor.optimize.plans.EditPlan`)
are what the editor commits as a revision.

- :mod:`nneditor.optimize.quantize`: ``QuantSettings``, ``quantize_tensor``,
  ``preview_quantization``; :mod:`nneditor.optimize.quant_plans`: ``weight_plan``, ``qdq_plan``.
- :mod:`nneditor.optimize.prune`: threshold / mask / N:M logical pruning and the shape-proven
  terminal channel pruning (:mod:`nneditor.optimize.channel_prune`).
"""
