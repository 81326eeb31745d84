"""Baccarat (punto banco): the tableau, dealing methods and styles, the coup."""
