"""The engine: the object that executes a run (:class:`~.engine.Engine`,
which holds the run's state and writes its ledger) and its parts, each given
the engine when it is made: ``waits.py`` (sleep, signals, patch markers,
child runs), ``mailbox.py`` (messages between runs, continue-as-new) and
``dispatch.py`` (a step's action calls, with ``locks.py``). ``identity.py``
makes a step's recorded identity, incrementally for list arguments;
``unwind.py`` says how an
execution unwinds (a wait, a halted run). Each module owns one part of the
durability contract.
"""
