"""Packaging beside pyproject.toml: ships the top-level ``resources/`` and ``plugins/`` folders
inside the package as ``nneditor/_resources`` and ``nneditor/_plugins``, so a wheel (and an app
bundle built from it) finds icons and bundled tracer plugins where a checkout keeps them.

It also builds a few hot loops as optional C extensions (COMPILED): without a C compiler the
install goes on and those loops stay pure Python (nneditor/platform/compiled.py)."""

import os

from setuptools import Extension, find_packages, setup

DATA = {"nneditor._resources": "resources", "nneditor._plugins": "plugins"}
# optional: a failed build leaves the pure-Python loops (nneditor/platform/compiled.py)
COMPILED = {
    "nneditor.artifacts.onnx._cwire": "nneditor/artifacts/onnx/_cwire.c",
}
OPTIMIZE = [] if os.name == "nt" else ["-O2"]

setup(
    packages=[*find_packages(include=["nneditor", "nneditor.*"]), *DATA],
    package_dir=DATA,
    package_data={"nneditor": ["py.typed"], **{name: ["**/*"] for name in DATA}},
    exclude_package_data={name: ["**/__pycache__/*", "**/*.pyc"] for name in DATA},
    ext_modules=[
        Extension(name, [source], extra_compile_args=OPTIMIZE, optional=True)
        for name, source in COMPILED.items()
    ],
)
