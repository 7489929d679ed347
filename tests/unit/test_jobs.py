from __future__ import annotations

from nneditor.jobs import CancelToken, JobHandle, SyncRunner


def test_sync_runner_returns_value_and_progress():
    seen = []

    def job(h: JobHandle) -> int:
        for i in range(1, 4):
            h.progress(i, 3, "step")
        return 42

    res = SyncRunner().run(job, on_progress=lambda d, t, m: seen.append((d, t)))
    assert res.ok and res.value == 42 and not res.partial
    assert seen[-1] == (3, 3)


def test_cancelled_job_returns_partial_result():
    token = CancelToken()

    def job(h: JobHandle) -> list[int]:
        acc: list[int] = []
        for i in range(100):
            h.check_cancelled()
            acc.append(i)
            h.set_partial(list(acc))
            if i == 9:
                token.cancel()
        return acc

    res = SyncRunner().run(job, token=token)
    assert res.cancelled and res.partial and res.value == list(range(10))


def test_job_error_is_reported_not_raised():
    def job(h: JobHandle) -> None:
        raise ValueError("bad")

    res = SyncRunner().run(job)
    assert not res.ok and isinstance(res.error, ValueError)
