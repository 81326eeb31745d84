"""The wager service: the wager book of each coup."""
