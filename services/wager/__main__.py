"""Run the wager service: python -m services.wager --nats URL."""

from services.runner import main

main("wager")
