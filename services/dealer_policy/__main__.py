"""Run the dealer-policy service: python -m services.dealer_policy --nats URL."""

from services.runner import main

main("dealer-policy")
