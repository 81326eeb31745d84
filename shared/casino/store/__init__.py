"""The event store: JetStream, and an in-memory fake with the same contract."""
