"""langchain-tests' standard sandbox suite, unmodified, on a real bridge."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_tests.integration_tests import SandboxIntegrationTests

from boxwire.deepagents import BoxwireSandbox, BoxwireSandboxClient


class TestBoxwireSandboxStandard(SandboxIntegrationTests):
    @pytest.fixture(scope="class")
    def sandbox(self, bridge_env: object) -> Iterator[BoxwireSandbox]:
        provider = BoxwireSandboxClient()
        backend = provider.create()
        try:
            yield backend
        finally:
            backend.delete()
            provider.close()
