"""Test inputs for tracing: presets from a model's declared inputs, generators and sources
(automatic, patterns, masks, time series, CSV, images), the safe .npy/.npz tensor picker, and
"Generate & assign all detected inputs".

Qt-free; the UI's Generate test input panel drives these plain functions and objects.
"""

from __future__ import annotations

from nneditor.inputs.assign import build_inputs, generate_and_assign_all, write_input_set
from nneditor.inputs.generate import automatic, mask, pattern, time_series
from nneditor.inputs.picker import assign_file, check_array, check_set, load_tensor_file
from nneditor.inputs.spec import InputPlan, InputSpec, InputSpecError, detect_inputs

__all__ = [
    "InputPlan",
    "InputSpec",
    "InputSpecError",
    "assign_file",
    "automatic",
    "build_inputs",
    "check_array",
    "check_set",
    "detect_inputs",
    "generate_and_assign_all",
    "load_tensor_file",
    "mask",
    "pattern",
    "time_series",
    "write_input_set",
]
