"""PocketJoe's README search agent on Stalwart, with only its imports changed.

The README's three class policies, its ``AppContext`` and its ``main`` are as
PocketJoe wrote them; the model and the search are offline fakes of the same
shape (no network here): the "LLM" asks for a web search on its first turn
and answers from the result on its second.

Run: ``python examples/pocketjoe_search_agent.py`` (in memory) or
``python examples/pocketjoe_search_agent.py sqlite:///agent.db`` (durable:
kill it during the search, run it again, and it resumes; the model's first
answer is not asked for again). ``PJ_SLOW_SEARCH`` (seconds) makes the search
slow enough to kill.
"""

import asyncio
import os
import sys
import uuid

from stalwart.pocketjoe import (
    BaseContext,
    DurableRunner,
    InMemoryRunner,
    Message,
    Policy,
    policy_spec_mcp_tool,
)


def log(event: str) -> None:
    """What ran for real, appended to $PJ_LOG, so a test can count it."""
    path = os.environ.get("PJ_LOG")
    if path:
        with open(path, "a") as f:
            f.write(event + "\n")


@policy_spec_mcp_tool(description="Calls an LLM with tool support")
class OpenAILLMPolicy_v1(Policy):
    async def __call__(self, observations: list[Message], options: list[str]) -> list[Message]:
        """LLM policy (an offline fake with the README's shape).
        :param observations: List of Messages representing the conversation history + new input
        :param options: Set of allowed options the LLM can call
        """
        log("llm")
        results = [m for m in observations if m.type == "action_result"]
        if not results:
            return [
                Message(
                    id=str(uuid.uuid4()),
                    actor="assistant",
                    type="action_call",
                    tool_id="call-1",
                    payload={"policy": options[0], "payload": {"query": "latest Python version"}},
                )
            ]
        return [
            Message(
                id=str(uuid.uuid4()),
                actor="assistant",
                type="text",
                payload={"content": f"From the web: {results[-1].payload.get('content')}"},
            )
        ]


@policy_spec_mcp_tool(description="Performs web search")
class WebSearchDdgsPolicy(Policy):
    async def __call__(self, query: str) -> list[Message]:
        """
        Performs a web search and returns results.
        :param query: The search query string to search for
        """
        log("search")
        await asyncio.sleep(float(os.environ.get("PJ_SLOW_SEARCH", "0")))
        results_str = f"Title: Python 3.14 released\nURL: https://python.org\nSnippet: {query}"
        return [Message(
            actor=self.__class__.__name__,
            type="action_result",
            payload={"content": results_str}
        )]


@policy_spec_mcp_tool(description="Orchestrator with LLM and search")
class SearchAgent(Policy):
    ctx: "AppContext"  # Override to specify context type

    async def __call__(self, prompt: str) -> list[Message]:
        """
        Orchestrator that gives the LLM access to web search.
        :param prompt: The user prompt to process
        """
        system_message = Message(actor="system", type="text",
            payload={"content": "You are an AI assistant that can use tools to help answer "
                                "user questions."})
        prompt_message = Message(actor="user", type="text", payload={"content": prompt})

        history = [system_message, prompt_message]
        while True:
            selected_actions = await self.ctx.llm(observations=history, options=["web_search"])
            history.extend(selected_actions)
            if not any(msg.type == "action_call" for msg in selected_actions):
                break

        return history


class AppContext(BaseContext):
    def __init__(self, runner):
        super().__init__(runner)
        self.llm = self._bind(OpenAILLMPolicy_v1)
        self.web_search = self._bind(WebSearchDdgsPolicy)
        self.search_agent = self._bind(SearchAgent)


async def main():
    store = sys.argv[1] if len(sys.argv) > 1 else None
    runner = DurableRunner(store) if store else InMemoryRunner()
    ctx = AppContext(runner)
    result = await ctx.search_agent(prompt="What is the latest Python version?")
    print(f"\nFinal Result: {result[-1].payload['content']}")
    await runner.close()


if __name__ == "__main__":
    asyncio.run(main())
