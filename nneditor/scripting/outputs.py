"""Worker-side files a run leaves in its folder: the result array and Matplotlib figures.

Invariants:
- Arrays are written with ``allow_pickle=False``; an object array is described, not pickled.
- Figures are saved only if the script (or a preload) imported ``matplotlib.pyplot``; every
  open figure is saved as PNG, in figure-number order, up to a bound, and then closed.
- Failures to save are reported as notes, never raised: the script's own outcome wins.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from nneditor.scripting.protocol import FIGURE_PATTERN, RESULT_ARRAY_FILE


def save_result_array(value: Any, run_dir: Path, notes: list[str]) -> dict[str, Any]:
    """Save an ndarray result as ``result.npy``; returns the result fields to report."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(value, np.ndarray):
        return {}
    fields: dict[str, Any] = {"result_shape": list(value.shape), "result_dtype": str(value.dtype)}
    path = run_dir / RESULT_ARRAY_FILE
    try:
        np.save(path, np.asarray(value), allow_pickle=False)
    except ValueError:
        notes.append(
            f"The result array has dtype {value.dtype}, which cannot be saved as .npy "
            "without pickling; only its text is shown."
        )
        path.unlink(missing_ok=True)
        return fields
    except (OSError, MemoryError) as exc:
        notes.append(f"The result array could not be saved: {exc}.")
        path.unlink(missing_ok=True)
        return fields
    fields["result_array_path"] = path.name
    return fields


def save_figures(run_dir: Path, max_figures: int, notes: list[str]) -> list[str]:
    """Save every open Matplotlib figure as ``figure-N.png``; returns the file names."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    try:
        numbers = list(plt.get_fignums())
    except Exception as exc:
        notes.append(f"Matplotlib figures could not be listed: {exc}.")
        return []
    if len(numbers) > max_figures:
        notes.append(
            f"The script left {len(numbers)} figures open; only the first {max_figures} were saved."
        )
    names = []
    for index, number in enumerate(numbers[:max_figures], start=1):
        name = FIGURE_PATTERN.format(index=index)
        try:
            plt.figure(number).savefig(run_dir / name, format="png")
        except Exception as exc:  # a broken artist must not lose the other figures
            notes.append(f"Figure {number} could not be saved as PNG: {type(exc).__name__}: {exc}.")
            continue
        names.append(name)
    with contextlib.suppress(Exception):
        plt.close("all")
    return names
