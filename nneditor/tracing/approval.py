"""Approvals: explicit consent for one run of one plan.

Invariants:

- An approval is created only by :func:`approve` (the "Approve & run trace" action) and binds
  a snapshot of the plan's binding: model identity + revision, inputs digest, limits, tracer
  identity and execution choice.
- :func:`verify` recomputes everything from the current state (files on disk, the arrays'
  bytes) and refuses with a sentence naming what changed.
- An approval is consumed by exactly one run: :meth:`Approval.consume` succeeds once; a second
  use is refused even if nothing changed.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from nneditor.errors import NNEditorError
from nneditor.tracing.identity import model_identity
from nneditor.tracing.plan import TracePlan

_FIELD_TEXT = {
    "model": "the model file changed on disk",
    "revision": "the model revision changed",
    "inputs": "the input tensors changed",
    "limits": "the limits changed",
    "tracer": "the tracer (backend version or NNEditor's tracing code) changed",
    "execution": "the backend or device choice changed",
    "capture": "the capture selection changed",
}


class ApprovalError(NNEditorError):
    """A run was refused because its approval does not match or was already used."""


@dataclass
class Approval:
    """Consent for one run; ``digest`` is recorded in the published manifest."""

    binding: dict[str, Any]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.time)
    _consumed_by: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def digest(self) -> str:
        return binding_digest(self.binding)

    @property
    def consumed(self) -> bool:
        return self._consumed_by is not None

    def consume(self, run_id: str) -> None:
        """Mark the approval used by ``run_id``; refuses a second use."""
        with self._lock:
            if self._consumed_by is not None:
                raise ApprovalError(
                    f"this approval was already used by run {self._consumed_by}; an approval "
                    "covers exactly one run, so approve the run again"
                )
            self._consumed_by = run_id

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "created": self.created, "digest": self.digest}


def binding_digest(binding: dict[str, Any]) -> str:
    text = json.dumps(binding, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def approve(plan: TracePlan) -> Approval:
    """Create the approval for ``plan`` as it is now (the user's explicit action).

    Refuses when the model or the inputs changed between planning and approving, so the user
    never approves something other than what the plan shows.
    """
    shown = json.loads(json.dumps(plan.binding(), default=str))
    now = current_binding(plan)
    changed = [k for k in _FIELD_TEXT if shown.get(k) != now.get(k)]
    if changed:
        what = "; ".join(_FIELD_TEXT[k] for k in changed)
        raise ApprovalError(f"the plan is out of date because {what}; plan the trace again")
    return Approval(now)


def current_binding(plan: TracePlan) -> dict[str, Any]:
    """The plan's binding recomputed from disk and from the arrays' current bytes."""
    now = model_identity(plan.model.path, [e[0] for e in plan.model.external])
    binding = plan.binding()
    binding["model"] = now.token()
    binding["inputs"] = plan.inputs.current_digest()
    return json.loads(json.dumps(binding, default=str))


def verify(approval: Approval, plan: TracePlan) -> None:
    """Refuse unless ``approval`` matches ``plan`` as it is now and was not used yet."""
    if approval.consumed:
        raise ApprovalError(
            "this approval was already used by a run; an approval covers exactly one run, so "
            "approve the run again"
        )
    now = current_binding(plan)
    changed = [k for k in _FIELD_TEXT if approval.binding.get(k) != now.get(k)]
    if changed:
        what = "; ".join(_FIELD_TEXT[k] for k in changed)
        raise ApprovalError(
            f"the run was refused because {what} since it was approved; review the plan and "
            "approve it again"
        )
