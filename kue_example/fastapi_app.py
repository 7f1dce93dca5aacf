"""Recipe: a FastAPI service that enqueues jobs with ``AsyncQueue`` and streams a job's
progress to its client over Server-Sent Events (see docs/recipes.md).

Run it, and a worker for its jobs, on one Redis (``KUE_REDIS_URL``; without it, the embedded
one in ``./.kue``)::

    pip install "kue[otel]" fastapi uvicorn
    uvicorn kue_example.fastapi_app:app --port 8000
    kue worker kue_example.handlers:build_report --type report -n 4

    curl -X POST localhost:8000/reports -H 'content-type: application/json' \\
         -d '{"title": "Q3", "pages": 20}'
    curl -N localhost:8000/reports/1/events
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from kue_core import JobNotFound, KueError
from kue_core.aio import AsyncQueue

#: A job's last events: after one of them, its stream ends.
FINAL = ("complete", "failed", "remove")


class ReportRequest(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    pages: int = Field(default=10, ge=1, le=1000)


def _sse(event: str, data: Any) -> str:
    """One Server-Sent Event."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def create_app(redis_url: str | None = None, prefix: str | None = None) -> FastAPI:
    """The service; its queue opens when the app starts and closes when it stops."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncQueue(redis_url, prefix) as queue:
            app.state.queue = queue
            yield

    app = FastAPI(title="reports", lifespan=lifespan)

    def queue_of(request: Request) -> AsyncQueue:
        queue: AsyncQueue = request.app.state.queue
        return queue

    @app.exception_handler(KueError)
    async def kue_error(request: Request, error: KueError) -> JSONResponse:
        status = 404 if isinstance(error, JobNotFound) else 400
        return JSONResponse({"error": str(error)}, status_code=status)

    @app.post("/reports", status_code=202)
    async def create_report(body: ReportRequest, request: Request) -> dict[str, Any]:
        """Enqueue a report: it is built by a worker; follow it at ``events``."""
        queue = queue_of(request)
        job = await queue.create_job("report", body.model_dump()).attempts(3).save()
        return {"id": job.id, "events": f"/reports/{job.id}/events"}

    async def report_job(queue: AsyncQueue, job_id: int) -> Any:
        """The job of a report (404 for any other job)."""
        job = await queue.get_job(job_id)
        if job.type != "report":
            raise HTTPException(404, "no such report")
        return job

    @app.get("/reports/{job_id}")
    async def report(job_id: int, request: Request) -> dict[str, Any]:
        """The report's job, as Kue's JSON shows it."""
        job = await report_job(queue_of(request), job_id)
        result: dict[str, Any] = job.to_dict()
        return result

    @app.get("/reports/{job_id}/events")
    async def events(job_id: int, request: Request) -> StreamingResponse:
        """The report's progress as it happens, then how it ended: ``progress`` events
        (``{"percent", "data"}``), then one ``complete``, ``failed`` or ``remove``."""
        queue = queue_of(request)
        await report_job(queue, job_id)  # a 404 before the stream starts

        async def body() -> AsyncIterator[str]:
            # Subscribed before the job is read again: nothing is missed. Opened here, so
            # that a client gone before the body starts leaves no subscription behind.
            async with queue.events("progress", *FINAL, job_id=job_id) as stream:
                now = await queue.get_job(job_id)
                yield _sse("progress", {"percent": now.progress(), "data": now.progress_data})
                if now.state == "complete":
                    yield _sse("complete", now.result)
                    return
                if now.state == "failed":
                    yield _sse("failed", now.error)
                    return
                async for event in stream:
                    if event.name == "progress":
                        yield _sse("progress", {"percent": event.args[0], "data": event.args[1]})
                    else:
                        yield _sse(event.name, event.args[0])
                        return

        return StreamingResponse(body(), media_type="text/event-stream")

    return app


#: For ``uvicorn kue_example.fastapi_app:app`` (``KUE_REDIS_URL`` and ``KUE_PREFIX`` apply).
app = create_app()
