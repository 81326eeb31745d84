"""Read models of the floor, folded from the event stream."""
