"""The test harness: a real bridge binary with the scripted model server.

``make build`` builds build/bridge and build/llmscript; the bridge runs on
loopback with a temporary BOXWIRE_DATA_DIR, a random token and the image
named by BOXWIRE_IMAGE (``make sdk-python`` passes $(IMAGE)). At the end the
bridge is stopped and ``bridge gc`` removes every sandbox it made.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BUILD = REPO / "build"
START_TIMEOUT = 60.0
_LISTEN = re.compile(r"listening on (http://[0-9.:]+)")


@dataclass
class Bridge:
    url: str
    token: str
    id: str
    data_dir: str


class _Proc:
    """A child process whose output is watched for a pattern."""

    def __init__(self, args: list[str], env: dict[str, str], stream: str) -> None:
        self.log: list[str] = []
        self.found = threading.Event()
        self.match = ""
        kw = (
            {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
            if stream == "stdout"
            else {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
        )
        self.proc = subprocess.Popen(args, env=env, text=True, **kw)  # type: ignore[call-overload]
        pipe = self.proc.stdout if stream == "stdout" else self.proc.stderr
        self._reader = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._reader.start()

    def _read(self, pipe: object) -> None:
        for line in pipe:  # type: ignore[attr-defined]
            self.log.append(line)
            m = _LISTEN.search(line)
            if m and not self.found.is_set():
                self.match = line
                self.found.set()

    def wait_listening(self, what: str) -> str:
        if not self.found.wait(START_TIMEOUT):
            self.stop()
            raise RuntimeError(f"{what} did not listen within {START_TIMEOUT}s:\n{''.join(self.log)}")
        m = _LISTEN.search(self.match)
        assert m is not None
        return m.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="session")
def bridge() -> Iterator[Bridge]:
    """A running bridge (session-wide); its sandboxes are removed at the end."""
    if not os.environ.get("BOXWIRE_SDK_SKIP_BUILD"):
        subprocess.run(["make", "-s", "build"], cwd=REPO, check=True, timeout=600)
    image = os.environ.get("BOXWIRE_IMAGE", "boxwire:latest")
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        pytest.fail(f"image {image} is missing: run make image IMAGE={image}")
    data_dir = tempfile.mkdtemp(prefix="bwpy")  # short: unix socket paths stay under 108 bytes
    api_key = "sk-py-" + secrets.token_hex(8)
    llm = _Proc(
        [
            str(BUILD / "llmscript"),
            "--script",
            str(Path(__file__).with_name("script.json")),
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            api_key,
        ],
        dict(os.environ),
        "stdout",
    )
    llm_url = llm.wait_listening("llmscript") + "/v1"
    b = Bridge(url="", token="tok-" + secrets.token_hex(12), id="py-" + secrets.token_hex(4), data_dir=data_dir)
    env = dict(os.environ)
    env.update(
        BOXWIRE_TOKEN=b.token,
        BOXWIRE_IMAGE=image,
        BOXWIRE_DATA_DIR=data_dir,
        BOXWIRE_BRIDGE_ID=b.id,
        BOXWIRE_MODEL="scripted",
        OPENAI_BASE_URL=llm_url,
        OPENAI_API_KEY=api_key,
        BOXWIRE_MAX_UPLOAD_BYTES=str(16 << 20),
    )
    proc = _Proc([str(BUILD / "bridge"), "--listen", "127.0.0.1:0"], env, "stderr")
    try:
        b.url = proc.wait_listening("bridge")
        yield b
    finally:
        proc.stop()
        llm.stop()
        subprocess.run(
            [str(BUILD / "bridge"), "gc", "--id", b.id, "--data-dir", data_dir],
            env=env,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def bridge_env(bridge: Bridge) -> Iterator[Bridge]:
    """The bridge, with BOXWIRE_URL and BOXWIRE_TOKEN set for code that reads them."""
    old = {k: os.environ.get(k) for k in ("BOXWIRE_URL", "BOXWIRE_TOKEN")}
    os.environ["BOXWIRE_URL"], os.environ["BOXWIRE_TOKEN"] = bridge.url, bridge.token
    try:
        yield bridge
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
