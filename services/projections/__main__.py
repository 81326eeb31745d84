"""Run the projections service: python -m services.projections --nats URL."""

from services.runner import main

main("projections")
