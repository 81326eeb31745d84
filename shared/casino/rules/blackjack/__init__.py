"""Blackjack: hands, the dealer's drawing rule, the deal of 002 and 003, the coup."""
