"""PocketFlow-compatible graphs: swap `from pocketflow import *` for `from stalwart.flow import *`.

The API, warnings and errors match PocketFlow's so that existing programs and
their tests see no difference. Every call a flow makes into user code goes
through `stalwart.flow._seam`, where the durable layer journals it.

`asyncio`, `copy`, `time` and `warnings` are exported too, because
`from pocketflow import *` exports them and programs rely on that (for
example calling `asyncio.run` without importing asyncio).
"""

import asyncio
import copy
import time
import warnings

from . import durable  # noqa: F401 (installs how flows enter runs: ._seam.RunEntry)
from .flow import (
    AsyncBatchFlow,
    AsyncFlow,
    AsyncParallelBatchFlow,
    BatchFlow,
    Flow,
)
from .node import (
    AsyncBatchNode,
    AsyncNode,
    AsyncParallelBatchNode,
    BaseNode,
    BatchNode,
    Node,
)

__all__ = [
    "AsyncBatchFlow",
    "AsyncBatchNode",
    "AsyncFlow",
    "AsyncNode",
    "AsyncParallelBatchFlow",
    "AsyncParallelBatchNode",
    "BaseNode",
    "BatchFlow",
    "BatchNode",
    "Flow",
    "Node",
    "asyncio",
    "copy",
    "time",
    "warnings",
]
