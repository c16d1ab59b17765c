"""The core: messages, policies, contexts, the codec and the engine.

It imports nothing above it: no store, runner, agent, interop or edge.
"""
