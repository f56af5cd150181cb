"""The Deep Agents example runs against the harness's bridge with the scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import BUILD, Bridge, _Proc

HERE = Path(__file__).resolve().parent


def test_deepagents_example(bridge: Bridge) -> None:
    pytest.importorskip("langchain_openai")
    llm = _Proc(
        [
            str(BUILD / "llmscript"),
            "--script",
            str(HERE.parent / "examples" / "deepagents-script.json"),
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            "sk-example",
        ],
        dict(os.environ),
        "stdout",
    )
    try:
        url = llm.wait_listening("llmscript") + "/v1"
        env = dict(os.environ, BOXWIRE_URL=bridge.url, BOXWIRE_TOKEN=bridge.token, OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-example")
        out = subprocess.run(
            [sys.executable, str(HERE.parent / "examples" / "deepagents_example.py")], env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-3000:]
        assert "[sandbox] hello from a deep agent" in out.stdout
        assert "I wrote /tmp/notes/hello.txt" in out.stdout
    finally:
        llm.stop()
