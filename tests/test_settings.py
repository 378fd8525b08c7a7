"""serve's settings: typed, frozen, and handed to every worker process exactly as the parent took them."""

from __future__ import annotations

from dataclasses import fields

import pytest

from engram_index.cli import main
from engram_index.settings import ServeSettings

# serve's options that set the process (where and how it listens, syncing, the heap), not the app. (The
# workers' count is both: the app reads it too, search_pool.py.)
PROCESS_OPTIONS = {"host", "port", "sync_account", "sync_password", "public_url", "poll_interval",
                   "open_registration", "access_log", "malloc_arenas"}
SPEC_NAMES = {"embedder_spec": "embedder", "face_embedder_spec": "face_embedder", "llm_spec": "llm",
              "rerank_spec": "rerank"}


def test_settings_survive_the_trip_to_a_worker_process_unchanged() -> None:
    settings = ServeSettings(data="/d", service_did="did:web:x", insecure_open=True, key_rate=0.5,
                             embed_authorities=("did:plc:a", "did:plc:b"), llm="m@http://127.0.0.1:9/v1",
                             store="postgresql://u@h/db", allow_private_urls=True, workers=3)
    assert ServeSettings.from_json(settings.to_json()) == settings


def test_a_setting_this_build_does_not_know_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown serve settings: colour"):
        ServeSettings.from_json('{"data": "/d", "service_did": "did:web:x", "colour": "blue"}')
    with pytest.raises(ValueError, match="serve settings"):
        ServeSettings.from_json('{"data": "/d"}')


def test_every_serve_option_is_a_setting_or_sets_the_process() -> None:
    # A new serve option the app reads must be a ServeSettings field, or workers would not get it.
    names = {SPEC_NAMES.get(param.name or "", param.name) for param in main.commands["serve"].params}
    settings = {f.name for f in fields(ServeSettings)}
    assert names - PROCESS_OPTIONS == settings
