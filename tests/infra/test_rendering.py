"""One shared output serializer renders every response as a serializer built for it would."""
from __future__ import annotations

import threading
from datetime import datetime, timezone
from types import SimpleNamespace

from rest_framework import serializers

from infra.rendering import rendered


class ItemOutput(serializers.Serializer):
    name = serializers.CharField()
    at = serializers.DateTimeField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField())


class ResultOutput(serializers.Serializer):
    owner = serializers.CharField(source="owner.name")
    items = ItemOutput(many=True)
    counts = serializers.DictField(child=serializers.IntegerField())
    budget = serializers.IntegerField(allow_null=True)


def _result(n: int):
    return SimpleNamespace(owner=SimpleNamespace(name=f"owner {n}"), budget=None if n % 2 else n,
                           counts={"a": n, "b": n + 1},
                           items=[SimpleNamespace(name=f"item {n}.{i}", tags=[str(i)] * i,
                                                  at=datetime(2024, 1, 1 + i, tzinfo=timezone.utc) if i else None)
                                  for i in range(n % 4)])


def test_each_render_is_what_a_fresh_serializer_gives_and_carries_nothing_over():
    for n in (3, 1, 0, 2, 3):  # larger, smaller, empty and again: nothing of one render is left in the next
        assert rendered(ResultOutput, _result(n)) == ResultOutput(_result(n)).data


def test_threads_rendering_at_once_each_get_their_own_result():
    wrong, barrier = [], threading.Barrier(8)

    def render(n: int):
        barrier.wait()
        for _ in range(200):
            if rendered(ResultOutput, _result(n)) != ResultOutput(_result(n)).data:
                wrong.append(n)
                return

    threads = [threading.Thread(target=render, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
