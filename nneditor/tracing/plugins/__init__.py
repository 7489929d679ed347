"""Tracer plugins: folders with an ``nneditor-tracer.json`` manifest and Python files.

- :mod:`.manifest` reads and validates one folder (manifest fields, size and file limits, no
  symlinks) and fingerprints its files — without importing anything from it;
- :mod:`.discovery` lists the plugins of every source (bundled, per-user, the
  ``NNEDITOR_TRACE_PLUGIN_PATH`` search path), disabling malformed ones and duplicate ids;
- :mod:`.install` copies a validated folder into the per-user folder and writes templates;
- :mod:`.loader` is the only place that imports plugin code: the trace worker, for an
  approved run, from the snapshot taken at approval.
"""
