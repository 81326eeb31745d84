"""The coup engine: deals baccarat and blackjack as the regulators' rules require."""
