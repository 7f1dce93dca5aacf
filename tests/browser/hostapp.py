"""A host Flask app with the kue dashboard and API mounted under ``/kue``, as a user would
embed it; the browser tests serve it with gunicorn (settings from ``KUE_*`` variables)."""

from __future__ import annotations

from flask import Flask

from kue_http import mount

app = Flask(__name__)


@app.get("/")
def home() -> str:
    return "the host application"


mount(app, "/kue")
