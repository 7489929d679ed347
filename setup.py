"""Packaging beside pyproject.toml: ships the top-level ``resources/`` and ``plugins/`` folders
inside the package as ``nneditor/_resources`` and ``nneditor/_plugins``, so a wheel (and an app
bundle built from it) finds icons and bundled tracer plugins where a checkout keeps them."""

from setuptools import find_packages, setup

DATA = {"nneditor._resources": "resources", "nneditor._plugins": "plugins"}

setup(
    packages=[*find_packages(include=["nneditor", "nneditor.*"]), *DATA],
    package_dir=DATA,
    package_data={"nneditor": ["py.typed"], **{name: ["**/*"] for name in DATA}},
    exclude_package_data={name: ["**/__pycache__/*", "**/*.pyc"] for name in DATA},
)
