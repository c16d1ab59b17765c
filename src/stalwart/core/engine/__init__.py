"""The engine: executes steps, replays recorded ones, dispatches action calls
(see :mod:`.execution`). Each module owns one part of the durability contract.
"""
