"""The four services: shoe, dealer-policy, wager and settlement."""
