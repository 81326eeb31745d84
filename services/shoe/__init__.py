"""The shoe service: shuffles, burns, draws and reshuffles each table's shoe."""
