"""Device check of tracing on ONNX Runtime's CUDA provider, run on a GPU machine from the repo root.

For each model (the bundled tiny transformer, and ``.gpuchk/ocr_rec.onnx`` when present) it
runs ``nneditor trace`` with ``--device gpu``, ``cpu`` and ``auto`` and reports the provider
that ran, the timings and the largest relative difference per value between the GPU and CPU
captures; then plain ONNX Runtime with every value exposed (CUDA with and without TF32, CPU)
as the anchor; and the refusal of ``--device npu``. Results go to ``$OUT/gpu_check.json``.

The machine needs onnxruntime-gpu (about 255 MB as a wheel): unpack it into a folder on
PYTHONPATH, with the CUDA libraries of the machine's nvidia-* packages on LD_LIBRARY_PATH.
Seen on an H200 (onnxruntime-gpu 1.31.1, CUDA 13): before the worker skipped its address-space
ceiling for accelerators, ``--device gpu`` failed and ``auto`` ran on CPU.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OUT = os.environ.get("OUT", "/tmp/out")
RESULT: dict = {}


def sh(cmd, **kw):
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p, time.perf_counter() - t


def trace(model, device, out):
    p, dt = sh(
        [
            sys.executable,
            "-m",
            "nneditor",
            "trace",
            model,
            "--device",
            device,
            "--out",
            out,
            "--json",
            "--yes",
        ]
    )
    try:
        res = json.loads(p.stdout)
    except Exception:
        res = {"stdout": p.stdout[-2000:], "stderr": p.stderr[-2000:], "rc": p.returncode}
    run = {}
    try:
        run = json.loads(Path(out, "manifest.json").read_text())["run"]
    except Exception as exc:
        run = {"error": str(exc)}
    log = Path(out, "worker.log")
    if p.returncode and log.is_file():
        res["log"] = log.read_text()[-1500:]
    keep = {
        k: run.get(k)
        for k in ("provider", "session_s", "inference_s", "capture_s", "worker_s", "notes")
    }
    return {
        "rc": p.returncode,
        "wall_s": round(dt, 3),
        "result": {k: res.get(k) for k in ("status", "message", "provider", "elapsed_s", "log")},
        "run": keep,
        "stderr": p.stderr[-800:],
    }


def compare(a_dir, b_dir):
    from safetensors.numpy import load_file

    a = load_file(os.path.join(a_dir, "values.safetensors"))
    b = load_file(os.path.join(b_dir, "values.safetensors"))
    worst = []
    exact = 0
    for k in a:
        if k not in b:
            continue
        x, y = a[k], b[k]
        if x.shape != y.shape:
            worst.append((float("inf"), k, "shape"))
            continue
        if not np.issubdtype(x.dtype, np.floating):
            same = np.array_equal(x, y)
            exact += same
            if not same:
                worst.append((float("inf"), k, "int differs"))
            continue
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        scale = float(np.max(np.abs(y))) + 1e-12
        rel = float(np.max(d)) / scale if d.size else 0.0
        exact += rel == 0.0
        worst.append((rel, k, str(x.dtype)))
    worst.sort(reverse=True)
    return {
        "values_a": len(a),
        "values_b": len(b),
        "common": len(set(a) & set(b)),
        "bit_equal": int(exact),
        "worst_rel": worst[:6],
        "over_1e-3": sum(1 for w in worst if w[0] > 1e-3),
    }


ANCHOR = r"""
import sys, time, numpy as np, onnx, onnxruntime as ort
m = onnx.load(sys.argv[1])
have = {o.name for o in m.graph.output}
m.graph.output.extend(onnx.ValueInfoProto(name=o) for n in m.graph.node for o in n.output if o and o not in have)
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
opts = {} if sys.argv[3] == "default" else {"use_tf32": "0"}
t = time.perf_counter()
s = ort.InferenceSession(m.SerializeToString(), so, providers=[(sys.argv[2], opts)])
t1 = time.perf_counter()
feeds = dict(np.load(sys.argv[4]))
r = s.run(None, feeds); t2 = time.perf_counter()
r = s.run(None, feeds); t3 = time.perf_counter()
names = [o.name for o in s.get_outputs()]
np.savez(sys.argv[5], **{f"v{i}": v for i, v in enumerate(r) if isinstance(v, np.ndarray)})
print({"provider": s.get_providers()[0], "session_s": round(t1 - t, 3), "run1_s": round(t2 - t1, 3), "run2_s": round(t3 - t2, 3)})
"""


def main():
    import onnxruntime as ort

    RESULT["ort"] = [ort.__version__, ort.get_available_providers()]
    try:
        RESULT["nvidia_smi"] = sh(["nvidia-smi", "-L"])[0].stdout.strip()
    except OSError as exc:
        RESULT["nvidia_smi"] = repr(exc)
    print(json.dumps(RESULT), flush=True)
    models = {"tiny": "examples/tiny_transformer.onnx"}
    if os.path.exists(".gpuchk/ocr_rec.onnx"):
        models["ocr_rec"] = ".gpuchk/ocr_rec.onnx"
    for name, path in models.items():
        r = RESULT.setdefault(name, {})
        for dev in ("gpu", "cpu", "auto"):
            r[dev] = trace(path, dev, f"/tmp/tr_{name}_{dev}")
            print(name, dev, json.dumps(r[dev]), flush=True)
        if r["gpu"]["rc"] == 0 and r["cpu"]["rc"] == 0:
            r["gpu_vs_cpu"] = compare(f"/tmp/tr_{name}_gpu", f"/tmp/tr_{name}_cpu")
            print(name, "gpu_vs_cpu", json.dumps(r["gpu_vs_cpu"]), flush=True)
        # the anchor: the same inputs, every value exposed, plain ONNX Runtime
        feeds = f"/tmp/feeds_{name}.npz"
        try:
            man = json.loads(Path(f"/tmp/tr_{name}_cpu/manifest.json").read_text())["run"]["inputs"]
            np.savez(
                feeds,
                **{k: np.load(os.path.join(f"/tmp/tr_{name}_cpu", v)) for k, v in man.items()},
            )
            for prov, mode in (
                ("CUDAExecutionProvider", "default"),
                ("CUDAExecutionProvider", "no_tf32"),
                ("CPUExecutionProvider", "default"),
            ):
                p, dt = sh(
                    [
                        sys.executable,
                        "-c",
                        ANCHOR,
                        path,
                        prov,
                        mode,
                        feeds,
                        f"/tmp/anc_{name}_{prov[:4]}_{mode}.npz",
                    ]
                )
                r[f"anchor_{prov[:4]}_{mode}"] = {
                    "wall_s": round(dt, 3),
                    "out": p.stdout.strip()[-400:],
                    "err": p.stderr.strip()[-400:],
                }
                print(name, prov, mode, r[f"anchor_{prov[:4]}_{mode}"], flush=True)
            cpu = np.load(f"/tmp/anc_{name}_CPUE_default.npz")
            for mode in ("default", "no_tf32"):
                g = np.load(f"/tmp/anc_{name}_CUDA_{mode}.npz")
                rel = [
                    float(
                        np.max(np.abs(g[k].astype(np.float64) - cpu[k]))
                        / (np.max(np.abs(cpu[k])) + 1e-12)
                    )
                    for k in cpu.files
                    if np.issubdtype(cpu[k].dtype, np.floating) and cpu[k].size
                ]
                r[f"anchor_cuda_{mode}_vs_cpu_worst_rel"] = max(rel)
                print(name, mode, "anchor worst rel vs cpu", max(rel), flush=True)
        except Exception as exc:
            r["anchor_error"] = repr(exc)
    p, _ = sh(
        [
            sys.executable,
            "-m",
            "nneditor",
            "trace",
            "examples/tiny_transformer.onnx",
            "--device",
            "npu",
            "--out",
            "/tmp/tr_npu",
            "--yes",
        ]
    )
    RESULT["npu_refusal"] = {"rc": p.returncode, "stderr": p.stderr.strip()[-600:]}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "gpu_check.json"), "w") as f:
        json.dump(RESULT, f, indent=1)
    print(json.dumps(RESULT["npu_refusal"]))


main()
