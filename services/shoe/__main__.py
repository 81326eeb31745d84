"""Run the shoe service: python -m services.shoe --nats URL."""

from services.runner import main

main("shoe")
