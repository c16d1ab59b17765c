"""A2A (agent to agent) both ways: a policy served as an A2A agent, a remote
A2A agent called as a tool.

    from stalwart import a2a

    app = a2a.build_app(agent, sw.Runner("sqlite:///tasks.db", serving=True),
                        url="http://127.0.0.1:9000/")          # uvicorn app:app
    # conversation=True: each contextId a durable conversation, each task a turn

    helper = a2a.remote_agent("http://127.0.0.1:9000/", name="helper")
    writer = llm.Agent(model, tools=[helper])

Built on the official ``a2a-sdk`` (the ``stalwart[a2a]`` extra): its
transport and client, Stalwart's runs behind them. A served task is a durable
run; a remote call is a recorded step. See ``docs/a2a.md``.
"""

from __future__ import annotations

from ..core.errors import A2AError, RemoteTaskFailed
from .remote import remote_agent
from .server import agent_card, build_app
from .tasks import CONTEXT_TAG, RESULT_ARTIFACT, TASK_PREFIX

__all__ = [
    "CONTEXT_TAG",
    "RESULT_ARTIFACT",
    "TASK_PREFIX",
    "A2AError",
    "RemoteTaskFailed",
    "agent_card",
    "build_app",
    "remote_agent",
]
