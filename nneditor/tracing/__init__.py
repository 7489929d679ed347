"""Activation tracing: plans, approvals, limits, the worker protocol, capture store, backends.

The flow a UI panel or the CLI drives, all with plain objects::

    plan = make_plan(doc, arrays, backend="auto", device="auto", limits=Limits(...))
    print("\\n".join(plan.describe()))      # shown before anything runs
    approval = approve(plan)                # "Approve & run trace"
    result = TraceRunner().run(plan, approval, out_dir, on_event=..., token=...)

The worker (``python -m nneditor.tracing.worker``) runs in its own process. Names are
imported lazily so that starting the worker does not import the parent-side modules; nothing
in this package imports Qt.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Approval": "approval",
    "ApprovalError": "approval",
    "approve": "approval",
    "verify": "approval",
    "Limits": "limits",
    "LimitsError": "limits",
    "PlanError": "plan",
    "TraceInputs": "plan",
    "TracePlan": "plan",
    "make_plan": "plan",
    "RunError": "runner",
    "TraceResult": "runner",
    "TraceRunner": "runner",
    "trace_job": "runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nneditor.tracing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"nneditor.tracing.{module}"), name)
