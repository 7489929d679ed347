"""Execution devices: which ONNX Runtime providers serve "auto", "cpu", "gpu" and "npu".

Invariants:

- "auto" lists installed accelerator providers (GPU, then NPU) before CPU and may fall back to
  CPU; the provider that actually ran is reported by the worker, never assumed.
- An explicit "gpu" or "npu" is strict: with no matching installed provider the request fails
  here with the extra to install, and the worker fails (never runs on CPU) if the provider
  cannot be initialised.
- Nothing here imports onnxruntime at module import; ``installed_providers`` does, lazily.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from dataclasses import dataclass

from nneditor.errors import NNEditorError
from nneditor.platform.runtime_env import quiet_runtimes

DEVICES = ("auto", "cpu", "gpu", "npu")
CPU = "CPUExecutionProvider"

#: provider -> (device family, display name, provider options)
PROVIDERS: dict[str, tuple[str, str, dict[str, str]]] = {
    "CUDAExecutionProvider": ("gpu", "NVIDIA CUDA", {}),
    "TensorrtExecutionProvider": ("gpu", "NVIDIA TensorRT", {}),
    "ROCMExecutionProvider": ("gpu", "AMD ROCm", {}),
    "MIGraphXExecutionProvider": ("gpu", "AMD MIGraphX", {}),
    "DmlExecutionProvider": ("gpu", "DirectML", {}),
    "OpenVINOExecutionProvider": ("gpu", "OpenVINO", {"device_type": "GPU"}),
    "QNNExecutionProvider": ("npu", "Qualcomm QNN HTP", {"backend_path": "QnnHtp.dll"}),
    "VitisAIExecutionProvider": ("npu", "AMD Vitis AI", {}),
    CPU: ("cpu", "CPU", {}),
}
#: Automatic order; TensorRT is left out of "auto" because it compiles engines first.
AUTO_ORDER = (
    "CUDAExecutionProvider",
    "ROCMExecutionProvider",
    "MIGraphXExecutionProvider",
    "DmlExecutionProvider",
    "OpenVINOExecutionProvider",
    "QNNExecutionProvider",
    "VitisAIExecutionProvider",
)
#: pyproject extras per accelerator family (all own the same ``onnxruntime`` import name).
EXTRAS = {
    "cpu": "install nneditor[cpu] (onnxruntime)",
    "gpu": (
        "install nneditor[cuda] (onnxruntime-gpu) for NVIDIA, nneditor[directml] "
        "(onnxruntime-directml) on Windows, or nneditor[openvino] (onnxruntime-openvino) for "
        "Intel GPUs"
    ),
    "npu": (
        "install nneditor[qnn] (onnxruntime-qnn) for Qualcomm NPUs or nneditor[openvino] "
        "(onnxruntime-openvino) for Intel NPUs"
    ),
}


class DeviceError(NNEditorError):
    """The requested execution device cannot be served by what is installed."""


@dataclass(frozen=True)
class ProviderChoice:
    """Providers to try, in order, each with its options; ``strict`` forbids CPU fallback."""

    device: str
    providers: tuple[tuple[str, dict[str, str]], ...]
    strict: bool

    def names(self) -> list[str]:
        return [name for name, _ in self.providers]

    def as_list(self) -> list[list[object]]:
        return [[name, dict(opts)] for name, opts in self.providers]


def onnxruntime_installed() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


@functools.cache
def installed_providers() -> tuple[str, ...]:
    """ONNX Runtime's available providers, or () when it is not installed or broken."""
    if not onnxruntime_installed():
        return ()
    try:
        quiet_runtimes()
        import onnxruntime

        return tuple(onnxruntime.get_available_providers())
    except Exception:  # a broken runtime install must not stop planning
        return ()


@functools.cache
def onnxruntime_version() -> str:
    try:
        quiet_runtimes()
        import onnxruntime

        return str(onnxruntime.__version__)
    except Exception:
        return "not installed"


def family(provider: str) -> str:
    return PROVIDERS.get(provider, ("other", provider, {}))[0]


def display_name(provider: str) -> str:
    return PROVIDERS.get(provider, ("other", provider, {}))[1]


def choose_providers(device: str, available: tuple[str, ...] | list[str]) -> ProviderChoice:
    """The provider list for ``device`` given the installed ``available`` providers."""
    if device not in DEVICES:
        raise DeviceError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    avail = list(available)
    if not avail:
        raise DeviceError(
            f"ONNX Runtime is not installed; {EXTRAS['cpu' if device in ('auto', 'cpu') else device]}"
        )
    if device == "cpu":
        if CPU not in avail:
            raise DeviceError(f"this ONNX Runtime build has no CPU provider; {EXTRAS['cpu']}")
        return ProviderChoice("cpu", ((CPU, {}),), strict=True)
    if device == "auto":
        chosen = [p for p in AUTO_ORDER if p in avail]
        if CPU in avail:
            chosen.append(CPU)
        return ProviderChoice("auto", tuple((p, _options(p)) for p in chosen), strict=False)
    matching = [
        p for p in (*AUTO_ORDER, "TensorrtExecutionProvider") if p in avail and family(p) == device
    ]
    if device == "npu" and "OpenVINOExecutionProvider" in avail:
        matching.append("OpenVINOExecutionProvider")
    if not matching:
        raise DeviceError(
            f"no {device.upper()} execution provider is installed (ONNX Runtime offers "
            f"{', '.join(avail)}); {EXTRAS[device]}. NNEditor does not fall back to CPU when "
            f"{'an' if device == 'npu' else 'a'} {device.upper()} is requested"
        )
    first = matching[0]
    opts = _options(first)
    if device == "npu" and first == "OpenVINOExecutionProvider":
        opts = {"device_type": "NPU"}
    return ProviderChoice(device, ((first, opts),), strict=True)


def _options(provider: str) -> dict[str, str]:
    opts = dict(PROVIDERS.get(provider, ("", "", {}))[2])
    if provider == "QNNExecutionProvider" and sys.platform != "win32":
        opts["backend_path"] = "libQnnHtp.so"
    return opts
