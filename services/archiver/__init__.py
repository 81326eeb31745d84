"""The archiver service: ended shoes sealed into the archive, then removed from the live stream."""
