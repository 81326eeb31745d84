"""The settlement service: pays every wager of a coup and closes it."""
