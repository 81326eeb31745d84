"""The dealer-policy service: runs each coup by the rules."""
