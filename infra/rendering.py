"""Rendering a response through an output serializer without building the serializer each time.

DRF deep-copies a serializer's declared fields whenever one is built, nested serializers included: for a turn's
response (tool calls, memories, grounding changes) that copying cost more than turning the result into JSON. An
output serializer only reads: `to_representation` binds nothing to the instance it renders and keeps no state
between calls, so one bound instance per class renders every response, on any thread.
"""
from __future__ import annotations

import threading

from rest_framework import serializers

_bound: dict[type, serializers.Serializer] = {}
_lock = threading.Lock()


def rendered(output: type[serializers.Serializer], instance) -> dict:
    """What `output(instance).data` gives, from one shared, already-bound instance of the serializer class."""
    serializer = _bound.get(output)
    if serializer is None:
        with _lock:
            serializer = _bound.get(output)
            if serializer is None:
                serializer = output()
                serializer.fields  # noqa: B018 - bound here, once, not by the first request's thread
                _bound[output] = serializer
    return serializer.to_representation(instance)
