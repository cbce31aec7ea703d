"""openai-node and the Vercel AI SDK (default Responses provider and .chat) against the live server, through
tests/node_clients/clients.mjs: plain, streamed, and a round trip through a tool of the client's own. The pinned
packages are installed by `npm ci` in tests/node_clients (the CI script does it)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .scripted_llm import answer, call, tool_step

pytestmark = pytest.mark.django_db(transaction=True)

NODE_DIR = Path(__file__).resolve().parents[1] / "node_clients"


def scripted(body: dict) -> dict:
    """The model: a tool's result is acknowledged, a weather question calls get_weather, anything else echoed."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return answer(f"done: {last['content']}")
    if "weather" in last["content"] and any(t["function"]["name"] == "get_weather" for t in body.get("tools") or []):
        return tool_step(call("get_weather", {"city": "Paris"}))
    return answer(f"echo: {last['content']}")


@pytest.mark.skipif(shutil.which("node") is None, reason="Node is not installed")
def test_node_clients(server, llm, alice):
    if not (NODE_DIR / "node_modules").exists():
        pytest.fail(f"run `npm ci` in {NODE_DIR} first (the CI script does)")
    llm.then = scripted
    run = subprocess.run(["node", "clients.mjs"], cwd=NODE_DIR, capture_output=True, text=True, timeout=400,
                         env={**os.environ, "BASE_URL": server, "API_KEY": alice.plain_key})
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["node_plain"] == {"content": "echo: say plain", "finish": "stop"}
    assert got["node_stream"]["content"] == "echo: say stream" and got["node_stream"]["total_tokens"] > 0
    assert got["node_tools"] == {"finish": "tool_calls", "call": "get_weather", "content": "done: sunny"}
    assert got["sdk_responses"] == {"content": "echo: say responses", "finish": "stop"}
    assert got["sdk_chat"] == {"content": "echo: say chat", "finish": "stop"}
    for name in ("sdk_stream_responses", "sdk_stream_chat"):
        assert got[name] == {"content": f"echo: say {name}", "finish": "stop"}, name
    for name in ("sdk_tools_responses", "sdk_tools_chat"):
        assert got[name] == {"content": "done: sunny in Paris", "steps": 2, "calls": ["get_weather"]}, (name, got)
