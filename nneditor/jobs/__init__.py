"""Qt-free job protocol: a job is a callable taking a :class:`JobHandle`."""

from nneditor.jobs.protocol import CancelToken, Job, JobHandle, JobResult, SyncRunner

__all__ = ["CancelToken", "Job", "JobHandle", "JobResult", "SyncRunner"]
