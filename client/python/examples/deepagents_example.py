"""A Deep Agent whose tools run in a boxwire sandbox.

The agent (LangChain Deep Agents) runs here, outside the sandbox; every file
tool and every command it uses runs inside a hardened, network-less boxwire
sandbox through :class:`boxwire.deepagents.BoxwireSandbox`.

Environment: BOXWIRE_URL and BOXWIRE_TOKEN (the bridge), OPENAI_BASE_URL,
OPENAI_API_KEY and MODEL (any OpenAI-compatible endpoint; the tests point it
at e2e/llmscript with examples/deepagents-script.json).

    python examples/deepagents_example.py "write a note and show it to me"
"""

from __future__ import annotations

import os
import sys

from deepagents import create_deep_agent
from langchain_openai import ChatOpenAI

from boxwire.deepagents import BoxwireSandboxClient


def main(task: str) -> str:
    model = ChatOpenAI(model=os.environ.get("MODEL", "scripted"), base_url=os.environ.get("OPENAI_BASE_URL"))
    with BoxwireSandboxClient() as provider:  # reads BOXWIRE_URL and BOXWIRE_TOKEN
        sandbox = provider.create()
        try:
            agent = create_deep_agent(model=model, backend=sandbox)
            result = agent.invoke({"messages": [{"role": "user", "content": task}]})
            for msg in result["messages"]:
                print(f"[{msg.type}] {msg.content}")
            check = sandbox.execute("cat /tmp/notes/hello.txt")
            print(f"[sandbox] {check.output.strip()}")
            return str(result["messages"][-1].content)
        finally:
            sandbox.delete()


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "write a note in the sandbox and show it to me")
