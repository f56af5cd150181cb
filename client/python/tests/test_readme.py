"""The README's Python quick start runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import REPO, Bridge


def test_readme_quick_start(bridge_env: Bridge, capsys: object) -> None:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python block"
    exec(compile(blocks[0], str(Path("README.md")), "exec"), {})  # noqa: S102
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "turn_done" in out and "Linux" in out and "b'hi'" in out
