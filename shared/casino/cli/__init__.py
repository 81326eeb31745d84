"""The ``casino`` command line, the launcher of ``make run``, the simulated tables and the live console."""
