"""Run the settlement service: python -m services.settlement --nats URL."""

from services.runner import main

main("settlement")
