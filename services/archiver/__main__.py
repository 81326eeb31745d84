"""Run the archiver service: python -m services.archiver --nats URL."""

from services.runner import main

main("archiver")
