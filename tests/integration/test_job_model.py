"""The Job model against a real Redis: what its attributes hold before and after the job runs,
and its options (delay given as a time)."""

from __future__ import annotations

from kue_core import Queue
from kue_core.job import Job

W = "worker-a"


def _claim(queue: Queue, job_type: str = "t") -> tuple[int, str]:
    claimed = queue.scripts.claim(job_type, W, 60_000)
    assert isinstance(claimed, tuple)
    return claimed[0], claimed[1]["lease"]


# -- result and progress_data ---------------------------------------------------------------
def _unset_fields_are_none(job: Job) -> None:
    assert job.result is None and job.progress_data is None
    out = job.to_dict()
    assert "result" not in out and "progress_data" not in out  # as Kue's JSON leaves them out


def test_result_and_progress_data_are_none_until_set(queue: Queue) -> None:
    job = queue.create_job("t")
    _unset_fields_are_none(job)
    job.save()
    _unset_fields_are_none(job)
    _unset_fields_are_none(queue.get_job(job.id))  # type: ignore[arg-type]
    job_id, lease = _claim(queue)
    queue.scripts.fail(job_id, lease, "E", "E", -1, None)
    _unset_fields_are_none(queue.get_job(job_id))


def test_result_and_progress_data_once_stored(queue: Queue) -> None:
    job = queue.create_job("t").save()
    job.progress(1, 2, {"step": 1})
    assert job.progress_data == {"step": 1} and job.to_dict()["progress_data"] == {"step": 1}
    job_id, lease = _claim(queue)
    queue.scripts.complete(job_id, lease, '{"ok":true}', None)
    done = queue.get_job(job_id)
    assert done.result == {"ok": True} and done.progress_data == {"step": 1}
    out = done.to_dict()
    assert out["result"] == {"ok": True} and out["progress_data"] == {"step": 1}


def test_a_stored_null_result_is_kept_in_the_json(queue: Queue) -> None:
    """A handler that returned None leaves ``null`` in the hash, which Kue's JSON shows."""
    queue.create_job("t").save()
    job_id, lease = _claim(queue)
    queue.scripts.complete(job_id, lease, "null", None)
    done = queue.get_job(job_id)
    assert done.result is None
    assert "result" in done.to_dict() and done.to_dict()["result"] is None
